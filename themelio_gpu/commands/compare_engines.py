"""`compare-engines`: synthesize the fleet with cdktf and with CDK Terrain and show the unexpected differences."""

from __future__ import annotations

import argparse
import sys

from themelio_gpu import exits
from themelio_gpu.commands.base import Commands, add_command, add_input_flags, load, paths_of


def register(commands: Commands) -> None:
    parser = add_command(
        commands,
        "compare-engines",
        "synthesize the fleet with cdktf and with CDK Terrain and show every difference that is not expected",
        "The expected ones (engine and provider versions, the namespace block's shape) are listed; "
        "docs/cdk-terrain.md says what each means for a deployed fleet.",
        exits="0 only the expected differences, 1 another difference (each is printed), 2 bad input or an "
        "engine that cannot synthesize the fleet",
    )
    add_input_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from themelio_gpu.verify.engines import EngineSynthesisError, compare_engines

    paths = paths_of(args)
    load(args)  # bad input is reported once, before either engine runs
    try:
        return compare_engines(paths.catalog, paths.stacks_dir)
    except EngineSynthesisError as error:
        print(f"compare-engines: {error}", file=sys.stderr)
        return exits.BAD_INPUT
