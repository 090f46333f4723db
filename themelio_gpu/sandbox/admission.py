"""`sandbox probe`'s quota half: the real API server's quota admission, and the scheduler's claims, asked about
every path to a GPU, each answer beside the quota model's.

For each offering a namespace gets the ResourceQuota `catalog quota CLUSTER NS OFFERING=1` writes (`plan/quota.py`
resolves the grant and the keys). Then the grant's pod, one more, and every other way to a device: each other
name the cluster serves, each class's implicit name `deviceclass.resource.kubernetes.io/<class>`, and a
ResourceClaim of each class (the stack's and the DRA driver's). Each attempt is the very pod of a placement row
(`probe.py`, in a namespace without quota: its control, which must land where the placement model says), or
that row's claim.

The model's answer is computed from the quota model, never written down: the keys Kubernetes charges each
attempt (`k8s/quota.py`: the pod's names at admission, and for a pod that lands through DRA the claim the
scheduler makes for it, the pod's own key skipped; a ResourceClaim's class keys) against the namespace's `hard`
and what is used so far: refused at admission by the keys exceeded, or admitted and then refused at the
scheduler's claim by those keys, or admitted and placed as its control. The cluster's answer is the API
server's refusal (its message parsed for the keys), or the pod's fate: bound with a device, or Pending for the
reason the scheduler gives (parsed: quota, naming the keys, or no node fits), or not decided within the wait.
The grant must end with an allocated device of the offering; one more must be refused by admission.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from themelio_gpu import interrupts
from themelio_gpu.k8s.dra import implicit_name
from themelio_gpu.k8s.quota import claim_charges, exceeded, pod_charges, requests_key
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.plan.quota import ClusterQuotaPlan, plan_quota, resolve_grants
from themelio_gpu.render import contracts
from themelio_gpu.sandbox import attempts, probe
from themelio_gpu.sandbox.cluster import Sandbox
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.outcomes import ADMITTED, Kind, Outcome, landed, no_fit, pod_outcome, refusal
from themelio_gpu.sandbox.placement import Planned, class_selectors, planned_rows
from themelio_gpu.sandbox.rest import Rest
from themelio_gpu.sandbox.tools import Toolbox
from themelio_gpu.tables import table


@dataclass
class Attempt:
    tried: str
    control: Planned
    """The placement row whose pod (or claim) this is: it must land without the quota."""
    claim_class: str | None = None
    """A ResourceClaim of this class is created, not the control's pod."""


@dataclass
class QuotaRow:
    namespace: str
    grant: str
    """The offering granted one device in the namespace (`catalog quota ... OFFERING=1`)."""
    tried: str
    control: str
    """The placement row that tries the same ask without the quota."""
    expected: Outcome
    real: Outcome | None = None
    devices: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    uncompared: str = ""
    """A pod whose control is not compared (its placement is the model's answer only) is not either."""
    slices: str = ""
    """Whose ResourceSlices the attempt ran on (probe.whose_slices)."""

    @property
    def agrees(self) -> bool:
        if self.uncompared:
            return True
        return self.real is not None and self.real.agrees_with(self.expected) and not self.problems


def _attempts(plan: ClusterPlan, granted: str) -> list[Attempt]:
    """The grant, one more, then every other path to a device, each tied to its placement row."""
    rows = {row.key: row for row in planned_rows(plan)}
    found = [Attempt(f"the grant ({granted})", rows[granted]), Attempt(f"one more ({granted})", rows[granted])]
    found += [Attempt(f"pod asking for {n}", rows[n]) for n in plan.advertised_names if n != granted]
    for device_class in class_selectors(plan):
        implicit = rows[implicit_name(device_class)]
        found.append(Attempt(f"pod asking for {implicit.key}", implicit))
        claim = rows[f"ResourceClaim of {device_class}"]
        found.append(Attempt(f"ResourceClaim of {device_class}", claim, claim_class=device_class))
    return found


