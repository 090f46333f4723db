"""The ClusterPolicy mode (the device-plugin stack): its operand DaemonSets and the node labels it adds.

The only mode of v26.3.3 and the default of v26.7.0; apart from the GPUCluster mode (gpucluster_mode.py)
because the two share no operand and label nodes by different rules.

ClusterPolicy facts, from NVIDIA/gpu-operator at v26.3.3 and v26.7.0:
- `controllers/state_manager.go` (`nodelabeling_controller.go` in v26.7.0): a node with an NFD label
  `feature.node.kubernetes.io/pci-10de.present` (or `pci-0302_10de`, `pci-0300_10de`) = true gets
  `nvidia.com/gpu.present=true` and the `nvidia.com/gpu.deploy.<operand>=true` state labels, except
  those already on the node (v26.7.0: already there with a non-empty value), which are honoured; that
  is how `nvidia.com/gpu.deploy.device-plugin=false` keeps the device plugin off a DRA node. v26.7.0 adds
  `nvidia.com/gpu.deploy.client`. `nvidia.com/gpu.deploy.mig-manager=true` is added on MIG-capable nodes
  (`nvidia.com/mig.capable=true`, from GPU Feature Discovery). `nvidia.com/gpu.deploy.operands=false`
  removes every state label. A node whose NFD GPU label is gone gets `nvidia.com/gpu.present=false`.
- `assets/*/..._daemonset.yaml`: each operand's nodeSelector is its state label; its tolerations are the
  ClusterPolicy's `daemonsets.tolerations` when that list is non-empty (`applyCommonDaemonsetConfig`
  replaces them), else the asset's own `nvidia.com/gpu` Exists NoSchedule.
- `isStateEnabled` and `api/nvidia/v1/clusterpolicy_types.go` `IsEnabled`: which operands exist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.k8s.nvidia import (
    DEPLOY,
    DEPLOY_CLIENT,
    DEPLOY_MIG_MANAGER,
    DEPLOY_OPERANDS,
    GPU_COUNT,
    GPU_PRESENT,
    GPU_PRODUCT,
    GPU_TOLERATION,
    MIG_CAPABLE,
)
from themelio_gpu.k8s.scheduling import PodScheduling
from themelio_gpu.k8s.version import release_numbers
from themelio_gpu.plan.helm.values import GPU_CLIENT_OPERATOR
from themelio_gpu.verify.operator_model import NFD_GPU_LABELS, enabled
from themelio_gpu.verify.workloads import Role, Workload

GFD = "gpu-feature-discovery"


@dataclass(frozen=True)
class Operand:
    name: str
    spec_key: str | None
    """The ClusterPolicy section with `enabled`; None for the validator, which always runs."""
    enabled_by_default: bool
    node_selector: Mapping[str, str]
    role: Role


def _deploy(operand: str) -> dict[str, str]:
    return {DEPLOY + operand: "true"}


OPERANDS = (
    Operand("nvidia-driver-daemonset", "driver", True, _deploy("driver"), Role.OPERAND),
    Operand("nvidia-container-toolkit-daemonset", "toolkit", True, _deploy("container-toolkit"), Role.OPERAND),
    Operand("nvidia-operator-validator", None, True, _deploy("operator-validator"), Role.OPERAND),
    Operand("nvidia-device-plugin-daemonset", "devicePlugin", True, _deploy("device-plugin"), Role.DEVICE_PLUGIN),
    Operand(
        "nvidia-device-plugin-mps-control-daemon",
        "devicePlugin",
        True,
        {**_deploy("device-plugin"), "nvidia.com/mps.capable": "true"},
        Role.DEVICE_PLUGIN_PART,
    ),
    Operand("nvidia-dcgm", "dcgm", True, _deploy("dcgm"), Role.OPERAND),
    Operand("nvidia-dcgm-exporter", "dcgmExporter", True, _deploy("dcgm-exporter"), Role.OPERAND),
    Operand(GFD, "gfd", True, _deploy("gpu-feature-discovery"), Role.OPERAND),
    Operand("nvidia-mig-manager", "migManager", True, _deploy("mig-manager"), Role.MIG_MANAGER),
    Operand(
        "nvidia-node-status-exporter", "nodeStatusExporter", False, _deploy("node-status-exporter"), Role.OPERAND
    ),
)
STATE_LABELS = tuple(
    DEPLOY + o
    for o in (
        "driver",
        "gpu-feature-discovery",
        "container-toolkit",
        "device-plugin",
        "dcgm",
        "dcgm-exporter",
        "node-status-exporter",
        "operator-validator",
    )
)
"""gpuStateLabels["container"], v26.3.3; v26.7.0 adds DEPLOY_CLIENT."""


def gfd_labels(pool: PoolContract, mig_strategy: str) -> dict[str, str]:
    """The GPU Feature Discovery labels the operator's own decisions read (gpu.product, mig.capable)."""
    product = pool.product
    return {
        GPU_PRODUCT: product.product_names[0].replace(" ", "-"),
        GPU_COUNT: str(pool.gpus_per_node),
        MIG_CAPABLE: "true" if product.supports_mig else "false",
        "nvidia.com/mig.strategy": mig_strategy,
    }


