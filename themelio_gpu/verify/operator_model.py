"""The GPU Operator at runtime: the operand DaemonSets it creates and the node labels it (and GFD) adds.

The operands are not in the chart: the operator creates them from its custom resource. A mode models one
such resource; `MODES` maps the resource kind to its model: the ClusterPolicy (the device-plugin stack, with
a separate DRA driver release) and the GPUCluster of v26.7.0 (the operator manages the DRA driver). A
rendered kind this file lists in `UNMODELLED` fails the proof rather than passing unproven.

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

GPUCluster facts, from NVIDIA/gpu-operator at v26.7.0 (commit 10ee5b36):
- `internal/state/manager.go` newGPUClusterStates: the DRA driver, DCGM, DCGM Exporter and DRA validator
  states, from `manifests/state-{dra-driver,dcgm,dcgm-exporter,dra-validation}/`. Every DaemonSet there
  selects its own `nvidia.com/gpu.deploy.<state>=true` label and carries `spec.daemonsets.tolerations`
  verbatim, and nothing when that list is empty (`{{- if .Daemonsets.Tolerations }}`: no operator default,
  unlike the ClusterPolicy). The kubelet plugin also requires node affinity (any of the NFD PCI label,
  NFD's NVIDIA CPU vendor, `nvidia.com/gpu.present`); the validator requires `nvidia.com/gpu.present`. The
  validator, DCGM and DCGM Exporter pods claim GPUs (adminAccess ResourceClaims on gpu.nvidia.com), so they
  start only where the kubelet plugin publishes the node's devices. DCGM exists only with
  `dcgm.enabled: true` (`gpucluster.go` dcgmEnabled), DCGM Exporter when `dcgmExporter` is set and not
  disabled, the validator and the plugin always; ComputeDomains add a Deployment (not per node).
- `controllers/nodelabeling_controller.go` updateGPUStateLabels with a GPUCluster: no GPU label, no state
  labels; otherwise the device-plugin stack's own state labels are swept off
  (`devicePluginOnlyStateLabelKeys`) and `gpuClusterStateLabels` (driver, dra-driver, dra-validator,
  dcgm-dra, dcgm-exporter-dra) are set unless already there with a non-empty value (`=false` opts a node
  out). `nvidia.com/gpu.deploy.operands` is not read in this mode. There is no GPU Feature Discovery.
- The driver, when the operator installs one, comes from an NVIDIADriver resource
  (`internal/state/driver.go`, `nodepool.go`, `manifests/state-driver/0500_daemonset.yaml`): one DaemonSet
  per OS of the nodes it owns, selecting `nvidia.com/gpu.deploy.driver=true`, `nvidia.com/gpu.present=true`,
  its owner label (`internal/nvidiadriver` AssignOwners: the matching non-default NVIDIADriver, else the
  default one) and NFD's OS labels; tolerating `nvidia.com/gpu` plus the resource's own tolerations.
- `manifests/state-dra-driver/04*_deviceclass-*.yaml`: its DeviceClasses, which
  `inputs/catalog/driver_classes.py` lists (`driver_device_classes(by_gpu_operator=True, ...)`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from themelio_gpu.inputs.catalog.driver_classes import DriverClass, driver_device_classes
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.k8s.nvidia import (
    DEPLOY,
    DEPLOY_CLIENT,
    DEPLOY_MIG_MANAGER,
    DEPLOY_OPERANDS,
    DRIVER_OWNER,
    GPU_COUNT,
    GPU_PRESENT,
    GPU_PRODUCT,
    GPU_TOLERATION,
    MIG_CAPABLE,
)
from themelio_gpu.k8s.scheduling import PodScheduling
from themelio_gpu.k8s.version import release_numbers
from themelio_gpu.plan.helm.values import GPU_CLIENT_OPERATOR
from themelio_gpu.plan.manifests import DEVICE_CLASS_API_VERSION
from themelio_gpu.verify.workloads import NFD_LABEL_PREFIX, NFD_OS_LABELS, Role, Workload

NFD_GPU_LABELS = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)
GFD = "gpu-feature-discovery"


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


def _enabled(section: Any, default: bool) -> bool:
    value = section.get("enabled") if isinstance(section, Mapping) else None
    return default if value is None else bool(value)


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
            created = operand.spec_key is None or _enabled(
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
        if _enabled(self.spec.get("sandboxWorkloads"), False):
            found.append("sandboxWorkloads.enabled: the VM passthrough and vGPU operands are not modelled")
        driver = self._section("driver")
        if _enabled(driver, True) and driver.get("useNvidiaDriverCRD"):
            found.append("driver.nvidiaDriverCRD.enabled: drivers from NVIDIADriver resources are not modelled")
        if _enabled(driver, True) and driver.get("usePrecompiled"):
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


# --- the GPUCluster mode (v26.7.0) -------------------------------------------------------------------------

DRA_PLUGIN = "nvidia-dra-driver-kubelet-plugin"
GPU_CLUSTER_STATE_LABELS = tuple(
    DEPLOY + o for o in ("driver", "dra-driver", "dra-validator", "dcgm-dra", "dcgm-exporter-dra")
)
"""gpuClusterStateLabels."""
_CLUSTER_POLICY_ONLY = (
    # gpuStateLabels of every workload config, the kata device plugin and the MIG Manager, less those the
    # GPUCluster shares (driver) and vgpu-manager (an NVIDIADriver DaemonSet of either stack).
    "gpu-feature-discovery",
    "container-toolkit",
    "device-plugin",
    "dcgm",
    "dcgm-exporter",
    "node-status-exporter",
    "operator-validator",
    "client",
    "sandbox-device-plugin",
    "sandbox-validator",
    "vfio-manager",
    "kata-manager",
    "cc-manager",
    "vgpu-device-manager",
    "kata-sandbox-device-plugin",
    "mig-manager",
)
DEVICE_PLUGIN_ONLY_LABELS = tuple(DEPLOY + o for o in _CLUSTER_POLICY_ONLY)
"""devicePluginOnlyStateLabelKeys: swept off every GPU node while a GPUCluster is active."""
ALL_STATE_LABELS = (*DEVICE_PLUGIN_ONLY_LABELS, *GPU_CLUSTER_STATE_LABELS, DEPLOY + "vgpu-manager")
"""removeAllGPUStateLabels: what a node without GPUs loses."""
_IN_TRUE = ("true",)


def _requires(*terms: tuple[str, tuple[str, ...]]) -> tuple[Mapping[str, Any], ...]:
    """Required node affinity terms (ORed), one `In` expression each."""
    return tuple({"matchExpressions": [{"key": k, "operator": "In", "values": list(v)}]} for k, v in terms)


# manifests/state-dra-driver/0500_daemonset.yaml and state-dra-validation/0500_daemonset.yaml
PLUGIN_AFFINITY = _requires(
    (NFD_GPU_LABELS[0], _IN_TRUE),
    (f"{NFD_LABEL_PREFIX}cpu-model.vendor_id", ("NVIDIA",)),
    (GPU_PRESENT, _IN_TRUE),
)
VALIDATOR_AFFINITY = _requires((GPU_PRESENT, _IN_TRUE))


@dataclass(frozen=True)
class DraOperand:
    name: str
    state: str
    """Its `nvidia.com/gpu.deploy.<state>` label."""
    role: Role
    affinity: tuple[Mapping[str, Any], ...] | None
    section: str | None
    """The GPUCluster section with `enabled` (and `hostNetwork`); None when it always exists."""
    enabled_when_unset: bool
    """Whether it exists when its section sets no `enabled` (a missing section means it does not)."""
    claims_gpus: bool
    """Its pods hold an adminAccess ResourceClaim on gpu.nvidia.com devices."""


DRA_OPERANDS = (
    DraOperand(DRA_PLUGIN, "dra-driver", Role.DRA_PLUGIN, PLUGIN_AFFINITY, None, True, False),
    DraOperand("nvidia-dra-validator", "dra-validator", Role.OPERAND, VALIDATOR_AFFINITY, None, True, True),
    # gpucluster.go dcgmEnabled: the standalone hostengine only with enabled: true.
    DraOperand("nvidia-dcgm-dra", "dcgm-dra", Role.OPERAND, None, "dcgm", False, True),
    # dcgm_exporter.go: with a dcgmExporter section, enabled unless it says false (IsEnabled).
    DraOperand("nvidia-dcgm-exporter-dra", "dcgm-exporter-dra", Role.OPERAND, None, "dcgmExporter", True, True),
)


def _why_off(key: str | None, section: Any) -> str:
    if not isinstance(section, Mapping):
        return f"no {key} section"
    if section.get("enabled") is None:
        return f"{key}.enabled unset, off by default"
    return f"{key}.enabled={str(section.get('enabled')).lower()}"


def driver_class_manifest(driver_class: DriverClass) -> dict[str, Any]:
    """A DeviceClass the DRA driver's installer creates, as an object (for the per-cluster class checks)."""
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": driver_class.selector}}]}
    if driver_class.extended_resource_name:
        spec["extendedResourceName"] = driver_class.extended_resource_name
    return {
        "apiVersion": DEVICE_CLASS_API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": driver_class.name},
        "spec": spec,
    }


