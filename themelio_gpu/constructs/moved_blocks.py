"""Terraform `moved` blocks for renamed node pools (`renamedFrom: OLD` on a pool).

A static pool's resources are addressed by its name; a rename without a move destroys the labels and taints
at the old addresses and creates them at the new ones (see plan/renames.py for why that hurts). A `moved`
block per address hands the old state to the new address, so Terraform plans an in-place update (the
pool label, `<labelDomain>/pool`, changes) and leaves every node labelled throughout. Terraform 1.1+ and OpenTofu
read them; a block whose old address is not in the state (the rename was applied already, or the pool was
untainted) does nothing, so `renamedFrom` may stay in the definition.

Moving a whole resource moves every instance of its `for_each` (one per node). Provisioned pools have no
resources to move; Karpenter pools are refused (plan/renames.py).

Written as one stack override: plain JSON, no jsii round trip per block.
"""

from __future__ import annotations

from themelio_gpu.constructs.naming import node_labels_id, node_taints_id
from themelio_gpu.constructs.providers import TerraformStack
from themelio_gpu.inputs.clusters.definition import NodePool
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.plan.renames import moves_addresses

LABELS_TYPE = "kubernetes_labels"
TAINTS_TYPE = "kubernetes_node_taint"


def pool_moves(pool: NodePool, contract: PoolContract) -> list[dict[str, str]]:
    """The moves of one pool: `{"from": old address, "to": new address}` for each resource it has."""
    old = pool.renamed_from
    if old is None or not moves_addresses(pool):
        return []
    moves = [{"from": f"{LABELS_TYPE}.{node_labels_id(old)}", "to": f"{LABELS_TYPE}.{node_labels_id(pool.name)}"}]
    if contract.taints:
        # An untainted pool has no taint resource to move to: the old taints are removed, as it asks.
        moves.append(
            {"from": f"{TAINTS_TYPE}.{node_taints_id(old)}", "to": f"{TAINTS_TYPE}.{node_taints_id(pool.name)}"}
        )
    return moves


def add_moved_blocks(stack: TerraformStack, plan: ClusterPlan) -> None:
    moves = [
        move
        for pool, contract in zip(plan.definition.node_pools, plan.pools, strict=True)
        for move in pool_moves(pool, contract)
    ]
    if moves:
        stack.add_override("moved", moves)
