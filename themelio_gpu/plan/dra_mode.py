"""Who installs the DRA driver: the rules each `draDriver.managedBy` mode puts on a cluster definition.

`chart` (default): the GPU Operator's ClusterPolicy plus a separate DRA driver release, as NVIDIA documents
for v26.3 and earlier. `gpu-operator`: GPU Operator v26.7.0's GPUCluster (Technology Preview) installs and
manages the DRA driver itself. Facts (../shared/reference/dra-2026-update.md, NVIDIA's
gpu-operator/dra-intro-install.rst at 26.7): new clusters only (a GPUCluster and a ClusterPolicy cannot
coexist, and no in-place migration is supported), Kubernetes 1.34.2 or later, driver 580 or later, a CDI
runtime; it manages no driver (host-installed, or an NVIDIADriver resource), no device plugin, no
toolkit, no GPU Feature Discovery and no MIG Manager.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from themelio_gpu.inputs.clusters.definition import ClusterDefinition, MigCreatedBy
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.k8s.nvidia import driver_major, gpu_cluster_supports
from themelio_gpu.k8s.version import strict_release

MIN_OPERATOR = (26, 7, 0)
MIN_DRIVER_MAJOR = 580
# Settings of the separate DRA driver release, which the gpu-operator mode does not install.
_CHART_ONLY = {
    "chart": "chart",
    "version": "version",
    "repository": "repository",
    "namespace": "namespace",
    "upgrade_from_25x": "upgradeFrom25x",
    "timeout_seconds": "timeoutSeconds",
    "values": "values",
}
_OTHER_MODE = "or keep draDriver.managedBy: chart (a ClusterPolicy and a separate DRA driver release)"


def check_mode(cluster: ClusterDefinition, file: str, problems: Problems) -> bool:
    """Refuse what the cluster's mode cannot do; False when values for the mode cannot even be derived."""
    if not cluster.dra_by_gpu_operator:
        _check_chart_mode(cluster, file, problems)
        return True
    return _check_gpu_operator_mode(cluster, file, problems)


def _check_chart_mode(cluster: ClusterDefinition, file: str, problems: Problems) -> None:
    if cluster.dra_driver.new_cluster is not None:
        problems.add(
            file,
            ("draDriver", "newCluster"),
            "applies only to draDriver.managedBy: gpu-operator (the GPUCluster needs a new cluster); remove it",
        )
    for index, pool in enumerate(cluster.node_pools):
        if pool.mig is not None and pool.mig.created_by is MigCreatedBy.external:
            problems.add(
                file,
                ("nodePools", index, "mig", "createdBy"),
                "external is for draDriver.managedBy: gpu-operator, which has no MIG Manager. With the DRA "
                "chart the GPU Operator's MIG Manager applies the pool's layout (nvidia.com/mig.config) and would "
                "undo one made elsewhere: remove createdBy",
            )


def _check_gpu_operator_mode(cluster: ClusterDefinition, file: str, problems: Problems) -> bool:
    version = cluster.gpu_operator.version
    release = strict_release(version)
    derivable = release is not None and release >= MIN_OPERATOR
    if not derivable:
        problems.add(
            file,
            ("gpuOperator", "version"),
            f"draDriver.managedBy: gpu-operator needs GPU Operator v26.7.0 or later (the GPUCluster resource is "
            f"new in v26.7.0), but the cluster pins {version}. Set gpuOperator.version: v26.7.0, {_OTHER_MODE}",
        )
    _check_kubernetes(cluster, file, problems)
    if cluster.dra_driver.new_cluster is not True:
        problems.add(
            file,
            ("draDriver", "newCluster"),
            "draDriver.managedBy: gpu-operator is for new clusters only: a GPUCluster cannot coexist with a "
            "ClusterPolicy, and NVIDIA supports no in-place migration from a ClusterPolicy or a separate DRA "
            "driver release. If `kubectl get clusterpolicy` finds none and no DRA driver release is installed, "
            "set draDriver.newCluster: true; an existing cluster keeps draDriver.managedBy: chart",
        )
    for field, key in _CHART_ONLY.items():
        if field in cluster.dra_driver.model_fields_set:
            problems.add(
                file,
                ("draDriver", key),
                "configures the separate DRA driver release, which draDriver.managedBy: gpu-operator does not "
                "install: the GPU Operator runs the DRA driver in its own namespace (gpuOperator.namespace). Set "
                "the driver's image, version or feature gates under gpuOperator.values.draDriver; remove this",
            )
    for index, pool in enumerate(cluster.node_pools):
        where = ("nodePools", index)
        if not pool.dra:
            problems.add(
                file,
                (*where, "dra"),
                f"pool {pool.name} uses the device plugin, which the GPUCluster does not run (and a ClusterPolicy "
                f"cannot run beside it): every pool must use DRA. Remove dra: false, {_OTHER_MODE}",
            )
        if pool.mig is not None and pool.mig.created_by is MigCreatedBy.mig_manager:
            problems.add(
                file,
                (*where, "mig"),
                f"pool {pool.name} runs its GPUs in MIG mode, but the GPUCluster has no MIG Manager: nothing would "
                "create its MIG devices. If they are created outside this stack (mig-parted at boot, the provider's "
                "image), say so with mig.createdBy: external; otherwise use whole GPUs, "
                f"{_OTHER_MODE}",
            )
    return derivable


