"""The platform trial: two or more offerings side by side on real ResourceSlices.

Which devices each offering's class could be given, which of them another offering excludes, and which
GPUs no offering reaches (the seed's "confirm that the former excludes unsuitable devices and the latter
retains its intended choices"). The classes are evaluated by the same engine as `match`; then every
selected device is checked against the offering's own definition directly from its attributes, without
CEL, so a selector that does not say what the catalog means is caught.

Problems (exit 1): an offering selects a device that violates its definition (a capability's memory,
architecture, compute capability, driver version, products or type; a product offering's product, profile
and constraints), an offering selects nothing, or a selector fails on a device.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from themelio_gpu import exits
from themelio_gpu.dryrun.match import ClassUnderTest, DeviceRef, match_classes
from themelio_gpu.dryrun.resourceslices import Device, ResourceSliceError, load_resourceslices
from themelio_gpu.inputs.catalog.catalog import Catalog, ResolvedOffering
from themelio_gpu.inputs.catalog.model import ServedBy
from themelio_gpu.inputs.catalog.products import GpuProduct
from themelio_gpu.inputs.catalog.selectors import CHART_CLASS_SELECTORS
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.k8s.nvidia import DRA_DRIVER, GPU_CLASS
from themelio_gpu.k8s.quantity import Quantity, parse_quantity
from themelio_gpu.k8s.semver import Semver, parse_semver
from themelio_gpu.tables import table_lines
from themelio_gpu.words import count

_GIB = Decimal(2**30)

DeviceKey = tuple[str, str, str, str]


@dataclass(frozen=True)
class TrialOffering:
    offering: ResolvedOffering
    devices: tuple[DeviceRef, ...]
    violations: tuple[tuple[DeviceRef, tuple[str, ...]], ...]
    """Selected devices that do not meet the offering's definition, with the reasons."""

    @property
    def name(self) -> str:
        return self.offering.name


@dataclass(frozen=True)
class TrialReport:
    source: str
    offerings: tuple[TrialOffering, ...]
    devices: tuple[DeviceRef, ...]
    """The GPU driver's devices (whole GPUs, MIG devices, ...), in report order."""
    other_drivers: Mapping[str, int]
    """Devices of other DRA drivers (ComputeDomain channels, ...): counted, not offered."""
    memory: Mapping[DeviceKey, str]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def selected(self, name: str) -> set[DeviceKey]:
        (item,) = [o for o in self.offerings if o.name == name]
        return {_key(d) for d in item.devices}

    def excluded_by(self, gets: str, excludes: str) -> tuple[DeviceRef, ...]:
        """Devices `gets` can be given that `excludes` cannot."""
        other = self.selected(excludes)
        (item,) = [o for o in self.offerings if o.name == gets]
        return tuple(d for d in item.devices if _key(d) not in other)

    @property
    def unreached(self) -> tuple[DeviceRef, ...]:
        reached = set().union(*(self.selected(o.name) for o in self.offerings))
        return tuple(d for d in self.devices if _key(d) not in reached)


def _key(device: DeviceRef | Device) -> DeviceKey:
    return (device.node, device.name, device.driver, device.pool)


def _gib(quantity: Quantity) -> str:
    return f"{(quantity.value / _GIB).quantize(Decimal('0.01'))}Gi"


def _class_of(offering: ResolvedOffering) -> ClassUnderTest:
    if offering.served_by is ServedBy.dra_driver_chart:
        selector = CHART_CLASS_SELECTORS[GPU_CLASS]
    else:
        selector = offering.selector
    # Sharing devices is what a trial compares, not a problem here (match and the catalog judge overlaps).
    return ClassUnderTest(offering.device_class, offering.name, [selector], offering.name, shares_devices=True)


def _version(device: Device, name: str) -> Semver | None:
    value = device.attribute(name)
    return value if isinstance(value, Semver) else None


