"""`check`: exit 1 when a synthesized folder differs from what the inputs synthesize."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from themelio_gpu import exits
from themelio_gpu.commands.base import Commands, add_command, add_input_flags, load
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.settings import DEFAULT_OUTDIR, SYNTH_COMMAND


def register(commands: Commands) -> None:
    parser = add_command(
        commands,
        "check",
        "exit 1 when a synthesized folder differs from what the inputs synthesize",
        "Synthesizes into a temporary folder and prints the differences and what to run.",
        exits="0 the folder is what the inputs synthesize, 1 it differs (the differences are printed), 2 bad "
        "input or no such folder",
    )
    add_input_flags(parser)
    parser.add_argument(
        "--against",
        default=DEFAULT_OUTDIR,
        metavar="DIR",
        help=f"the synthesized folder to check, e.g. what `npx cdktf synth` wrote (default: {DEFAULT_OUTDIR})",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from themelio_gpu.outputs.synth import synthesize
    from themelio_gpu.verify.drift import compare_folders, render_diff

    against = Path(args.against)
    if not against.is_dir():
        problems = Problems()
        what = "is not a folder" if against.exists() else "folder not found"
        problems.add(
            display_path(against), "", f"{what}: synthesize into it first (`{_resynthesize_command(args)}`)"
        )
        problems.raise_if_any()
    fleet = load(args)
    with tempfile.TemporaryDirectory(prefix="themelio-check-") as tmp:
        synthesize(fleet, Path(tmp), progress=None)
        diff = compare_folders(against, Path(tmp))
    print(render_diff(diff, display_path(against), _resynthesize_command(args)))
    return exits.OK if diff.identical else exits.FAILED


def _resynthesize_command(args: argparse.Namespace) -> str:
    """The `main.py` command that rewrites the checked folder from the same inputs."""
    words = [SYNTH_COMMAND]
    if args.catalog:
        words.append(f"--catalog {args.catalog}")
    if args.stacks_dir:
        words.append(f"--stacks-dir {args.stacks_dir}")
    if Path(args.against) != Path(DEFAULT_OUTDIR):
        words.append(f"--outdir {args.against}")
    return " ".join(words)
