"""`sandbox probe`: ask the real scheduler for every GPU name and class the cluster serves, the way users do.

Each row of `placement.py` becomes a pod (and a ResourceClaimTemplate for a claim), submitted one at a time
(pods that share devices would take each other's), read once the real kube-scheduler has decided it, then
deleted with its claims before the next. The scheduler places it through DRA (a ResourceClaim it makes from the
DeviceClass whose `extendedResourceName` is the name, or the pod's own claim, allocated from the ResourceSlices)
or, on a device-plugin pool, by the node's allocatable. Each row shows both answers: where the pod landed and
which devices it got, or the scheduler's own reason for Pending (parsed: no node fits, quota, or neither), and
the model's. A row agrees when the outcome is the model's, and every allocated device meets the offering's
definition (product, MIG profile, a capability's memory, architecture, compute capability and driver floors:
`dryrun.trial.violations`), matches the model's selector of its class in the offline CEL evaluator, and matches
the live DeviceClass's selectors there too. A pod the scheduler does not decide within the wait fails its row.
`admission.py` asks quota admission, `daemonsets.py` the DaemonSet controller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from themelio_gpu import interrupts
from themelio_gpu.dryrun.cel_kubernetes import CelError, compile_selector
from themelio_gpu.dryrun.resourceslices import Device, parse_resourceslices
from themelio_gpu.dryrun.trial import violations
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox import attempts, slice_compare
from themelio_gpu.sandbox.attempts import DeviceKey
from themelio_gpu.sandbox.cluster import Sandbox
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.outcomes import Kind, Outcome, pod_outcome
from themelio_gpu.sandbox.placement import Planned, planned_rows
from themelio_gpu.sandbox.rest import Rest, path
from themelio_gpu.sandbox.tools import Toolbox
from themelio_gpu.tables import table

NAMESPACE = "themelio-probe"


@dataclass
class Row:
    key: str
    """What was tried: a name (`x9`: that many), an implicit name, a ResourceClaim of a class, a queue's pod."""
    count: int
    expected: Outcome
    """The model's answer."""
    model: str
    """Which model answered, on what."""
    real: Outcome | None = None
    """The cluster's answer (None: not tried)."""
    devices: list[str] = field(default_factory=list)
    """What was allocated: `product profile memory` per device, or the device plugin's count."""
    problems: list[str] = field(default_factory=list)
    """What the allocated devices do wrong (the offering's definition, the CEL evaluator)."""
    cel_checked: int = 0
    """Allocated devices the offline CEL evaluator was asked about."""
    uncompared: str = ""
    """Why the row is shown but not compared with the model."""
    slices: str = ""
    """Whose ResourceSlices the row ran on (slice_compare.publishers): of the node it landed on, else of the
    nodes of the pools that serve it; `driver` (NVIDIA's DRA driver), `sandbox`, or `none` (the device plugin)."""

    @property
    def agrees(self) -> bool:
        if self.uncompared:
            return True
        return self.real is not None and self.real.agrees_with(self.expected) and not self.problems


@dataclass(frozen=True)
class Published:
    """What the cluster publishes, read once: its devices (raw and parsed) and its DeviceClasses' selectors."""

    raw: dict[DeviceKey, dict[str, Any]]
    devices: dict[DeviceKey, Device]
    classes: dict[str, list[str]]
    nodes: dict[str, dict[str, Any]]
    publishers: dict[str, str] = field(default_factory=dict)
    """Node -> whose slices it has (slice_compare.publishers)."""


def read_published(api: Rest) -> Published:
    slices = attempts.dra_items(api, "ResourceSlice")
    parsed = parse_resourceslices(json.dumps({"apiVersion": "v1", "kind": "List", "items": slices}))
    classes = {c["metadata"]["name"]: _selectors(c) for c in attempts.dra_items(api, "DeviceClass")}
    nodes = {n["metadata"]["name"]: n for n in api.items("Node")}
    devices = {(d.driver, d.pool, d.name): d for d in parsed}
    return Published(attempts.devices_by_key(slices), devices, classes, nodes, slice_compare.publishers(slices))


def _selectors(device_class: dict[str, Any]) -> list[str]:
    return [s["cel"]["expression"] for s in device_class.get("spec", {}).get("selectors") or [] if "cel" in s]


def probe(plan: ClusterPlan, sandbox: Sandbox, toolbox: Toolbox) -> list[Row]:
    """Every planned row, one pod at a time, in a namespace of its own that is deleted at the end."""
    api = Rest(sandbox.kubeconfig)
    api.fresh_namespace(NAMESPACE)
    try:
        published = read_published(api)
        return [_try(plan, sandbox, api, published, i, planned) for i, planned in enumerate(planned_rows(plan))]
    finally:
        with interrupts.deferred():
            api.delete_namespace(NAMESPACE, wait=False)  # `sandbox probe` waits for it at its end


def _try(
    plan: ClusterPlan, sandbox: Sandbox, api: Rest, published: Published, index: int, planned: Planned
) -> Row:
    row = Row(planned.key, planned.ask.count, planned.expected, planned.model, uncompared=planned.uncompared)
    name = f"probe-{index}"
    objects = attempts.pod_objects(name, NAMESPACE, planned.ask)
    api.create_all(objects)
    pod = attempts.wait_decided(api, NAMESPACE, [name]).get(name)
    if pod is None:
        raise SandboxError(f"probe pod {name} ({planned.key}) vanished before the scheduler decided it")
    bound = bool(pod.get("spec", {}).get("nodeName"))
    events = [] if bound else attempts.events(api, NAMESPACE)  # why it is Pending, when it is
    row.real = pod_outcome(pod, events, attempts.pool_of(sandbox))
    row.slices = whose_slices(pod, planned, published.publishers, sandbox, plan)
    claims = attempts.claim_names(pod)
    if row.real.kind is Kind.LANDED:
        read_devices(plan, row, planned, pod, claims, published, api)
    api.delete("Pod", NAMESPACE, name)
    left = attempts.wait_gone(api, NAMESPACE, "ResourceClaim", claims)
    if left:
        raise SandboxError(f"the claims of probe pod {name} were not removed within the wait: {', '.join(left)}")
    if len(objects) > 1:
        api.delete("ResourceClaimTemplate", NAMESPACE, name)
    return row


