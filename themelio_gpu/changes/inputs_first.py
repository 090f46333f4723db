"""Comparing two sides (sides.py) from their inputs first: a stack whose inputs are the same on both sides is
unchanged without being synthesized or read; the others are compared address by address (compare.py).

Same inputs: the digests are equal (outputs/stack_inputs.py: the cluster's plan, the tool's code, the
installed packages, the engine), or the base's cluster file has the head's bytes while the catalog and the
tool are the head's too (then the plans are equal without planning). Equal inputs synthesize the same bytes,
which incremental synthesis relies on as well; so the report is the one comparing every stack would give.

The stacks compared are found, in this order: a stack file on disk that is the stack (a folder's; the
default output folder's for the same inputs), the cache by digest (cache.py), and else synthesized in this
process from the plan, then kept in the cache. An unchanged stack is only counted (`unchanged_resources`)
when a form of the report shows the count (JSON), and only from a file at hand (on disk or in the cache):
a stack whose inputs are the same on both sides is never synthesized, not even to count its addresses.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from themelio_gpu.changes.cache import StackCache
from themelio_gpu.changes.compare import Comparison, StackChange, compare
from themelio_gpu.changes.sides import Side
from themelio_gpu.changes.stacks import StackConfig, instance_count, read_stack
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.outputs.stack_folders import STACK_FILE, STACKS_FOLDER
from themelio_gpu.plan.model import Fleet


class _Found:
    """A stack file found for a stack: where, the SHA-256 it must have (None: any), from the cache or not."""

    def __init__(self, path: Path, sha: str | None, cached: bool) -> None:
        self.path, self.sha, self.cached = path, sha, cached


class StackFiles:
    """The stack files of one side's stacks, found or synthesized (see the module's docstring)."""

    def __init__(self, side: Side, tag: str, scratch: Path, cache: StackCache | None) -> None:
        self.side, self.tag, self.scratch, self.cache = side, tag, scratch, cache
        self.found: dict[str, _Found] = {}
        self.syntheses = 0

    def on_disk(self, name: str) -> _Found | None:
        """A file already there for the stack (a folder's, or the default output folder's), unsynthesized."""
        stack = self.side.stacks[name]
        if stack.file is not None:
            return _Found(stack.file, stack.file_sha, cached=False)
        recorded = self.side.recorded_file(name)
        return _Found(recorded[0], recorded[1], cached=False) if recorded is not None else None

    def at_hand(self, name: str) -> _Found | None:
        """A file for the stack on disk or in the cache (by its digest, when known), never synthesized."""
        found = self.on_disk(name)
        digest = self.side.stacks[name].digest
        if found is None and self.cache is not None and digest is not None:
            into = self.scratch / f"{self.tag}-cached" / STACKS_FOLDER / name / STACK_FILE
            if self.cache.fetch(digest, into):
                found = _Found(into, None, cached=True)
        return found

    def find(self, names: Iterable[str]) -> None:
        """A file for each of these stacks: on disk, from the cache, or synthesized now (all at once)."""
        wanted = [n for n in names if n not in self.found]
        self.side.digests(wanted)
        to_synthesize = []
        for name in wanted:
            found = self.at_hand(name)
            if found is not None:
                self.found[name] = found
            else:
                to_synthesize.append(name)
        if to_synthesize:
            self._synthesize(to_synthesize)

    def _synthesize(self, names: list[str]) -> None:
        from themelio_gpu.outputs.synth import synthesize  # the engine loads only when a stack is synthesized

        fleet = self.side.fleet
        self.side.plan(names)
        plans = [self.side.stacks[n].plan for n in names]
        assert fleet is not None and all(p is not None for p in plans), "only a planned stack is synthesized"
        count = f"{len(names)} stack{'s' if len(names) != 1 else ''}"
        print(f"changed: synthesizing {count} of {self.side.label}", file=sys.stderr, flush=True)
        # A folder of its own per synthesis: another synthesis into it would remove these stacks as stale.
        self.syntheses += 1
        into = self.scratch / f"{self.tag}-synthesized-{self.syntheses}"
        synthesize(Fleet(fleet.catalog, tuple(p for p in plans if p is not None)), into, progress=None)
        for name in names:
            path = into / STACKS_FOLDER / name / STACK_FILE
            self.found[name] = _Found(path, None, cached=False)
            if self.cache is not None:
                self.cache.store(self.side.digest(name), path)

    def raw(self, name: str, problems: Problems) -> tuple[Path, bytes] | None:
        found = self.found[name]
        try:
            raw = found.path.read_bytes()
        except OSError as error:
            problems.add(display_path(found.path), "", f"cannot be read: {error.strerror or error}")
            return None
        if found.sha is not None and hashlib.sha256(raw).hexdigest() != found.sha:
            problems.add(
                display_path(found.path),
                "",
                "changed while it was being read (it is not the file its folder's record names); run changed again",
            )
            return None
        if found.cached:
            # A file of the cache that does not read is damaged: say where, not the temporary copy's path.
            check = Problems()
            if read_stack(found.path, check, raw) is None:
                where = self.cache.folder if self.cache is not None else found.path
                problems.add(display_path(where), "", f"a damaged file in changed's cache; remove {where}")
                return None
        return found.path, raw

    def read(self, name: str, problems: Problems) -> StackConfig | None:
        got = self.raw(name, problems)
        return read_stack(got[0], problems, got[1]) if got is not None else None

    def count(self, name: str, problems: Problems) -> int | None:
        got = self.raw(name, problems)
        return instance_count(got[0], problems, got[1]) if got is not None else None


def compare_sides(
    base: Side,
    head: Side,
    scratch: Path,
    cache: StackCache | None,
    *,
    every_stack: bool,
    counts: bool,
    notes: tuple[str, ...] = (),
) -> Comparison:
    """The comparison of every stack of both sides. `every_stack`: compare all, whatever their inputs;
    `counts`: count the addresses of the unchanged stacks too (the JSON report shows them)."""
    names = sorted(base.stacks.keys() | head.stacks.keys())
    both = [n for n in names if n in base.stacks and n in head.stacks]
    same: set[str] = set()
    if not every_stack:
        planned = [n for n in both if not base.stacks[n].same_as_head]
        base.digests(planned)
        head.digests(planned)
        same = {
            n
            for n in both
            if base.stacks[n].same_as_head
            or (base.stacks[n].digest is not None and base.stacks[n].digest == head.stacks[n].digest)
        }
        for side in (base, head):  # decided without synthesis: their plans are no longer needed
            side.release(same)
        compared = len(names) - len(same)
        notes += (
            f"{len(same)} of {len(names)} stacks have the same inputs on both sides (cluster plan, tool, packages, "
            f"engine): unchanged, not synthesized; {compared} compared address by address",
        )
    base_files = StackFiles(base, "base", scratch, cache)
    head_files = StackFiles(head, "head", scratch, cache)
    base_files.find(n for n in names if n in base.stacks and n not in same)
    head_files.find(n for n in names if n in head.stacks and n not in same)
    problems = Problems()
    base_configs = {n: c for n in base_files.found if (c := base_files.read(n, problems)) is not None}
    head_configs = {n: c for n in head_files.found if (c := head_files.read(n, problems)) is not None}
    problems.raise_if_any()
    compared_stacks = compare(base_configs, head_configs, base.label, head.label).stacks
    unchanged = [
        StackChange(n, "unchanged", (), count, (), ())
        for n, count in _counts(sorted(same), base_files, head_files, counts, problems).items()
    ]
    problems.raise_if_any()
    stacks = sorted([*compared_stacks, *unchanged], key=lambda s: s.name)
    return replace(Comparison(base.label, head.label, tuple(stacks)), notes=notes)


def _counts(
    names: list[str], base: StackFiles, head: StackFiles, counts: bool, problems: Problems
) -> dict[str, int | None]:
    """The addresses of each unchanged stack (None each when not asked for): from a file on disk of either
    side (the head's first), else the cache; None for a stack neither has (it is not synthesized to count)."""
    if not counts:
        return dict.fromkeys(names)
    for name in names:
        for files in (head, base):
            if (found := files.at_hand(name)) is not None:
                files.found[name] = found
                break
    return {
        n: (head if n in head.found else base).count(n, problems) if n in head.found or n in base.found else None
        for n in names
    }
