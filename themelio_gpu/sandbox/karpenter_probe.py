"""`sandbox probe`'s Karpenter rows: pending pods make Karpenter's own controller (components/karpenter.py) launch
the nodes of each Karpenter pool, and the node it made is read against the pool's contract.

Per Karpenter pool, first of the probe (every other row then finds one node per Karpenter pool, as the model
has it, nodes.model_nodes), in a namespace of its own:
1. a pod asking for one device of the pool's first offering (`nvidia.com/<offering>: 1`, the offering's node
   selector and the pool's `karpenter.sh/nodepool`, tolerating the pool's taints), on an empty pool: does
   Karpenter launch a node for it? The model: Karpenter launches for a pod only where an instance type's
   resources hold every extended resource it asks for. A device-plugin pool's instance types list its GPUs (as
   its nodes advertise them); a DRA pool's list none: the name is served by a DeviceClass's
   `extendedResourceName`, which Karpenter 1.14 does not read, so it launches nothing and says why in its log
   (`could not schedule pod`), which the row quotes;
2. a pod that asks for no device (a warm node's placeholder, `karpenter.sh/do-not-disrupt`, kept until the
   probe ends): Karpenter launches a node, and the row reads it against the pool's contract: the template's
   labels and taints, `karpenter.sh/nodepool`, an instance type and capacity type the pool allows, and on a DRA
   pool the ResourceSlice the slice writer published as it registered;
3. the pod of 1., once a node is there: where the real scheduler places it (through DRA on the launched node).
Nodes an earlier probe left are removed first (their NodeClaims deleted), so each pool starts empty. The nodes
launched are added to the sandbox's record of its nodes (`sandbox.json`), for the rows that follow.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from themelio_gpu import interrupts
from themelio_gpu.inputs.catalog.catalog import ResolvedOffering
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox import attempts
from themelio_gpu.sandbox.cluster import KUBECTL, Sandbox
from themelio_gpu.sandbox.components.karpenter import karpenter_pools
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.nodes import node_allocatable
from themelio_gpu.sandbox.outcomes import Kind, pod_outcome
from themelio_gpu.sandbox.placement import Ask, serves, tolerations_of
from themelio_gpu.sandbox.rest import Rest, path
from themelio_gpu.sandbox.tools import Toolbox
from themelio_gpu.tables import table

NAMESPACE = "themelio-karpenter-probe"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
OWN_TAINTS = ("karpenter.sh/", "node.kubernetes.io/")
"""Taints Karpenter and the node lifecycle controller set and clear themselves: not the pool's."""
LAUNCH_SECONDS = 120.0
"""How long Karpenter has to decide a pod (its batch window, a launch, the node's registration)."""
NOT_LAUNCHED = "could not schedule pod"
"""Karpenter's log message for a pod it launches nothing for (pkg/controllers/provisioning/scheduling)."""

T = TypeVar("T")


@dataclass
class KarpenterRow:
    pool: str
    tried: str
    expected: str
    real: str
    agrees: bool
    said: str = ""
    """Karpenter's own log line about the pod, when it launched nothing."""


def pool_offering(plan: ClusterPlan, contract: PoolContract) -> ResolvedOffering | None:
    """The first offering (in the cluster file's order) the pool serves under its own name."""
    order = list(plan.definition.offerings)
    ranked = sorted(plan.offerings, key=lambda o: order.index(o.name) if o.name in order else len(order))
    return next(
        (
            o
            for o in ranked
            if contract.name in plan.placements.get(o.name, ()) and serves(plan, o, contract, o.name)
        ),
        None,
    )


def expects_launch(contract: PoolContract, name: str) -> bool:
    """Karpenter's rule as modelled: an instance type of the pool lists the name in its resources."""
    return name in node_allocatable(contract)


def pool_tolerations(contract: PoolContract) -> list[dict[str, str]]:
    return [{"key": t.key, "operator": "Exists", "effect": t.effect} for t in contract.taints]


