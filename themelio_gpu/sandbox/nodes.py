"""The sandbox's simulated nodes: one Node per node of every pool, and the ResourceSlices of its GPUs.

What a real node carries before the stack touches it: hostname, arch and os labels, allocatable CPU, memory
and pods, and the kwok annotation that puts it under kwok's controller (which keeps it Ready and runs its
pods without containers). Per pool kind:
- static: the named nodes, with nothing of the contract: the stack labels and taints them;
- provisioned: `PROVISIONED_NODES` nodes per pool, registered as the stack's output tells a node group to
  register them (the contract's labels and taints, as `--node-labels` and `--register-with-taints` give);
- karpenter: none. Karpenter's own controller (components/karpenter.py) launches them for pending pods; the
  probe models one node per pool as it launches it (`model_nodes`: the template's labels and taints,
  `karpenter.sh/nodepool`, the first instance type and capacity type), and its ResourceSlices are written as
  it registers (components/karpenter_slices.py);
and one CPU node without GPUs or taints (`SYSTEM_NODE`), where the cluster's controllers run, and a
control-plane node (`CONTROL_PLANE_NODE`), tainted as kubeadm taints one.

A DRA pool's node publishes its GPUs as the NVIDIA DRA driver's kubelet plugin does (driver `gpu.nvidia.com`,
one pool per node, whole GPUs as `type: gpu` devices, or with MIG on, only its MIG devices, `type: mig`),
and advertises no `nvidia.com/gpu`. A device-plugin pool (`dra: false`) advertises `nvidia.com/gpu` in its
allocatable (MIG devices as `nvidia.com/mig-<profile>`), as the device plugin does, and publishes no slice. The attribute names and spellings follow
the driver's (../shared/reference/dra-2026-update.md; tests/fixtures/resourceslices holds captured shapes).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from themelio_gpu.inputs.catalog.products import GpuProduct, canonical_mig_profile, mig_profile_shape
from themelio_gpu.inputs.clusters.definition import NodePool
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.k8s.nvidia import DRA_DRIVER, device_plugin_resource
from themelio_gpu.k8s.semver import parse_semver
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.gpu_profiles import NVML_CUDA_VERSION, NVML_DRIVER_VERSION, driver_publishes

SYSTEM_NODE = "system-0"
"""The one CPU node of every sandbox: a real cluster runs its controllers (the GPU Operator, NFD's master) on
nodes without the GPU taint, and Helm's wait never ends without one."""
CONTROL_PLANE_NODE = "control-plane-0"
"""A control-plane node as kubeadm makes one (its role label, tainted NoSchedule): what charts that run their
controllers there expect (nvidia-dra-driver-gpu 25.x requires one for its controller; on a managed cluster
without schedulable control-plane nodes that controller stays Pending unless its affinity is overridden)."""
CONTROL_PLANE_ROLE = "node-role.kubernetes.io/control-plane"
OS_ID, OS_VERSION, KERNEL = "ubuntu", "24.04", "6.8.0"
"""What every simulated node runs (its nodeInfo says so too)."""
NFD_PCI_LABEL = "feature.node.kubernetes.io/pci-10de.present"
NFD_GPU_NODE = {
    NFD_PCI_LABEL: "true",
    "feature.node.kubernetes.io/system-os_release.ID": OS_ID,
    "feature.node.kubernetes.io/system-os_release.VERSION_ID": OS_VERSION,
    "feature.node.kubernetes.io/system-os_release.VERSION_ID.major": "24",  # OS_VERSION's, as NFD splits it
    "feature.node.kubernetes.io/system-os_release.VERSION_ID.minor": "04",
    "feature.node.kubernetes.io/kernel-version.full": KERNEL,
}
"""What NFD's worker labels a GPU node with: its NVIDIA PCI device (vendor 10de), which the DRA driver's kubelet
plugin selects on, and its OS (`system` source) and kernel (`kernel` source), without which the GPU Operator's
controller stops ("failed to retrieve GPU node OS info"). Nodes register without them: the sandbox writes them
where NFD's worker pod is placed (components/nfd_worker.py), as the worker would."""
PROVISIONED_NODES = 2
"""Nodes the sandbox registers for each provisioned pool (the cluster file does not say how many)."""
KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
DRIVER_VERSION = str(parse_semver(NVML_DRIVER_VERSION, normalize=True))
"""The installed driver every simulated node runs (gpu_profiles.py), as the driver's `driverVersion` spells it."""
CUDA_DRIVER_VERSION = str(parse_semver(NVML_CUDA_VERSION, normalize=True))
NODE_ALLOCATABLE = {"cpu": "128", "memory": "1Ti", "pods": "110", "ephemeral-storage": "1Ti"}


@dataclass(frozen=True)
class SimulatedNode:
    name: str
    pool: str
    kind: str
    """static, provisioned or karpenter."""
    manifest: dict[str, Any]
    slices: tuple[dict[str, Any], ...]
    """The node's GPUs as the generator shapes them: what the sandbox writes, and the model's view of them
    (placement.py) also where the driver publishes them."""
    by_driver: bool = False
    """NVIDIA's DRA driver's kubelet plugin publishes this node's GPUs (gpu_profiles.driver_publishes)."""

    @property
    def written(self) -> tuple[dict[str, Any], ...]:
        """The slices the sandbox writes for the node: none where the driver publishes (no double publishing)."""
        return () if self.by_driver else self.slices


def _stable_uuid(*parts: str) -> str:
    return str(uuid.UUID(bytes=hashlib.sha256("/".join(parts).encode()).digest()[:16], version=5))


def _version(text: str) -> str:
    """A driver `version` attribute is full semver: `9.0` -> `9.0.0` (Kubernetes' normalization)."""
    return str(parse_semver(text, normalize=True))


def _common_attributes(product: GpuProduct) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "brand": {"string": "Nvidia"},
        "productName": {"string": product.product_names[0]},
        "driverVersion": {"version": DRIVER_VERSION},
        "cudaDriverVersion": {"version": CUDA_DRIVER_VERSION},
    }
    if product.architecture:
        attributes["architecture"] = {"string": product.architecture}
    if product.compute_capability:
        attributes["cudaComputeCapability"] = {"version": _version(product.compute_capability)}
    return attributes


