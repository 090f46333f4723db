"""`synth`: synthesize every cluster (what main.py does)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from themelio_gpu import exits
from themelio_gpu.commands.base import Commands, add_command, add_input_flags, not_here, paths_of
from themelio_gpu.settings import DEFAULT_OUTDIR

EXITS = (
    "exit codes: 0 written, 2 bad input or an output folder that cannot be written (every problem is listed; "
    "nothing is written), 130/143 interrupted by SIGINT/SIGTERM (the output is wholly the old or wholly the "
    "new one, as the message says)"
)


def register(commands: Commands) -> None:
    parser = add_command(commands, "synth", "synthesize every cluster (what main.py does)", exits=EXITS)
    add_arguments(parser)
    parser.set_defaults(run=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `synth` and of main.py."""
    add_input_flags(parser)
    parser.add_argument(
        "--outdir",
        metavar="DIR",
        help=f"output folder; stack folders of clusters that no longer exist are removed from it "
        f"(default: $CDKTF_OUTDIR or {DEFAULT_OUTDIR})",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="no progress lines or summary (removed stack folders are still named)"
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="synthesize every stack (default: only those whose inputs changed since their files were written; "
        "the others' files stay, the same bytes either way)",
    )
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="a pipeline that starts from a fresh clone: when the output folder does not exist, start from the "
        "synthesis kept in DIR (only the stacks whose inputs changed are synthesized), and keep this one there "
        "afterwards (docs/pipelines.md)",
    )
    # Synthesis runs in one process since workers stopped paying (docs/performance.md); pipelines that
    # still pass the flag keep working.
    parser.add_argument("--workers", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    from themelio_gpu.outputs import kept
    from themelio_gpu.outputs.synth import output_target, summary_table, synthesize_files

    if args.workers is not None:
        print("note: --workers is no longer used: synthesis runs in one process", file=sys.stderr)
    not_here(args)
    outdir, progress = Path(args.outdir) if args.outdir else None, None if args.quiet else sys.stdout
    keep = Path(args.keep) if args.keep else None
    if keep is not None:
        kept.restore(keep, output_target(outdir))
    fleet, result = synthesize_files(paths_of(args), outdir, progress, full=args.full)
    if keep is not None:
        kept.save(output_target(outdir), keep)
    for warning in [*map(str, fleet.warnings), *result.warnings]:
        print(f"warning: {warning}", file=sys.stderr)
    if not args.quiet:
        print(summary_table(result.summary))
    return exits.OK
