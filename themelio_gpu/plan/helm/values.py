"""Helm values derived from a cluster definition and its pools, as NVIDIA documents the two charts together.

Derived values come first; the cluster's own `values` are deep-merged over them after every key path has
been checked against the pinned chart version's known keys (a typo or a key removed upstream is an error).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.clusters.pool_contract import DRA_KUBELET_PLUGIN, PoolContract

OPERATOR_CHART = "gpu-operator"
DRIVER_ROOT_OPERATOR = "/run/nvidia/driver"
DRIVER_ROOT_HOST = "/"
OLD_DRA_CHART = "nvidia-dra-driver-gpu"


def gpu_pool_tolerations(pools: Sequence[PoolContract], *, dra_only: bool = False) -> list[dict[str, str]]:
    """Tolerations for every taint the cluster's GPU pools carry (or only its DRA pools'), derived once.

    Every DaemonSet that must reach a GPU node (NFD worker, the operator's operands, the DRA kubelet plugin)
    takes this same list: a pool tainted with anything it does not tolerate never gets its GPUs allocatable.
    """
    keys = sorted({(t.key, t.effect) for p in pools if p.dra or not dra_only for t in p.taints})
    return [{"key": key, "operator": "Exists", "effect": effect} for key, effect in keys]


def operator_values(cluster: ClusterDefinition, pools: Sequence[PoolContract]) -> dict[str, Any]:
    dra = any(p.dra for p in pools)
    device_plugin = any(not p.dra for p in pools)
    mig = any(p.mig_devices is not None for p in pools)
    driver: dict[str, Any] = {"enabled": not cluster.host_driver}
    if dra and not cluster.host_driver:
        # Known issue: the driver manager does not know the DRA kubelet plugin; this label lets it evict it.
        driver["manager"] = {"env": [{"name": "NODE_LABEL_FOR_GPU_POD_EVICTION", "value": DRA_KUBELET_PLUGIN}]}
    return {
        "cdi": {"enabled": True},
        # With DRA on every pool the device plugin must not run (NVIDIA's documented install). In a mixed
        # cluster it stays on and DRA nodes opt out through nvidia.com/gpu.deploy.device-plugin=false.
        "devicePlugin": {"enabled": device_plugin},
        "driver": driver,
        # Mixed: each MIG profile keeps its own name (nvidia.com/mig-<profile>) where the device plugin runs.
        "mig": {"strategy": "mixed" if mig else "single"},
        "migManager": {"enabled": mig},
        "toolkit": {"enabled": not cluster.host_driver},
    }


def dra_driver_values(cluster: ClusterDefinition, pools: Sequence[PoolContract]) -> dict[str, Any]:
    release = cluster.dra_driver
    values: dict[str, Any] = {
        "gpuResourcesEnabledOverride": True,
        "image": {"pullPolicy": "IfNotPresent"},
        "kubeletPlugin": {
            "nodeSelector": {DRA_KUBELET_PLUGIN: "true"},
            # Tolerate exactly the taints this cluster's DRA pools carry.
            "tolerations": gpu_pool_tolerations(pools, dra_only=True),
        },
        "nvidiaDriverRoot": DRIVER_ROOT_HOST if cluster.host_driver else DRIVER_ROOT_OPERATOR,
        # Explicit, so rendering never depends on API discovery (the chart fails without a v1 API).
        "resourceApiVersion": "resource.k8s.io/v1",
        "resources": {"computeDomains": {"enabled": release.compute_domains}, "gpus": {"enabled": True}},
    }
    if release.upgrade_from_25x:
        # Keeps the resource names of a release installed from the old chart name (NVIDIA upgrade notes).
        values["nameOverride"] = OLD_DRA_CHART
    return values


def dra_release_name(cluster: ClusterDefinition) -> str:
    return OLD_DRA_CHART if cluster.dra_driver.upgrade_from_25x else "dra-driver-nvidia-gpu"
