"""Where the models say each probe pod lands: the pods `sandbox probe` submits, each with its expected outcome.

Every row's expectation is computed, never written down:
- a pod asking for one of the cluster's names (an offering's, or a migration alias it still serves) with the
  offering's node selector and tolerations: the pools `validate` places the offering on (`plan.placements`)
  that serve that name (a DRA class maps it, or the device plugin advertises it), that the pod's selector and
  tolerations reach, and that have a node with as many of the offering's devices as it asks for;
- "one more": the offering's name asking for one device more than that model's largest node has: by the same
  capacity rule, no pool fits;
- for every DeviceClass of the cluster (the stack's and the DRA driver's), a pod asking for its implicit name
  `deviceclass.resource.kubernetes.io/<class>` and a pod claiming one of its devices through a
  ResourceClaimTemplate (the second seed's way): the pools where the offline CEL evaluator (`dryrun/`, what
  `match` and `trial` use) finds a device of the class's selector among the devices the sandbox publishes;
Kueue's admission is asked apart, through Kueue's own controller (kueue_model.py, kueue_probe.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from themelio_gpu.dryrun.cel_kubernetes import CelError, compile_selector
from themelio_gpu.dryrun.resourceslices import Device, parse_resourceslices
from themelio_gpu.inputs.catalog.capability import DeviceKind
from themelio_gpu.inputs.catalog.catalog import ResolvedOffering
from themelio_gpu.inputs.catalog.offerings import DEFAULT_TOLERATIONS
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.k8s.dra import implicit_name
from themelio_gpu.k8s.nvidia import device_plugin_resource
from themelio_gpu.k8s.scheduling import selector_mismatches, untolerated
from themelio_gpu.plan.coverage import device_plugin_names
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.nodes import model_nodes
from themelio_gpu.sandbox.outcomes import Outcome, landed, no_fit

PLACEMENTS = "validate's placements"
CEL = "the CEL evaluator on the devices the sandbox publishes"
OPERATOR_CLASS = (
    "not compared: the GPU Operator's controller creates this class from the GPUCluster for the DRA driver it "
    "deploys (v0.5.0), of which no source is at hand to run here (the model's answer only)"
)


@dataclass(frozen=True)
class Ask:
    """What a probe pod asks for (a resource name in its limits, or a claim of a class) and where it may go."""

    limits: Mapping[str, int]
    claim_class: str | None
    selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]

    @property
    def count(self) -> int:
        return sum(self.limits.values()) if self.limits else 1


@dataclass(frozen=True)
class Planned:
    key: str
    """What the row tries, as its table shows it (unique in the cluster)."""
    ask: Ask
    expected: Outcome
    model: str
    """Which model decided, and on what."""
    offering: ResolvedOffering | None = field(default=None, repr=False)
    """The offering whose definition every allocated device must meet (`dryrun.trial.violations`)."""
    selector: tuple[str, str] | None = None
    """(class, the model's CEL selector of it) every allocated device must match (the offline evaluator)."""
    uncompared: str = ""
    """Why the row is shown but not compared (a MIG name on device-plugin pools: the plugin's MIG names are not
    simulated)."""
    room: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """Pool -> unit (`gpu`, or a MIG profile) -> how many of the pool's devices (all its nodes) the ask can take:
    what quota attempts in one namespace leave each other (`admission.Ledger`)."""


def tolerations_of(offering: ResolvedOffering | None) -> tuple[Mapping[str, Any], ...]:
    given = offering.tolerations if offering is not None else DEFAULT_TOLERATIONS
    return tuple(t.model_dump(exclude_none=True) for t in given)


def reaches(ask: Ask, pool: PoolContract) -> bool:
    """Whether the ask's node selector and tolerations let it onto the pool's nodes (as the stack labels and
    taints them)."""
    return not selector_mismatches(ask.selector, pool.labels) and not untolerated(ask.tolerations, pool.taints)


def _units(offering: ResolvedOffering, pool: PoolContract, name: str) -> dict[str, int]:
    """Unit (`gpu` or a MIG profile) -> the offering's devices one node of the pool has for `name`: DRA devices
    of the kinds its class takes, or what the device plugin advertises under the name."""
    units = pool.devices_per_node()
    if pool.dra:
        taken = set(offering.takes)
        return {
            unit: n
            for unit, n in units.items()
            if DeviceKind(pool.product.key, None if unit == "gpu" else unit) in taken
        }
    return {
        unit: n for unit, n in units.items() if device_plugin_resource(None if unit == "gpu" else unit) == name
    }


def per_node(offering: ResolvedOffering, pool: PoolContract, name: str) -> int:
    return sum(_units(offering, pool, name).values())


def _nodes(plan: ClusterPlan) -> dict[str, int]:
    """Pool -> how many nodes the sandbox registers for it."""
    found: dict[str, int] = {}
    for node in model_nodes(plan):
        found[node.pool] = found.get(node.pool, 0) + 1
    return found


def room_of(
    plan: ClusterPlan, offering: ResolvedOffering, pools: Sequence[PoolContract], name: str
) -> dict[str, dict[str, int]]:
    nodes = _nodes(plan)
    return {p.name: {u: n * nodes.get(p.name, 0) for u, n in _units(offering, p, name).items()} for p in pools}


def serves(plan: ClusterPlan, offering: ResolvedOffering, pool: PoolContract, name: str) -> bool:
    if pool.dra:
        return any(extended == name for _, extended, _ in class_selectors(plan).values())
    return name in device_plugin_names(offering, pool)


def _name_rows(plan: ClusterPlan, offering: ResolvedOffering) -> list[Planned]:
    pools = {p.name: p for p in plan.pools}
    names = [offering.name, *(a.name for a in offering.aliases if a.name in plan.advertised_names)]
    rows = []
    for name in names:
        ask = Ask({name: 1}, None, offering.node_selector, tolerations_of(offering))
        serving = [
            pools[p] for p in plan.placements.get(offering.name, ()) if serves(plan, offering, pools[p], name)
        ]
        fits = [p.name for p in serving if reaches(ask, p) and per_node(offering, p, name) >= 1]
        expected = (
            landed(fits) if fits else no_fit(f"no pool serving {name} is reached by its selector and tolerations")
        )
        plugin_mig = bool(fits) and all(not pools[p].dra and pools[p].mig_devices is not None for p in fits)
        why = "not compared: MIG devices of device-plugin pools (the plugin's MIG names are not simulated)"
        room = room_of(plan, offering, [pools[p] for p in fits], name)
        rows.append(Planned(name, ask, expected, PLACEMENTS, offering, None, why if plugin_mig else "", room))
        if name == offering.name and fits:
            most = max(per_node(offering, pools[p], name) for p in fits)
            more = Ask({name: most + 1}, None, ask.selector, ask.tolerations)
            large = [p for p in fits if per_node(offering, pools[p], name) >= most + 1]
            expected = landed(large) if large else no_fit(f"no node of {', '.join(fits)} has {most + 1} of them")
            rows.append(Planned(f"{name} x{most + 1}", more, expected, PLACEMENTS, offering))
    return rows


def _published(plan: ClusterPlan) -> dict[str, list[list[Device]]]:
    """Pool -> the devices each of its nodes publishes in the sandbox (nodes.py, read by the dry run's parser)."""
    by_pool: dict[str, list[list[Device]]] = {}
    for node in model_nodes(plan):
        if node.slices:
            text = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(node.slices)})
            by_pool.setdefault(node.pool, []).append(parse_resourceslices(text, node.name))
    return by_pool


