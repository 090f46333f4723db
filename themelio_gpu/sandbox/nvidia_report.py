"""What NVIDIA's own code answers in `sandbox probe`, beside the rows the scheduler answers (probe.py).

- The GPU Operator: whether NVIDIA's controller runs and what its custom resources' status says
  (operator_status.py); its operands' placement is in the DaemonSet rows (daemonsets.py), compared there.
- The GPUs: whose slices each node has (the DRA driver's kubelet plugin or the sandbox); no node may have both.
  The share of whole-GPU devices the driver published, the generator's devices beside the driver's, and the
  stack's DeviceClasses on the driver's devices (slice_compare.py).
Any of these that disagrees fails the probe.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox import operator_status, slice_compare
from themelio_gpu.sandbox.folder import Sandbox, kubectl
from themelio_gpu.sandbox.tools import Toolbox


@dataclass
class NvidiaReport:
    operator: operator_status.OperatorStatus | None
    publishers: dict[str, str]
    """node -> whose slices it has."""
    whole_gpus: int
    """Whole-GPU devices in the cluster's slices."""
    by_driver: int
    """Of them, published by the driver."""
    pools: list[slice_compare.PoolComparison] = field(default_factory=list)
    classes: list[slice_compare.ClassSelection] = field(default_factory=list)

    @property
    def doubly_published(self) -> list[str]:
        return [node for node, who in self.publishers.items() if "+" in who]

    @property
    def ok(self) -> bool:
        operator_ok = self.operator is None or self.operator.ok
        return (
            operator_ok
            and not self.doubly_published
            and all(p.agrees for p in self.pools)
            and all(c.agrees for c in self.classes)
        )


def _whole_gpus(slices: list[dict[str, Any]]) -> tuple[int, int]:
    total = driver = 0
    for item in slices:
        whole = sum(
            1
            for d in item["spec"].get("devices") or []
            if (d.get("attributes", {}).get("type") or {}).get("string") == "gpu"
        )
        total += whole
        driver += whole if slice_compare.publisher(item) == "driver" else 0
    return total, driver


def read(plan: ClusterPlan, sandbox: Sandbox, toolbox: Toolbox) -> NvidiaReport:
    served = kubectl(toolbox, sandbox, "api-resources", "-o", "name").split()
    slices: list[dict[str, Any]] = []
    classes: list[dict[str, Any]] = []
    if "resourceslices.resource.k8s.io" in served:
        slices = json.loads(
            kubectl(toolbox, sandbox, "get", "resourceslices", "-o", "json", "--show-managed-fields")
        )["items"]
        classes = json.loads(kubectl(toolbox, sandbox, "get", "deviceclasses", "-o", "json"))["items"]
    total, driver = _whole_gpus(slices)
    return NvidiaReport(
        operator_status.read(toolbox, sandbox),
        slice_compare.publishers(slices),
        total,
        driver,
        slice_compare.compare_pools(plan, slices),
        slice_compare.class_selections(plan, slices, classes),
    )


def as_text(report: NvidiaReport) -> str:
    out: list[str] = []
    if report.operator is not None:
        out += operator_status.lines(report.operator)
    who = ", ".join(f"{node}: {publisher}" for node, publisher in report.publishers.items()) or "no node has any"
    out.append(
        f"ResourceSlices: whole GPUs {report.by_driver} of {report.whole_gpus} published by NVIDIA's DRA driver; "
        f"whose slices each node has: {who}"
    )
    for node in report.doubly_published:
        out.append(f"  NO: {node} has slices of the driver and of the sandbox (double publishing)")
    if report.pools:
        out.append(slice_compare.comparison_table(report.pools))
    if report.classes:
        out.append(slice_compare.selection_table(report.classes))
    return "\n".join(out)


def as_json(report: NvidiaReport) -> dict[str, Any]:
    return {
        "operator": dataclasses.asdict(report.operator) if report.operator else None,
        "slicesBy": report.publishers,
        "wholeGpus": {"total": report.whole_gpus, "publishedByDriver": report.by_driver},
        "sliceDifferences": [{**dataclasses.asdict(p), "agrees": p.agrees} for p in report.pools],
        "deviceClasses": [{**dataclasses.asdict(c), "agrees": c.agrees} for c in report.classes],
        "agrees": report.ok,
    }


def summary(report: NvidiaReport) -> str:
    """The summary line's part."""
    parts = [f"whole GPUs {report.by_driver} of {report.whole_gpus} published by NVIDIA's DRA driver"]
    unexplained = sum(1 for p in report.pools for d in p.differences if not d.reason)
    parts.append(f"{unexplained} unexplained difference(s) between the sandbox's slices and the driver's")
    wrong = sum(not c.agrees for c in report.classes)
    parts.append(f"{len(report.classes)} DeviceClasses on the driver's devices, {wrong} selecting otherwise")
    if report.operator is not None:
        parts.append("the GPU Operator's controller " + ("runs" if report.operator.running else "does not run"))
    return "; ".join(parts)
