"""Whose slices a node has, the sandbox's generator beside what NVIDIA's DRA driver published, and the catalog's
DeviceClass selectors on the driver's devices.

Wherever the driver's kubelet plugin runs (components/dra_kubelet_plugin.py) it publishes the node's GPUs; the
sandbox still writes the slices of MIG pools (nodes.py). So that its own slices stay shaped as the driver's, the
devices the generator would write for a driver-published node are set beside the driver's, device by device (by
name), every attribute and capacity: a difference is either listed in `KNOWN` with its reason (docs/sandbox.md
lists them too) or a defect of the generator, which fails the probe. Values that identify one device (its UUID,
its PCI bus ID) are made by each side for itself: only their presence and type are compared.

Then each of the stack's DeviceClasses is asked, with the offline CEL evaluator (`dryrun/`, as `match` and `trial`
use it), which of the driver's devices it selects: every device on the nodes of the pools its offering is placed
on, and no other. A difference listed with its reason is the mock's profile, not the hardware's (NVIDIA's L40S
profile says 48 GiB; a real L40S has 45): each device is asked as the driver publishes it with those values as the
hardware has them (the catalog's, the generator's), and a class that selects otherwise only because of them is
shown with the difference, not failed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from themelio_gpu.dryrun.cel_kubernetes import CelError, compile_selector
from themelio_gpu.dryrun.resourceslices import Device, parse_resourceslices
from themelio_gpu.inputs.catalog.products import GpuProduct
from themelio_gpu.k8s.nvidia import DRA_DRIVER
from themelio_gpu.k8s.quantity import QuantityError, parse_quantity
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.gpu_profiles import Profile, driver_publishes, profile_for
from themelio_gpu.sandbox.nodes import gpu_devices, simulated_nodes
from themelio_gpu.tables import table

DRIVER_MANAGER = "gpu-kubelet-plugin"
"""The DRA driver's kubelet plugin's field manager on the slices it publishes."""
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
IDENTITY = ("uuid", PCI_BUS_ID)
"""Attributes whose value identifies one device: each side makes its own."""
KNOWN: Mapping[str, str] = {
    f"attribute {PCIE_ROOT}": (
        "the driver reads a GPU's PCIe root from /sys/bus/pci/devices/<bus id>, which a simulated node does not "
        "have (it warns and publishes the device without it); on a real node it is there, as in the sandbox's "
        "own slices (nvlib.go, `error getting PCIe root`)"
    ),
}
"""Differences that stay, each with its reason: attribute or capacity -> why."""
KNOWN_FOR_PROFILE: Mapping[tuple[str, str], str] = {
    ("h100", "capacity memory"): (
        "NVIDIA's H100 profile gives 80 GiB (85899345920 bytes); a real H100 80GB HBM3 reports 81559 MiB "
        "(nvidia-smi), the catalog's value, which the sandbox's own slices keep"
    ),
    ("l40s", "capacity memory"): (
        "NVIDIA's L40S profile gives 48 GiB (51539607552 bytes); a real L40S reports 46068 MiB (nvidia-smi), the "
        "catalog's value, which the sandbox's own slices keep"
    ),
}
"""Differences of one NVIDIA profile's facts from the catalog's (profile name, key) -> why: the profile's, not
the hardware's."""


def publisher(resource_slice: Mapping[str, Any]) -> str:
    """Who wrote a ResourceSlice: `driver` (the DRA driver's kubelet plugin) or `sandbox` (nodes.py)."""
    managers = {entry.get("manager") for entry in resource_slice["metadata"].get("managedFields") or []}
    return "driver" if DRIVER_MANAGER in managers else "sandbox"