def _mebibytes(gib: float) -> str:
    return f"{round(gib * 1024)}Mi"


def gpu_devices(node: str, product: GpuProduct, gpus: int, mig: dict[str, int] | None) -> list[dict[str, Any]]:
    """The devices the DRA driver publishes for `gpus` GPUs of `product` (MIG devices per GPU when `mig`)."""
    devices: list[dict[str, Any]] = []
    for index in range(gpus):
        gpu_uuid = "GPU-" + _stable_uuid(node, str(index))
        pci = {
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{16 + index:02x}:00.0"},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{16 + index:02x}"},
        }
        if not mig:
            devices.append(
                {
                    "name": f"gpu-{index}",
                    "attributes": {
                        **_common_attributes(product),
                        "type": {"string": "gpu"},
                        "uuid": {"string": gpu_uuid},
                        **pci,
                    },
                    "capacity": {"memory": {"value": _mebibytes(product.memory_gib)}},
                }
            )
            continue
        for profile, count in sorted(mig.items()):
            spelled = canonical_mig_profile(profile)
            shape = mig_profile_shape(spelled)
            memory_gib = float(shape.memory_gb) if shape else product.memory_gib
            for n in range(count):
                devices.append(
                    {
                        "name": f"gpu-{index}-mig-{spelled.replace('.', '').replace('+', '')}-{n}",
                        "attributes": {
                            **_common_attributes(product),
                            "type": {"string": "mig"},
                            "profile": {"string": spelled},
                            "parentUUID": {"string": gpu_uuid},
                            "uuid": {"string": "MIG-" + _stable_uuid(node, str(index), spelled, str(n))},
                            **pci,
                        },
                        "capacity": {
                            "memory": {"value": _mebibytes(memory_gib)},
                            "multiprocessors": {"value": str(shape.compute_slices * 14 if shape else 14)},
                        },
                    }
                )
    return devices


