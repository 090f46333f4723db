"""The Kubernetes versions this tool knows the rules of, and the warning for a cluster beyond them.

What depends on the version: the DRAExtendedResource gate (alpha and off in 1.34 and 1.35, beta and on in
1.36, GA and locked on in 1.37; `fleet._check_version_gates`), resource.k8s.io/v1 (from 1.34), and the
schemas `verify` validates every object against (kubernetes-validate's, up to 1.37). A newer version is
planned as the newest known one, which may be wrong: the cluster's file says so in a warning.
"""

from __future__ import annotations

from themelio_gpu.inputs.clusters.definition import ClusterDefinition

NEWEST_KNOWN_MINOR = 37
"""Kubernetes 1.37: the newest release whose DRA rules this tool follows (tests check kubernetes-validate's
newest schemas are of it too)."""


def version_warnings(cluster: ClusterDefinition) -> list[tuple[str, str]]:
    """(location, message) of what the cluster's version leaves unknown."""
    if cluster.minor_version <= NEWEST_KNOWN_MINOR:
        return []
    newest = f"1.{NEWEST_KNOWN_MINOR}"
    return [
        (
            "kubernetesVersion",
            f"Kubernetes {cluster.kubernetes_version} is newer than any version this tool knows ({newest}): the "
            f"stack is planned as for {newest}, and verify checks it against the {newest} schemas. If "
            f"{cluster.kubernetes_version} is a typo, correct it; if it is real, read its release notes for "
            "changes to DRA before deploying, and update this tool",
        )
    ]
