"""The components of the sandbox: programs run beside the control plane, each one module (base.py says what one
is), started by `up` for the clusters that need them and stopped by `down`, in the order of COMPONENTS.

- `COMPONENTS`: the ordered registry; `wanted(plan, probe_components)`: the ones a cluster runs (without
  `probe_components`, not those only the probe asks of); `tools(plan, probe_components)`: their tools.
- `start(context)`: starts each wanted component in order, then waits until each is ready; returns the state
  they keep (merged into `sandbox.json`). A failure raises; the caller's teardown stops what started.
- `stop(supervisor)`: stops every component, wanted or not, in reverse order (`down` knows no plan).
"""

from __future__ import annotations

import time
from typing import Any

from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.components.base import Component, Context
from themelio_gpu.sandbox.components.chart_repository import ChartRepository
from themelio_gpu.sandbox.components.dra_kubelet_plugin import DraKubeletPlugin
from themelio_gpu.sandbox.components.gpu_operator import GpuOperator
from themelio_gpu.sandbox.components.karpenter import Karpenter
from themelio_gpu.sandbox.components.kueue import Kueue
from themelio_gpu.sandbox.components.nfd_worker import NfdWorker
from themelio_gpu.sandbox.supervisor import Supervisor

__all__ = ["COMPONENTS", "Component", "Context", "start", "stop", "tools", "wanted"]

COMPONENTS: tuple[Component, ...] = (
    ChartRepository(),
    NfdWorker(),
    Karpenter(),
    Kueue(),
    DraKubeletPlugin(),
    GpuOperator(),
)
"""Every component, in the order they start."""


def wanted(plan: ClusterPlan, probe_components: bool = True) -> list[Component]:
    return [c for c in COMPONENTS if c.wanted(plan) and (probe_components or not c.probe_only)]


def tools(plan: ClusterPlan, probe_components: bool = True) -> set[str]:
    """The tools.toml names the cluster's components need."""
    return {tool for component in wanted(plan, probe_components) for tool in component.tools_for(plan)}


def start(context: Context) -> dict[str, Any]:
    """Start the cluster's components in order, then wait for each to be ready; returns their state, with
    `componentSeconds`: each one's seconds to start and then to be ready (where a sandbox's `up` goes)."""
    state: dict[str, dict[str, Any]] = {}
    seconds: dict[str, list[float]] = {}
    running = wanted(context.plan, context.probe_components)
    for component in running:
        mark = time.monotonic()
        state[component.name] = component.start(context)
        seconds[component.name] = [round(time.monotonic() - mark, 1)]
    for component in running:
        mark = time.monotonic()
        component.ready(context, state[component.name])
        seconds[component.name].append(round(time.monotonic() - mark, 1))
    merged = {key: value for entries in state.values() for key, value in entries.items()}
    return {**merged, "componentSeconds": seconds}


def stop(supervisor: Supervisor) -> None:
    """Stop every component, last started first."""
    for component in reversed(COMPONENTS):
        component.stop(supervisor)