def mig_capable(labels: Mapping[str, str]) -> bool:
    """state_manager.go hasMIGCapableGPU."""
    if MIG_CAPABLE in labels:
        return labels[MIG_CAPABLE] == "true"
    product = labels.get(GPU_PRODUCT, "").lower()
    return any(name in product for name in ("h100", "a100", "a30"))


class ClusterPolicyMode:
    """The ClusterPolicy (device-plugin stack) mode: the only mode of v26.3.3, the default of v26.7.0."""

    kind = "ClusterPolicy"

    def __init__(
        self, policy: Mapping[str, Any], operator_version: str, release_objects: Sequence[Mapping[str, Any]] = ()
    ) -> None:
        self.policy = policy
        self.spec: Mapping[str, Any] = policy.get("spec") or {}
        self.resource = f"ClusterPolicy {(policy.get('metadata') or {}).get('name')}"
        newer = release_numbers(operator_version) >= GPU_CLIENT_OPERATOR
        self.state_labels = (*STATE_LABELS, DEPLOY_CLIENT) if newer else STATE_LABELS
        # v26.7.0 treats a state label with an empty value as absent (driver-manager leftovers).
        self.empty_is_unset = newer

    def _section(self, key: str) -> Mapping[str, Any]:
        section = self.spec.get(key)
        return section if isinstance(section, Mapping) else {}

    def tolerations(self) -> tuple[Mapping[str, Any], ...]:
        given = self._section("daemonsets").get("tolerations") or []
        return tuple(given) if given else (GPU_TOLERATION,)

    def workloads(self) -> list[Workload]:
        found = []
        tolerations = self.tolerations()
        for operand in OPERANDS:
            created = operand.spec_key is None or enabled(
                self.spec.get(operand.spec_key), operand.enabled_by_default
            )
            found.append(
                Workload(
                    operand.name,
                    operand.role,
                    self.resource,
                    PodScheduling(node_selector=operand.node_selector, tolerations=tolerations),
                    created=created,
                    not_created="" if created else f"{operand.spec_key}.enabled=false",
                )
            )
        return found

    def unmodelled(self) -> list[str]:
        found = []
        if enabled(self.spec.get("sandboxWorkloads"), False):
            found.append("sandboxWorkloads.enabled: the VM passthrough and vGPU operands are not modelled")
        driver = self._section("driver")
        if enabled(driver, True) and driver.get("useNvidiaDriverCRD"):
            found.append("driver.nvidiaDriverCRD.enabled: drivers from NVIDIADriver resources are not modelled")
        if enabled(driver, True) and driver.get("usePrecompiled"):
            found.append("driver.usePrecompiled: per-kernel driver DaemonSets are not modelled")
        return found

    def device_classes(self) -> list[Mapping[str, Any]]:
        return []

    def label(self, labels: dict[str, str], running: set[str], pool: PoolContract) -> dict[str, str]:
        labels = dict(labels)
        if not any(labels.get(key) == "true" for key in NFD_GPU_LABELS):
            if labels.get(GPU_PRESENT) == "true":
                labels[GPU_PRESENT] = "false"  # "node no longer has GPUs"
            return self._without_state_labels(labels)
        labels[GPU_PRESENT] = "true"
        if labels.get(DEPLOY_OPERANDS) == "false":
            return self._without_state_labels(labels)
        if GFD in running:
            mig = self._section("mig").get("strategy") or "single"
            labels.update(gfd_labels(pool, str(mig)))
        for key in self.state_labels:
            if key not in labels or (self.empty_is_unset and labels[key] == ""):
                labels[key] = "true"
        if mig_capable(labels) and DEPLOY_MIG_MANAGER not in labels:
            labels[DEPLOY_MIG_MANAGER] = "true"
        return labels

    def _without_state_labels(self, labels: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in labels.items() if k not in self.state_labels and k != DEPLOY_MIG_MANAGER}
