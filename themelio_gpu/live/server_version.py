"""The server version against the definition's kubernetesVersion: the same major.minor (feature gates and API
versions follow it), and 1.34.2 or later for the GPU Operator's GPUCluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from themelio_gpu.k8s.nvidia import GPU_CLUSTER_MIN_KUBERNETES, gpu_cluster_supports
from themelio_gpu.k8s.version import parse_kubernetes_version
from themelio_gpu.live.report import Report
from themelio_gpu.plan.model import ClusterPlan


def check_version(plan: ClusterPlan, version: Mapping[str, Any], report: Report) -> None:
    definition = plan.definition
    git_version = str(version.get("gitVersion", ""))
    parsed = parse_kubernetes_version(git_version)
    if parsed is None:
        # Some distributions report only major/minor (minor may read "34+").
        parsed = parse_kubernetes_version(f"{version.get('major', '')}.{version.get('minor', '')}")
    if parsed is None:
        report.fail("server-version", f"cannot parse the server version {version!r}")
        return
    served = (parsed.major, parsed.minor, parsed.patch)
    declared = (definition.version.major, definition.version.minor, definition.version.patch)
    shown = git_version or ".".join(str(x) for x in served if x is not None)
    too_old = parsed.release == GPU_CLUSTER_MIN_KUBERNETES.release and gpu_cluster_supports(parsed) is False
    if definition.dra_by_gpu_operator and too_old:
        report.fail(
            "server-version",
            f"the server runs {shown}; the GPU Operator's GPUCluster (draDriver.managedBy: gpu-operator) needs "
            "1.34.2 or later. Upgrade the control plane",
        )
    elif served[:2] != declared[:2]:
        report.fail(
            "server-version",
            f"the server runs {shown}, the definition declares kubernetesVersion {definition.kubernetes_version}: "
            f"major.minor must match (feature gates and API versions follow it). Update kubernetesVersion in "
            f"{plan.file}, or bring the cluster to {definition.kubernetes_version}",
        )
    elif declared[2] is not None and served[2] is not None and served[2] < declared[2]:
        report.warn(
            "server-version",
            f"the server runs {shown}, older than the declared {definition.kubernetes_version} (patch release)",
        )
    else:
        report.ok("server-version", f"{shown} (declared {definition.kubernetes_version})")
