"""Where the real DaemonSet controller and scheduler put every DaemonSet's pods, beside what `verify` predicts.

After apply, each DaemonSet the charts created (NFD's worker, the DRA driver's kubelet plugin, ...) has pods on
the nodes the real DaemonSet controller chose and the real kube-scheduler bound. `verify` predicts the same from
the rendered charts alone: it renders each release the sandbox installed (the very chart archive) with the
stack's values, models each pool's nodes from the pool's contract and the labels NFD and the operator would
add, and places each DaemonSet there (`verify/proof.py`, the prediction `verify` prints). The prediction is
computed by the `verify` layer and handed in (`Predictor`): this module only compares. The two must name the
same GPU nodes; the sandbox's CPU and control-plane nodes are outside verify's model and only shown.

The GPU Operator's operands are created by NVIDIA's own controller from its ClusterPolicy or GPUCluster
(components/gpu_operator.py) and compared here like every other DaemonSet: where it runs, an operand verify
predicts and the controller did not create is a row with no node. Where the controller does not run (the machine
gives it no mount namespace, or no build of its version), their rows carry verify's prediction with no cluster
answer (`real` None: model only) and the reason.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.cluster import Sandbox
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.rest import Rest
from themelio_gpu.sandbox.tools import Toolbox
from themelio_gpu.tables import table

WAIT_SECONDS = 60.0
QUIET_SECONDS = 12.0
"""How long pods the scheduler found no node for must stay so before that is its answer: longer than its longest
backoff (podMaxBackoffSeconds, 10 s by default), so a pod it would try again has been tried again."""
NODES_QUIET_SECONDS = 8.0
"""How long after the last change to a node's labels, taints or existence the DaemonSets are read: a node
Karpenter just launched is labelled by NFD, then by NVIDIA's controller, and only then does the DaemonSet
controller count it (until then every DaemonSet looks settled without it: seen in CI under load)."""
MODEL_ONLY = "created by the GPU Operator's controller, which does not run here ({}): verify's prediction only"
UNKNOWN = "verify renders no such DaemonSet from the cluster's charts"
RUNTIME = (
    "not compared: verify's prediction rests on labels the sandbox's nodes do not get ({}): NFD's and GPU Feature "
    "Discovery's workers read a real node's devices and run nothing here, and the GPU Operator's labels are its "
    "controller's only where it runs"
)


@dataclass(frozen=True)
class Predicted:
    """verify's prediction for one DaemonSet: on which of the sandbox's GPU nodes its pods run."""

    namespace: str
    name: str
    source: str
    """Where it comes from, as verify says: `chart <release>`, or the operator's resource."""
    in_chart: bool
    """The chart renders it, so Helm creates it in the sandbox; False: an operand of the GPU Operator."""
    nodes: Mapping[str, str]
    """Each GPU node of the sandbox -> "" where verify says its pods run, else verify's reason."""
    runtime_labels: tuple[str, ...] = ()
    """Labels NFD or the GPU Operator add at runtime that verify's verdict rests on, and the sandbox does not
    give its nodes (their workers run nothing here): the prediction cannot be compared."""
    pending: tuple[str, ...] = ()
    """GPU nodes where verify says a pod is created but never bound (only its claims stop it): Pending there."""


Predictor = Callable[[ClusterPlan, Sandbox, Toolbox], list[Predicted]]
"""verify's prediction for a sandbox (`themelio_gpu.verify.sandbox_prediction.predict`)."""


@dataclass
class DaemonSetRow:
    namespace: str
    name: str
    source: str
    real: list[str] | None
    """The GPU nodes its pods are bound to (the DaemonSet controller and the scheduler); None: not created in the
    sandbox (model only)."""
    model: list[str]
    """The GPU nodes verify predicts its pods run on."""
    pending: int = 0
    """Pods the controller created that the scheduler did not bind within the wait."""
    elsewhere: list[str] = field(default_factory=list)
    """Other nodes its pods run on: the sandbox's CPU and control-plane nodes, outside verify's model."""
    why_not: str = ""
    """verify's reason for one node where the two differ."""
    note: str = ""
    pending_model: int = 0
    """How many Pending pods verify predicts: on nodes where only their claims stop them."""

    @property
    def compared(self) -> bool:
        return self.real is not None and not self.note.startswith("not compared")

    @property
    def agrees(self) -> bool:
        if not self.compared:
            return True  # verify's prediction only: no cluster answer to compare it with
        return self.real == self.model and self.pending == self.pending_model and self.note != UNKNOWN


