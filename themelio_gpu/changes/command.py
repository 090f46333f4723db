"""`python -m themelio_gpu changed`: its arguments and what it runs (the parser lives in cli.py)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from themelio_gpu import interrupts
from themelio_gpu.changes.base_ref import synthesize_ref
from themelio_gpu.changes.compare import Comparison, compare
from themelio_gpu.changes.report import FORMATS, render
from themelio_gpu.changes.stacks import read_output_folder
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.plan.fleet import Fleet, load_fleet
from themelio_gpu.settings import InputPaths

FAIL_ON = ("dangerous",)
EXIT_OK, EXIT_DANGEROUS, EXIT_BAD_INPUT = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    base = parser.add_mutually_exclusive_group(required=True)
    base.add_argument(
        "--base", metavar="DIR", help="the synthesized folder to compare with (e.g. the base branch's)"
    )
    base.add_argument(
        "--base-ref",
        metavar="GITREF",
        help="synthesize this commit's fleet, with its own code, in a temporary git worktree (e.g. origin/main)",
    )
    parser.add_argument(
        "--head",
        metavar="DIR",
        help="the synthesized folder of the change (default: synthesize the current fleet)",
    )
    parser.add_argument(
        "--format",
        action="append",
        metavar="FORMAT[=FILE]",
        help=f"{', '.join(FORMATS)} (default text); with =FILE written there instead of stdout (which then gets "
        "the text); repeatable, e.g. --format json=changed.json --format github-matrix=matrix.json",
    )
    parser.add_argument(
        "--fail-on", choices=FAIL_ON, help="dangerous: exit 1 when a change would hurt a running cluster"
    )
    parser.add_argument(
        "--skip-stack",
        action="append",
        metavar="NAME",
        default=[],
        help="leave this stack out of the github-matrix (one a pipeline does not deploy, such as a cluster whose "
        "state is local); the text says so. Repeatable",
    )


@dataclass(frozen=True)
class Output:
    form: str
    file: Path | None


def outputs_of(values: list[str] | None, problems: Problems) -> list[Output]:
    outputs = []
    for value in values or ["text"]:
        form, sep, file = value.partition("=")
        if form not in FORMATS:
            problems.add("command line", f"--format {value}", f"unknown format; choose {', '.join(FORMATS)}")
        elif sep and not file:
            problems.add("command line", f"--format {value}", "name a file after =, or leave out =")
        else:
            outputs.append(Output(form, Path(file) if file else None))
    to_stdout = sum(1 for o in outputs if o.file is None)
    if to_stdout > 1:
        problems.add("command line", "--format", "only one format can go to stdout; give the others =FILE")
    # The log shows the text report unless another format takes stdout.
    return outputs if to_stdout else [*outputs, Output("text", None)]


def synthesize_fleet(fleet: Fleet, into: Path) -> None:
    """The current fleet's stacks, written into `into` (the one place `changed` synthesizes)."""
    from themelio_gpu.outputs.synth import synthesize

    synthesize(fleet, into, progress=None)


def run_changed(args: argparse.Namespace, paths: InputPaths) -> int:
    try:
        return _changed(args, paths)
    except interrupts.Interrupted as interrupted:
        interrupted.outcome = "temporary files removed"  # the CLI prints it, exit 128 + signal
        raise


def _changed(args: argparse.Namespace, paths: InputPaths) -> int:
    problems = Problems()
    outputs = outputs_of(args.format, problems)
    folders = [(flag, Path(value)) for flag, value in (("--base", args.base), ("--head", args.head)) if value]
    for flag, folder in folders:
        if not folder.is_dir():
            what = "not a folder" if folder.exists() else "folder not found"
            problems.add("command line", f"{flag} {folder}", what)
    if args.base_ref is not None and not args.base_ref.strip():
        problems.add("command line", "--base-ref", "empty; name a commit, branch or tag (e.g. origin/main)")
    problems.raise_if_any()
    # The fleet is checked before anything is synthesized: bad input is reported at once.
    fleet = None if args.head else load_fleet(paths.catalog, paths.stacks_dir)
    warnings: tuple[str, ...] = ()
    with tempfile.TemporaryDirectory(prefix="themelio-changed-") as tmp:
        if fleet is not None:
            fleet_name = f"the fleet in {display_path(paths.stacks_dir)}"
            head, head_label = Path(tmp) / "head", f"{fleet_name} (synthesized now)"
            print(f"changed: synthesizing {fleet_name}", file=sys.stderr)  # stdout holds only the report
            synthesize_fleet(fleet, head)
        else:
            head, head_label = Path(args.head), display_path(Path(args.head))
        if args.base_ref is not None:
            base = Path(tmp) / "base"
            print(f"changed: synthesizing {args.base_ref} with its own code", file=sys.stderr)
            found = synthesize_ref(args.base_ref, paths.catalog, paths.stacks_dir, base)
            base_label, warnings = found.label, found.warnings
        else:
            base, base_label = Path(args.base), display_path(Path(args.base))
        base_stacks = read_output_folder(base, problems)
        head_stacks = read_output_folder(head, problems)
        problems.raise_if_any()
        comparison = compare(base_stacks, head_stacks, base_label, head_label)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    _write(comparison, outputs, frozenset(args.skip_stack))
    return EXIT_DANGEROUS if args.fail_on == "dangerous" and comparison.dangers else EXIT_OK


def _write(comparison: Comparison, outputs: list[Output], skipped: frozenset[str]) -> None:
    for output in outputs:
        text = render(comparison, output.form, skipped)
        if output.file is None:
            sys.stdout.write(text)
        else:
            output.file.parent.mkdir(parents=True, exist_ok=True)
            output.file.write_text(text, encoding="utf-8")