def node_problems(
    contract: PoolContract, allowed: Mapping[str, tuple[str, ...]], node: Mapping[str, Any]
) -> list[str]:
    """How the node Karpenter made differs from the pool's contract (and the instance and capacity types the pool
    allows)."""
    labels = node["metadata"].get("labels", {})
    problems = [
        f"label {k}={labels.get(k)} (the contract: {v})"
        for k, v in sorted(contract.labels.items())
        if labels.get(k) != v
    ]
    if labels.get(NODEPOOL_LABEL) != contract.name:
        problems.append(f"{NODEPOOL_LABEL}={labels.get(NODEPOOL_LABEL)}")
    for key, values in allowed.items():
        if labels.get(key) not in values:
            problems.append(f"{key}={labels.get(key)} (the pool allows {', '.join(values)})")
    own = {(t.key, t.value, t.effect) for t in contract.taints}
    found = {
        (t["key"], t.get("value", ""), t["effect"])
        for t in node.get("spec", {}).get("taints") or []
        if not t["key"].startswith(OWN_TAINTS)
    }
    problems += [f"taint {k}={v}:{e} missing" for k, v, e in sorted(own - found)]
    problems += [f"taint {k}={v}:{e} not the pool's" for k, v, e in sorted(found - own)]
    return problems


def _until(check: Callable[[], T], seconds: float = LAUNCH_SECONDS) -> T:
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


def karpenter_said(log: Path, pod: str) -> str:
    """Karpenter's `could not schedule pod` error for the pod, from its log (JSON lines), or ""."""
    if not log.is_file():
        return ""
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if NOT_LAUNCHED not in line or pod not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            return line.strip()
        if entry.get("Pod", {}).get("name") == pod:
            return f"{entry.get('message')}: {entry.get('error', '')}"
    return ""


def _claims(api: Rest, pool: str) -> list[dict[str, Any]]:
    return [c for c in api.items("NodeClaim") if c["metadata"].get("labels", {}).get(NODEPOOL_LABEL) == pool]


def _nodes(api: Rest, pool: str) -> list[dict[str, Any]]:
    listed = api.get(path("Node") + f"?labelSelector={NODEPOOL_LABEL}%3D{pool}")
    return list(listed["items"])


