"""Offline dry run of the scheduler's DeviceClass filter: which devices does each class select?

A device is selected by a class when all of the class's CEL selectors evaluate to true, evaluated in
order and stopping at the first false, as the DRA allocator does.  A runtime error is reported for
that (class, device) pair instead: in Kubernetes it aborts the allocation.

Problems (`MatchReport.ok` is False): a class that selects nothing, a selector that does not
compile or fails on a device, and a device selected by the classes of two or more different catalog
offerings.  Such a device could satisfy two different extended resource names (every class also
has the implicit name `deviceclass.resource.kubernetes.io/<class>`), so requests for one offering
could consume another's hardware.  An offering's alias classes select its devices by design, and the
driver chart's generic classes (`gpu.nvidia.com`, `mig.nvidia.com`, offering None) overlap with
specific ones by design: neither counts.

Not on these nodes (neither): the classes of offerings none of whose devices the slices hold, by the
catalog's facts (`match` given some nodes' slices); they select nothing, as they should.

Warnings only: devices that no offering's class selects, driver classes (offering None) that select nothing
(`vfio.gpu.nvidia.com`, or `mig.nvidia.com` on a cluster without MIG, are empty by design), and
devices shared with an offering that shares by design (`shares_devices`: `nvidia.com/gpu` served by the
chart during a migration, or a capability offering that declares `overlaps: allowed`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from themelio_gpu.dryrun.cel_kubernetes import (
    CelCompileError,
    CelEvaluationError,
    CompiledSelector,
    compile_selector,
)
from themelio_gpu.dryrun.resourceslices import Device
from themelio_gpu.words import count

__all__ = [
    "ClassMatch",
    "ClassUnderTest",
    "DeviceRef",
    "MatchReport",
    "Overlap",
    "SelectorFailure",
    "match_classes",
    "render_report",
    "report_as_dict",
]

FailureKind = Literal["compile", "unsupported", "evaluation"]


@dataclass(frozen=True)
class ClassUnderTest:
    """A DeviceClass to dry-run; `offering` is the catalog key it serves (None for driver classes)."""

    name: str
    extended_resource_name: str | None
    selectors: Sequence[str]
    offering: str | None
    shares_devices: bool = False
    """An offering whose devices other offerings also select by design: the generic legacy one (any whole
    GPU) or a capability offering with `overlaps: allowed`."""


@dataclass(frozen=True)
class DeviceRef:
    """The identifying and descriptive fields of a device, as shown in the report."""

    node: str
    name: str
    driver: str
    pool: str
    product_name: str | None
    device_type: str | None
    profile: str | None

    @property
    def label(self) -> str:
        return f"{self.node}/{self.name}"

    def describe(self) -> str:
        """`node/device (productName, profile)`; the type is shown for non-MIG devices."""
        details = [d for d in (self.product_name, self.profile or self.device_type) if d]
        return f"{self.label} ({', '.join(details)})" if details else self.label


@dataclass(frozen=True)
class ClassMatch:
    name: str
    offering: str | None
    extended_resource_name: str | None
    selectors: tuple[str, ...]
    devices: tuple[DeviceRef, ...]
    evaluable: bool
    """False when a selector did not compile: the class was not evaluated."""


@dataclass(frozen=True)
class Overlap:
    device: DeviceRef
    classes: tuple[str, ...]


@dataclass(frozen=True)
class SelectorFailure:
    """A selector that does not compile (device None) or fails on one device."""

    class_name: str
    selector_index: int
    selector: str
    device: DeviceRef | None
    message: str
    kind: FailureKind


@dataclass(frozen=True)
class MatchReport:
    classes: tuple[ClassMatch, ...]
    devices: tuple[DeviceRef, ...]
    empty_classes: tuple[str, ...]
    """Catalog classes (with an offering) that select no device: a problem."""
    overlaps: tuple[Overlap, ...]
    """Devices selected by classes of two different offerings: a problem."""
    shared_devices: tuple[Overlap, ...]
    """Devices a specific offering shares with a generic legacy one: a warning."""
    errors: tuple[SelectorFailure, ...]
    unselected_devices: tuple[DeviceRef, ...]
    empty_driver_classes: tuple[str, ...]
    """Driver classes (offering None) that select no device: a warning."""
    absent_classes: tuple[str, ...] = ()
    """Classes of offerings whose devices these slices do not hold: they select nothing, rightly."""

    @property
    def ok(self) -> bool:
        """No empty class, no overlap, no error; unselected devices are only a warning."""
        return not (self.empty_classes or self.overlaps or self.errors)


def _natural_key(text: str) -> tuple[tuple[int, int | str], ...]:
    # gpu-2 before gpu-10.
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part)


def _device_key(device: DeviceRef) -> tuple[object, ...]:
    return (_natural_key(device.node), _natural_key(device.name), device.driver, device.pool)


def _class_key(item: ClassMatch) -> tuple[object, ...]:
    # Catalog offerings first (by offering), then driver classes, each by class name.
    return (item.offering is None, _natural_key(item.offering or ""), _natural_key(item.name))


def _ref(device: Device) -> DeviceRef:
    return DeviceRef(
        node=device.node,
        name=device.name,
        driver=device.driver,
        pool=device.pool,
        product_name=device.product_name,
        device_type=device.device_type,
        profile=device.profile,
    )


def match_classes(
    classes: Sequence[ClassUnderTest], devices: Sequence[Device], absent: Collection[str] = ()
) -> MatchReport:
    """Evaluate every class against every device and collect the findings.

    `absent`: offerings whose devices are not among `devices` (slices of some nodes only); their classes
    selecting nothing is no problem.
    """
    refs = [_ref(device) for device in devices]
    catalog_selectors: list[list[tuple[str, str, bool]]] = [[] for _ in devices]
    selected_any = [False] * len(devices)
    matches: list[ClassMatch] = []
    errors: list[SelectorFailure] = []

    for item in classes:
        compiled: list[tuple[int, CompiledSelector]] = []
        for index, expression in enumerate(item.selectors):
            try:
                compiled.append((index, compile_selector(expression)))
            except CelCompileError as error:
                kind: FailureKind = "unsupported" if error.unsupported else "compile"
                errors.append(SelectorFailure(item.name, index, expression, None, error.message, kind))
        evaluable = len(compiled) == len(item.selectors)
        chosen: list[DeviceRef] = []
        if evaluable:
            for position, device in enumerate(devices):
                if _selects(item, compiled, device, refs[position], errors):
                    chosen.append(refs[position])
                    if item.offering is not None:
                        # Only offerings count: a device only the chart's generic class selects serves no one.
                        selected_any[position] = True
                        catalog_selectors[position].append((item.offering, item.name, item.shares_devices))
        matches.append(
            ClassMatch(
                name=item.name,
                offering=item.offering,
                extended_resource_name=item.extended_resource_name,
                selectors=tuple(item.selectors),
                devices=tuple(sorted(chosen, key=_device_key)),
                evaluable=evaluable,
            )
        )

    overlaps: list[Overlap] = []
    shared: list[Overlap] = []
    for position, selected in enumerate(catalog_selectors):
        strict = {offering for offering, _, shares in selected if not shares}
        if len(strict) >= 2:
            overlaps.append(Overlap(refs[position], tuple(sorted(name for _, name, _ in selected))))
        elif len({offering for offering, _, _ in selected}) >= 2:
            shared.append(Overlap(refs[position], tuple(sorted(name for _, name, _ in selected))))
    ordered = sorted(matches, key=_class_key)
    empty = [m for m in ordered if m.evaluable and not m.devices and m.offering is not None]
    return MatchReport(
        classes=tuple(ordered),
        devices=tuple(sorted(refs, key=_device_key)),
        empty_classes=tuple(m.name for m in empty if m.offering not in absent),
        absent_classes=tuple(m.name for m in empty if m.offering in absent),
        overlaps=tuple(sorted(overlaps, key=lambda o: _device_key(o.device))),
        shared_devices=tuple(sorted(shared, key=lambda o: _device_key(o.device))),
        errors=tuple(
            sorted(
                errors,
                key=lambda e: (e.class_name, e.selector_index, _device_key(e.device) if e.device else ()),
            )
        ),
        unselected_devices=tuple(
            sorted((ref for ref, hit in zip(refs, selected_any, strict=True) if not hit), key=_device_key)
        ),
        empty_driver_classes=tuple(
            m.name for m in ordered if m.evaluable and not m.devices and m.offering is None
        ),
    )


def _selects(
    item: ClassUnderTest,
    compiled: list[tuple[int, CompiledSelector]],
    device: Device,
    ref: DeviceRef,
    errors: list[SelectorFailure],
) -> bool:
    for index, selector in compiled:
        try:
            if not selector.evaluate(device):
                return False
        except CelEvaluationError as error:
            errors.append(SelectorFailure(item.name, index, selector.expression, ref, error.message, "evaluation"))
            return False
    return True


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------

_MAX_LISTED_ERROR_DEVICES = 3


def _class_heading(item: ClassMatch) -> str:
    resource = f" -> {item.extended_resource_name}" if item.extended_resource_name else ""
    count = f"{len(item.devices)} device{'s' if len(item.devices) != 1 else ''}"
    if item.offering is not None:
        return f"offering {item.offering}: class {item.name}{resource} ({count})"
    return f"class {item.name}{resource} (driver class, {count})"


def _problem_lines(report: MatchReport) -> list[str]:
    offerings = {m.name: m.offering for m in report.classes}
    lines = []
    for name in report.empty_classes:
        offering = offerings.get(name)
        served = f" (offering {offering})" if offering else ""
        lines.append(f"empty class: {name}{served} selects no device")
    for overlap in report.overlaps:
        lines.append(f"overlap: {overlap.device.describe()} is selected by {', '.join(overlap.classes)}")
    # Group runtime errors: one failing selector usually fails the same way on many devices.
    groups: dict[tuple[str, int, str, str], list[SelectorFailure]] = {}
    for failure in report.errors:
        groups.setdefault((failure.class_name, failure.selector_index, failure.kind, failure.message), []).append(
            failure
        )
    for (class_name, index, kind, message), failures in groups.items():
        where = f"class {class_name} selectors[{index}]"
        if kind == "unsupported":
            lines.append(f"unverifiable: {where}: {message}")
            continue
        if kind == "compile":
            lines.append(f"invalid selector: {where}: {_one_line(message)}")
            continue
        devices = [f.device.label for f in failures if f.device is not None]
        shown = ", ".join(devices[:_MAX_LISTED_ERROR_DEVICES])
        more = len(devices) - _MAX_LISTED_ERROR_DEVICES
        suffix = f" and {more} more" if more > 0 else ""
        lines.append(f"selector error: {where} on {shown}{suffix}: {message} (allocation would abort)")
    return lines


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _one_line(message: str) -> str:
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


def render_report(report: MatchReport) -> str:
    """Plain text: one block per class (offerings first), then PROBLEMS and WARNINGS sections."""
    nodes = {device.node for device in report.devices}
    lines = [
        f"DeviceClass dry run: {count(len(report.classes), 'class', 'classes')} against {count(len(report.devices), 'device')} "
        f"on {len(nodes)} node{'s' if len(nodes) != 1 else ''}",
        "",
    ]
    absent = set(report.absent_classes)
    for item in report.classes:
        lines.append(_class_heading(item))
        if not item.evaluable:
            lines.append("  (not evaluated: a selector does not compile)")
        elif item.name in absent:
            lines.append("  (none on these nodes: they have no device of this offering)")
        elif not item.devices:
            lines.append("  (no device)")
        lines.extend(f"  {device.describe()}" for device in item.devices)
        lines.append("")
    problems = _problem_lines(report)
    warnings = [f"driver class selects no device: {name}" for name in report.empty_driver_classes]
    warnings += [f"unselected device: {device.describe()}" for device in report.unselected_devices]
    warnings += [
        f"shared with a generic offering: {item.device.describe()} is selected by {', '.join(item.classes)}"
        for item in report.shared_devices
    ]
    if report.absent_classes:
        offerings = {m.name: m.offering for m in report.classes}
        lines.append(f"NOT ON THESE NODES ({len(report.absent_classes)}): no problem for slices of some nodes")
        lines.extend(f"  {offerings[name]}: class {name}" for name in report.absent_classes)
    lines.append(f"PROBLEMS ({len(problems)})")
    lines.extend(f"  {line}" for line in problems or ["none"])
    lines.append(f"WARNINGS ({len(warnings)})")
    lines.extend(f"  {line}" for line in warnings or ["none"])
    verdict = "OK" if report.ok else "NOT OK"
    lines.append(f"RESULT: {verdict} ({_count(len(problems), 'problem')}, {_count(len(warnings), 'warning')})")
    return "\n".join(lines) + "\n"


def _device_dict(device: DeviceRef) -> dict[str, object]:
    return {
        "node": device.node,
        "name": device.name,
        "driver": device.driver,
        "pool": device.pool,
        "productName": device.product_name,
        "type": device.device_type,
        "profile": device.profile,
    }


def report_as_dict(report: MatchReport) -> dict[str, object]:
    """A JSON-serialisable form of the report (same ordering as the text)."""
    return {
        "ok": report.ok,
        "classes": [
            {
                "name": item.name,
                "offering": item.offering,
                "extendedResourceName": item.extended_resource_name,
                "selectors": list(item.selectors),
                "evaluated": item.evaluable,
                "devices": [_device_dict(device) for device in item.devices],
            }
            for item in report.classes
        ],
        "emptyClasses": list(report.empty_classes),
        "absentClasses": list(report.absent_classes),
        "overlaps": [
            {"device": _device_dict(overlap.device), "classes": list(overlap.classes)}
            for overlap in report.overlaps
        ],
        "sharedDevices": [
            {"device": _device_dict(item.device), "classes": list(item.classes)} for item in report.shared_devices
        ],
        "errors": [
            {
                "class": failure.class_name,
                "selectorIndex": failure.selector_index,
                "selector": failure.selector,
                "device": _device_dict(failure.device) if failure.device else None,
                "kind": failure.kind,
                "message": failure.message,
            }
            for failure in report.errors
        ],
        "unselectedDevices": [_device_dict(device) for device in report.unselected_devices],
        "emptyDriverClasses": list(report.empty_driver_classes),
    }
