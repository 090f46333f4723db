"""Renamed node pools (`renamedFrom`): which renames Terraform `moved` blocks can carry, and which they cannot.

A pool's resources are addressed by its name (`kubernetes_labels.node_labels_<pool>`, see
docs/resource-addresses.md). Renaming a pool without a move destroys the old addresses and creates the new
ones; the kubernetes provider deletes node labels and taints by applying an empty set as the stack's field
manager, which also strips what the new address applied under that same manager. With `renamedFrom` the stack
moves the old addresses to the new ones (constructs/moved_blocks.py) and the rename plans as updates.
"""

from __future__ import annotations

from themelio_gpu.inputs.clusters.definition import ClusterDefinition, NodePool
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.k8s import names as k8s_names

KARPENTER_RENAME = (
    "a Karpenter pool cannot be renamed in place: the pool's name is its NodePool's metadata.name, and "
    "kubernetes_manifest replaces an object whose metadata.name changes even at a moved address "
    "(terraform-provider-kubernetes v2.38.0 manifest/provider/plan.go marks manifest.metadata.name "
    "RequiresReplace). Deleting the NodePool makes Karpenter drain and terminate every node it launched (its "
    "NodeClaims are owned by the NodePool). Keep the pool's name, or add the new pool beside the old one and "
    "remove the old one once its workloads have moved"
)


def moves_addresses(pool: NodePool) -> bool:
    """A renamed static pool, whose labels and taints move. Provisioned pools have no resources to move;
    renamed Karpenter pools are refused."""
    return pool.renamed_from is not None and pool.provisioning.static is not None


def check_renames(cluster: ClusterDefinition, file: str, problems: Problems) -> None:
    """Refuse every `renamedFrom` whose addresses cannot be moved, saying why."""
    current = {pool.name: index for index, pool in enumerate(cluster.node_pools)}
    claimed: dict[str, int] = {}
    for index, pool in enumerate(cluster.node_pools):
        old = pool.renamed_from
        if old is None:
            continue
        where = ("nodePools", index, "renamedFrom")
        for message in k8s_names.dns1123_label(old):
            problems.add(file, where, f"{message} (it names the pool's previous name)")
        if old == pool.name:
            problems.add(
                file, where, f"{old!r} is the pool's own name: there is nothing to move; remove renamedFrom"
            )
        elif old in current:
            problems.add(
                file,
                where,
                f"pool {old!r} still exists (nodePools[{current[old]}]): Terraform cannot move addresses that are "
                f"still in the configuration, and both pools would manage the same nodes' labels. Rename or remove "
                f"nodePools[{current[old]}] first, or drop renamedFrom",
            )
        if old in claimed:
            problems.add(
                file,
                where,
                f"nodePools[{claimed[old]}] is also renamed from {old!r}: one pool's addresses can move to one "
                "pool only",
            )
        claimed.setdefault(old, index)
        if pool.provisioning.karpenter is not None:
            problems.add(file, where, KARPENTER_RENAME)
