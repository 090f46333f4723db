"""Which Jobs `sandbox probe` submits through Kueue, and what this tool's model says Kueue does with each.

The Jobs, per cluster, from its Kueue plan (plan/kueue.py, what `kueue.yaml` is rendered from):
- per ClusterQueue with a flavor: one Job that fits its quota (one device of a name it holds quota for) and one
  that exceeds it (one device more than its largest flavor holds of that name);
- per reserved pool a queue grants: one Job through that queue (from one of its namespaces) for a name the pool's
  flavor counts its devices toward, and the same Job through the queue `gpus`, which does not grant it.
Each Job's pod asks as the offering's users ask: `name: count` in its limits, the offering's node selector and
tolerations, the queue's label; the namespace is the queue's first (a probe namespace for `gpus`, whose
LocalQueues users create themselves).

The model of Kueue's admission (Kueue 0.19's flavor assigner, pkg/scheduler/flavorassigner): the queue admits
from the namespaces its selector names; it tries its flavors in order and takes the first whose node labels the
pod's node selector does not contradict (on the flavor's own label keys), whose NoSchedule and NoExecute taints
the pod's tolerations with the flavor's own tolerate, and whose nominal quota of the name holds the request
(nothing else runs: the probe submits one Job at a time). Admitted, the pod gets the flavor's node labels and
tolerations, and lands where validate's placement says such a pod lands: the pools that serve the name, that
its selector and tolerations reach, with a node holding as many devices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from themelio_gpu.inputs.catalog.catalog import ResolvedOffering
from themelio_gpu.k8s.scheduling import BLOCKING_EFFECTS, untolerated
from themelio_gpu.plan.kueue import DEFAULT_QUEUE, Flavor, KueuePlan, plan_kueue, reserved_flavor_name
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.placement import Ask, per_node, reaches, serves, tolerations_of

PROBE_NAMESPACE = "themelio-kueue-probe"
"""Where the Jobs through the queue `gpus` are submitted, with a LocalQueue `gpus` of the probe's own."""
MODEL = "Kueue's flavor assignment as modelled (kueue_model.py)"


@dataclass(frozen=True)
class JobAsk:
    queue: str
    """The ClusterQueue, and the LocalQueue of the same name the Job's label names."""
    namespace: str
    name: str
    count: int
    selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class Admission:
    """What becomes of a Job: admitted in a flavor (its pod landing on one of `pools`, or Pending when there is
    none), or not admitted; `reason` says why, in the model's words or Kueue's and the scheduler's."""

    admitted: bool
    flavor: str = ""
    pools: tuple[str, ...] = ()
    reason: str = ""

    def describe(self) -> str:
        if not self.admitted:
            return f"not admitted: {self.reason}" if self.reason else "not admitted"
        where = f"lands on {' or '.join(self.pools)}" if self.pools else f"Pending ({self.reason})"
        return f"admitted in {self.flavor}, {where}"


@dataclass(frozen=True)
class PlannedJob:
    key: str
    """What the row tries, as its table shows it (unique in the cluster)."""
    ask: JobAsk
    expected: Admission
    offering: ResolvedOffering | None


def offering_of(plan: ClusterPlan, name: str) -> ResolvedOffering | None:
    """The offering a name is of: its own, or the one whose migration alias it is."""
    return next((o for o in plan.offerings if name == o.name or name in {a.name for a in o.aliases}), None)


def _flavor_tolerations(flavor: Flavor) -> list[dict[str, str]]:
    return [{"key": key, "operator": "Exists", "effect": effect} for key, effect in flavor.tolerations]


def landing(plan: ClusterPlan, ask: JobAsk, flavor: Flavor) -> tuple[str, ...]:
    """The pools an admitted Job's pod lands on: with the flavor's labels and tolerations added, where validate's
    placement lands such a pod."""
    offering = offering_of(plan, ask.name)
    if offering is None:
        return ()
    pod = Ask(
        {ask.name: ask.count},
        None,
        {**ask.selector, **flavor.node_labels},
        (*ask.tolerations, *_flavor_tolerations(flavor)),
    )
    return tuple(
        p.name
        for p in plan.pools
        if serves(plan, offering, p, ask.name) and reaches(pod, p) and per_node(offering, p, ask.name) >= ask.count
    )


