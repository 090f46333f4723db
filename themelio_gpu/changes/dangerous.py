"""What would hurt a running cluster: the objects whose destroy (or replace: destroy, then create) takes GPUs
away from workloads, each with why. Judged on the deployed (base) configuration of the object.

- the GPU Operator's Helm release: uninstalling it deletes its ClusterPolicy or GPUCluster, and with it the
  operands on every GPU node;
- the NVIDIA DRA driver's Helm release: its kubelet plugin publishes the nodes' devices;
- a DeviceClass: it turns an extended resource name into DRA allocations;
- a Karpenter NodePool: its nodes are owned by it;
- node labels and taints (`kubernetes_labels`, `kubernetes_node_taint`): the kubernetes provider deletes
  them by applying an empty set as the stack's field manager, which removes every label (taint) that manager
  owns on the node, also those another address of the stack applied (a pool renamed without renamedFrom);
- a namespace the stack created: deleting it deletes everything in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from themelio_gpu.changes.replacement import lookup
from themelio_gpu.changes.stacks import Instance

OPERATOR_CHARTS = frozenset({"gpu-operator"})
DRA_DRIVER_CHARTS = frozenset({"dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu"})
KARPENTER_OWNERSHIP = (
    "https://github.com/kubernetes-sigs/karpenter/blob/v1.14.1/pkg/controllers/provisioning/scheduling/"
    "nodeclaimtemplate.go#L157"
)
LABELS_DELETE = (
    "https://github.com/hashicorp/terraform-provider-kubernetes/blob/v2.38.0/kubernetes/"
    "resource_kubernetes_labels.go#L303"
)
TAINTS_DELETE = (
    "https://github.com/hashicorp/terraform-provider-kubernetes/blob/v2.38.0/kubernetes/"
    "resource_kubernetes_node_taint.go#L94"
)


@dataclass(frozen=True)
class Danger:
    address: str
    action: str
    what: str
    why: str
    source: str | None = None
    """Where the behaviour the why rests on is written (the provider's or Karpenter's source), if not common
    Kubernetes or Helm knowledge."""


def _text(config: Any, *path: str) -> str:
    value = lookup(config, path)
    return value if isinstance(value, str) else "?"


def danger_of(instance: Instance, action: str) -> Danger | None:
    """Why destroying or replacing this object hurts a running cluster; None when it does not."""
    if action not in ("destroy", "replace"):
        return None
    config = instance.config
    first = "A replace destroys it before creating it again: " if action == "replace" else ""
    what, why, source = "", "", None
    if instance.type == "helm_release":
        release = f"Helm release {_text(config, 'name')} in {_text(config, 'namespace')}"
        first = first and "A replace uninstalls it before installing it again: "
        chart = lookup(config, ("chart",))
        if chart in OPERATOR_CHARTS:
            what = f"the GPU Operator ({release})"
            why = (
                f"{first}helm uninstall deletes the chart's ClusterPolicy or GPUCluster, and the operator's operands "
                "on every GPU node go with it (driver, container toolkit, device plugin or DRA driver, MIG "
                "Manager, DCGM exporter): new GPU pods cannot start until it is installed again"
            )
        elif chart in DRA_DRIVER_CHARTS:
            what = f"the NVIDIA DRA driver ({release})"
            why = (
                f"{first}helm uninstall deletes the kubelet plugin on every GPU node, so the nodes' ResourceSlices "
                "go, and the chart's DeviceClasses (gpu.nvidia.com, mig.nvidia.com, ...): no ResourceClaim or "
                "extended-resource request can be allocated, and pods that end meanwhile cannot release their "
                "devices"
            )
    elif instance.type == "kubernetes_manifest":
        kind, api_version = lookup(config, ("manifest", "kind")), lookup(config, ("manifest", "apiVersion"))
        name = _text(config, "manifest", "metadata", "name")
        if kind == "DeviceClass":
            served = lookup(config, ("manifest", "spec", "extendedResourceName"))
            requests = (
                f"requests for {served} and claims of the class" if isinstance(served, str) else "its claims"
            )
            what = f"DeviceClass {name}"
            why = (
                f"{first}while it is gone, {requests} cannot be scheduled (no class advertises them); running "
                "pods keep the devices they hold"
            )
        elif kind == "NodePool" and isinstance(api_version, str) and api_version.startswith("karpenter.sh/"):
            what, source = f"Karpenter NodePool {name}", KARPENTER_OWNERSHIP
            why = (
                f"{first}deleting a NodePool deletes the NodeClaims it owns (their owner reference): Karpenter "
                "drains and terminates every node it launched for the pool"
            )
    elif instance.type == "kubernetes_labels":
        node = _text(config, "metadata", "name")
        labels = lookup(config, ("labels",))
        keys = ", ".join(sorted(labels)) if isinstance(labels, dict) else "its labels"
        manager = _text(config, "field_manager")
        what, source = f"the labels of {_text(config, 'kind')} {node}", LABELS_DELETE
        why = (
            f"{first}the provider deletes labels by applying an empty label set as field manager {manager} "
            f"(its delete is an update to no labels): {node} loses every label that manager owns ({keys}), also those another address "
            "of the stack applied; the GPU operands, the DRA kubelet plugin and workloads select GPU nodes by them"
        )
    elif instance.type == "kubernetes_node_taint":
        node = _text(config, "metadata", "name")
        taints = lookup(config, ("taint",))
        shown = (
            ", ".join(f"{t.get('key')}={t.get('value')}:{t.get('effect')}" for t in taints if isinstance(t, dict))
            if isinstance(taints, list)
            else "its taints"
        )
        what, source = f"the taints of node {node}", TAINTS_DELETE
        why = (
            f"{first}the provider deletes taints by applying an empty taint list as field manager "
            f"{_text(config, 'field_manager')} (its delete is an update to no taints): {node} loses {shown}, so pods that do not "
            "tolerate them can be scheduled onto the GPU node"
        )
    elif instance.type == "kubernetes_namespace_v1":
        what = f"namespace {_text(config, 'metadata', 'name')}"
        why = f"{first}deleting a namespace deletes every object in it, also those others put there"
    if not what:
        return None
    return Danger(instance.address, action, what, why, source)