def _matching(selector: str, devices: Sequence[Device]) -> dict[str, int]:
    """Unit (`gpu` or the MIG profile) -> the devices the selector matches in the offline CEL evaluator."""
    compiled = compile_selector(selector)
    found: dict[str, int] = {}
    for device in devices:
        try:
            if compiled.evaluate(device):
                unit = device.profile or "gpu"
                found[unit] = found.get(unit, 0) + 1
        except CelError:
            continue  # a runtime error: the scheduler does not allocate that device either
    return found


def class_selectors(plan: ClusterPlan) -> dict[str, tuple[str, str | None, str | None]]:
    """Every DeviceClass of the cluster: name -> (the model's selector, extended resource name, the offering
    whose class it is, if any)."""
    offerings = {o.name for o in plan.offerings}
    found: dict[str, tuple[str, str | None, str | None]] = {}
    for spec in plan.device_classes:
        found[spec.name] = (spec.selector, spec.extended_resource_name, spec.offering)
    for driver in plan.driver_classes:
        owner = driver.extended_resource_name if driver.extended_resource_name in offerings else None
        found.setdefault(driver.name, (driver.selector, driver.extended_resource_name, owner))
    return dict(sorted(found.items()))


def offering_class(plan: ClusterPlan, offering: ResolvedOffering) -> str:
    """The DeviceClass the cluster has for the offering: the stack's own, else the installer's that maps its name."""
    own = [c.name for c in plan.device_classes if c.offering == offering.name and not c.is_alias]
    mapped = [d.name for d in plan.driver_classes if d.extended_resource_name == offering.name]
    if not own + mapped:
        raise SandboxError(f"cluster {plan.name} has no DeviceClass for {offering.name}")
    return (own + mapped)[0]


def _class_rows(plan: ClusterPlan) -> list[Planned]:
    offerings = {o.name: o for o in plan.offerings}
    published = _published(plan)
    by_operator = {d.name for d in plan.driver_classes} if plan.definition.dra_by_gpu_operator else set()
    rows = []
    for device_class, (selector, _, owner) in class_selectors(plan).items():
        operator = OPERATOR_CLASS if device_class in by_operator else ""
        offering = offerings.get(owner) if owner else None
        base = Ask({}, None, offering.node_selector if offering else {}, tolerations_of(offering))
        room: dict[str, dict[str, int]] = {}
        for pool in (p for p in plan.pools if p.dra and reaches(base, p)):
            for node in published.get(pool.name, []):
                for unit, n in _matching(selector, node).items():
                    room.setdefault(pool.name, {})[unit] = room.get(pool.name, {}).get(unit, 0) + n
        fits = list(room)
        expected = (
            landed(fits) if fits else no_fit(f"no node this pod reaches publishes a device of {device_class}")
        )
        for key, ask in (
            (
                implicit_name(device_class),
                Ask({implicit_name(device_class): 1}, None, base.selector, base.tolerations),
            ),
            (f"ResourceClaim of {device_class}", Ask({}, device_class, base.selector, base.tolerations)),
        ):
            rows.append(Planned(key, ask, expected, CEL, offering, (device_class, selector), operator, room))
    return rows


def planned_rows(plan: ClusterPlan) -> list[Planned]:
    """Every probe pod of the cluster, in the order they are tried."""
    rows = [row for offering in plan.offerings for row in _name_rows(plan, offering)]
    return rows + _class_rows(plan)