@dataclass(frozen=True)
class NvidiaDriver:
    """A rendered NVIDIADriver resource: the operator installs the GPU driver on the nodes it owns."""

    name: str
    spec: Mapping[str, Any]

    @property
    def default(self) -> bool:
        return bool(self.spec.get("default"))

    def selects(self, labels: Mapping[str, str]) -> bool:
        """GetNodeSelector: its nodeSelector, or every GPU node when it has none."""
        selector = self.spec.get("nodeSelector") or {GPU_PRESENT: "true"}
        return all(labels.get(str(k)) == str(v) for k, v in selector.items())


class GPUClusterMode:
    """The GPUCluster mode of v26.7.0: the operator runs the DRA driver (and DCGM, DCGM Exporter, a validator);
    no ClusterPolicy, device plugin, toolkit, GPU Feature Discovery or MIG Manager."""

    kind = "GPUCluster"

    def __init__(
        self,
        gpu_cluster: Mapping[str, Any],
        operator_version: str,
        release_objects: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.spec: Mapping[str, Any] = gpu_cluster.get("spec") or {}
        self.resource = f"GPUCluster {(gpu_cluster.get('metadata') or {}).get('name')}"
        self.drivers = tuple(
            NvidiaDriver(str((o.get("metadata") or {}).get("name")), o.get("spec") or {})
            for o in release_objects
            if o.get("kind") == "NVIDIADriver"
        )

    def _section(self, *path: str) -> Mapping[str, Any]:
        node: Any = self.spec
        for key in path:
            node = node.get(key) if isinstance(node, Mapping) else None
        return node if isinstance(node, Mapping) else {}

    def tolerations(self) -> tuple[Mapping[str, Any], ...]:
        """`spec.daemonsets.tolerations` as given: the manifests add no default when it is empty."""
        return tuple(self._section("daemonsets").get("tolerations") or ())

    def compute_domains(self) -> bool:
        """`draDriver.computeDomains.enabled`; the CRD defaults it to true."""
        value = self._section("draDriver", "computeDomains").get("enabled")
        return True if value is None else bool(value)

    def workloads(self) -> list[Workload]:
        found = []
        for operand in DRA_OPERANDS:
            section = self.spec.get(operand.section) if operand.section else {}
            created = operand.section is None or (
                isinstance(section, Mapping) and _enabled(section, operand.enabled_when_unset)
            )
            scheduling = PodScheduling(
                node_selector={DEPLOY + operand.state: "true"},
                node_selector_terms=operand.affinity,
                tolerations=self.tolerations(),
                host_network=isinstance(section, Mapping) and bool(section.get("hostNetwork")),
            )
            found.append(
                Workload(
                    operand.name,
                    operand.role,
                    self.resource,
                    scheduling,
                    created=created,
                    not_created="" if created else _why_off(operand.section, section),
                    needs_devices_from=DRA_PLUGIN if operand.claims_gpus else None,
                )
            )
        return found + [self._driver_workload(d) for d in self.drivers]

    def _driver_workload(self, driver: NvidiaDriver) -> Workload:
        # One DaemonSet per OS of its nodes, each selecting that OS's NFD labels (their values are the
        # nodes' own): the model asks only that NFD published them.
        selector = {
            **{str(k): str(v) for k, v in (driver.spec.get("nodeSelector") or {}).items()},
            DEPLOY + "driver": "true",
            GPU_PRESENT: "true",
            DRIVER_OWNER: driver.name,
        }
        os_labels = {"matchExpressions": [{"key": key, "operator": "Exists"} for key in NFD_OS_LABELS]}
        scheduling = PodScheduling(
            node_selector=selector,
            node_selector_terms=(os_labels,),
            tolerations=(GPU_TOLERATION, *(driver.spec.get("tolerations") or ())),
            host_network=bool(driver.spec.get("hostNetwork")),
        )
        kind = driver.spec.get("driverType") or "gpu"
        return Workload(
            f"nvidia-{kind}-driver-<os>-<hash>", Role.OPERAND, f"NVIDIADriver {driver.name}", scheduling
        )

    def unmodelled(self) -> list[str]:
        found = []
        for driver in self.drivers:
            if (driver.spec.get("driverType") or "gpu") != "gpu":
                found.append(
                    f"NVIDIADriver {driver.name}: driverType {driver.spec.get('driverType')} is not modelled"
                )
            if driver.spec.get("usePrecompiled"):
                found.append(f"NVIDIADriver {driver.name}: usePrecompiled (per-kernel DaemonSets) is not modelled")
        return found

    def device_classes(self) -> list[Mapping[str, Any]]:
        classes = driver_device_classes(by_gpu_operator=True, compute_domains=self.compute_domains())
        return [driver_class_manifest(c) for c in classes]

    def label(self, labels: dict[str, str], running: set[str], pool: PoolContract) -> dict[str, str]:
        labels = dict(labels)
        if not any(labels.get(key) == "true" for key in NFD_GPU_LABELS):
            if labels.get(GPU_PRESENT) == "true":
                labels[GPU_PRESENT] = "false"
            return {k: v for k, v in labels.items() if k not in ALL_STATE_LABELS}
        labels[GPU_PRESENT] = "true"
        labels = {k: v for k, v in labels.items() if k not in DEVICE_PLUGIN_ONLY_LABELS}
        for key in GPU_CLUSTER_STATE_LABELS:
            if labels.get(key, "") == "":
                labels[key] = "true"
        owner = self._driver_owner(labels)
        if owner is None:
            labels.pop(DRIVER_OWNER, None)
        else:
            labels[DRIVER_OWNER] = owner
        return labels

    def _driver_owner(self, labels: Mapping[str, str]) -> str | None:
        """AssignOwners: the one non-default NVIDIADriver that selects the node, else the default one; none
        when two non-default ones (or two defaults) qualify, where the operator fails and assigns none."""
        defaults = [d.name for d in self.drivers if d.default]
        matching = [d.name for d in self.drivers if not d.default and d.selects(labels)]
        if len(defaults) > 1 or len(matching) > 1:
            return None
        if matching:
            return matching[0]
        return defaults[0] if defaults else None


ModeFactory = Callable[[Mapping[str, Any], str, Sequence[Mapping[str, Any]]], OperatorMode]
MODES: dict[str, ModeFactory] = {"ClusterPolicy": ClusterPolicyMode, "GPUCluster": GPUClusterMode}
"""Custom resource kind -> its model, given the rendered resource, the operator chart version and every
object of the release (an NVIDIADriver beside the GPUCluster)."""
UNMODELLED: dict[str, str] = {}
"""Operator resource kinds that no model covers yet (kind -> why): rendering one fails the proof."""


@dataclass(frozen=True)
class ModeFound:
    mode: OperatorMode | None
    problems: tuple[str, ...]


def operator_mode(objects: Sequence[Mapping[str, Any]], operator_version: str) -> ModeFound:
    """The operator mode of a rendered operator release: which custom resource its operands come from."""
    modes = [MODES[o["kind"]](o, operator_version, objects) for o in objects if o.get("kind") in MODES]
    problems = [UNMODELLED[str(o["kind"])] for o in objects if o.get("kind") in UNMODELLED]
    if len(modes) > 1:
        problems.append(f"{len(modes)} operator resources rendered ({', '.join(m.resource for m in modes)})")
    if not modes and not problems:
        problems.append(
            "the operator release renders no ClusterPolicy and no GPUCluster: the operator would create no operands"
        )
    return ModeFound(modes[0] if len(modes) == 1 else None, tuple(problems))