@dataclass
class Ledger:
    """The quota model of one namespace: its `hard`, and what the attempts so far are charged."""

    plan: ClusterPlan
    hard: dict[str, str]
    used: dict[str, int] = field(default_factory=dict)
    held: dict[tuple[str, str], int] = field(default_factory=dict)
    """(pool, unit) -> devices held by the attempts that landed: the next attempts cannot have them."""

    def _charge(self, charges: dict[str, int]) -> tuple[str, ...]:
        refused = exceeded(self.hard, self.used, charges)
        if not refused:
            for key, amount in charges.items():
                self.used[key] = self.used.get(key, 0) + amount
        return refused

    def admit(self, attempt: Attempt) -> Outcome | None:
        """Quota admission's answer when the object is created (None: admitted, a pod to be placed next)."""
        classes = class_selectors(self.plan)
        if attempt.claim_class is not None:
            refused = self._charge(claim_charges(attempt.claim_class, classes[attempt.claim_class][1]))
            return Outcome(Kind.REFUSED, keys=refused) if refused else ADMITTED
        refused = self._charge(pod_charges(attempt.control.ask.limits))
        return Outcome(Kind.REFUSED, keys=refused) if refused else None

    def _free(self, room: dict[str, int], pool: str) -> int:
        return sum(n - self.held.get((pool, unit), 0) for unit, n in room.items())

    def place(self, attempt: Attempt) -> Outcome:
        """An admitted pod's fate: its control's, where a device is still free (the namespace's earlier pods hold
        theirs), unless quota refuses the claim the scheduler makes for it on a DRA pool (charged to the class's
        keys, without the one the pod paid)."""
        control = attempt.control
        if control.expected.kind is not Kind.LANDED:
            return control.expected
        count = control.ask.count
        free = [p for p in control.expected.pools if self._free(dict(control.room.get(p, {})), p) >= count]
        if not free:
            return no_fit(f"this namespace's earlier pods hold the devices of {', '.join(control.expected.pools)}")
        pools = {p.name: p for p in self.plan.pools}
        ((name, _),) = control.ask.limits.items()
        device_class = _class_for(self.plan, name)
        if device_class is not None and any(pools[p].dra for p in free):
            classes = class_selectors(self.plan)
            refused = self._charge(
                claim_charges(device_class, classes[device_class][1], count, requests_key(name))
            )
            if refused:
                free = [p for p in free if not pools[p].dra]
                if not free:
                    return Outcome(Kind.QUOTA_PENDING, keys=refused)
        if len(free) == 1:  # where it lands is known: its device is held
            self.hold(control, free[0])
        return landed(free)

    def hold(self, control: Planned, pool: str) -> None:
        """A device of the pool that the control's ask can take is held from now on."""
        room = control.room.get(pool, {})
        unit = next((u for u, n in room.items() if n - self.held.get((pool, u), 0) > 0), None)
        if unit is not None:
            self.held[(pool, unit)] = self.held.get((pool, unit), 0) + control.ask.count

    def answer(self, first: bool, attempt: Attempt) -> Outcome:
        """The model's answer for the next attempt: created (quota admission), then, a pod admitted, placed (the
        scheduler, and the quota admission of its claim). A Pending pod but the first is deleted once read, and
        its charges returned."""
        admitted = self.admit(attempt)
        answer = admitted if admitted is not None else self.place(attempt)
        if not first and admitted is None and answer.pending:
            for key, amount in pod_charges(attempt.control.ask.limits).items():
                self.used[key] = self.used.get(key, 0) - amount
        return answer

    def observe(self, attempt: Attempt, expected: Outcome, real: Outcome | None) -> None:
        """Where the model lets a pod land on several pools, the pool it landed on holds its device from now on:
        the model's answers for the next attempts are conditioned on the cluster's choice among those it allows."""
        ambiguous = expected.kind is Kind.LANDED and len(expected.pools) > 1
        where = real.pools[0] if real is not None and real.kind is Kind.LANDED and real.pools else ""
        if ambiguous and where in expected.pools:
            self.hold(attempt.control, where)