def publishers(slices: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """node -> whose slices it has (`driver`, `sandbox`, or both joined by `+`: double publishing)."""
    found: dict[str, set[str]] = {}
    for item in slices:
        node = item["spec"].get("nodeName")
        if node and item["spec"].get("driver") == DRA_DRIVER:
            found.setdefault(node, set()).add(publisher(item))
    return {node: "+".join(sorted(who)) for node, who in sorted(found.items())}


@dataclass(frozen=True)
class Difference:
    key: str
    """`attribute <name>`, `capacity <name>` or `devices`."""
    sandbox: str
    driver: str
    reason: str
    """Why it stays (KNOWN); empty: a defect of the generator."""


@dataclass
class PoolComparison:
    pool: str
    profile: str
    nodes: list[str]
    devices: int
    """Devices the driver published on the pool's nodes."""
    differences: list[Difference] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return all(d.reason for d in self.differences)


def _shown(value: Mapping[str, Any] | None) -> str:
    if value is None:
        return "(none)"
    kind, text = next(iter(value.items()))
    return f"{kind} {text}"


def _same_quantity(left: str, right: str) -> bool:
    try:
        return parse_quantity(left) == parse_quantity(right)
    except QuantityError:
        return left == right


def device_differences(
    sandbox: Mapping[str, Any], driver: Mapping[str, Any], profile: Profile
) -> list[tuple[str, str, str]]:
    """(key, sandbox's, driver's) for every attribute and capacity of one device that the two do not share."""
    found = []
    ours, theirs = sandbox.get("attributes") or {}, driver.get("attributes") or {}
    for name in sorted(set(ours) | set(theirs)):
        left, right = ours.get(name), theirs.get(name)
        if left is not None and right is not None and name in IDENTITY:
            same = set(left) == set(right)  # the same type; the values are each side's own
        else:
            same = left == right
        if not same:
            found.append((f"attribute {name}", _shown(left), _shown(right)))
    ours, theirs = sandbox.get("capacity") or {}, driver.get("capacity") or {}
    for name in sorted(set(ours) | set(theirs)):
        left, right = (ours.get(name) or {}).get("value"), (theirs.get(name) or {}).get("value")
        if left is None or right is None or not _same_quantity(str(left), str(right)):
            found.append((f"capacity {name}", str(left or "(none)"), str(right or "(none)")))
    return found


def _reason(key: str, profile: Profile) -> str:
    if key in KNOWN:
        return KNOWN[key]
    return "" if profile.derived else KNOWN_FOR_PROFILE.get((profile.base.name, key), "")


def node_differences(
    node: str, product: GpuProduct, gpus: int, published: Mapping[str, Mapping[str, Any]], profile: Profile
) -> list[Difference]:
    """The generator's devices for a node of `gpus` whole GPUs of `product` beside the driver's (`published`, by
    device name), each difference once, with its reason where it has one."""
    generated = {d["name"]: d for d in gpu_devices(node, product, gpus, None)}
    found: list[tuple[str, str, str]] = []
    if sorted(generated) != sorted(published):
        found.append(
            ("devices", ", ".join(sorted(generated)) or "(none)", ", ".join(sorted(published)) or "(none)")
        )
    for name in sorted(set(generated) & set(published)):
        found.extend(device_differences(generated[name], published[name], profile))
    differences: dict[str, Difference] = {}
    for key, ours, theirs in found:
        differences.setdefault(key, Difference(key, ours, theirs, _reason(key, profile)))
    return list(differences.values())


def compare_pools(plan: ClusterPlan, slices: Sequence[Mapping[str, Any]]) -> list[PoolComparison]:
    """Per pool the driver publishes: the generator's devices beside the driver's, each difference once."""
    contracts = {c.name: c for c in plan.pools}
    driver_devices: dict[str, dict[str, Mapping[str, Any]]] = {}
    for item in slices:
        if item["spec"].get("driver") == DRA_DRIVER and publisher(item) == "driver":
            mine = driver_devices.setdefault(item["spec"]["nodeName"], {})
            mine.update({d["name"]: d for d in item["spec"].get("devices") or []})
    comparisons: dict[str, PoolComparison] = {}
    for node in simulated_nodes(plan):
        contract = contracts.get(node.pool)
        if contract is None or not driver_publishes(contract):
            continue
        profile = profile_for(contract.product)
        assert profile is not None
        pool = comparisons.setdefault(node.pool, PoolComparison(node.pool, profile.describe, [], 0))
        pool.nodes.append(node.name)
        published = driver_devices.get(node.name, {})
        pool.devices += len(published)
        seen = {d.key for d in pool.differences}
        for difference in node_differences(
            node.name, contract.product, contract.gpus_per_node, published, profile
        ):
            if difference.key not in seen:
                pool.differences.append(difference)
    return list(comparisons.values())


@dataclass
class ClassSelection:
    """One of the stack's DeviceClasses on the driver's devices."""

    name: str
    offering: str
    expected: int
    """Driver devices on the nodes of the pools its offering is placed on."""
    selected: int
    missed: list[str] = field(default_factory=list)
    """Expected devices it does not select (`node/device`)."""
    extra: list[str] = field(default_factory=list)
    """Devices it selects on nodes of other pools."""
    error: str = ""
    as_published: list[str] = field(default_factory=list)
    """How it selects otherwise as the driver publishes the devices, only because of differences of the mock's
    profile listed with their reason (`would also select 8: node/device, ...`): shown, not failed."""
    differing: list[str] = field(default_factory=list)
    """The explained differences of those devices (`capacity memory`)."""

    @property
    def agrees(self) -> bool:
        return not (self.missed or self.extra or self.error)


def class_selections(
    plan: ClusterPlan, slices: Sequence[Mapping[str, Any]], classes: Sequence[Mapping[str, Any]]
) -> list[ClassSelection]:
    """Each of the stack's DeviceClasses (as the API server holds it) asked which driver-published devices it
    selects; expected: every one on the nodes of its offering's pools, none elsewhere. Asked of the devices with
    the explained differences as the hardware has them (`_as_the_hardware_has_it`)."""
    driver_slices = [s for s in slices if s["spec"].get("driver") == DRA_DRIVER and publisher(s) == "driver"]
    if not driver_slices:
        return []
    corrected, explained = _as_the_hardware_has_it(plan, driver_slices)
    published = parse_resourceslices(json.dumps({"apiVersion": "v1", "kind": "List", "items": driver_slices}))
    devices = parse_resourceslices(json.dumps({"apiVersion": "v1", "kind": "List", "items": corrected}))
    pools = {node.name: node.pool for node in simulated_nodes(plan)}
    served = {c["metadata"]["name"]: c for c in classes}
    rows = []
    for spec in plan.device_classes:
        if spec.is_alias or spec.name not in served:
            continue
        placed = set(plan.placements.get(spec.offering, ()))
        expected = {_key(d) for d in devices if pools.get(d.node) in placed}
        row = ClassSelection(spec.name, spec.offering, len(expected), 0)
        try:
            selected = {_key(d) for d in devices if _selects(served[spec.name], d)}
            as_published = {_key(d) for d in published if _selects(served[spec.name], d)}
        except CelError as error:
            row.error = str(error)
            rows.append(row)
            continue
        row.selected = len(selected & expected)
        row.missed = sorted(expected - selected)
        row.extra = sorted(selected - expected)
        for what, keys in (
            ("would also select", as_published - selected),
            ("would miss", selected - as_published),
        ):
            if keys:
                shown = ", ".join(sorted(keys)[:3]) + (", ..." if len(keys) > 3 else "")
                row.as_published.append(f"{what} {len(keys)}: {shown}")
        row.differing = sorted({k for key in selected ^ as_published for k in explained[key]})
        rows.append(row)
    return rows


def _as_the_hardware_has_it(
    plan: ClusterPlan, driver_slices: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """The driver's slices with each difference listed with its reason set to the generator's value (the
    catalog's, the hardware's), and `node/device` -> the keys set so."""
    contracts = {c.name: c for c in plan.pools}
    pools = {node.name: node.pool for node in simulated_nodes(plan)}
    corrected: list[dict[str, Any]] = []
    explained: dict[str, list[str]] = {}
    for item in driver_slices:
        node = item["spec"].get("nodeName")
        contract = contracts.get(pools.get(node, ""))
        profile = profile_for(contract.product) if contract is not None else None
        if contract is None or profile is None:
            corrected.append(dict(item))
            continue
        generated = {d["name"]: d for d in gpu_devices(node, contract.product, contract.gpus_per_node, None)}
        devices = []
        for device in item["spec"].get("devices") or []:
            counterpart = generated.get(device["name"])
            keys = [
                key
                for key, _ours, _theirs in (
                    device_differences(counterpart, device, profile) if counterpart else []
                )
                if _reason(key, profile)
            ]
            device = json.loads(json.dumps(device))
            for key in keys:
                section, name = key.split(" ", 1)
                section = "attributes" if section == "attribute" else "capacity"
                value = (counterpart or {}).get(section, {}).get(name)
                if value is None:
                    device.get(section, {}).pop(name, None)
                else:
                    device.setdefault(section, {})[name] = value
            explained[f"{node}/{device['name']}"] = keys
            devices.append(device)
        corrected.append({**item, "spec": {**item["spec"], "devices": devices}})
    return corrected, explained


def _key(device: Device) -> str:
    return f"{device.node}/{device.name}"


def _selects(device_class: Mapping[str, Any], device: Device) -> bool:
    expressions = [
        s["cel"]["expression"] for s in device_class.get("spec", {}).get("selectors") or [] if "cel" in s
    ]
    return all(compile_selector(e).evaluate(device) for e in expressions)


def comparison_table(pools: Sequence[PoolComparison]) -> str:
    lines: list[tuple[str, ...]] = [
        ("pool (driver-published)", "differs", "sandbox writes", "driver publishes", "why")
    ]
    for pool in pools:
        if not pool.differences:
            lines.append((f"{pool.pool} ({pool.devices} devices)", "nothing", "", "", pool.profile))
        for difference in pool.differences:
            why = difference.reason or "NOT EXPLAINED: the generator (sandbox/nodes.py) differs from the driver"
            lines.append(
                (
                    f"{pool.pool} ({pool.devices} devices)",
                    difference.key,
                    difference.sandbox,
                    difference.driver,
                    why,
                )
            )
    return table(lines, pad_last=False)


def selection_table(rows: Sequence[ClassSelection]) -> str:
    lines: list[tuple[str, ...]] = [
        ("DeviceClass", "offering", "selects of its pools' driver devices", "of other pools", "agrees")
    ]
    for row in rows:
        verdict = "yes" if row.agrees else "NO: " + (row.error or "; ".join(
            ([f"misses {', '.join(row.missed[:3])}"] if row.missed else [])
            + ([f"selects {', '.join(row.extra[:3])}"] if row.extra else [])
        ))  # fmt: skip
        if row.as_published:
            verdict += f"; as the mock publishes its devices it {'; '.join(row.as_published)}, only by what the "
            verdict += f"profile differs in ({', '.join(row.differing)}: listed above)"
        lines.append((row.name, row.offering, f"{row.selected} of {row.expected}", str(len(row.extra)), verdict))
    return table(lines, pad_last=False)