def violations(offering: ResolvedOffering, device: Device, products: Mapping[str, GpuProduct]) -> list[str]:
    """Why `device` does not meet `offering`'s definition, read from its attributes (no CEL)."""
    found: list[str] = []
    if device.driver != DRA_DRIVER:
        return [f"driver {device.driver}, not {DRA_DRIVER}"]
    capability = offering.capability
    wanted_type = "mig" if offering.is_mig else "gpu"
    if device.device_type != wanted_type:
        found.append(f"type {device.device_type}, not {wanted_type}")
    names: set[str] = set()
    if capability is not None:
        names = {n for key in capability.products for n in products[key].product_names}
    elif offering.product is not None:
        names = set(offering.product.product_names)
    if names and device.product_name not in names:
        found.append(f"productName {device.product_name!r} is not one of {', '.join(sorted(names))}")
    if offering.mig_profile is not None and device.profile != offering.mig_profile:
        found.append(f"profile {device.profile}, not {offering.mig_profile}")
    min_memory = capability.min_memory if capability else offering.constraints.min_memory
    min_driver = capability.min_driver_version if capability else offering.constraints.min_driver_version
    if min_memory is not None:
        memory = device.capacity_of("memory")
        if memory is None:
            found.append("no memory capacity")
        elif memory.compare(parse_quantity(min_memory)) < 0:
            found.append(f"memory {_gib(memory)} < {min_memory}")
    checks = [("driverVersion", min_driver)]
    if capability is not None:
        checks.append(("cudaComputeCapability", capability.min_compute_capability))
        if capability.architectures:
            architecture = device.attribute("architecture")
            if architecture not in capability.architectures:
                found.append(f"architecture {architecture!r} is not {' or '.join(capability.architectures)}")
    for attribute, minimum in checks:
        if minimum is None:
            continue
        have = _version(device, attribute)
        if have is None:
            found.append(f"no {attribute} version")
        elif have.compare(parse_semver(minimum, normalize=True)) < 0:
            found.append(f"{attribute} {have} < {minimum}")
    return found


def run_trial(
    catalog: Catalog, offerings: Sequence[ResolvedOffering], devices: Sequence[Device], source: str
) -> TrialReport:
    gpu_devices = [d for d in devices if d.driver == DRA_DRIVER]
    other: dict[str, int] = {}
    for device in devices:
        if device.driver != DRA_DRIVER:
            other[device.driver] = other.get(device.driver, 0) + 1
    report = match_classes([_class_of(o) for o in offerings], gpu_devices)
    by_key = {_key(d): d for d in gpu_devices}
    problems: list[str] = []
    trial: list[TrialOffering] = []
    for offering in offerings:
        (item,) = [c for c in report.classes if c.offering == offering.name]
        bad = []
        for ref in item.devices:
            reasons = violations(offering, by_key[_key(ref)], catalog.products)
            if reasons:
                bad.append((ref, tuple(reasons)))
                problems.append(
                    f"{offering.name} selects {ref.describe()}, which violates its definition: {'; '.join(reasons)}"
                )
        if item.evaluable and not item.devices:
            problems.append(f"{offering.name} selects no device: requests for it would never be satisfied here")
        trial.append(TrialOffering(offering, item.devices, tuple(bad)))
    for failure in report.errors:
        where = f" on {failure.device.label}" if failure.device else ""
        problems.append(f"{failure.class_name}: selector{where}: {failure.message}")
    memory = {}
    for device in gpu_devices:
        quantity = device.capacity_of("memory")
        memory[_key(device)] = _gib(quantity) if quantity is not None else "-"
    return TrialReport(source, tuple(trial), report.devices, dict(sorted(other.items())), memory, tuple(problems))


def _what(offering: ResolvedOffering) -> str:
    if offering.capability is not None:
        return f"capability: {offering.capability.describe()}"
    if offering.served_by is ServedBy.dra_driver_chart:
        return "any whole GPU (the DRA chart's gpu.nvidia.com)"
    assert offering.product is not None
    return f"product {offering.product.key}" + (f", MIG {offering.mig_profile}" if offering.mig_profile else "")


def _table(rows: list[list[str]]) -> list[str]:
    return table_lines(rows)


def _block(heading: str, devices: Sequence[DeviceRef]) -> list[str]:
    return [f"{heading} ({len(devices)}):", *(f"  {d.describe()}" for d in devices or ())] + (
        [] if devices else ["  none"]
    )


