"""Helm values derived from a cluster definition and its pools, as NVIDIA documents the two charts together.

Derived values come first; the cluster's own `values` are deep-merged over them after every key path has
been checked against the pinned chart version's known keys (a typo or a key removed upstream is an error).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.k8s.nvidia import DEPLOY_CLIENT, DRA_KUBELET_PLUGIN, GPU_TOLERATION
from themelio_gpu.k8s.scheduling import toleration_covers
from themelio_gpu.k8s.version import release_numbers

OPERATOR_CHART = "gpu-operator"
DRIVER_ROOT_OPERATOR = "/run/nvidia/driver"
DRIVER_ROOT_HOST = "/"
OLD_DRA_CHART = "nvidia-dra-driver-gpu"
GPU_CLIENT_OPERATOR = (26, 7, 0)

# The chart defaults our derived lists replace (a Helm list value replaces the whole default list). Both
# pinned operator charts (v26.3.3, v26.7.0) ship these; a test compares them with the real values.yaml.
CONTROL_PLANE_TOLERATION = {
    "key": "node-role.kubernetes.io/control-plane",
    "operator": "Equal",
    "value": "",
    "effect": "NoSchedule",
}
NFD_WORKER_DEFAULT_TOLERATIONS = (CONTROL_PLANE_TOLERATION, GPU_TOLERATION)
"""`node-feature-discovery.worker.tolerations`: NFD labels control-plane nodes too."""
OPERAND_DEFAULT_TOLERATIONS = (GPU_TOLERATION,)
"""`daemonsets.tolerations`: what the ClusterPolicy gives every operand DaemonSet."""

EVERY_TAINT = {"operator": "Exists"}
"""Tolerates every taint (an empty key with Exists matches every key, value and effect)."""
NODE_AGENT_TOLERATIONS = (EVERY_TAINT,)
"""The tolerations of the GPU Operator's operands (`daemonsets.tolerations`) and of the DRA kubelet plugin: every
taint, so that they stay the same as pools come and go. They are part of the driver DaemonSet's template: a list
that followed the pools' taints changed whenever a tainted pool was added or removed, and NVIDIA's upgrade
controller then restarted the driver on every GPU node, one node at a time, each cordoned (docs/day-two.md, a
pool removed). Their node selectors keep them on GPU nodes (NVIDIA's `nvidia.com/gpu.deploy.*` labels, the
pools' `nvidia.com/dra-kubelet-plugin`), so a taint cannot keep them from a GPU node that needs them; like
kube-proxy's, a NoExecute taint does not evict them either. NFD's worker, which runs on every node and whose
restart disturbs nothing, tolerates only the GPU pools' taints."""


def gpu_pool_tolerations(pools: Sequence[PoolContract]) -> list[dict[str, str]]:
    """Tolerations for every taint the cluster's GPU pools carry: NFD's worker takes them, since a pool it does
    not label never gets the operator's operands, and so never its GPUs allocatable."""
    keys = sorted({(t.key, t.effect) for p in pools for t in p.taints})
    return [{"key": key, "operator": "Exists", "effect": effect} for key, effect in keys]


def with_chart_defaults(
    defaults: Sequence[Mapping[str, str]], derived: Sequence[Mapping[str, str]]
) -> list[dict[str, str]]:
    """The chart's default tolerations that the derived ones do not already cover, then the derived ones."""
    kept = [dict(d) for d in defaults if not any(toleration_covers(t, d) for t in derived)]
    return kept + [dict(t) for t in derived]


def operator_restarts_gpu_clients(operator_version: str) -> bool:
    """GPU Operator v26.7.0 and later label GPU nodes `nvidia.com/gpu.deploy.client=true` (see DEPLOY_CLIENT)."""
    return release_numbers(operator_version) >= GPU_CLIENT_OPERATOR


UPGRADE_CRDS: dict[str, Any] = {"operator": {"upgradeCRD": True}}
"""Helm installs a chart's `crds/` once and never upgrades them: a GPU Operator upgrade keeps the old
ClusterPolicy, NVIDIADriver and GPUCluster CRDs unless the chart's pre-upgrade hook applies the new ones
(`operator.upgradeCRD`). The chart's default, set here so that every stack says it and a review sees an override
turn it off (docs/day-two.md, the GPU Operator upgraded)."""


def operator_values(cluster: ClusterDefinition, pools: Sequence[PoolContract]) -> dict[str, Any]:
    dra = any(p.dra for p in pools)
    device_plugin = any(not p.dra for p in pools)
    mig = any(p.mig_devices is not None for p in pools)
    driver: dict[str, Any] = {"enabled": not cluster.host_driver}
    if dra and not cluster.host_driver and not operator_restarts_gpu_clients(cluster.gpu_operator.version):
        # Known issue before v26.7.0: the driver manager does not know the DRA kubelet plugin; this label
        # lets it evict it. From v26.7.0 the plugin selects nvidia.com/gpu.deploy.client instead.
        driver["manager"] = {"env": [{"name": "NODE_LABEL_FOR_GPU_POD_EVICTION", "value": DRA_KUBELET_PLUGIN}]}
    # NFD must reach every GPU pool to label it: it tolerates each pool taint, keeping the chart's defaults.
    tolerations = gpu_pool_tolerations(pools)
    return {
        **UPGRADE_CRDS,
        "cdi": {"enabled": True},
        "daemonsets": {"tolerations": with_chart_defaults(OPERAND_DEFAULT_TOLERATIONS, NODE_AGENT_TOLERATIONS)},
        # With DRA on every pool the device plugin must not run (NVIDIA's documented install). In a mixed
        # cluster it stays on and DRA nodes opt out through nvidia.com/gpu.deploy.device-plugin=false.
        "devicePlugin": {"enabled": device_plugin},
        "driver": driver,
        # Mixed: each MIG profile keeps its own name (nvidia.com/mig-<profile>) where the device plugin runs.
        "mig": {"strategy": "mixed" if mig else "single"},
        "migManager": {"enabled": mig},
        # NFD's labels are what the operator and the DRA plugin's node affinity wait for.
        "node-feature-discovery": {
            "worker": {"tolerations": with_chart_defaults(NFD_WORKER_DEFAULT_TOLERATIONS, tolerations)}
        },
        "toolkit": {"enabled": not cluster.host_driver},
    }


def gpu_cluster_operator_values(cluster: ClusterDefinition, pools: Sequence[PoolContract]) -> dict[str, Any]:
    """The GPU Operator (v26.7.0+) managing the DRA driver through a GPUCluster instead of a ClusterPolicy.

    The GPUCluster exposes no kubelet-plugin nodeSelector: the operator runs the plugin on every node it
    labels `nvidia.com/gpu.deploy.dra-driver=true`, i.e. every node where NFD found an NVIDIA GPU. So what
    this stack controls is that NFD's worker tolerates every taint of the pools and the GPUCluster's DaemonSets
    (`daemonsets.tolerations`, which the chart copies into the GPUCluster) every taint at all.
    """
    tolerations = gpu_pool_tolerations(pools)
    values: dict[str, Any] = {
        **UPGRADE_CRDS,
        "clusterPolicy": {"deployCR": False},
        "daemonsets": {"tolerations": with_chart_defaults(OPERAND_DEFAULT_TOLERATIONS, NODE_AGENT_TOLERATIONS)},
        "draDriver": {"computeDomains": {"enabled": cluster.dra_driver.compute_domains}},
        "gpuCluster": {"deployCR": True},
        "node-feature-discovery": {
            "worker": {"tolerations": with_chart_defaults(NFD_WORKER_DEFAULT_TOLERATIONS, tolerations)}
        },
    }
    # The GPUCluster never installs a driver: the host has one (its validator finds it at / by itself, so
    # the driver root is left alone, as NVIDIA's pre-installed procedure does), or the chart's default
    # NVIDIADriver resource installs one under /run/nvidia/driver (the chart refuses driver.enabled without
    # nvidiaDriverCRD.enabled in this mode).
    if cluster.host_driver:
        values["driver"] = {"enabled": False}
    else:
        values["driver"] = {"enabled": True, "nvidiaDriverCRD": {"enabled": True}}
        values["hostPaths"] = {"driverInstallDir": DRIVER_ROOT_OPERATOR}
    return values


def dra_driver_values(cluster: ClusterDefinition) -> dict[str, Any]:
    release = cluster.dra_driver
    node_selector = {DRA_KUBELET_PLUGIN: "true"}
    if operator_restarts_gpu_clients(cluster.gpu_operator.version):
        # The operator then restarts the plugin on driver upgrades and MIG changes (MIG Manager never did).
        node_selector[DEPLOY_CLIENT] = "true"
    values: dict[str, Any] = {
        "gpuResourcesEnabledOverride": True,
        "image": {"pullPolicy": "IfNotPresent"},
        "kubeletPlugin": {
            "nodeSelector": node_selector,
            "tolerations": [dict(t) for t in NODE_AGENT_TOLERATIONS],
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
