"""Synthesis with progress and a summary table (what `main.py`, `check` and `terraform-check` run)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TextIO

from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.outputs.output_folder import CommitResult, OutputFolder, OutputWriteError
from themelio_gpu.outputs.stack_folders import StaleStack, held_files, kept_message
from themelio_gpu.plan.fleet import ClusterPlan, Fleet
from themelio_gpu.settings import DEFAULT_OUTDIR

# What node's fs module says when a write fails ("ENOSPC: no space left on device, write"), as jsii passes it.
_NODE_FS_ERROR = re.compile(r"\b(E[A-Z]+): ([^,]+), (\w+)(?: '([^']*)')?")


class StateAtRiskError(Exception):
    """Under the CDKTF CLI, a stale stack folder holds Terraform state that the CLI would delete."""


def output_target(outdir: Path | None) -> Path:
    """The output folder: `outdir`, else $CDKTF_OUTDIR (the CDKTF CLI sets it), else cdktf.out."""
    return outdir or Path(os.environ.get("CDKTF_OUTDIR") or DEFAULT_OUTDIR)


def run_by_cdktf_cli() -> bool:
    """`cdktf synth` (also diff and deploy) runs the app with these set, and after it exits deletes every
    stack folder the app did not write, whatever the folder holds."""
    return "CDKTF_OUTDIR" in os.environ and "SYNTH_HCL_OUTPUT" in os.environ


def synthesize(
    fleet: Fleet, outdir: Path | None = None, progress: TextIO | None = sys.stdout, notices: TextIO | None = None
) -> CommitResult:
    """Write one stack per cluster into `outdir` (see output_target), all or nothing (output_folder.py).

    `progress`: a line per stack (None: quiet); `notices` (default stdout): the stack folders removed,
    always."""
    target = output_target(outdir)
    names = [plan.name for plan in fleet.clusters]
    by_cli = run_by_cdktf_cli()
    with OutputFolder(target) as output:
        if by_cli:
            _refuse_losing_state(output.stale(names))
        _synthesize_into(fleet, output.staging, target, progress)
        result = output.commit(names, remove_stale=not by_cli)
    for name in result.removed:
        folder = display_path(target / "stacks" / name)
        how = "cdktf synth removes" if by_cli else "removed"
        print(f"{how} {folder}: cluster {name} is no longer defined", file=notices or sys.stdout, flush=True)
    for stack in result.kept:
        print(f"warning: {kept_message(stack, display_path(stack.folder))}", file=sys.stderr)
    return result


def _synthesize_into(fleet: Fleet, staging: Path, target: Path, progress: TextIO | None) -> None:
    # Imported here: the engine and the provider bindings take a while to load, and commands that only read
    # YAML (catalog validate, match) should not pay for them.
    from themelio_gpu.outputs.app import build_app

    total = len(fleet.clusters)
    done = 0

    def report(plan: ClusterPlan) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            print(
                f"[{done}/{total}] {plan.name}: {len(plan.device_classes)} DeviceClasses",
                file=progress,
                flush=True,
            )

    app = build_app(fleet.clusters, staging, report)
    if progress is not None:
        print(f"writing {total} stack{'s' if total != 1 else ''}", file=progress, flush=True)
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


def summary_table(fleet: Fleet) -> str:
    header = ("cluster", "k8s", "offerings", "DeviceClasses", "pools", "releases", "backend")
    rows = [header]
    for plan in fleet.clusters:
        releases = ", ".join(r.name for r in plan.releases)
        rows.append(
            (
                plan.name,
                plan.definition.kubernetes_version,
                str(len(plan.offerings)),
                str(len(plan.device_classes)),
                str(len(plan.pools)),
                releases,
                plan.definition.backend.type,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