def resource_slice(node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    """The one ResourceSlice the kubelet plugin publishes for a node: pool named after the node."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRA_DRIVER}"},
        "spec": {
            "driver": DRA_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _node(
    name: str, labels: dict[str, str], taints: list[dict[str, str]], allocatable: dict[str, str], kubelet: str
) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": dict(KWOK_ANNOTATION),
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "type": "kwok",
                **labels,
            },
        },
        "spec": {},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "machineID": _stable_uuid("machine", name).replace("-", ""),
                "systemUUID": _stable_uuid("system", name),
                "bootID": _stable_uuid("boot", name),
                "kernelVersion": KERNEL,
                "osImage": f"{OS_ID.capitalize()} {OS_VERSION} LTS",
                "containerRuntimeVersion": "containerd://2.1.0",
                "kubeletVersion": kubelet,
                "kubeProxyVersion": "",
            },
        },
    }
    if taints:
        manifest["spec"]["taints"] = taints
    return manifest


def _taints(contract: PoolContract) -> list[dict[str, str]]:
    return [t.as_object() for t in contract.taints]


def node_allocatable(contract: PoolContract) -> dict[str, str]:
    """What a node of the pool advertises: CPU, memory and pods, and on a device-plugin pool its GPUs."""
    allocatable = dict(NODE_ALLOCATABLE)
    if contract.dra:  # a DRA node advertises no GPU name
        return allocatable
    # The device plugin: whole GPUs as nvidia.com/gpu, MIG devices per profile as nvidia.com/mig-<profile> (its
    # mixed strategy, what the GPU Operator's MIG Manager sets up beside the plugin).
    for unit, count in contract.devices_per_node().items():
        name = device_plugin_resource(None if unit == "gpu" else unit)
        allocatable[name] = str(count)
    return allocatable


def _names(pool: NodePool, cluster: str) -> Iterator[tuple[str, str]]:
    provisioning = pool.provisioning
    if provisioning.static is not None:
        for name in provisioning.static.nodes:
            yield name, "static"
    elif provisioning.provisioned is not None:
        for index in range(PROVISIONED_NODES):
            yield f"{cluster}-{pool.name}-{index}", "provisioned"
    else:
        yield f"{cluster}-{pool.name}-karpenter-0", "karpenter"


def gpu_slices(name: str, contract: PoolContract) -> tuple[dict[str, Any], ...]:
    """The ResourceSlices a node of the pool publishes (none on a device-plugin pool)."""
    if not contract.dra:
        return ()
    mig = dict(contract.mig_devices) if contract.mig_devices is not None else None
    return (resource_slice(name, gpu_devices(name, contract.product, contract.gpus_per_node, mig)),)


def simulated_nodes(plan: ClusterPlan) -> list[SimulatedNode]:
    """Every node the sandbox registers, with its slices, in the cluster file's order: no Karpenter pool's."""
    return [node for node in model_nodes(plan) if node.kind != "karpenter"]


def model_nodes(plan: ClusterPlan) -> list[SimulatedNode]:
    """Every node of every pool of the cluster as the probe has them, with its slices, in the cluster file's
    order: the registered ones and, per Karpenter pool, the one node the probe has Karpenter launch."""
    contracts = {c.name: c for c in plan.pools}
    version = plan.definition.kubernetes_version.lstrip("v")
    kubelet = f"v{version}" if version.count(".") == 2 else f"v{version}.0"
    nodes: list[SimulatedNode] = []
    for pool in plan.definition.node_pools:
        contract = contracts[pool.name]
        for name, kind in _names(pool, plan.name):
            labels: dict[str, str] = {}
            taints: list[dict[str, str]] = []
            if kind == "provisioned":
                labels, taints = {**labels, **contract.labels}, _taints(contract)
            elif kind == "karpenter":
                karpenter = pool.provisioning.karpenter
                assert karpenter is not None
                labels = {
                    **labels,
                    **contract.labels,
                    "karpenter.sh/nodepool": pool.name,
                    "karpenter.sh/capacity-type": karpenter.capacity_types[0],
                    "karpenter.sh/registered": "true",
                    "node.kubernetes.io/instance-type": karpenter.instance_types[0],
                }
                taints = _taints(contract)
            slices = gpu_slices(name, contract)
            manifest = _node(name, labels, taints, node_allocatable(contract), kubelet)
            by_driver = driver_publishes(contract) and kind != "karpenter"  # no plugin runs on Karpenter's nodes
            nodes.append(SimulatedNode(name, pool.name, kind, manifest, slices, by_driver))
    system = _node(SYSTEM_NODE, {"node-role.kubernetes.io/system": ""}, [], dict(NODE_ALLOCATABLE), kubelet)
    nodes.append(SimulatedNode(SYSTEM_NODE, "", "system", system, ()))
    control_taint = [{"key": CONTROL_PLANE_ROLE, "effect": "NoSchedule"}]
    control = _node(CONTROL_PLANE_NODE, {CONTROL_PLANE_ROLE: ""}, control_taint, dict(NODE_ALLOCATABLE), kubelet)
    nodes.append(SimulatedNode(CONTROL_PLANE_NODE, "", "system", control, ()))
    return nodes
