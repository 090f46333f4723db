"""The DaemonSets the placement proof places, and what each must do on which GPU pool.

Chart DaemonSets come straight from `helm template`; the GPU Operator's operands are created later by the
operator itself, so an operator mode (`operator_model.py`, one module per mode) derives them from the rendered custom resource.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import yaml

from themelio_gpu.inputs.catalog.products import GpuProduct
from themelio_gpu.k8s.scheduling import PodScheduling


class Role(Enum):
    """What a DaemonSet is for, which decides where it must (and must not) run."""

    NFD_WORKER = "NFD worker"
    OPERAND = "operator operand"
    DEVICE_PLUGIN = "device plugin"
    DEVICE_PLUGIN_PART = "device plugin part"
    MIG_MANAGER = "MIG Manager"
    DRA_PLUGIN = "DRA kubelet plugin"
    OTHER = "other"


@dataclass(frozen=True)
class Workload:
    name: str
    role: Role
    source: str
    """Where it comes from, as the report shows it: `chart gpu-operator`, `ClusterPolicy cluster-policy`."""
    scheduling: PodScheduling
    created: bool = True
    not_created: str = ""
    """Why it is not created, when it is not (e.g. `devicePlugin.enabled=false`)."""
    needs_devices_from: str | None = None
    """The DaemonSet whose DRA kubelet plugin publishes the devices this pod's ResourceClaim asks for: the
    scheduler places the pod only on a node where that plugin runs (it publishes the node's ResourceSlice)."""
    needs_whole_gpu: bool = False
    """Its ResourceClaim asks the class `gpu.nvidia.com` (`type == 'gpu'`) for a whole GPU: a node whose GPUs are
    MIG-partitioned publishes only its MIG devices (the DRA driver without DynamicMIG), so the scheduler cannot
    place it there."""


NFD_LABEL_PREFIX = "feature.node.kubernetes.io/"
NFD_NAME = "node-feature-discovery"
# The PCI class of NVIDIA data-center GPUs ("3D controller"); NFD's defaults when its config says nothing.
GPU_PCI_CLASS = "0302"
NVIDIA_PCI_VENDOR = "10de"
NFD_DEFAULT_CLASSES = ("03", "0b40", "12")
NFD_DEFAULT_FIELDS = ("class", "vendor")
# NFD's `system` source: the OS of the node (nfd source/system). The values are the node's own, which the
# model does not know; only the keys matter (the NVIDIADriver's DaemonSets select each node's own values).
NFD_OS_LABELS = (f"{NFD_LABEL_PREFIX}system-os_release.ID", f"{NFD_LABEL_PREFIX}system-os_release.VERSION_ID")
NFD_OS_UNKNOWN = "from-os-release"


def _is_nfd(obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(labels.get("app.kubernetes.io/name") == NFD_NAME)


def chart_workloads(release: str, objects: Sequence[Mapping[str, Any]]) -> list[Workload]:
    """The DaemonSets a chart renders, by role: the NFD worker, the DRA kubelet plugin, others."""
    found = []
    for obj in objects:
        if obj.get("kind") != "DaemonSet":
            continue
        name = str((obj.get("metadata") or {}).get("name"))
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if _is_nfd(obj) and labels.get("role") == "worker":
            role = Role.NFD_WORKER
        elif name.endswith("-kubelet-plugin"):
            role = Role.DRA_PLUGIN
        else:
            role = Role.OTHER
        found.append(Workload(name, role, f"chart {release}", PodScheduling.of_daemonset(obj)))
    return found


def nfd_worker_config(objects: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The NFD worker's configuration as the chart renders it ({} when absent or unreadable)."""
    for obj in objects:
        name = str((obj.get("metadata") or {}).get("name", ""))
        if obj.get("kind") == "ConfigMap" and _is_nfd(obj) and name.endswith("-worker-conf"):
            text = (obj.get("data") or {}).get("nfd-worker.conf") or ""
            try:
                config = yaml.safe_load(text)
            except yaml.YAMLError:
                return {}
            return config if isinstance(config, dict) else {}
    return {}


def nfd_labels(config: Mapping[str, Any], product: GpuProduct) -> dict[str, str]:
    """The PCI label NFD's worker publishes for the pool's GPUs (nfd `source/pci`), from its config."""
    pci = ((config.get("sources") or {}).get("pci")) or {}
    classes = tuple(str(c) for c in pci.get("deviceClassWhitelist") or NFD_DEFAULT_CLASSES)
    fields = tuple(str(f) for f in pci.get("deviceLabelFields") or NFD_DEFAULT_FIELDS)
    if not any(GPU_PCI_CLASS.startswith(c) for c in classes):
        return {}
    device = product.pci_device_ids[0][2:6].lower() if product.pci_device_ids else None
    known = {"class": GPU_PCI_CLASS, "vendor": NVIDIA_PCI_VENDOR, "device": device}
    parts = [known.get(f) for f in fields]
    if any(p is None for p in parts):
        return {}  # subsystem IDs are not in the catalog: the label cannot be predicted
    return {f"{NFD_LABEL_PREFIX}pci-{'_'.join(str(p) for p in parts)}.present": "true"}


def nfd_os_labels(config: Mapping[str, Any]) -> dict[str, str]:
    """The OS labels of NFD's `system` source, unless the config's `core.labelSources` leaves it out."""
    sources = [str(s) for s in (config.get("core") or {}).get("labelSources") or ("all",)]
    if "-system" in sources or not ({"all", "system"} & set(sources)):
        return {}
    return dict.fromkeys(NFD_OS_LABELS, NFD_OS_UNKNOWN)