def _class_for(plan: ClusterPlan, name: str) -> str | None:
    """The DeviceClass a pod's request for `name` is allocated from: the one mapping it (`validate` allows one),
    or the class an implicit name names."""
    classes = class_selectors(plan)
    mapping = [c for c, (_, extended, _) in classes.items() if extended == name]
    if mapping:
        return mapping[0]
    return next((c for c in classes if implicit_name(c) == name), None)


def expectations(plan: ClusterPlan, hard: dict[str, str], found: list[Attempt]) -> list[Outcome]:
    """The model's answer for each attempt, in the order the probe makes them (`Ledger.answer`), where no pod
    the model lets land on several pools has landed yet."""
    ledger = Ledger(plan, hard)
    return [ledger.answer(index == 0, attempt) for index, attempt in enumerate(found)]


def _objects(namespace: str, index: int, attempt: Attempt) -> list[dict[str, Any]]:
    name = f"q-{index}"
    if attempt.claim_class is not None:
        return [attempts.claim_object(name, namespace, attempt.claim_class)]
    return attempts.pod_objects(name, namespace, attempt.control.ask)


def _create_each(api: Rest, documents: list[dict[str, Any]]) -> dict[str, str]:
    """Create each object, one request each; returns the refusal message of each object the API server refused,
    by name."""
    refused = {}
    for document in documents:
        message = api.create(document)
        if message is not None:
            refused[document["metadata"]["name"]] = message
    return refused


def quota_probe(
    plan: ClusterPlan, sandbox: Sandbox, toolbox: Toolbox, published: probe.Published | None = None
) -> list[QuotaRow]:
    """Per offering, a namespace granted one device of it; every attempt's answer beside the model's."""
    quota = plan_quota(plan)
    api = Rest(sandbox.kubeconfig)
    published = published or probe.read_published(api)
    rows: list[QuotaRow] = []
    for offering, namespace in zip(plan.offerings, namespaces(plan), strict=True):
        grants, problems = resolve_grants(quota, plan, [(offering.name, 1)])
        if problems:
            raise SandboxError(f"catalog quota {offering.name}=1: {problems}")
        rows += _namespace(plan, sandbox, api, published, quota, namespace, offering.name, grants)
    return rows


def namespaces(plan: ClusterPlan) -> list[str]:
    """The namespace of each offering's grant."""
    return [f"themelio-quota-{number}" for number, _ in enumerate(plan.offerings)]


def _namespace(
    plan: ClusterPlan,
    sandbox: Sandbox,
    api: Rest,
    published: probe.Published,
    quota: ClusterQuotaPlan,
    namespace: str,
    offering: str,
    grants: dict[str, int],
) -> list[QuotaRow]:
    hard = quota.hard(grants)
    granted = next(iter(grants))  # where `catalog quota` puts the grant: a migrating offering's legacy name
    found = _attempts(plan, granted)
    ledger = Ledger(plan, hard)
    rows: list[QuotaRow] = []
    api.fresh_namespace(namespace)
    try:
        api.create_all(
            [contracts.resource_quota(contracts.WALDUR_RESOURCE_QUOTA_NAME, namespace, hard, plan.names)]
        )
        _wait_quota_ready(api, namespace)
        # One attempt at a time, each pod until the scheduler has decided it. A pod left Pending is deleted (but
        # the grant's, whose charge one more must meet): while the scheduler retries it, its in-flight
        # allocation would hide a device from the next attempt.
        for index, attempt in enumerate(found):
            name = f"q-{index}"
            uncompared = "" if attempt.claim_class else attempt.control.uncompared
            row = QuotaRow(namespace, offering, attempt.tried, attempt.control.key,
                           ledger.answer(index == 0, attempt), uncompared=uncompared)  # fmt: skip
            rows.append(row)
            refused = _create_each(api, _objects(namespace, index, attempt))
            decided = {} if refused or attempt.claim_class else attempts.wait_decided(api, namespace, [name])
            bound = bool(decided.get(name, {}).get("spec", {}).get("nodeName"))
            events = [] if bound or not decided else attempts.events(api, namespace)
            _read(plan, sandbox, api, published, row, attempt, name, refused, decided, events)
            row.slices = probe.whose_slices(
                decided.get(name, {}), attempt.control, published.publishers, sandbox, plan
            )
            ledger.observe(attempt, row.expected, row.real)
            if index and decided and not bound:
                api.delete("Pod", namespace, name)
    finally:
        with interrupts.deferred():
            _clear(api, namespace)
    return rows


