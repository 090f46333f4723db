"""Synthesis with progress and a summary table (what `main.py` and `check` run)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TextIO

from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.outputs.stack_folders import kept_message, remove_stale_stacks
from themelio_gpu.outputs.workers import (
    WORKERS_ENV,
    WorkerPool,
    can_fork,
    requested_workers,
    synthesize_in_workers,
    usable_cpus,
    worker_count,
)
from themelio_gpu.plan.fleet import ClusterPlan, Fleet, cluster_definition_files
from themelio_gpu.settings import DEFAULT_OUTDIR


def early_workers(stacks_dir: Path, workers: str | None = None) -> WorkerPool:
    """The synthesis workers for the fleet in `stacks_dir`, forked before it is loaded (none if one process
    will do): they start jsii while this process reads and checks the fleet. Counted from its cluster
    files; `synthesize` gives any worker without clusters nothing to do."""
    requested = requested_workers(workers if workers is not None else os.environ.get(WORKERS_ENV))
    files = cluster_definition_files(stacks_dir, Problems()) if stacks_dir.is_dir() else []
    count = worker_count(len(files), requested, usable_cpus(), can_fork())
    return WorkerPool(count if count > 1 else 0)


def synthesize(
    fleet: Fleet,
    outdir: Path | None,
    progress: TextIO | None = sys.stdout,
    workers: str | None = None,
    pool: WorkerPool | None = None,
) -> None:
    """Write one stack per cluster into `outdir`. `workers`: how many processes synthesize, a number or
    `auto` (default: $THEMELIO_SYNTH_WORKERS, else automatic; see workers.py); `pool`: workers started
    already (`early_workers`), used instead."""
    requested = requested_workers(workers if workers is not None else os.environ.get(WORKERS_ENV))
    # Create the output folder first: a path that cannot be written is a message, not a jsii traceback.
    target = outdir or Path(os.environ.get("CDKTF_OUTDIR") or DEFAULT_OUTDIR)
    target.mkdir(parents=True, exist_ok=True)
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

    count = (
        pool.size
        if pool is not None and pool.size > 1
        else worker_count(total, requested, usable_cpus(), can_fork())
    )
    if count > 1:
        if progress is not None:
            print(f"synthesizing {total} stacks in {min(count, total)} processes", file=progress, flush=True)
        if pool is not None and pool.size > 1:
            pool.synthesize(fleet, target, report)
        else:
            synthesize_in_workers(fleet, target, count, report)
    else:
        # Imported here: the provider bindings take a while to load, and commands that only read YAML
        # (catalog validate, match) should not pay for them.
        from themelio_gpu.outputs.app import build_app

        app = build_app(fleet.clusters, outdir, report)
        if progress is not None:
            print(f"writing {total} stack{'s' if total != 1 else ''}", file=progress, flush=True)
        app.synth()
    # A deleted cluster file leaves its old stack folder behind: the cdktf library keeps it (the CDKTF CLI
    # deletes every folder it did not write, whatever it holds; here a folder holding state is kept).
    removed, kept = remove_stale_stacks(target, {plan.name for plan in fleet.clusters})
    for name in removed:
        if progress is not None:
            print(
                f"removed {display_path(target / 'stacks' / name)}: cluster {name} is no longer defined",
                file=progress,
            )
    for stack in kept:
        print(f"warning: {kept_message(stack, display_path(stack.folder))}", file=sys.stderr)


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