def installed_charts(plan: ClusterPlan, sandbox: Sandbox) -> dict[str, Path]:
    """Release -> the chart archive the sandbox installed it from: its own chart repository's package of the
    cached chart, or the local chart folder's archive the stack ships."""
    found = {}
    repository = sandbox.folder / "charts"
    for release in plan.releases:
        if release.archive is not None:
            found[release.name] = release.archive.source
            continue
        packaged = sorted(repository.glob(f"{release.chart}-*.tgz"))
        version = release.version.lstrip("v")
        matching = [p for p in packaged if p.name[len(release.chart) + 1 : -len(".tgz")].lstrip("v") == version]
        if not matching:
            raise SandboxError(
                f"the sandbox's chart repository ({repository}) has no {release.chart} {release.version}"
            )
        found[release.name] = matching[0]
    return found


def gpu_nodes(sandbox: Sandbox) -> dict[str, tuple[str, str]]:
    """The sandbox's GPU nodes: node -> (pool, kind), as it registered them."""
    nodes = sandbox.state().get("nodes", {})
    return {n: (str(v["pool"]), str(v["kind"])) for n, v in nodes.items() if v.get("pool")}


def bound_nodes(daemonset: Mapping[str, Any], pods: list[dict[str, Any]]) -> tuple[list[str], int]:
    owned = _owned(daemonset, pods)
    nodes = sorted(str(p["spec"]["nodeName"]) for p in owned if _bound(p))
    return nodes, len(owned) - len(nodes)


def settled(daemonsets: list[dict[str, Any]], pods: list[dict[str, Any]], refused: bool = False) -> bool:
    """Every DaemonSet's controller has caught up with its spec and made every pod it wants, and each is bound
    (with `refused`: bound, or one the scheduler found no node for: PodScheduled False, Unschedulable)."""
    for daemonset in daemonsets:
        status = daemonset.get("status") or {}
        if status.get("observedGeneration", 0) < daemonset["metadata"].get("generation", 0):
            return False
        nodes, pending = bound_nodes(daemonset, pods)
        if len(nodes) + pending != status.get("desiredNumberScheduled", 0):
            return False
        if pending and not (refused and all(_unschedulable(p) for p in _owned(daemonset, pods) if not _bound(p))):
            return False
    return True


def _owned(daemonset: Mapping[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    uid = daemonset["metadata"]["uid"]
    return [p for p in pods if any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])]


def _bound(pod: Mapping[str, Any]) -> bool:
    return bool(pod.get("spec", {}).get("nodeName"))


def _unschedulable(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in conditions
    )


def _last_node_change(nodes: list[dict[str, Any]]) -> float:
    """When a node was last created or its metadata or spec written (its managedFields' times; status updates,
    the kubelet's heartbeats, excluded), as seconds since the epoch; 0 with none."""
    times = []
    for node in nodes:
        metadata = node.get("metadata") or {}
        stamps = [metadata.get("creationTimestamp")]
        stamps += [f.get("time") for f in metadata.get("managedFields") or [] if f.get("subresource") != "status"]
        for stamp in stamps:
            with suppress(TypeError, ValueError):
                times.append(datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp())
    return max(times, default=0.0)


