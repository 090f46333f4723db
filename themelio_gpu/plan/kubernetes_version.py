"""The Kubernetes versions this tool knows the rules of: the gates DRA needs, and the warning for a cluster
outside them.

What depends on the version: the DRAExtendedResource gate (alpha and off in 1.34 and 1.35, beta and on in
1.36, GA and locked on in 1.37; `check_version_gates`), resource.k8s.io/v1 (from 1.34), and the
schemas `verify` validates every object against (kubernetes-validate's, 1.25 to 1.37). A version outside
them is accepted, since a real one may be newer than this tool, but its file says what that leaves unknown.
"""

from __future__ import annotations

from themelio_gpu.inputs.clusters.definition import ClusterDefinition, Component
from themelio_gpu.inputs.problems import KeyPath, Problems
from themelio_gpu.k8s.dra import (
    EXTENDED_RESOURCE_GATE,
    RESOURCE_API_MINOR,
    RESOURCE_API_VERSION,
    extended_resource_gate,
    extended_resource_on_by_default_from,
)

ALL_COMPONENTS = tuple(Component)

NEWEST_KNOWN_MINOR = 37
"""Kubernetes 1.37: the newest release whose DRA rules this tool follows, and kubernetes-validate's newest
schemas (a test checks both)."""
OLDEST_VALIDATED_MINOR = 25
"""Kubernetes 1.25: kubernetes-validate's oldest schemas (a test checks it)."""


def version_warnings(cluster: ClusterDefinition) -> list[tuple[KeyPath, str]]:
    """(location, message) of what the cluster's version leaves unknown."""
    version, minor = cluster.kubernetes_version, cluster.minor_version
    fix = f"If {version} is a typo, correct it"
    if minor > NEWEST_KNOWN_MINOR:
        newest = f"1.{NEWEST_KNOWN_MINOR}"
        message = (
            f"Kubernetes {version} is newer than any version this tool knows ({newest}): the stack is planned by "
            f"the rules of {newest}, and verify cannot check it (its schemas end at {newest}). {fix}; if it is "
            "real, read its release notes for changes to DRA before deploying, and update this tool"
        )
    elif minor < OLDEST_VALIDATED_MINOR:
        oldest = f"1.{OLDEST_VALIDATED_MINOR}"
        message = (
            f"Kubernetes {version} is older than any version verify can check ({oldest}: its schemas start there). "
            f"{fix}"
        )
    else:
        return []
    return [(("kubernetesVersion",), message)]


def check_version_gates(cluster: ClusterDefinition, file: str, problems: Problems) -> None:
    """resource.k8s.io/v1 needs 1.34; extendedResourceName needs DRAExtendedResource (KEP-5004)."""
    minor = cluster.minor_version
    gate = cluster.feature_gates.dra_extended_resource
    stage = extended_resource_gate(minor)
    if minor < RESOURCE_API_MINOR and not cluster.dra_by_gpu_operator:  # that mode says why itself (dra_mode.py)
        problems.add(
            file,
            ("kubernetesVersion",),
            f"cluster {cluster.name} runs Kubernetes {cluster.kubernetes_version}, but DeviceClasses need "
            f"{RESOURCE_API_VERSION} (Kubernetes 1.{RESOURCE_API_MINOR} or later). Upgrade the cluster, or set dra: "
            "false on every pool",
        )
    elif stage is not None and not stage.on_by_default:
        missing = [c.value for c in ALL_COMPONENTS if gate is None or not gate.enabled or c not in gate.components]
        if missing:
            problems.add(
                file,
                ("featureGates", EXTENDED_RESOURCE_GATE),
                f"cluster {cluster.name} runs Kubernetes {cluster.kubernetes_version}, where {EXTENDED_RESOURCE_GATE} "
                f"is {stage.describe()}: without it the API server silently drops spec.extendedResourceName and GPU "
                f"requests are never satisfied. Enable the gate on {', '.join(missing)} and declare it here "
                f"(featureGates.{EXTENDED_RESOURCE_GATE}.components), or upgrade to "
                f"1.{extended_resource_on_by_default_from()}",
            )
    elif stage is not None and gate is not None and not gate.enabled:
        problems.add(
            file,
            ("featureGates", EXTENDED_RESOURCE_GATE, "enabled"),
            f"{EXTENDED_RESOURCE_GATE} is {stage.describe()} in {cluster.kubernetes_version}; extended resource "
            "names need it on" + (" (it cannot be turned off)" if stage.locked else ""),
        )
