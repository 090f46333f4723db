"""Synthesis with progress and a summary table (what `main.py`, `check`, `terraform-check` and `changed` run).

Incremental by default: a stack whose inputs (stack_inputs.py: its cluster's plan, this tool, the installed
packages, the engine) are the ones recorded when its file was written, and whose file is still that file,
is not synthesized again; its files stay. `main.py` also leaves a cluster file unread when it and
everything else its plan depends on are unchanged (`synthesize_files`). Every stack of the fleet stays in
the manifest, and the output is byte-identical to a full synthesis (`full=True`, `--full`).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from themelio_gpu.engine import Engine, selected
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.outputs.manifest import manifest_text, read_manifest
from themelio_gpu.outputs.output_folder import OutputFolder, OutputWriteError
from themelio_gpu.outputs.stack_folders import (
    MANIFEST,
    STACK_FILE,
    STACKS_FOLDER,
    StaleStack,
    held_files,
    kept_message,
)
from themelio_gpu.outputs.stack_inputs import (
    EMPTY,
    INDEX,
    Index,
    Recorded,
    file_digest,
    fleet_key,
    index_text,
    input_digests,
    read_index,
)
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan, Fleet
from themelio_gpu.settings import DEFAULT_OUTDIR, InputPaths
from themelio_gpu.tables import table
from themelio_gpu.words import count

# What node's fs module says when a write fails ("ENOSPC: no space left on device, write"), as jsii passes it.
_NODE_FS_ERROR = re.compile(r"\b(E[A-Z]+): ([^,]+), (\w+)(?: '([^']*)')?")
SUMMARY_HEADER = ("cluster", "k8s", "offerings", "DeviceClasses", "pools", "releases", "backend")


class StateAtRiskError(Exception):
    """Under the CDKTF CLI, a stale stack folder holds Terraform state that the CLI would delete."""


@dataclass(frozen=True)
class Synthesis:
    written: tuple[str, ...]
    """The stacks synthesized by this run."""
    unchanged: tuple[str, ...]
    """The stacks whose inputs had not changed: their files were left as they were."""
    removed: tuple[str, ...]
    kept: tuple[StaleStack, ...]
    summary: tuple[tuple[str, ...], ...]
    """A row per stack of the fleet (summary_table), by cluster name."""
    warnings: tuple[str, ...]
    """The warnings of the cluster files left unread (the others' are in the loaded fleet)."""


def output_target(outdir: Path | None) -> Path:
    """The output folder: `outdir`, else $CDKTF_OUTDIR (the CDKTF CLI sets it), else cdktf.out."""
    return outdir or Path(os.environ.get("CDKTF_OUTDIR") or DEFAULT_OUTDIR)


def run_by_cdktf_cli() -> bool:
    """`cdktf synth` (also diff and deploy) runs the app with these set, and after it exits deletes every
    stack folder the app did not write, whatever the folder holds."""
    return "CDKTF_OUTDIR" in os.environ and "SYNTH_HCL_OUTPUT" in os.environ


def synthesize(
    fleet: Fleet,
    outdir: Path | None = None,
    progress: TextIO | None = sys.stdout,
    notices: TextIO | None = None,
    *,
    full: bool = False,
) -> Synthesis:
    """Write one stack per cluster of a loaded fleet into `outdir` (see output_target), all or nothing
    (output_folder.py). `progress`: a line per stack (None: quiet); `notices` (default stdout): the stack
    folders removed, always. `full`: every stack, whatever was recorded."""
    return _synthesize(Path(fleet.catalog.file), lambda _: fleet, outdir, progress, notices, full)[1]


def synthesize_files(
    paths: InputPaths,
    outdir: Path | None = None,
    progress: TextIO | None = sys.stdout,
    notices: TextIO | None = None,
    *,
    full: bool = False,
) -> tuple[Fleet, Synthesis]:
    """Load the fleet and synthesize it (`main.py`), reading again only the cluster files whose stacks may
    change: with the catalog, this tool, the packages and the engine as recorded, a cluster file with the
    bytes recorded has the plan recorded, so its stack (still the file recorded) is left as it is."""

    def load(unchanged_files: dict[str, str]) -> Fleet:
        return load_fleet(paths.catalog, paths.stacks_dir, unchanged_files)

    return _synthesize(paths.catalog, load, outdir, progress, notices, full)


def _synthesize(
    catalog: Path,
    load: Callable[[dict[str, str]], Fleet],
    outdir: Path | None,
    progress: TextIO | None,
    notices: TextIO | None,
    full: bool,
) -> tuple[Fleet, Synthesis]:
    """`load` gets the cluster files it need not read again (file -> SHA-256) and returns the fleet."""
    engine = selected()
    target = output_target(outdir)
    with OutputFolder(target) as output:
        key = fleet_key(catalog, engine)
        intact = intact_records(target, EMPTY if full else read_index(target))
        fleet = load(intact.unchanged_files(key))
        result = _synthesize_in(output, fleet, intact, key, engine, progress)
    _report(result, target, notices)
    return fleet, result


def intact_records(target: Path, index: Index) -> Index:
    """The records whose stack is still in the manifest and whose stack file is still the one written."""
    manifest = read_manifest(target / MANIFEST)
    listed = manifest["stacks"] if manifest is not None else {}
    stacks = {
        name: r
        for name, r in index.stacks.items()
        if name in listed and file_digest(target / STACKS_FOLDER / name / STACK_FILE) == r.stack_file
    }
    return Index(index.fleet_key, stacks)


def _synthesize_in(
    output: OutputFolder, fleet: Fleet, intact: Index, key: str, engine: Engine, progress: TextIO | None
) -> Synthesis:
    """`intact`: the records of the stacks still as they were written (intact_records)."""
    by_cli = run_by_cdktf_cli()
    reused = {name: intact.stacks[name] for _, name in fleet.reused}
    names = sorted([plan.name for plan in fleet.clusters] + list(reused))
    if by_cli:
        _refuse_losing_state(output.stale(names))
    digests = input_digests(fleet, engine)
    to_write = [
        p for p in fleet.clusters if (r := intact.stacks.get(p.name)) is None or r.inputs != digests[p.name]
    ]
    unchanged = sorted({*reused, *(p.name for p in fleet.clusters)} - {p.name for p in to_write})
    if to_write:
        _synthesize_into(to_write, len(unchanged), output.staging, output.target, progress)
    elif progress is not None:
        print(f"every stack is up to date ({len(unchanged)} unchanged)", file=progress, flush=True)
    _stage_manifest(output, engine, to_write, unchanged)
    records = _records(fleet, to_write, digests, intact, reused, output.staging)
    (output.staging / INDEX).write_text(index_text(Index(key, records)), encoding="utf-8")
    committed = output.commit(names, remove_stale=not by_cli)
    return Synthesis(
        written=tuple(sorted(p.name for p in to_write)),
        unchanged=tuple(unchanged),
        removed=tuple(committed.removed),
        kept=tuple(committed.kept),
        summary=tuple(records[name].summary for name in names),
        warnings=tuple(w for record in reused.values() for w in record.warnings),
    )


def _stage_manifest(
    output: OutputFolder, engine: Engine, written: Sequence[ClusterPlan], unchanged: list[str]
) -> None:
    """manifest.json listing every stack: the written ones as the engine staged them, the others as before."""
    old = read_manifest(output.target / MANIFEST) or {"stacks": {}, "version": engine.version}
    staged = read_manifest(output.staging / MANIFEST) if written else None
    stacks = {name: old["stacks"][name] for name in unchanged}
    stacks.update(staged["stacks"] if staged is not None else {})
    version = staged["version"] if staged is not None else old["version"]
    (output.staging / MANIFEST).write_text(
        manifest_text({"stacks": stacks, "version": version}, engine), encoding="utf-8"
    )


def _records(
    fleet: Fleet,
    written: Sequence[ClusterPlan],
    digests: dict[str, str],
    intact: Index,
    reused: dict[str, Recorded],
    staging: Path,
) -> dict[str, Recorded]:
    """What is recorded of every stack of the fleet, for the next run."""
    warnings: dict[str, list[str]] = {}
    for warning in fleet.warnings:
        warnings.setdefault(warning.file, []).append(str(warning))
    records = dict(reused)
    staged = {p.name for p in written}
    for plan in fleet.clusters:
        stack_file = (
            file_digest(staging / STACKS_FOLDER / plan.name / STACK_FILE)
            if plan.name in staged
            else intact.stacks[plan.name].stack_file
        )
        records[plan.name] = Recorded(
            file=plan.file,
            file_sha=file_digest(Path(plan.file)) or "",
            inputs=digests[plan.name],
            stack_file=stack_file or "",
            summary=summary_row(plan),
            warnings=tuple(warnings.get(plan.file, ())),
            charts=tuple(archive.archive for archive in plan.chart_archives),
        )
    return records


def _report(result: Synthesis, target: Path, notices: TextIO | None) -> None:
    by_cli = run_by_cdktf_cli()
    for name in result.removed:
        folder = display_path(target / STACKS_FOLDER / name)
        how = "cdktf synth removes" if by_cli else "removed"
        print(f"{how} {folder}: cluster {name} is no longer defined", file=notices or sys.stdout, flush=True)
    for stack in result.kept:
        print(f"warning: {kept_message(stack, display_path(stack.folder))}", file=sys.stderr)


def _synthesize_into(
    plans: Sequence[ClusterPlan], unchanged: int, staging: Path, target: Path, progress: TextIO | None
) -> None:
    # Imported here: the engine and the provider bindings take a while to load, and commands that only read
    # YAML (catalog validate, match), or a synthesis with nothing to write, should not pay for them.
    from themelio_gpu.outputs.app import build_app

    total = len(plans)
    done = 0

    def report(plan: ClusterPlan) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            print(
                f"[{done}/{total}] {plan.name}: {count(len(plan.device_classes), 'DeviceClass', 'DeviceClasses')}",
                file=progress,
                flush=True,
            )

    app = build_app(plans, staging, report)
    if progress is not None:
        others = f" ({unchanged} unchanged)" if unchanged else ""
        print(f"writing {total} stack{'s' if total != 1 else ''}{others}", file=progress, flush=True)
    try:
        app.synth()
    except RuntimeError as error:  # the engine writes in node: jsii raises its fs errors as RuntimeError
        found = _NODE_FS_ERROR.search(str(error))
        if found is None:
            raise
        code, reason, _, path = found.groups()
        where = display_path(Path(path)) if path else f"the stacks into {display_path(staging)}"
        raise OutputWriteError(
            f"cannot write {where}: {reason} ({code}); {display_path(target)} unchanged"
        ) from None


def _refuse_losing_state(stale: list[StaleStack]) -> None:
    at_risk = [s for s in stale if not s.removable]
    if at_risk:
        lines = "".join(
            f"{display_path(s.folder)}: cluster {s.name} is no longer defined, but its folder holds "
            f"{held_files(s)}\n"
            for s in at_risk
        )
        raise StateAtRiskError(
            f"{lines}cdktf synth deletes every stack folder its app did not write, so nothing was written. "
            "Destroy the stack or move its state first (with the cluster file restored), then delete the "
            "folder; `python main.py` keeps such a folder and says so"
        )


def summary_row(plan: ClusterPlan) -> tuple[str, ...]:
    return (
        plan.name,
        plan.definition.kubernetes_version,
        str(len(plan.offerings)),
        str(len(plan.device_classes)),
        str(len(plan.pools)),
        ", ".join(r.name for r in plan.releases),
        plan.definition.backend.type,
    )


def summary_table(rows: Sequence[Sequence[str]]) -> str:
    return table([SUMMARY_HEADER, *rows], rule=True)
