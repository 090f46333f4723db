"""Kubernetes objects the stack applies itself, as plain dicts (no cdktf): the constructs wrap them in
`kubernetes_manifest` resources (the DeviceClasses, a Karpenter pool's NodePool), and `verify` validates the
DeviceClasses beside the rendered charts."""

from __future__ import annotations

from typing import Any

from themelio_gpu.inputs.catalog.names import Names
from themelio_gpu.inputs.clusters.definition import KarpenterNodes
from themelio_gpu.inputs.clusters.pool_contract import INSTANCE_TYPE, PoolContract
from themelio_gpu.k8s.dra import RESOURCE_API_VERSION
from themelio_gpu.k8s.nvidia import GPU
from themelio_gpu.k8s.quantity import canonical_quantity
from themelio_gpu.plan.model import DeviceClassSpec

DEVICE_CLASS_API_VERSION = RESOURCE_API_VERSION
NODE_POOL_API_VERSION = "karpenter.sh/v1"


def device_class_manifest(spec: DeviceClassSpec, names: Names) -> dict[str, Any]:
    return {
        "apiVersion": DEVICE_CLASS_API_VERSION,
        "kind": "DeviceClass",
        "metadata": {
            "name": spec.name,
            "labels": names.managed_by,
            "annotations": {names.offering_annotation: spec.offering},
        },
        "spec": {
            "extendedResourceName": spec.extended_resource_name,
            "selectors": [{"cel": {"expression": spec.selector}}],
        },
    }


def karpenter_node_pool_manifest(contract: PoolContract, karpenter: KarpenterNodes) -> dict[str, Any]:
    """The `karpenter.sh/v1` NodePool that stamps the pool's contract on every node it launches. Its `spec`
    holds the user's text (the node class reference): the construct writes it as a Terraform literal."""
    # The instance type is a well-known label Karpenter sets itself (a Karpenter pool has no instanceType):
    # it goes in the requirements.
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": dict(contract.labels)},
            "spec": {
                "nodeClassRef": {
                    "group": karpenter.node_class_ref.group,
                    "kind": karpenter.node_class_ref.kind,
                    "name": karpenter.node_class_ref.name,
                },
                "requirements": [
                    {"key": INSTANCE_TYPE, "operator": "In", "values": list(karpenter.instance_types)},
                    {
                        "key": "karpenter.sh/capacity-type",
                        "operator": "In",
                        "values": list(karpenter.capacity_types),
                    },
                ],
                # The NodePool CRD's value pattern needs a character: a taint without a value omits it.
                "taints": [t.as_object() for t in contract.taints],
            },
        }
    }
    if karpenter.max_gpus is not None:
        # As the API server stores it (1000 -> 1k): anything else reads back changed after apply.
        spec["limits"] = {GPU: canonical_quantity(karpenter.max_gpus)}
    return {
        "apiVersion": NODE_POOL_API_VERSION,
        "kind": "NodePool",
        "metadata": {"name": contract.name},
        "spec": spec,
    }