def _check_kubernetes(cluster: ClusterDefinition, file: str, problems: Problems) -> None:
    supported = gpu_cluster_supports(cluster.version)
    if supported:
        return
    if supported is None:
        # 1.34.0 and 1.34.1 are too old, so "1.34" alone does not say whether the cluster qualifies.
        problems.add(
            file,
            ("kubernetesVersion",),
            "draDriver.managedBy: gpu-operator needs Kubernetes 1.34.2 or later, and 1.34 does not say the patch "
            "release. Write the version the control plane runs (1.34.2 or later), or upgrade to 1.35",
        )
        return
    problems.add(
        file,
        ("kubernetesVersion",),
        f"draDriver.managedBy: gpu-operator needs Kubernetes 1.34.2 or later (NVIDIA's GPUCluster prerequisite); "
        f"the cluster runs {cluster.kubernetes_version}. Upgrade the control plane first, {_OTHER_MODE}",
    )


def _get(values: Mapping[str, Any], *path: str) -> Any:
    node: Any = values
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def check_operator_values(
    cluster: ClusterDefinition, merged: Mapping[str, Any], file: str, problems: Problems
) -> None:
    """Overrides in gpuOperator.values must not undo the mode the definition chose."""
    where = ("gpuOperator", "values")
    if not cluster.dra_by_gpu_operator:
        if _get(merged, "gpuCluster", "deployCR") is True:
            problems.add(
                file,
                (*where, "gpuCluster", "deployCR"),
                "a GPUCluster cannot run beside the ClusterPolicy and DRA driver release that draDriver.managedBy: "
                "chart installs. Choose the mode with draDriver.managedBy: gpu-operator instead; remove this",
            )
        return
    for path, wanted in ((("clusterPolicy", "deployCR"), False), (("gpuCluster", "deployCR"), True)):
        if _get(merged, *path) is not wanted:
            problems.add(
                file,
                (*where, *path),
                f"draDriver.managedBy: gpu-operator sets it to {str(wanted).lower()} (a GPUCluster and no "
                "ClusterPolicy; they cannot coexist); remove the override",
            )
    if _get(merged, "driver", "enabled") is True:
        if _get(merged, "driver", "nvidiaDriverCRD", "enabled") is not True:
            problems.add(
                file,
                (*where, "driver", "nvidiaDriverCRD", "enabled"),
                "the GPUCluster installs no driver: without the NVIDIADriver resource nothing would (the chart "
                "refuses to render). Remove the override, or set hostDriver: true for a preinstalled driver",
            )
        version = _get(cluster.gpu_operator.values, "driver", "version")
        major = driver_major(str(version)) if version is not None else None
        if version is not None and (major is None or major < MIN_DRIVER_MAJOR):
            problems.add(
                file,
                (*where, "driver", "version"),
                f"the GPUCluster needs NVIDIA driver {MIN_DRIVER_MAJOR} or later, not {version}. Use a "
                f"{MIN_DRIVER_MAJOR}+ driver (the chart's default is one), {_OTHER_MODE}",
            )
