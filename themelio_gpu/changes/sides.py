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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from themelio_gpu.changes.stacks import stack_files
from themelio_gpu.engine import Engine
from themelio_gpu.inputs.clusters.files import cluster_definition_files
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.outputs.stack_folders import STACK_FILE, STACKS_FOLDER
from themelio_gpu.outputs.stack_inputs import EMPTY, Index, file_digest, fleet_key, plan_digests, read_index
from themelio_gpu.outputs.synth import intact_records, output_target
from themelio_gpu.plan.fleet import ClusterPlan, Fleet, load_fleet
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
    same_as_head: bool = False
    """A base stack left unplanned: its cluster file's bytes, the catalog and the tool are the head's."""


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
    _memo: dict[int, Any] = field(default_factory=dict)

    def digest(self, name: str) -> str | None:
        stack = self.stacks[name]
        if stack.digest is None and stack.plan is not None:
            stack.digest = plan_digests([stack.plan], self.engine, self._memo)[name]
        return stack.digest

    def digests(self, names: Iterable[str]) -> None:
        """Compute the digests of these planned stacks at once (one memo: shared catalog parts once)."""
        plans = [s.plan for n in names if (s := self.stacks[n]).digest is None and s.plan is not None]
        for name, digest in plan_digests(plans, self.engine, self._memo).items():
            self.stacks[name].digest = digest

    def recorded_file(self, name: str) -> tuple[Path, str] | None:
        """The output folder's file of a planned stack, when its record has this stack's inputs."""
        record = self.index.stacks.get(name)
        if self.output is None or record is None or record.inputs != self.digest(name):
            return None
        return self.output / STACKS_FOLDER / name / STACK_FILE, record.stack_file


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
        )
    return Side(label, stacks, engine, fleet_key=index.fleet_key or None)


def fleet_side(paths: InputPaths, label: str, engine: Engine, *, reuse: bool = True) -> Side:
    """The current fleet, checked (InputError on bad input). With `reuse`, as `python main.py` would
    synthesize it into the default output folder: a cluster file that folder's record holds with the same
    bytes (the catalog and tool as recorded) is not read again, and its stack file there is this stack."""
    key = fleet_key(paths.catalog, engine)
    output = output_target(None)
    index = intact_records(output, read_index(output)) if reuse else EMPTY
    fleet = load_fleet(paths.catalog, paths.stacks_dir, index.unchanged_files(key))
    stacks: dict[str, Stack] = {}
    for plan in fleet.clusters:
        stacks[plan.name] = Stack(plan.name, plan=plan, cluster_sha=file_digest(Path(plan.file)))
    for _, name in fleet.reused:
        record = index.stacks[name]
        stacks[name] = Stack(
            name,
            digest=record.inputs,
            file=output / STACKS_FOLDER / name / STACK_FILE,
            file_sha=record.stack_file,
            cluster_sha=record.file_sha,
        )
    return Side(label, stacks, engine, fleet=fleet, fleet_key=key, output=output if reuse else None, index=index)


def planned_side(catalog: Path, stacks_dir: Path, label: str, engine: Engine, head: Side) -> Side:
    """A fleet planned with this checkout's code (InputError on bad input), leaving unread the cluster files
    whose bytes are the head's for the same stack while the catalog and the tool are the head's too."""
    key = fleet_key(catalog, engine)
    unchanged: dict[str, str] = {}
    if head.fleet_key == key:
        cwd = Path.cwd().resolve()
        for path in cluster_definition_files(stacks_dir, Problems()):
            known = head.stacks.get(path.stem)
            if known is not None and known.cluster_sha is not None and file_digest(path) == known.cluster_sha:
                unchanged[display_path(path, cwd)] = known.cluster_sha
    fleet = load_fleet(catalog, stacks_dir, unchanged)
    stacks = {plan.name: Stack(plan.name, plan=plan) for plan in fleet.clusters}
    for _, name in fleet.reused:
        stacks[name] = Stack(name, same_as_head=True)
    return Side(label, stacks, engine, fleet=fleet, fleet_key=key)
