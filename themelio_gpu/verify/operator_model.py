"""The GPU Operator at runtime, what every mode shares: the protocol a mode follows, the NFD GPU labels.

The operands are not in the chart: the operator creates them from its custom resource. A mode models one
such resource: the ClusterPolicy (clusterpolicy_mode.py: the device-plugin stack, with a separate DRA driver
release) and the GPUCluster of v26.7.0 (gpucluster_mode.py: the operator manages the DRA driver);
operator_modes.py picks the mode of a rendered release. Apart so that each mode imports what they share
without importing the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.verify.workloads import Workload

NFD_GPU_LABELS = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)


class OperatorMode(Protocol):
    """One way the operator runs (one custom resource kind): its operands and its runtime node labels."""

    kind: str
    """The custom resource kind: `ClusterPolicy`, `GPUCluster`."""
    resource: str
    """The custom resource the operands come from, as the report shows it: `ClusterPolicy cluster-policy`."""

    def workloads(self) -> list[Workload]:
        """Every operand DaemonSet the operator could create (with created=False when it will not)."""
        ...

    def unmodelled(self) -> list[str]:
        """Settings of the resource that this model cannot prove; each one fails the proof."""
        ...

    def device_classes(self) -> list[Mapping[str, Any]]:
        """DeviceClasses the operator creates at runtime (not in the chart)."""
        ...

    def label(self, labels: dict[str, str], running: set[str], pool: PoolContract) -> dict[str, str]:
        """The node's labels after the operator and its label-writing operands acted, given which
        workloads run on the node. `labels` already holds what NFD published."""
        ...


def enabled(section: Any, default: bool) -> bool:
    """A custom resource section's `enabled`, `default` when it sets none (or is no mapping)."""
    value = section.get("enabled") if isinstance(section, Mapping) else None
    return default if value is None else bool(value)
