"""Where the real DaemonSet controller and scheduler put every DaemonSet's pods, beside `verify`'s predicate.

After apply, each DaemonSet the charts created (NFD's worker, the DRA driver's kubelet plugin, ...) has pods on
the nodes the real DaemonSet controller chose and the real kube-scheduler bound. The same DaemonSet, read back
from the API server, is placed by `k8s/scheduling.py` (`why_not`, what `verify` proves with) on the same nodes,
with their labels and taints as they are now: the two must name the same nodes.

The GPU Operator's operands are created by NVIDIA's own controller from its ClusterPolicy or GPUCluster
(components/gpu_operator.py) and compared here like every other DaemonSet. Where the controller does not run
(the machine gives it no mount namespace, or no build of its version), their placement is `verify`'s model only,
and the report says so in a row of its own, with the reason.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from themelio_gpu.k8s.scheduling import Node, PodScheduling, TaintSpec, why_not
from themelio_gpu.sandbox.cluster import Sandbox, kubectl
from themelio_gpu.sandbox.tools import Toolbox
from themelio_gpu.tables import table

WAIT_SECONDS = 60.0
OPERATOR_KINDS = ("clusterpolicies.nvidia.com", "gpuclusters.nvidia.com")


def model_only(why: str) -> str:
    """An operator resource's operands when NVIDIA's controller does not run here (operator_status.py)."""
    return f"created by the GPU Operator's controller, which does not run here ({why or 'not started'}): verify's model only"


@dataclass
class DaemonSetRow:
    namespace: str
    name: str
    real: list[str]
    """The nodes its pods are bound to (the DaemonSet controller and the scheduler)."""
    model: list[str]
    """The nodes `verify`'s placement predicate lets its pods run on."""
    pending: int = 0
    """Pods the controller created that the scheduler did not bind within the wait."""
    why_not: str = ""
    """The model's reason for one node where the two differ."""

    @property
    def agrees(self) -> bool:
        return self.real == self.model and not self.pending


def _get(toolbox: Toolbox, sandbox: Sandbox, *args: str) -> Any:
    return json.loads(kubectl(toolbox, sandbox, "get", *args, "-o", "json"))


def _nodes(toolbox: Toolbox, sandbox: Sandbox) -> list[Node]:
    return [
        Node(
            item["metadata"]["name"],
            dict(item["metadata"].get("labels") or {}),
            tuple(
                TaintSpec(str(t["key"]), str(t.get("value") or ""), str(t["effect"]))
                for t in item.get("spec", {}).get("taints") or []
            ),
        )
        for item in _get(toolbox, sandbox, "nodes")["items"]
    ]


def bound_nodes(daemonset: dict[str, Any], pods: list[dict[str, Any]]) -> tuple[list[str], int]:
    uid = daemonset["metadata"]["uid"]
    owned = [p for p in pods if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])]
    nodes = sorted(str(p["spec"]["nodeName"]) for p in owned if p.get("spec", {}).get("nodeName"))
    return nodes, len(owned) - len(nodes)


def settled(daemonsets: list[dict[str, Any]], pods: list[dict[str, Any]]) -> bool:
    """Every DaemonSet's controller has caught up with its spec and every pod it wants is bound."""
    for daemonset in daemonsets:
        status = daemonset.get("status") or {}
        if status.get("observedGeneration", 0) < daemonset["metadata"].get("generation", 0):
            return False
        nodes, pending = bound_nodes(daemonset, pods)
        if pending or len(nodes) != status.get("desiredNumberScheduled", 0):
            return False
    return True


def compare(toolbox: Toolbox, sandbox: Sandbox) -> list[DaemonSetRow]:
    """Each DaemonSet's bound nodes beside the model's, once the controller has settled (or the wait ends)."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        daemonsets = _get(toolbox, sandbox, "daemonsets", "-A")["items"]
        pods = _get(toolbox, sandbox, "pods", "-A")["items"]
        if settled(daemonsets, pods) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    nodes = _nodes(toolbox, sandbox)
    rows = []
    for daemonset in sorted(daemonsets, key=lambda d: (d["metadata"]["namespace"], d["metadata"]["name"])):
        scheduling = PodScheduling.of_daemonset(daemonset)
        reasons = {node.name: why_not(scheduling, node) for node in nodes}
        real, pending = bound_nodes(daemonset, pods)
        model = sorted(name for name, why in reasons.items() if not why)
        row = DaemonSetRow(daemonset["metadata"]["namespace"], daemonset["metadata"]["name"], real, model, pending)
        differing = sorted(set(real) ^ set(model))
        if differing:
            first = differing[0]
            row.why_not = f"{first}: " + ("; ".join(reasons[first]) or "the model lets it run here")
        rows.append(row)
    return rows


def operator_resources(toolbox: Toolbox, sandbox: Sandbox) -> list[str]:
    """The GPU Operator's custom resources in the sandbox (`ClusterPolicy/cluster-policy`): its operands' source."""
    served = kubectl(toolbox, sandbox, "api-resources", "-o", "name").split()
    found = []
    for kind in OPERATOR_KINDS:
        if kind in served:
            found += [f"{i['kind']}/{i['metadata']['name']}" for i in _get(toolbox, sandbox, kind)["items"]]
    return found


def _nodes_text(names: list[str]) -> str:
    return f"{len(names)}: {', '.join(names)}" if names else "none"


def as_table(rows: list[DaemonSetRow], operator: list[str], why: str) -> str:
    """One line per DaemonSet, and one per operator resource whose operands are model only."""
    lines: list[tuple[str, ...]] = [("daemonset", "runs on (DaemonSet controller, scheduler)", "model", "agrees")]
    for row in rows:
        real = _nodes_text(row.real) + (f" (+{row.pending} Pending)" if row.pending else "")
        verdict = "yes" if row.agrees else f"NO: {row.why_not}"
        lines.append((f"{row.namespace}/{row.name}", real, _nodes_text(row.model), verdict))
    for resource in operator:
        lines.append((f"operands of {resource}", "not created", "see `verify`", why))
    return table(lines, pad_last=False)