def _clear(api: Rest, namespace: str) -> None:
    """Delete the namespace, its pods first, and wait until their claims are gone: their devices are free again
    for the next namespace's attempts, which the model gives all of them."""
    pods = [p["metadata"]["name"] for p in api.items("Pod", namespace)]
    for name in pods:
        api.delete("Pod", namespace, name)
    claims = [c["metadata"]["name"] for c in attempts.dra_items(api, "ResourceClaim", namespace)]
    for name in claims:
        api.delete("ResourceClaim", namespace, name)
    left = attempts.wait_gone(api, namespace, "ResourceClaim", claims)
    api.delete_namespace(namespace, wait=False)  # `sandbox probe` waits for it at its end
    if left:
        raise SandboxError(f"the claims in {namespace} were not removed within the wait: {', '.join(left)}")


def _read(
    plan: ClusterPlan,
    sandbox: Sandbox,
    api: Rest,
    published: probe.Published,
    row: QuotaRow,
    attempt: Attempt,
    name: str,
    refused: dict[str, str],
    pods: dict[str, dict[str, Any]],
    events: list[dict[str, Any]],
) -> None:
    if name in refused:
        row.real = refusal(refused[name])
        return
    if attempt.claim_class is not None:
        row.real = ADMITTED
        return
    pod = pods.get(name)
    if pod is None:
        raise SandboxError(f"quota attempt {name} in {row.namespace} ({row.tried}) vanished")
    row.real = pod_outcome(pod, events, attempts.pool_of(sandbox))
    if row.real.kind is Kind.LANDED:
        checked = probe.Row(row.tried, attempt.control.ask.count, row.expected, "")
        claims = attempts.claim_names(pod)
        probe.read_devices(plan, checked, attempt.control, pod, claims, published, api, row.namespace)
        row.devices, row.problems = checked.devices, checked.problems
        if not row.devices:
            row.problems.append("bound, but no device was allocated")


def _wait_quota_ready(api: Rest, namespace: str) -> None:
    """Quota admission refuses nothing until the quota controller has written the quota's status."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        items = api.items("ResourceQuota", namespace)
        if items and items[0].get("status", {}).get("hard"):
            return
        time.sleep(0.2)
    raise SandboxError(f"the ResourceQuota in {namespace} got no status in 30 s")


def as_dicts(rows: list[QuotaRow]) -> list[dict[str, Any]]:
    return [
        {
            "namespace": r.namespace,
            "grant": r.grant,
            "tried": r.tried,
            "control": r.control,
            "cluster": probe.outcome_dict(r.real),
            "model": probe.outcome_dict(r.expected),
            "devices": r.devices,
            "problems": r.problems,
            "uncompared": r.uncompared,
            "slices": r.slices,
            "agrees": r.agrees,
        }
        for r in rows
    ]


def quota_table(rows: list[QuotaRow]) -> str:
    lines = [("namespace", "grant", "tried", "cluster's answer", "slices", "quota model", "agrees")]
    for row in rows:
        verdict = row.uncompared or (
            "yes" if row.agrees else "NO" + (": " + "; ".join(row.problems) if row.problems else "")
        )
        got = probe.answer(row.real) + (f" [{'; '.join(row.devices)}]" if row.devices else "")
        lines.append((row.namespace, row.grant, row.tried, got, row.slices or "-", row.expected.describe()[:70],
                      verdict))  # fmt: skip
    return table(lines, pad_last=False)
