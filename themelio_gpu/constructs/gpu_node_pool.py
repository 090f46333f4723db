"""A GPU node pool: its label and taint contract, brought to the nodes the way the pool is provisioned.

- static: `kubernetes_labels` and `kubernetes_node_taint` (unless the pool is untainted) on each named node,
  managing only our keys;
- provisioned: outputs with the labels, taints and kubelet flags for whatever creates the nodes;
- karpenter: a `karpenter.sh/v1` NodePool that stamps the contract on every node it launches.
Every pool also gets the output, so provisioning scripts and reviewers can read the contract.

Like the other building blocks here, it adds its resources straight to the cluster's stack under readable
ids (`kubernetes_labels.node_labels_<pool>`): a nested `Construct` would cost a jsii round trip and hash
every address, which would then take another round trip per resource to undo. See docs/performance.md.
"""

from __future__ import annotations

from typing import Any

from themelio_gpu.constructs.literal import literal
from themelio_gpu.constructs.naming import (
    karpenter_node_pool_id,
    logical_id,
    node_labels_id,
    node_taints_id,
)
from themelio_gpu.constructs.providers import (
    Labels,
    LabelsMetadata,
    Manifest,
    ManifestFieldManager,
    NodeTaint,
    NodeTaintMetadata,
    NodeTaintTaint,
    TerraformIterator,
    TerraformStack,
)
from themelio_gpu.inputs.catalog.names import Names
from themelio_gpu.inputs.clusters.definition import KarpenterNodes, NodePool
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.plan.manifests import karpenter_node_pool_manifest


class GpuNodePool:
    def __init__(self, stack: TerraformStack, pool: NodePool, contract: PoolContract, names: Names) -> None:
        self.stack = stack
        self.field_manager = names.field_manager
        self.taint_field_manager = names.taint_field_manager
        self.dependables: list[Any] = []
        self.outputs = {logical_id("node_pool", pool.name.replace("-", "_")): self.contract_output(contract)}
        provisioning = pool.provisioning
        if provisioning.static is not None:
            self._static(contract, provisioning.static.nodes)
        elif provisioning.karpenter is not None:
            self._karpenter(contract, provisioning.karpenter)

    @staticmethod
    def contract_output(contract: PoolContract) -> dict[str, Any]:
        return {
            "labels": dict(contract.labels),
            # Allocatable units per node (whole GPUs, or MIG devices per profile): capacity for quotas.
            "devices_per_node": dict(contract.devices_per_node()),
            "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in contract.taints],
            "kubelet_args": list(contract.kubelet_args),
        }

    def _static(self, contract: PoolContract, nodes: tuple[str, ...]) -> None:
        # One resource per pool with for_each over its nodes: every node gets the same contract.
        each_node = TerraformIterator.from_list(sorted(nodes))
        # The Terraform expression itself: what the iterator's token would resolve to, without two round trips.
        node_name = "${each.value}"
        labels = Labels(
            self.stack,
            node_labels_id(contract.name),
            for_each=each_node,
            api_version="v1",
            kind="Node",
            metadata=LabelsMetadata(name=node_name),
            labels=dict(contract.labels),
            field_manager=self.field_manager,
            # These keys belong to this tool; the GPU Operator writes nvidia.com/mig.config too.
            force=True,
        )
        self.dependables.append(labels)
        if not contract.taints:
            # An untainted pool (taints: []): kubernetes_node_taint requires at least one taint block.
            return
        taints = NodeTaint(
            self.stack,
            node_taints_id(contract.name),
            for_each=each_node,
            metadata=NodeTaintMetadata(name=node_name),
            taint=[NodeTaintTaint(key=t.key, value=t.value, effect=t.effect) for t in contract.taints],
            field_manager=self.taint_field_manager,
            force=True,
        )
        self.dependables.append(taints)

    def _karpenter(self, contract: PoolContract, karpenter: KarpenterNodes) -> None:
        manifest = karpenter_node_pool_manifest(contract, karpenter)
        node_pool = Manifest(
            self.stack,
            karpenter_node_pool_id(contract.name),
            # The node class reference is the user's text: literal() keeps it from being a template.
            manifest={**manifest, "spec": literal(manifest["spec"])},
            # The fields the stack sets are the stack's (Karpenter writes only status and its own annotations): a
            # hand edit of one is put back by a forced apply, not left as a conflict (docs/day-two.md, drift).
            field_manager=ManifestFieldManager(name=self.field_manager, force_conflicts=True),
        )
        self.dependables.append(node_pool)
