"""Which of a fleet's clusters to deploy so that every way its stacks differ is applied at least once.

A stack's apply depends on its pool kinds (static nodes get labels and taints; Karpenter pools a NodePool, whose
nodes Karpenter launches as the probe asks, differently for DRA and device-plugin pools; provisioned pools nothing
in the API), on the Kueue queues that grant reserved pools (the probe's Jobs through Kueue), on who installs the
DRA driver (a separate chart, the GPU Operator's GPUCluster, or none: device plugin only), on each chart and
version it installs (and whether one ships from a local chart folder), and on the Kubernetes minor its control
plane runs; and `sandbox probe` asks the real scheduler and quota admission about every name a cluster serves
(its offerings and the migration aliases it still serves), so each name is a feature too: every offering and
alias of the fleet is probed somewhere.
`covering` picks clusters, most new features first, until every feature of the fleet is covered, and says
which features each was picked for.
"""

from __future__ import annotations

from collections.abc import Sequence

from themelio_gpu.plan.model import ClusterPlan


def features(plan: ClusterPlan) -> frozenset[str]:
    found = {f"Kubernetes 1.{plan.definition.minor_version}"}
    for pool in plan.definition.node_pools:
        provisioning = pool.provisioning
        kind = "static" if provisioning.static else "karpenter" if provisioning.karpenter else "provisioned"
        found.add(f"{kind} pool")
        found.add("DRA pool" if pool.dra else "device-plugin pool")
        if provisioning.karpenter:  # Karpenter launches for a device-plugin pool's GPUs, not for a DRA pool's
            found.add("Karpenter " + ("DRA pool" if pool.dra else "device-plugin pool"))
    if plan.dra_enabled:
        found.add("DRA driver by " + ("the GPU Operator" if plan.dra_release is None else "its chart"))
    for release in plan.releases:
        found.add(f"{release.chart} {release.version}")
        if release.archive is not None:
            found.add("a chart from a local chart folder")
    if plan.definition.kueue.queues:
        found.add("a Kueue queue granting a reserved pool")
    if plan.config_map is not None:
        found.add("catalog ConfigMap")
    found.update(f"serves {name}" for name in plan.advertised_names)
    return frozenset(found)


def covering(plans: Sequence[ClusterPlan]) -> list[tuple[ClusterPlan, list[str]]]:
    """Clusters in the order picked, each with the features it was the first to cover (sorted)."""
    left = set().union(*(features(p) for p in plans)) if plans else set()
    chosen: list[tuple[ClusterPlan, list[str]]] = []
    candidates = list(plans)
    while left:
        best = max(candidates, key=lambda p: (len(features(p) & left), -plans.index(p)))
        new = sorted(features(best) & left)
        chosen.append((best, new))
        left -= set(new)
        candidates.remove(best)
    return chosen
