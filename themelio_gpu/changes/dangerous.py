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

And one update: the GPU Operator's release with another chart version, or other `driver` or `daemonsets` values
(what its driver DaemonSet's template is made of). The new template is rolled out by NVIDIA's upgrade controller,
which cordons each GPU node and deletes the pods it calls GPU pods (`gpuPodSpecFilter`); seen on the sandbox
with NVIDIA's own controller (docs/day-two.md).
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import yaml

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
GPU_POD_FILTER = "https://github.com/NVIDIA/gpu-operator/blob/v26.7.0/cmd/gpu-operator/main.go#L263"
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
    scenario: str | None = None
    """The section of docs/day-two.md whose scenario did this on a running sandbox (the text form points at it)."""


def _text(config: Any, *path: str) -> str:
    value = lookup(config, path)
    return value if isinstance(value, str) else "?"


Found = tuple[str, str, str | None]
"""What the object is, why losing it hurts, and where the behaviour the why rests on is written."""


def _release(config: Any, replaced: bool) -> Found | None:
    release = f"Helm release {_text(config, 'name')} in {_text(config, 'namespace')}"
    first = "A replace uninstalls it before installing it again: " if replaced else ""
    chart = lookup(config, ("chart",))
    if chart in OPERATOR_CHARTS:
        why = (
            f"{first}helm uninstall deletes the chart's ClusterPolicy or GPUCluster, and the operator's operands on "
            "every GPU node go with it (driver, container toolkit, device plugin or DRA driver, MIG Manager, DCGM "
            "exporter): new GPU pods cannot start until it is installed again"
        )
        return f"the GPU Operator ({release})", why, None
    if chart in DRA_DRIVER_CHARTS:
        why = (
            f"{first}helm uninstall deletes the kubelet plugin on every GPU node, so the nodes' ResourceSlices go, "
            "and the chart's DeviceClasses (gpu.nvidia.com, mig.nvidia.com, ...): no ResourceClaim or "
            "extended-resource request can be allocated, and pods that end meanwhile cannot release their devices"
        )
        return f"the NVIDIA DRA driver ({release})", why, None
    return None


def _manifest(config: Any, first: str) -> Found | None:
    kind, api_version = lookup(config, ("manifest", "kind")), lookup(config, ("manifest", "apiVersion"))
    name = _text(config, "manifest", "metadata", "name")
    if kind == "DeviceClass":
        served = lookup(config, ("manifest", "spec", "extendedResourceName"))
        requests = f"requests for {served} and claims of the class" if isinstance(served, str) else "its claims"
        why = f"{first}while it is gone, {requests} cannot be scheduled (no class advertises them); running pods "
        return f"DeviceClass {name}", why + "keep the devices they hold", None
    if kind == "NodePool" and isinstance(api_version, str) and api_version.startswith("karpenter.sh/"):
        why = (
            f"{first}deleting a NodePool deletes the NodeClaims it owns (their owner reference): Karpenter drains "
            "and terminates every node it launched for the pool"
        )
        return f"Karpenter NodePool {name}", why, KARPENTER_OWNERSHIP
    return None


def _labels(config: Any, first: str) -> Found:
    node, labels = _text(config, "metadata", "name"), lookup(config, ("labels",))
    keys = ", ".join(sorted(labels)) if isinstance(labels, dict) else "its labels"
    why = (
        f"{first}the provider deletes labels by applying an empty label set as field manager "
        f"{_text(config, 'field_manager')} (its delete is an update to no labels): {node} loses every label that "
        f"manager owns ({keys}), also those another address of the stack applied; the GPU operands, the DRA "
        "kubelet plugin and workloads select GPU nodes by them"
    )
    return f"the labels of {_text(config, 'kind')} {node}", why, LABELS_DELETE


def _taints(config: Any, first: str) -> Found:
    node, taints = _text(config, "metadata", "name"), lookup(config, ("taint",))
    listed = [t for t in taints if isinstance(t, dict)] if isinstance(taints, list) else []
    shown = ", ".join(f"{t.get('key')}={t.get('value')}:{t.get('effect')}" for t in listed) or "its taints"
    why = (
        f"{first}the provider deletes taints by applying an empty taint list as field manager "
        f"{_text(config, 'field_manager')} (its delete is an update to no taints): {node} loses {shown}, so pods "
        "that do not tolerate them can be scheduled onto the GPU node"
    )
    return f"the taints of node {node}", why, TAINTS_DELETE


def _namespace(config: Any, first: str) -> Found:
    why = f"{first}deleting a namespace deletes every object in it, also those others put there"
    return f"namespace {_text(config, 'metadata', 'name')}", why, None


DRIVER_TEMPLATE_VALUES = ("driver", "daemonsets")
"""The GPU Operator values its driver DaemonSet's template is made from (besides the chart's version): the driver's
own, and what every operand DaemonSet gets (`daemonsets`: the stack's tolerations there are every taint, so pools
coming and going leave the template alone; a cluster's own values can still change either)."""


def _driver_template_values(config: Any) -> dict[str, Any]:
    """The release's values under DRIVER_TEMPLATE_VALUES, as its values documents set them."""
    values, found = lookup(config, ("values",)), {}
    for text in values if isinstance(values, list) else []:
        with suppress(yaml.YAMLError):
            document = yaml.safe_load(text) if isinstance(text, str) else None
            if isinstance(document, dict):
                found.update({k: document[k] for k in DRIVER_TEMPLATE_VALUES if k in document})
    return found


def _operator_upgrade(before: Instance, after: Instance) -> Danger | None:
    """An update of the GPU Operator's release that changes its driver DaemonSet's template."""
    if before.type != "helm_release" or lookup(before.config, ("chart",)) not in OPERATOR_CHARTS:
        return None
    versions = [lookup(i.config, ("version",)) for i in (before, after)]
    changed = sorted(
        key
        for key in DRIVER_TEMPLATE_VALUES
        if _driver_template_values(before.config).get(key) != _driver_template_values(after.config).get(key)
    )
    if versions[0] == versions[1] and not changed:
        return None
    deletes = (
        "deleting the pods it calls GPU pods, those asking for nvidia.com/gpu* or nvidia.com/mig-* or holding a "
        "claim of their own on a gpu.nvidia.com device; pods asking for other names (a DeviceClass's "
        "extendedResourceName) are not deleted and keep running while the driver under them is replaced"
    )
    if versions[0] != versions[1]:
        why = (
            f"the chart {versions[0]} -> {versions[1]} brings its own driver version unless the values pin one "
            "(v26.3.3's 580.126.20, v26.7.0's 595.91.07): NVIDIA's upgrade controller replaces the driver node by "
            f"node (driver.upgradePolicy), cordoning each GPU node and {deletes}"
        )
    else:
        why = (
            f"its values' {' and '.join(changed)} change the driver DaemonSet's template: NVIDIA's upgrade "
            "controller restarts the driver pod node by node, each node cordoned meanwhile; v26.7.0 does it "
            "without deleting workloads when the driver's own "
            f"configuration is unchanged (internal/predicates/restart_only.go); v26.3.3 registers no such path in its "
            f"source and would take the full flow, {deletes}"
        )
    release = f"Helm release {_text(before.config, 'name')} in {_text(before.config, 'namespace')}"
    return Danger(
        before.address, "update", f"the GPU Operator ({release})", why, GPU_POD_FILTER,
        f"{DAY_TWO}#the-gpu-operator-upgraded",
    )  # fmt: skip


def danger_of(instance: Instance, action: str, after: Instance | None = None) -> Danger | None:
    """Why destroying or replacing this object (or this update of it to `after`) hurts a running cluster; None
    when it does not."""
    if action == "update" and after is not None:
        return _operator_upgrade(instance, after)
    if action not in ("destroy", "replace"):
        return None
    config, replaced = instance.config, action == "replace"
    first = "A replace destroys it before creating it again: " if replaced else ""
    found: Found | None = None
    if instance.type == "helm_release":
        found = _release(config, replaced)
    elif instance.type == "kubernetes_manifest":
        found = _manifest(config, first)
    elif instance.type == "kubernetes_labels":
        found = _labels(config, first)
    elif instance.type == "kubernetes_node_taint":
        found = _taints(config, first)
    elif instance.type == "kubernetes_namespace_v1":
        found = _namespace(config, first)
    if found is None:
        return None
    what, why, source = found
    return Danger(instance.address, action, what, why, source, _scenario(instance, action))


DAY_TWO = "docs/day-two.md"


def _scenario(instance: Instance, action: str) -> str | None:
    """The day-two scenario that shows this kind of change on a running cluster, and what to do around it."""
    config = instance.config
    if instance.type == "helm_release":
        chart = lookup(config, ("chart",))
        if chart in DRA_DRIVER_CHARTS:
            return f"{DAY_TWO}#the-dra-driver-chart-renamed"
        return f"{DAY_TWO}#the-gpu-operator-upgraded" if chart in OPERATOR_CHARTS else None
    if instance.type == "kubernetes_manifest" and lookup(config, ("manifest", "kind")) == "DeviceClass":
        return f"{DAY_TWO}#an-offering-removed" if action == "destroy" else f"{DAY_TWO}#an-offering-renamed"
    if instance.type in ("kubernetes_labels", "kubernetes_node_taint", "kubernetes_manifest"):
        return f"{DAY_TWO}#a-pool-removed"
    return None
