"""`python -m themelio_gpu changed`: its arguments and what it runs (the parser lives in cli.py)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from themelio_gpu import interrupts
from themelio_gpu.changes.base_ref import (
    Commit,
    checked_out,
    lock_warning,
    resolve,
    synthesize_commit,
    tool_differences,
)
from themelio_gpu.changes.cache import StackCache, commit_key
from themelio_gpu.changes.compare import Comparison
from themelio_gpu.changes.inputs_first import compare_sides
from themelio_gpu.changes.report import FORMATS, render
from themelio_gpu.changes.sides import Side, Stack, fleet_side, folder_side, planned_side
from themelio_gpu.engine import Engine, selected
from themelio_gpu.inputs.problems import InputError, Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.outputs.stack_folders import STACK_FILE, STACKS_FOLDER
from themelio_gpu.outputs.stack_inputs import packages_digest
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
    full: bool = args.full
    cache = None if full else StackCache.configured(problems)
    problems.raise_if_any()
    engine = selected()
    warnings: tuple[str, ...] = ()
    with tempfile.TemporaryDirectory(prefix="themelio-changed-") as tmp, ExitStack() as held:
        scratch = Path(tmp)
        # The head first: a fleet with problems is reported before anything is synthesized.
        if args.head:
            head = folder_side(Path(args.head), display_path(Path(args.head)), engine, problems, records=not full)
        else:
            name = f"the fleet in {display_path(paths.stacks_dir)} (synthesized now)"
            head = fleet_side(paths, name, engine, cache, reuse=not full)
        problems.raise_if_any()
        notes: tuple[str, ...] = ("every stack compared address by address (--full)",) if full else ()
        if args.base_ref is not None:
            commit = resolve(args.base_ref, paths.catalog, paths.stacks_dir)
            tree = held.enter_context(checked_out(commit))
            base: Side | None = None
            differences = tool_differences(commit, tree)
            if not full and not differences:
                print(
                    f"changed: {args.base_ref} has this checkout's tool: planning its fleet here", file=sys.stderr
                )
                base = _planned_base(commit, tree, engine, head)
            if base is None:
                base, warnings = _synthesized_base(commit, tree, scratch, engine, cache)
                if differences:
                    notes = (
                        f"every stack compared address by address: the tool differs between {commit.label} and "
                        f"this checkout ({', '.join(differences)}), which can change any stack",
                    )
                elif not full:
                    notes = (f"every stack compared address by address: {commit.label} could not be planned here",)
                full = True
        else:
            base = folder_side(Path(args.base), display_path(Path(args.base)), engine, problems, records=not full)
        problems.raise_if_any()
        counts = any(output.form == "json" for output in outputs)
        comparison = compare_sides(base, head, scratch, cache, every_stack=full, counts=counts, notes=notes)
        if cache is not None:
            for side in (base, head):
                cache.store_checked(side.fleet_key if side.fleet is not None else None, side.checked())
            cache.trim()
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    _write(comparison, outputs, frozenset(args.skip_stack))
    return EXIT_DANGEROUS if args.fail_on == "dangerous" and comparison.dangers else EXIT_OK


def _planned_base(commit: Commit, tree: Path, engine: Engine, head: Side) -> Side | None:
    """The commit's fleet planned here (its tool is this checkout's); None when it cannot be: its own
    synthesis then says why, as for any commit."""
    try:
        return planned_side(tree / commit.catalog, tree / commit.stacks_dir, commit.label, engine, head)
    except InputError:
        return None


def _synthesized_base(
    commit: Commit, tree: Path, scratch: Path, engine: Engine, cache: StackCache | None
) -> tuple[Side, tuple[str, ...]]:
    """The commit's stacks synthesized by its own code, or taken from the cache when they were before."""
    key = commit_key(
        commit.sha,
        commit.catalog.as_posix(),
        commit.stacks_dir.as_posix(),
        commit.project.as_posix(),
        engine.name,
        packages_digest(),
        sys.version,
    )
    recorded = cache.commit(key) if cache is not None else None
    if cache is not None and recorded is not None:
        folder = scratch / "base-cached" / STACKS_FOLDER
        if all(cache.fetch(digest, folder / name / STACK_FILE) for name, digest in recorded.items()):
            print(f"changed: {commit.ref} was synthesized before: taken from the cache", file=sys.stderr)
            stacks = {name: Stack(name, digest, folder / name / STACK_FILE) for name, digest in recorded.items()}
            return Side(commit.label, stacks, engine), lock_warning(commit, tree)
    print(f"changed: synthesizing {commit.ref} with its own code", file=sys.stderr)
    into = scratch / "base"
    warnings = synthesize_commit(commit, tree, into)
    problems = Problems()
    side = folder_side(into, commit.label, engine, problems)
    problems.raise_if_any()
    if cache is not None and all(s.digest is not None for s in side.stacks.values()):
        for stack in side.stacks.values():
            assert stack.file is not None
            cache.store(stack.digest, stack.file)
        cache.store_commit(key, commit.sha, {n: s.digest for n, s in side.stacks.items() if s.digest is not None})
    return side, warnings


def _write(comparison: Comparison, outputs: list[Output], skipped: frozenset[str]) -> None:
    for output in outputs:
        text = render(comparison, output.form, skipped)
        if output.file is None:
            sys.stdout.write(text)
        else:
            output.file.parent.mkdir(parents=True, exist_ok=True)
            output.file.write_text(text, encoding="utf-8")
