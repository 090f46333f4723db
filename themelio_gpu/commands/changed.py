"""`changed`: what a change does to each stack, compared from two synthesized folders or a git commit's fleet."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from themelio_gpu import exits
from themelio_gpu.changes.compare import Comparison
from themelio_gpu.changes.report import FORMATS, render
from themelio_gpu.commands.base import Commands, add_command, add_input_flags, paths_of
from themelio_gpu.inputs.problems import Problems

FAIL_ON = ("dangerous",)


def register(commands: Commands) -> None:
    parser = add_command(
        commands,
        "changed",
        "what a change does to each stack: added, changed, removed; per address create, update, replace, destroy",
        "Compares two synthesized folders (or a git commit's fleet with the current one), synthesizing only the "
        "stacks whose inputs differ, lists what would hurt a running cluster, and prints text, JSON or a GitHub "
        "Actions matrix (docs/changed.md).",
        exits="0 compared, 1 with --fail-on dangerous: a change would hurt a running cluster, 2 bad input (a "
        "folder or commit that cannot be read or synthesized), 130/143 interrupted (temporary files removed)",
    )
    add_input_flags(parser)
    add_arguments(parser)
    parser.set_defaults(run=run)


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
        "--full",
        action="store_true",
        help="synthesize and compare every stack, even those whose inputs are the same on both sides, without "
        "the cache (default: only the stacks whose inputs differ; docs/changed.md)",
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


def run(args: argparse.Namespace) -> int:
    from themelio_gpu.changes.changed import run_changed

    problems = Problems()
    outputs = outputs_of(args.format, problems)
    comparison = run_changed(
        paths_of(args),
        problems,
        base=args.base,
        head=args.head,
        base_ref=args.base_ref,
        full=args.full,
        counts=any(output.form == "json" for output in outputs),
    )
    _write(comparison, outputs, frozenset(args.skip_stack))
    return exits.FAILED if args.fail_on == "dangerous" and comparison.dangers else exits.OK


def _write(comparison: Comparison, outputs: list[Output], skipped: frozenset[str]) -> None:
    for output in outputs:
        text = render(comparison, output.form, skipped)
        if output.file is None:
            sys.stdout.write(text)
        else:
            output.file.parent.mkdir(parents=True, exist_ok=True)
            output.file.write_text(text, encoding="utf-8")