def whose_slices(
    pod: dict[str, Any], planned: Planned, publishers: dict[str, str], sandbox: Sandbox, plan: ClusterPlan
) -> str:
    """Whose slices the row ran on: its node's, else those of the nodes of the pools the model names or that
    serve its offering (the scheduler tried them all); `none`: the device plugin's allocatable, no slice."""
    node = pod.get("spec", {}).get("nodeName")
    serving = set(planned.expected.pools)
    if planned.offering is not None:
        serving |= set(plan.placements.get(planned.offering.name, ()))
    pools = {name: str(n.get("pool")) for name, n in sandbox.state().get("nodes", {}).items()}
    nodes = [node] if node else [n for n, pool in pools.items() if pool in serving]
    return ", ".join(sorted({publishers.get(n, "none") for n in nodes})) or "none"


def read_devices(
    plan: ClusterPlan,
    row: Row,
    planned: Planned,
    pod: dict[str, Any],
    claims: list[str],
    published: Published,
    api: Rest,
    namespace: str = NAMESPACE,
) -> None:
    """The devices the landed pod got, each checked against the offering's definition and the CEL evaluator."""
    node = pod["spec"]["nodeName"]
    if not claims:  # the device-plugin path: the node advertises the name
        for resource, count in planned.ask.limits.items():
            advertised = published.nodes.get(node, {}).get("status", {}).get("allocatable", {}).get(resource)
            row.devices.append(f"{count} of {advertised} {resource} (device plugin)")
            if advertised is None or int(advertised) < count:
                row.problems.append(f"bound to {node}, which advertises {advertised or 'no'} {resource}")
        return
    got = 0
    for claim_name in claims:
        claim = api.get(path("ResourceClaim", namespace, claim_name))
        classes = attempts.request_classes(claim)
        for request, key in attempts.allocation(claim):
            got += 1
            row.devices.append(attempts.describe_device(published.raw.get(key, {})))
            device = published.devices.get(key)
            if device is None:
                row.problems.append(f"allocated {key[2]} on {key[1]}, which no ResourceSlice the probe read has")
                continue
            check_device(plan, row, planned, device, classes.get(request, ""), published)
    if got != planned.ask.count:
        row.problems.append(f"got {got} devices for {planned.ask.count}")


def check_device(
    plan: ClusterPlan, row: Row, planned: Planned, device: Device, device_class: str, published: Published
) -> None:
    what = f"{device.name} on {device.node}"
    if planned.offering is not None:
        for reason in violations(planned.offering, device, plan.products):
            row.problems.append(f"{what} is not a device of {planned.offering.name}: {reason}")
    checks = [(f"the model's selector of {planned.selector[0]}", planned.selector[1])] if planned.selector else []
    if device_class not in published.classes:
        row.problems.append(f"{what} was allocated for class {device_class!r}, which the cluster does not have")
    checks += [(f"{device_class}'s live selector", s) for s in published.classes.get(device_class, [])]
    row.cel_checked += 1
    for label, expression in checks:
        try:
            matched = compile_selector(expression).evaluate(device)
        except CelError as error:
            row.problems.append(f"the offline CEL evaluator fails on {label}: {error}")
            continue
        if not matched:
            row.problems.append(f"the scheduler allocated {what}, but the offline CEL evaluator says {label} "
                                f"{expression!r} does not match it")  # fmt: skip


def outcome_dict(outcome: Outcome | None) -> dict[str, Any] | None:
    if outcome is None:
        return None
    return {"kind": outcome.kind.name.lower(), "pools": list(outcome.pools), "keys": list(outcome.keys),
            "reason": outcome.reason}  # fmt: skip


def as_dicts(rows: list[Row]) -> list[dict[str, Any]]:
    return [
        {
            "tried": r.key,
            "count": r.count,
            "cluster": outcome_dict(r.real),
            "model": {**(outcome_dict(r.expected) or {}), "by": r.model},
            "devices": r.devices,
            "problems": r.problems,
            "celChecked": r.cel_checked,
            "uncompared": r.uncompared,
            "slices": r.slices,
            "agrees": r.agrees,
        }
        for r in rows
    ]


def answer(outcome: Outcome | None) -> str:
    """The cluster's answer in a table cell: where it landed, or why not (the scheduler's words, cut)."""
    if outcome is None:
        return "not tried"
    if outcome.kind is Kind.LANDED:
        return f"{outcome.reason} ({', '.join(outcome.pools)})"
    if outcome.kind in (Kind.REFUSED, Kind.QUOTA_PENDING):
        return outcome.describe()
    return f"{outcome.kind.value}: {outcome.reason[:90]}" if outcome.reason else outcome.kind.value


def as_table(rows: list[Row]) -> str:
    header = ("tried", "count", "cluster's answer", "devices", "slices", "model", "agrees")
    lines = [header]
    for row in rows:
        verdict = row.uncompared or (
            "yes" if row.agrees else "NO" + (": " + "; ".join(row.problems) if row.problems else "")
        )
        lines.append((row.key, str(row.count), answer(row.real), "; ".join(row.devices) or "-", row.slices or "-",
                      f"{row.expected.describe()[:60]} ({row.model})", verdict))  # fmt: skip
    return table(lines, pad_last=False)
