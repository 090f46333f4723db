"""Building and synthesizing the app: one `GpuClusterStack` per cluster of the fleet."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from themelio_gpu.constructs.gpu_cluster_stack import GpuClusterStack
from themelio_gpu.constructs.providers import App
from themelio_gpu.plan.model import ClusterPlan


def build_app(
    plans: Iterable[ClusterPlan], outdir: Path | None = None, on_stack: Callable[[ClusterPlan], None] | None = None
) -> App:
    """One `GpuClusterStack` per plan (the clusters being synthesized); `on_stack` hears of each once built."""
    # App() reads CDKTF_OUTDIR itself when the CDKTF CLI runs us; an explicit outdir wins.
    app = App(outdir=str(outdir)) if outdir is not None else App()
    for plan in plans:
        GpuClusterStack(app, plan)
        if on_stack is not None:
            on_stack(plan)
    return app
