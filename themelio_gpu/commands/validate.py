"""`validate`: check the catalog and every cluster definition; writes nothing."""

from __future__ import annotations

import argparse
import sys

from themelio_gpu import exits
from themelio_gpu.commands.base import BAD_INPUT, Commands, add_command, add_input_flags, load, paths_of
from themelio_gpu.words import count


def register(commands: Commands) -> None:
    parser = add_command(
        commands,
        "validate",
        "check the catalog and every cluster definition",
        "Writes nothing.",
        exits=f"0 the catalog and every cluster definition are valid, {BAD_INPUT}",
    )
    add_input_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from themelio_gpu.render.schemas import schema_warnings

    fleet = load(args)
    for advice in fleet.advice:
        print(f"warning: {advice}", file=sys.stderr)
    for warning in schema_warnings(paths_of(args)):
        print(f"warning: {warning}", file=sys.stderr)
    print(f"OK: {count(len(fleet.catalog.offerings), 'offering')}, {count(len(fleet.clusters), 'cluster')}")
    return exits.OK
