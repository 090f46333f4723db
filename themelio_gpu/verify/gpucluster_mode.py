"""The GPUCluster mode of v26.7.0: the operator runs the DRA driver; its operands, drivers and node labels.

Apart from the ClusterPolicy mode (clusterpolicy_mode.py) because the two share no operand and label nodes
by different rules.

GPUCluster facts, from NVIDIA/gpu-operator at v26.7.0 (commit 10ee5b36):
- `internal/state/manager.go` newGPUClusterStates: the DRA driver, DCGM, DCGM Exporter and DRA validator
  states, from `manifests/state-{dra-driver,dcgm,dcgm-exporter,dra-validation}/`. Every DaemonSet there
  selects its own `nvidia.com/gpu.deploy.<state>=true` label and carries `spec.daemonsets.tolerations`
  verbatim, and nothing when that list is empty (`{{- if .Daemonsets.Tolerations }}`: no operator default,
  unlike the ClusterPolicy). The kubelet plugin also requires node affinity (any of the NFD PCI label,
  NFD's NVIDIA CPU vendor, `nvidia.com/gpu.present`); the validator requires `nvidia.com/gpu.present`. The
  validator, DCGM and DCGM Exporter pods claim GPUs (adminAccess ResourceClaims on gpu.nvidia.com), so they
  start only where the kubelet plugin publishes the node's devices, and not on a MIG node: the class selects
  `type == 'gpu'`, and with MIG on the driver publishes only MIG devices (cmd/gpu-kubelet-plugin/nvlib.go of the
  DRA driver, without its DynamicMIG gate; seen with NVIDIA's controller and the real scheduler in the sandbox:
  those pods stay Pending there, "cannot allocate all claims"). DCGM exists only with
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from themelio_gpu.inputs.catalog.driver_classes import DriverClass, driver_device_classes
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.k8s.nvidia import DEPLOY, DRIVER_OWNER, GPU_PRESENT, GPU_TOLERATION
from themelio_gpu.k8s.scheduling import PodScheduling
from themelio_gpu.plan.manifests import DEVICE_CLASS_API_VERSION
from themelio_gpu.verify.operator_model import NFD_GPU_LABELS, enabled
from themelio_gpu.verify.workloads import NFD_LABEL_PREFIX, NFD_OS_LABELS, Role, Workload

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
                isinstance(section, Mapping) and enabled(section, operand.enabled_when_unset)
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
                    needs_whole_gpu=operand.claims_gpus,
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
