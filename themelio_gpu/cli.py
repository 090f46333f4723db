"""Command-line entry points. Bad input ends in a list of `file: location: message` lines, never a traceback."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from themelio_gpu.fleet import Fleet, load_fleet
from themelio_gpu.problems import InputError
from themelio_gpu.settings import CATALOG_ENV, STACKS_DIR_ENV, input_paths

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2

# jsii prints a large banner about Node 20's end of life on every run; it says nothing about this app.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def _add_input_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--catalog", help=f"catalog file (default: ${CATALOG_ENV} or catalog/gpu-catalog.yaml)")
    parser.add_argument("--stacks-dir", help=f"cluster definitions (default: ${STACKS_DIR_ENV} or stacks/)")


def _load(args: argparse.Namespace) -> Fleet:
    paths = input_paths(args.catalog, args.stacks_dir)
    return load_fleet(paths.catalog, paths.stacks_dir)


def report_input_errors(run: Callable[[], int]) -> int:
    try:
        return run()
    except InputError as error:
        count = len(error.problems)
        print(error.render(), file=sys.stderr)
        print(f"{count} problem{'s' if count != 1 else ''} found; nothing was written.", file=sys.stderr)
        return EXIT_BAD_INPUT


def synth_main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="main.py", description="Synthesize one Terraform stack per cluster.")
    _add_input_flags(parser)
    parser.add_argument("--outdir", help="output folder (default: $CDKTF_OUTDIR or cdktf.out)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines or summary")
    args = parser.parse_args(argv)

    def run() -> int:
        from themelio_gpu.synth import summary_table, synthesize

        fleet = _load(args)
        synthesize(fleet, Path(args.outdir) if args.outdir else None, None if args.quiet else sys.stderr)
        if not args.quiet:
            print(summary_table(fleet), file=sys.stderr)
        return EXIT_OK

    return report_input_errors(run)
