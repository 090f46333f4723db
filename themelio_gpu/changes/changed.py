"""What `python -m themelio_gpu changed` runs: both sides planned or synthesized, compared stack by stack
(its arguments are in themelio_gpu/commands/changed.py)."""

from __future__ import annotations

import sys
import tempfile
from contextlib import ExitStack
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
from themelio_gpu.changes.sides import Side, Stack, fleet_side, folder_side, planned_side
from themelio_gpu.engine import Engine, selected
from themelio_gpu.inputs.problems import InputError, Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.outputs.stack_folders import STACK_FILE, STACKS_FOLDER
from themelio_gpu.outputs.stack_inputs import packages_digest
from themelio_gpu.settings import InputPaths


def run_changed(
    paths: InputPaths,
    problems: Problems,
    *,
    base: str | None,
    head: str | None,
    base_ref: str | None,
    full: bool,
    counts: bool,
) -> Comparison:
    """The comparison of the base (folder `base`, or commit `base_ref`) with the head (folder `head`, or the
    fleet of `paths`); `problems` (the command line's so far) are raised with those found here. `full`: every
    stack compared address by address, without the cache; `counts`: with the counts the JSON report gives.
    Interrupted, it says its temporary files are removed (the CLI prints it, exit 128 + signal)."""
    with interrupts.outcome("temporary files removed"):
        folders = [(flag, Path(value)) for flag, value in (("--base", base), ("--head", head)) if value]
        for flag, folder in folders:
            if not folder.is_dir():
                what = "not a folder" if folder.exists() else "folder not found"
                problems.add("command line", f"{flag} {folder}", what)
        if base_ref is not None and not base_ref.strip():
            problems.add("command line", "--base-ref", "empty; name a commit, branch or tag (e.g. origin/main)")
        cache = None if full else StackCache.configured(problems)
        problems.raise_if_any()
        engine = selected()
        warnings: tuple[str, ...] = ()
        with tempfile.TemporaryDirectory(prefix="themelio-changed-") as tmp, ExitStack() as held:
            scratch = Path(tmp)
            # The head first: a fleet with problems is reported before anything is synthesized.
            if head:
                head_side = folder_side(Path(head), display_path(Path(head)), engine, problems, records=not full)
            else:
                name = f"the fleet in {display_path(paths.stacks_dir)} (synthesized now)"
                head_side = fleet_side(paths, name, engine, cache, reuse=not full)
            problems.raise_if_any()
            notes: tuple[str, ...] = ("every stack compared address by address (--full)",) if full else ()
            if base_ref is not None:
                commit = resolve(base_ref, paths.catalog, paths.stacks_dir)
                tree = held.enter_context(checked_out(commit))
                base_side: Side | None = None
                differences = tool_differences(commit, tree)
                if not full and not differences:
                    print(
                        f"changed: {base_ref} has this checkout's tool: planning its fleet here", file=sys.stderr
                    )
                    base_side = _planned_base(commit, tree, engine, head_side)
                if base_side is None:
                    base_side, warnings = _synthesized_base(commit, tree, scratch, engine, cache)
                    if differences:
                        notes = (
                            f"every stack compared address by address: the tool differs between {commit.label} and "
                            f"this checkout ({', '.join(differences)}), which can change any stack",
                        )
                    elif not full:
                        notes = (
                            f"every stack compared address by address: {commit.label} could not be planned here",
                        )
                    full = True
            else:
                assert base is not None
                base_side = folder_side(Path(base), display_path(Path(base)), engine, problems, records=not full)
            problems.raise_if_any()
            comparison = compare_sides(
                base_side, head_side, scratch, cache, every_stack=full, counts=counts, notes=notes
            )
            if cache is not None:
                for side in (base_side, head_side):
                    cache.store_checked(side.fleet_key if side.fleet is not None else None, side.checked())
                cache.trim()
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        return comparison


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