def _pod(name: str, ask: Ask, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    (pod,) = attempts.pod_objects(name, NAMESPACE, ask)
    if annotations:
        pod["metadata"]["annotations"] = dict(annotations)
    return pod


def _empty(api: Rest, pools: list[str]) -> None:
    """Remove what an earlier probe had Karpenter launch: each pool starts without a node."""
    for pool in pools:
        for claim in _claims(api, pool):
            api.delete("NodeClaim", None, claim["metadata"]["name"])
    if not _until(lambda: not any(_claims(api, p) or _nodes(api, p) for p in pools)):
        raise SandboxError(
            f"the nodes an earlier probe had Karpenter launch in {', '.join(pools)} are still there"
        )


def _bound(api: Rest, name: str) -> dict[str, Any]:
    def check() -> dict[str, Any]:
        pod = api.get(path("Pod", NAMESPACE, name))
        return pod if pod.get("spec", {}).get("nodeName") else {}

    return _until(check) or api.get(path("Pod", NAMESPACE, name))


def _probe_pool(plan: ClusterPlan, sandbox: Sandbox, api: Rest, contract: PoolContract) -> list[KarpenterRow]:
    karpenter = karpenter_pools(plan)[contract.name]
    allowed = {INSTANCE_TYPE: karpenter.instance_types, CAPACITY_TYPE: karpenter.capacity_types}
    log = Path(sandbox.state()["karpenter"]["log"])
    rows = []
    offering = pool_offering(plan, contract)
    selector = {NODEPOOL_LABEL: contract.name}
    tolerations = tuple(pool_tolerations(contract))
    gpu = f"gpu-{contract.name}"
    if offering is not None:
        name = offering.name
        ask = Ask(
            {name: 1}, None, {**offering.node_selector, **selector}, (*tolerations_of(offering), *tolerations)
        )
        api.create_all([_pod(gpu, ask)])
        launches = expects_launch(contract, name)
        expected = "launches a node" if launches else f"launches nothing: no instance type lists {name}"

        def decided() -> str:
            if _claims(api, contract.name):
                return "launched"
            return "said" if karpenter_said(log, gpu) else ""

        decision = _until(decided)
        said = karpenter_said(log, gpu)
        real = (
            f"launched NodeClaim {', '.join(c['metadata']['name'] for c in _claims(api, contract.name))}"
            if decision == "launched"
            else f"launched nothing: {said[:150]}"
            if said
            else f"no answer within {LAUNCH_SECONDS:.0f} s"
        )
        rows.append(
            KarpenterRow(
                contract.name,
                f"{name} x1 on the empty pool",
                expected,
                real,
                (decision == "launched") == launches and bool(decision),
                said,
            )
        )
    warm = f"node-{contract.name}"
    api.create_all([_pod(warm, Ask({}, None, selector, tolerations), {"karpenter.sh/do-not-disrupt": "true"})])
    pod = _bound(api, warm)
    node_name = pod.get("spec", {}).get("nodeName")
    expected = "launches a node with the pool's labels and taints, an instance and capacity type it allows"
    if not node_name:
        rows.append(
            KarpenterRow(contract.name, "a pod without a device", expected, "no node within the wait", False)
        )
        return rows
    node = api.get(path("Node", None, node_name))
    problems = node_problems(contract, allowed, node)
    labels = node["metadata"]["labels"]
    slices = (
        _until(
            lambda: [
                s for s in attempts.dra_items(api, "ResourceSlice") if s["spec"].get("nodeName") == node_name
            ],
            30.0,
        )
        if contract.dra
        else []
    )
    if contract.dra and not slices:
        problems.append("no ResourceSlice published within 30 s")
    devices = sum(len(s["spec"].get("devices", [])) for s in slices)
    real = (
        f"{node_name} ({labels.get(INSTANCE_TYPE)}, {labels.get(CAPACITY_TYPE)})"
        + (f", {devices} devices published" if contract.dra else "")
        + (": " + "; ".join(problems) if problems else ": the contract's labels and taints")
    )
    rows.append(KarpenterRow(contract.name, "a pod without a device", expected, real, not problems))
    _record(sandbox, {n["metadata"]["name"]: contract.name for n in _nodes(api, contract.name)})
    if offering is not None:
        placed = _bound(api, gpu)
        events = [] if placed.get("spec", {}).get("nodeName") else attempts.events(api, NAMESPACE)
        outcome = pod_outcome(placed, events, attempts.pool_of(sandbox))
        landed = outcome.kind is Kind.LANDED and outcome.pools == (contract.name,)
        real = f"{outcome.reason} ({contract.name})" if landed else outcome.describe()[:150]
        rows.append(
            KarpenterRow(
                contract.name,
                f"{offering.name} x1 once a node is there",
                f"lands on {contract.name}",
                real,
                landed,
            )
        )
        claims = attempts.claim_names(placed)
        api.delete("Pod", NAMESPACE, gpu)
        attempts.wait_gone(api, NAMESPACE, "Pod", [gpu])
        attempts.wait_gone(api, NAMESPACE, "ResourceClaim", claims)
    return rows


def _record(sandbox: Sandbox, launched: Mapping[str, str]) -> None:
    """Add the launched nodes to the sandbox's record of its nodes (`sandbox.json`), as Karpenter's."""
    state = sandbox.state()
    state["nodes"] = {
        **{
            n: v
            for n, v in state.get("nodes", {}).items()
            if v.get("kind") != "karpenter" or v.get("pool") not in launched.values()
        },
        **{n: {"pool": p, "kind": "karpenter"} for n, p in launched.items()},
    }
    sandbox.state_file.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")


def probe_karpenter(plan: ClusterPlan, sandbox: Sandbox) -> list[KarpenterRow]:
    """Every Karpenter pool's rows; the warm pods stay until `end`."""
    if "karpenter" not in sandbox.state():
        return []
    contracts = {c.name: c for c in plan.pools}
    pools = [contracts[name] for name in karpenter_pools(plan)]
    api = Rest(sandbox.kubeconfig)
    refused = api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    if refused is not None and "already exists" not in refused:
        raise SandboxError(f"creating namespace {NAMESPACE}: {refused}")
    _empty(api, [p.name for p in pools])
    return [row for contract in pools for row in _probe_pool(plan, sandbox, api, contract)]


def end(sandbox: Sandbox, toolbox: Toolbox) -> None:
    """The warm pods go (Karpenter then removes their nodes, or the NodePool's removal does); nothing to do in a
    sandbox without Karpenter."""
    if "karpenter" not in sandbox.state():
        return
    interrupts.run([str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "delete", "namespace",
                    NAMESPACE, "--ignore-not-found", "--wait=true", "--timeout=60s"])  # fmt: skip


def as_dicts(rows: list[KarpenterRow]) -> list[dict[str, Any]]:
    return [{"pool": r.pool, "tried": r.tried, "karpenter": r.real, "model": r.expected, "karpenterLog": r.said,
             "agrees": r.agrees} for r in rows]  # fmt: skip


def as_table(rows: list[KarpenterRow]) -> str:
    lines = [("Karpenter pool", "tried", "Karpenter's answer, then the scheduler's", "model", "agrees")]
    lines += [(r.pool, r.tried, r.real, r.expected, "yes" if r.agrees else "NO") for r in rows]
    return table(lines, pad_last=False)
