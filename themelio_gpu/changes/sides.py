"""The two sides `changed` compares, as what each knows of its stacks before anything is synthesized.

A side is a synthesized folder (`--base DIR`, `--head DIR`), the current fleet (the head by default), or a
commit's fleet planned here (`--base-ref` when the commit's tool is this checkout's). Per stack it may know:

- the digest of its inputs (outputs/stack_inputs.py): a folder's record (`.themelio-inputs.json`, for the
  stack files still as they were written), or the plan's;
- a stack file on disk that is that stack: a folder's, or one the default output folder (`cdktf.out`, what
  `python main.py` writes) holds for the same inputs;
- its plan, to synthesize it;
- its cluster file's SHA-256 and what every plan of the side depends on beside it (the catalog and the tool,
  stack_inputs.fleet_key): with both equal on the two sides, the plans are equal without planning.

A cluster file is read and checked once per set of inputs: the current fleet leaves unread the files that the
default output folder's record holds with the same bytes (as `python main.py` does), and those that `changed`
checked before with the same bytes, catalog and tool (the cache's record, cache.py). A file left unread is
planned when its plan is needed after all (its stack is compared).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from themelio_gpu.changes.cache import StackCache
from themelio_gpu.changes.stacks import stack_files
from themelio_gpu.engine import Engine
from themelio_gpu.inputs.clusters.files import cluster_definition_files
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.outputs.engine_load import engine_loaded_meanwhile
from themelio_gpu.outputs.stack_folders import STACK_FILE, STACKS_FOLDER
from themelio_gpu.outputs.stack_inputs import EMPTY, Index, file_digest, fleet_key, plan_digests, read_index
from themelio_gpu.outputs.synth import intact_records, output_target
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan, Fleet
from themelio_gpu.settings import InputPaths


@dataclass
class Stack:
    """What one side knows of one of its stacks."""

    name: str
    digest: str | None = None
    """The digest of its inputs, when known (for a planned stack: computed when first asked, Side.digest)."""
    file: Path | None = None
    """A stack file on disk that is this stack."""
    file_sha: str | None = None
    """The SHA-256 `file` was recorded with: read, it must still have it (None: a folder's file as it is)."""
    plan: ClusterPlan | None = None
    cluster_sha: str | None = None
    """The SHA-256 of its cluster file."""
    unread: bool = False
    """Its cluster file was checked before with these bytes and inputs: planned only when needed (Side.plan)."""
    same_as_head: bool = False
    """A base stack left unplanned: its cluster file's bytes, the catalog and the tool are the head's."""
    ships_charts: bool = False
    """A folder's record says it ships a chart from a local chart folder (a plan says it itself)."""
    planned: bool = False
    """Its cluster file was checked and planned here, the plan let go since (Side.release)."""


Planner = Callable[[list[str]], dict[str, ClusterPlan]]


@dataclass
class Side:
    label: str
    stacks: dict[str, Stack]
    engine: Engine
    fleet: Fleet | None = None
    """The planned fleet the plans come from (to synthesize them)."""
    fleet_key: str | None = None
    """What every plan of this side depends on beside its cluster file (stack_inputs.fleet_key), if known."""
    output: Path | None = None
    """An output folder whose records may hold a planned stack's file (the default output folder)."""
    index: Index = EMPTY
    """Its intact records."""
    planner: Planner | None = None
    """Plans the clusters left unread, by name."""
    _memo: dict[int, Any] = field(default_factory=dict)

    def plan(self, names: Iterable[str]) -> None:
        """Plan the clusters of these stacks that were left unread."""
        unread = [n for n in names if self.stacks[n].unread and self.stacks[n].plan is None]
        if unread:
            assert self.planner is not None
            for name, plan in self.planner(unread).items():
                self.stacks[name].plan = plan

    def digest(self, name: str) -> str | None:
        self.digests([name])
        return self.stacks[name].digest

    def digests(self, names: Iterable[str]) -> None:
        """Compute the digests of these stacks where the plan gives them (one memo: shared parts once)."""
        missing = [n for n in names if self.stacks[n].digest is None]
        self.plan(missing)
        plans = [p for n in missing if (p := self.stacks[n].plan) is not None]
        for name, digest in plan_digests(plans, self.engine, self._memo).items():
            self.stacks[name].digest = digest

    def release(self, names: Iterable[str]) -> None:
        """Let go of the plans of these stacks (decided without them) and of the plans' shared digest memo, so
        that the memory they take serves the synthesis (a thousand plans are tens of MB)."""
        for name in names:
            stack = self.stacks.get(name)
            if stack is not None and stack.plan is not None:
                stack.ships_charts, stack.planned, stack.plan = _ships_charts(stack), True, None
        self._memo.clear()
        if self.fleet is not None:
            self.fleet = dataclasses.replace(self.fleet, clusters=())  # the plans left are in self.stacks

    def recorded_file(self, name: str) -> tuple[Path, str] | None:
        """The output folder's file of a planned stack, when its record has this stack's inputs."""
        record = self.index.stacks.get(name)
        if self.output is None or record is None or record.inputs != self.digest(name):
            return None
        return self.output / STACKS_FOLDER / name / STACK_FILE, record.stack_file

    def checked(self) -> dict[str, str]:
        """The cache's record of this side's cluster files, checked and planned by this tool: `<file name>
        <SHA-256>` -> the digest of the stack's inputs ("" when not computed). Not the files whose plans ship
        a chart from a local chart folder: the archive's bytes are their input too (Index.unchanged_files)."""
        return {
            _checked_key(s.name, s.cluster_sha): s.digest or ""
            for s in self.stacks.values()
            if s.cluster_sha is not None and (s.plan is not None or s.planned or s.unread) and not _ships_charts(s)
        }


def _ships_charts(stack: Stack) -> bool:
    """It ships a chart from a local chart folder: the same cluster file may plan another stack."""
    return stack.ships_charts or (stack.plan is not None and bool(stack.plan.chart_archives))


def _checked_key(name: str, sha: str) -> str:
    return f"{name} {sha}"


def folder_side(folder: Path, label: str, engine: Engine, problems: Problems, *, records: bool = True) -> Side:
    """A synthesized folder: its stack files, and the digests its records hold for those still intact."""
    files = stack_files(folder, problems)
    index = intact_records(folder, read_index(folder)) if records and files else EMPTY
    stacks = {}
    for name, path in files.items():
        record = index.stacks.get(name)
        stacks[name] = Stack(
            name,
            digest=record.inputs if record else None,
            file=path,
            file_sha=record.stack_file if record else None,
            cluster_sha=record.file_sha if record else None,
            ships_charts=bool(record.charts) if record else False,
        )
    return Side(label, stacks, engine, fleet_key=index.fleet_key or None)


def fleet_side(
    paths: InputPaths, label: str, engine: Engine, cache: StackCache | None, *, reuse: bool = True
) -> Side:
    """The current fleet, checked (InputError on bad input). With `reuse`, the cluster files checked before
    with the same bytes, catalog and tool are not read again: those the default output folder's record holds
    (their stack files there are these stacks), and those the cache's record holds."""
    key = fleet_key(paths.catalog, engine)
    output = output_target(None)
    index = intact_records(output, read_index(output)) if reuse else EMPTY
    in_output = index.unchanged_files(key)
    checked = cache.checked_files(key) if cache is not None and reuse else {}
    cwd = Path.cwd().resolve()
    shown_of: dict[str, tuple[str, str]] = {}
    """Name -> (file as shown, SHA-256) of every cluster file that can be left unread."""
    unchanged: dict[str, str] = {}
    files = _one_file_per_name(cluster_definition_files(paths.stacks_dir, Problems()))
    for path in files if reuse else ():
        shown, sha = display_path(path, cwd), file_digest(path)
        if sha is None:
            continue
        shown_of[path.stem] = (shown, sha)
        if in_output.get(shown) == sha or _checked_key(path.stem, sha) in checked:
            unchanged[shown] = sha
    # The engine loads meanwhile (outputs/engine_load.py): the stacks that differ are synthesized next.
    with engine_loaded_meanwhile(len(files) - len(unchanged)):
        fleet = load_fleet(paths.catalog, paths.stacks_dir, unchanged)
    stacks: dict[str, Stack] = {}
    for plan in fleet.clusters:
        known = shown_of.get(plan.name)
        stacks[plan.name] = Stack(
            plan.name, plan=plan, cluster_sha=known[1] if known else file_digest(Path(plan.file))
        )
    for shown, name in fleet.reused:
        record = index.stacks.get(name)
        if in_output.get(shown) == unchanged[shown] and record is not None:
            stacks[name] = Stack(
                name,
                digest=record.inputs,
                file=output / STACKS_FOLDER / name / STACK_FILE,
                file_sha=record.stack_file,
                cluster_sha=record.file_sha,
            )
        else:
            sha = unchanged[shown]
            stacks[name] = Stack(
                name, digest=checked[_checked_key(name, sha)] or None, cluster_sha=sha, unread=True
            )

    def planner(names: list[str]) -> dict[str, ClusterPlan]:
        wanted = {shown_of[n][0] for n in names}
        others = {shown: sha for shown, sha in shown_of.values() if shown not in wanted}
        planned = load_fleet(paths.catalog, paths.stacks_dir, others)
        return {plan.name: plan for plan in planned.clusters if plan.name in names}

    return Side(
        label,
        stacks,
        engine,
        fleet=fleet,
        fleet_key=key,
        output=output if reuse else None,
        index=index,
        planner=planner,
    )


def planned_side(catalog: Path, stacks_dir: Path, label: str, engine: Engine, head: Side) -> Side:
    """A fleet planned with this checkout's code (InputError on bad input), leaving unread the cluster files
    whose bytes are the head's for the same stack while the catalog and the tool are the head's too."""
    key = fleet_key(catalog, engine)
    unchanged: dict[str, str] = {}
    if head.fleet_key == key:
        cwd = Path.cwd().resolve()
        for path in _one_file_per_name(cluster_definition_files(stacks_dir, Problems())):
            known = head.stacks.get(path.stem)
            if known is None or _ships_charts(known):  # its archives may differ between the sides
                continue
            if known.cluster_sha is not None and file_digest(path) == known.cluster_sha:
                unchanged[display_path(path, cwd)] = known.cluster_sha
    fleet = load_fleet(catalog, stacks_dir, unchanged)
    stacks = {}
    for plan in fleet.clusters:
        stacks[plan.name] = Stack(plan.name, plan=plan, cluster_sha=file_digest(Path(plan.file)))
    for _, name in fleet.reused:
        stacks[name] = Stack(name, same_as_head=True)
    return Side(label, stacks, engine, fleet=fleet, fleet_key=key)


def _one_file_per_name(files: list[Path]) -> list[Path]:
    """The files whose name no other file has: only those may be left unread (load_fleet reports two files
    of one cluster when it reads them)."""
    stems = Counter(path.stem for path in files)
    return [path for path in files if stems[path.stem] == 1]
