"""The Kubernetes versions this tool knows the rules of, and the warning for a cluster outside them.

What depends on the version: the DRAExtendedResource gate (alpha and off in 1.34 and 1.35, beta and on in
1.36, GA and locked on in 1.37; `fleet._check_version_gates`), resource.k8s.io/v1 (from 1.34), and the
schemas `verify` validates every object against (kubernetes-validate's, 1.25 to 1.37). A version outside
them is accepted, since a real one may be newer than this tool, but its file says what that leaves unknown.
"""

from __future__ import annotations

from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.problems import KeyPath

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