def assign(plan: ClusterPlan, kueue: KueuePlan, ask: JobAsk) -> Admission:
    """The model's answer for a Job (the module's docstring)."""
    queue = next(q for q in kueue.queues if q.name == ask.queue)
    if queue.namespaces is not None and ask.namespace not in queue.namespaces:
        return Admission(
            False, reason=f"namespace {ask.namespace} is not one ClusterQueue {queue.name} admits from"
        )
    if ask.name not in kueue.covered or not queue.flavors:
        return Admission(False, reason=f"ClusterQueue {queue.name} holds no quota of {ask.name}")
    reasons = []
    for flavor in queue.flavors:
        labels = flavor.node_labels
        if any(key in labels and labels[key] != value for key, value in ask.selector.items()):
            reasons.append(f"{flavor.name}: the node selector contradicts its labels")
            continue
        hard = [t for t in flavor.node_taints if t.effect in BLOCKING_EFFECTS]
        missing = untolerated([*ask.tolerations, *_flavor_tolerations(flavor)], hard)
        if missing:
            reasons.append(f"{flavor.name}: untolerated taint {missing[0]}")
            continue
        quota = kueue.capacity[flavor.name].get(ask.name, 0)
        if quota < ask.count:
            reasons.append(f"{flavor.name}: quota {quota} of {ask.name}, {ask.count} asked")
            continue
        pools = landing(plan, ask, flavor)
        return Admission(True, flavor.name, pools, "" if pools else "no pool its pod reaches serves it")
    return Admission(False, reason="; ".join(reasons))


def _job(plan: ClusterPlan, kueue: KueuePlan, key: str, queue: str, name: str, count: int) -> PlannedJob:
    offering = offering_of(plan, name)
    selector = dict(offering.node_selector) if offering else {}
    ask = JobAsk(queue, _namespace(kueue, queue), name, count, selector, tolerations_of(offering))
    return PlannedJob(key, ask, assign(plan, kueue, ask), offering)


def _namespace(kueue: KueuePlan, queue: str) -> str:
    found = next(q for q in kueue.queues if q.name == queue)
    return PROBE_NAMESPACE if found.namespaces is None else found.namespaces[0]


def planned_jobs(plan: ClusterPlan) -> list[PlannedJob]:
    """Every Job of the cluster, in the order they are submitted (the module's docstring)."""
    kueue = plan_kueue(plan)
    whys: dict[tuple[str, str, int], list[str]] = {}

    def add(queue: str, name: str, count: int, why: str) -> None:
        whys.setdefault((queue, name, count), []).append(why)

    for queue in kueue.queues:
        held = {
            name: max(kueue.capacity[f.name].get(name, 0) for f in queue.flavors)
            for name in kueue.covered
            if queue.flavors and offering_of(plan, name) is not None
        }
        name = next((n for n, most in held.items() if most > 0), None)
        if name is not None:
            add(queue.name, name, 1, "fits its quota")
            add(queue.name, name, held[name] + 1, "exceeds its quota")
    for granted in plan.definition.kueue.queues:
        for pool in granted.pools:
            counted = sorted(n for n in kueue.counted.get(reserved_flavor_name(pool), ()) if offering_of(plan, n))
            if counted:
                add(granted.name, counted[0], 1, f"reserved pool {pool}, the queue that grants it")
                add(DEFAULT_QUEUE, counted[0], 1, f"reserved pool {pool}, a queue that does not grant it")
    return [
        _job(plan, kueue, f"{name} x{count} through {queue} ({'; '.join(why)})", queue, name, count)
        for (queue, name, count), why in whys.items()
    ]