def render_trial(report: TrialReport) -> str:
    nodes = {d.node for d in report.devices}
    others = ", ".join(f"{n} {driver}" for driver, n in report.other_drivers.items())
    lines = [
        f"Platform trial: {count(len(report.offerings), 'offering')} on {count(len(report.devices), 'GPU device')} of "
        f"{count(len(nodes), 'node')} ({report.source})"
        + (f"; not GPUs, not offered: {others}" if others else ""),
        "",
    ]
    for index, item in enumerate(report.offerings, start=1):
        lines.append(f"[{index}] {item.name} ({_what(item.offering)}): {count(len(item.devices), 'device')}")
    lines.append("")
    chosen = [report.selected(o.name) for o in report.offerings]
    rows = [["device", "productName", "type", "memory", *(f"[{i}]" for i in range(1, len(chosen) + 1))]]
    for device in report.devices:
        key = _key(device)
        kind = device.profile or device.device_type or "-"
        marks = ["yes" if key in picked else "-" for picked in chosen]
        rows.append([device.label, device.product_name or "-", kind, report.memory.get(key, "-"), *marks])
    lines.extend(_table(rows))
    lines.append("")
    for gets in report.offerings:
        for excludes in report.offerings:
            if gets is not excludes:
                only = report.excluded_by(gets.name, excludes.name)
                lines.extend(_block(f"{gets.name} can be given, {excludes.name} excludes", only))
    lines.extend(_block("no offering on trial can reach", report.unreached))
    lines.append("")
    lines.append(f"PROBLEMS ({len(report.problems)})")
    lines.extend(f"  {p}" for p in report.problems or ["none"])
    lines.append(f"RESULT: {'OK' if report.ok else 'NOT OK'}")
    return "\n".join(lines) + "\n"


def _device(ref: DeviceRef) -> dict[str, object]:
    return {
        "node": ref.node,
        "name": ref.name,
        "productName": ref.product_name,
        "type": ref.device_type,
        "profile": ref.profile,
    }


def trial_as_dict(report: TrialReport) -> dict[str, object]:
    names = [o.name for o in report.offerings]
    return {
        "ok": report.ok,
        "offerings": [
            {
                "name": item.name,
                "devices": [_device(d) for d in item.devices],
                "violations": [{"device": _device(d), "reasons": list(r)} for d, r in item.violations],
                "notSelectedBy": {  # devices this offering can be given that the other cannot
                    other: [_device(d) for d in report.excluded_by(item.name, other)]
                    for other in names
                    if other != item.name
                },
            }
            for item in report.offerings
        ],
        "unreached": [_device(d) for d in report.unreached],
        "otherDrivers": dict(report.other_drivers),
        "problems": list(report.problems),
    }


def resolve_offerings(catalog: Catalog, names: Sequence[str]) -> list[ResolvedOffering]:
    """The offerings named on the command line (an alias names its offering); InputError if one is unknown."""
    problems = Problems()
    found: list[ResolvedOffering] = []
    for name in names:
        offering = catalog.find(name)
        if offering is None:
            problems.add(
                "command line", name, f"not in the catalog {catalog.file}; known: {', '.join(catalog.offerings)}"
            )
        elif offering in found:
            problems.add("command line", name, f"{offering.name} is already on trial")
        else:
            found.append(offering)
    if not problems and len(found) < 2:
        problems.add("command line", " ".join(names), "a trial compares two or more offerings")
    problems.raise_if_any()
    return found


def trial_command(catalog: Catalog, slices: Path, names: Sequence[str], as_json: bool) -> int:
    """Print the trial; 0 when every offering gets devices that meet it, 1 otherwise, 2 bad input."""
    offerings = resolve_offerings(catalog, names)
    try:
        devices = load_resourceslices(slices)
    except ResourceSliceError as error:
        print("\n".join(error.problems), file=sys.stderr)
        return exits.BAD_INPUT
    report = run_trial(catalog, offerings, devices, str(slices))
    if as_json:
        print(json.dumps(trial_as_dict(report), indent=2, sort_keys=True))
    else:
        print(render_trial(report), end="")
    return exits.OK if report.ok else exits.FAILED