def _placement(daemonsets: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[tuple[str, list[str], int]]:
    """What changes while the controller and the scheduler work: each DaemonSet's bound nodes and pending pods."""
    return [(d["metadata"]["uid"], *bound_nodes(d, pods)) for d in daemonsets]


def compare(
    toolbox: Toolbox, sandbox: Sandbox, predicted: list[Predicted], operator_absent: str = "not started"
) -> list[DaemonSetRow]:
    """Each DaemonSet's bound nodes beside verify's, once the controller and the scheduler have settled: every
    pod bound, or those left refused by the scheduler and nothing changed for QUIET_SECONDS (or the wait ends).
    `operator_absent`: why NVIDIA's controller does not run here; empty: it runs, and its operands are compared."""
    api = Rest(sandbox.kubeconfig)
    deadline = time.monotonic() + WAIT_SECONDS
    last: list[tuple[str, list[str], int]] = []
    quiet_since = time.monotonic()
    while True:
        nodes_quiet = time.time() - _last_node_change(api.items("Node")) >= NODES_QUIET_SECONDS
        daemonsets = api.items("DaemonSet")
        pods = api.items("Pod")
        now = time.monotonic()
        placement = _placement(daemonsets, pods)
        if placement != last:
            last, quiet_since = placement, now
        quiet = now - quiet_since >= QUIET_SECONDS
        done = settled(daemonsets, pods) or (quiet and settled(daemonsets, pods, refused=True))
        if (done and nodes_quiet) or now > deadline:
            break
        time.sleep(0.5)
    return rows_of(daemonsets, pods, predicted, set(gpu_nodes(sandbox)), operator_absent)


def rows_of(
    daemonsets: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    predicted: list[Predicted],
    gpu: set[str],
    operator_absent: str = "not started",
) -> list[DaemonSetRow]:
    """The rows: every DaemonSet of the cluster beside its prediction, and every operand verify models only."""
    by_name = {(p.namespace, p.name): p for p in predicted}
    rows = []
    for daemonset in daemonsets:
        key = (daemonset["metadata"]["namespace"], daemonset["metadata"]["name"])
        bound, pending = bound_nodes(daemonset, pods)
        prediction = by_name.pop(key, None) or _by_pattern(by_name, key)
        model = sorted(n for n, why in prediction.nodes.items() if not why) if prediction else []
        note = UNKNOWN if prediction is None else ""
        if prediction is not None and prediction.runtime_labels:
            note = RUNTIME.format(", ".join(prediction.runtime_labels))
        row = DaemonSetRow(key[0], key[1], prediction.source if prediction else "?", sorted(set(bound) & gpu),
                           model, pending, sorted(set(bound) - gpu), note=note)  # fmt: skip
        row.pending_model = len(prediction.pending) if prediction else 0
        differing = sorted(set(row.real or ()) ^ set(model))
        if prediction and differing:
            first = differing[0]
            row.why_not = f"{first}: " + (prediction.nodes.get(first) or "verify says it runs here")
        rows.append(row)
    for prediction in by_name.values():
        model = sorted(n for n, why in prediction.nodes.items() if not why)
        created_here = prediction.in_chart or not operator_absent  # by Helm, or by NVIDIA's running controller
        real: list[str] | None = [] if created_here else None
        note = "" if created_here else MODEL_ONLY.format(operator_absent)
        rows.append(DaemonSetRow(prediction.namespace, prediction.name, prediction.source, real, model, note=note))
    return sorted(rows, key=lambda r: (r.real is None, r.namespace, r.name))


PLACEHOLDERS = {"<os>": r"[a-z0-9.]+", "<hash>": r"[a-z0-9]+"}
"""What verify writes for the parts of an operand's name the operator makes at runtime (the NVIDIADriver's
DaemonSet `nvidia-gpu-driver-<os>-<hash>`: the nodes' OS as NFD labels it, a hash of its spec)."""


def _by_pattern(by_name: dict[tuple[str, str], Predicted], key: tuple[str, str]) -> Predicted | None:
    """The prediction whose name, its placeholders filled in, is the DaemonSet's (taken from `by_name`)."""
    for namespace, name in by_name:
        if namespace != key[0] or "<" not in name:
            continue
        pattern = "".join(PLACEHOLDERS.get(part, re.escape(part)) for part in re.split(r"(<[a-z]+>)", name))
        if re.fullmatch(pattern, key[1]):
            return by_name.pop((namespace, name))
    return None


def _nodes_text(names: list[str]) -> str:
    return f"{len(names)}: {', '.join(names)}" if names else "none"


def as_table(rows: list[DaemonSetRow]) -> str:
    lines: list[tuple[str, ...]] = [
        ("daemonset", "GPU nodes it runs on (DaemonSet controller, scheduler)", "verify predicts", "agrees")
    ]
    for row in rows:
        if row.real is None:
            real = "not created here"
        else:
            real = _nodes_text(row.real) + (f" (+{row.pending} Pending)" if row.pending else "")
            real += f"; also on {', '.join(row.elsewhere)}" if row.elsewhere else ""
        verdict = row.note if not row.compared else "yes" if row.agrees else f"NO: {row.note or row.why_not}"
        model = _nodes_text(row.model) + (
            f" (+{row.pending_model} Pending: only claims stop them)" if row.pending_model else ""
        )
        if row.compared and not row.agrees and row.pending != row.pending_model and not row.why_not:
            verdict = f"NO: {row.pending} Pending where verify predicts {row.pending_model}"
        lines.append((f"{row.namespace}/{row.name}", real, model, verdict))
    return table(lines, pad_last=False)
