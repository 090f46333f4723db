"""The published devices (ResourceSlices) against the offerings' classes, by the same offline dry run as
`match`: every offering finds devices, no device is taken by two offerings, every selector evaluates; and,
for the GPU Operator's GPUCluster, the NVIDIA driver version the DRA driver publishes.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence

from themelio_gpu.dryrun.cluster_match import match_cluster
from themelio_gpu.dryrun.match import MatchReport
from themelio_gpu.dryrun.resourceslices import Device, ResourceSliceError, parse_resourceslices
from themelio_gpu.inputs.catalog.model import ServedBy
from themelio_gpu.k8s.nvidia import DRA_DRIVER, DRA_KUBELET_PLUGIN
from themelio_gpu.k8s.semver import Semver
from themelio_gpu.live.api import RESOURCE_SLICES, Api
from themelio_gpu.live.device_classes import expected_device_classes
from themelio_gpu.live.report import Report, Status
from themelio_gpu.plan import dra_mode
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.words import count

_LISTED = 4  # devices named in one line; the rest are counted


def _listed(labels: Sequence[str]) -> str:
    shown = ", ".join(labels[:_LISTED])
    return f"{shown} and {len(labels) - _LISTED} more" if len(labels) > _LISTED else shown


def check_resource_slices(plan: ClusterPlan, api: Api, report: Report) -> None:
    """Match the published devices against the offerings' classes, as the scheduler's class filter would."""
    items = api.list_items(RESOURCE_SLICES)
    # Items of a list response carry no kind/apiVersion; the parser wants whole objects.
    listing = {
        "kind": "ResourceSliceList",
        "apiVersion": "resource.k8s.io/v1",
        "items": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", **item} for item in items],
    }
    try:
        devices = parse_resourceslices(json.dumps(listing), f"GET {RESOURCE_SLICES}")
    except ResourceSliceError as error:
        report.fail("resource-slices", f"cannot read the published devices: {_listed(list(error.problems))}")
        return
    nodes = {d.node for d in devices}
    if devices:
        report.ok(
            "resource-slices",
            f"{count(len(devices), 'device')} in {count(len(items), 'ResourceSlice')} on {count(len(nodes), 'node')}",
        )
    else:
        report.fail(
            "resource-slices",
            f"no device is published ({len(items)} ResourceSlices): is the DRA driver's kubelet plugin running "
            f"on the GPU nodes ({DRA_KUBELET_PLUGIN}=true)?",
        )
    if plan.definition.dra_by_gpu_operator:
        check_driver_version(devices, report)
    # The same dry run as the `match` command, so both judge a cluster alike.
    result = match_cluster(plan, devices)
    by_class = {m.name: m for m in result.classes}
    offering_of = {m.name: m.offering for m in result.classes}
    primary = {c.offering: c.name for c in expected_device_classes(plan) if not c.is_alias}
    # Devices a product offering shares with the generic nvidia.com/gpu while migrating: fine, worth a note.
    shared: dict[str, set[str]] = defaultdict(set)
    shared_with: dict[str, set[str]] = defaultdict(set)
    for item in result.shared_devices:
        for name in item.classes:
            shared[name].add(item.device.label)
            shared_with[name].update(o for c in item.classes if (o := offering_of.get(c)) and c != name)

    empty = set(result.empty_classes)
    for offering in plan.offerings:
        check = f"offering {offering.name}"
        class_name = primary.get(offering.name, offering.device_class)
        found = by_class.get(class_name)
        if found is None:
            report.warn(check, f"class {class_name} was not evaluated against the devices")
        elif not found.evaluable:
            continue  # its selector errors are reported below
        elif class_name in empty or not found.devices:
            report.fail(
                check,
                f"class {class_name} selects none of the {len(devices)} published devices: no node offers "
                f"{offering.display_name}",
            )
        else:
            on = {d.node for d in found.devices}
            note = ""
            others = sorted(shared_with[class_name] - {offering.name})
            if others:
                note = f"; {len(shared[class_name])} shared with {', '.join(others)} by design"
            report.ok(
                check,
                f"{count(len(found.devices), 'device')} on {count(len(on), 'node')} (class {class_name}{note})",
            )

    # The match engine already ignores alias classes and the chart's generic nvidia.com/gpu; name only
    # the specific offerings that collide.
    chart_served = {o.name for o in plan.offerings if o.served_by is ServedBy.dra_driver_chart}
    overlaps: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for overlap in result.overlaps:
        hit = {offering_of.get(c) or c for c in overlap.classes}
        specific = hit - chart_served
        overlaps[tuple(sorted(specific if len(specific) > 1 else hit))].append(overlap.device.label)
    for names, labels in sorted(overlaps.items()):
        report.fail(
            f"overlap {' & '.join(names)}",
            f"{len(labels)} devices are selected by {len(names)} offerings ({_listed(labels)}): a request "
            "for one could take the other's hardware. Narrow their selectors",
        )
    for failure_line in _selector_failures(result):
        report.line(*failure_line)

    if result.unselected_devices:
        kinds: dict[str, list[str]] = defaultdict(list)
        for device in result.unselected_devices:
            kind = " ".join(x for x in (device.product_name, device.profile or device.device_type) if x)
            kinds[kind or device.driver].append(device.label)
        groups = "; ".join(f"{len(labels)}x {kind} ({_listed(labels)})" for kind, labels in sorted(kinds.items()))
        report.warn(
            "unselected-devices",
            f"{count(len(result.unselected_devices), 'device')} no offering selects: {groups}",
        )


def check_driver_version(devices: Sequence[Device], report: Report) -> None:
    """The GPUCluster needs driver 580 or later, which no definition can prove: the DRA driver publishes it."""
    versions: dict[str, set[str]] = defaultdict(set)
    old: set[str] = set()
    for device in devices:
        version = device.attribute("driverVersion") if device.driver == DRA_DRIVER else None
        if isinstance(version, Semver):
            versions[str(version)].add(device.node)
            if version.major < dra_mode.MIN_DRIVER_MAJOR:
                old.add(device.node)
    if old:
        found = "; ".join(f"{v} on {_listed(sorted(n))}" for v, n in sorted(versions.items()) if n & old)
        report.fail(
            "driver-version",
            f"the GPU Operator's GPUCluster needs NVIDIA driver {dra_mode.MIN_DRIVER_MAJOR} or later; published: "
            f"{found}. Upgrade the driver on those nodes",
        )
    elif versions:
        report.ok("driver-version", f"NVIDIA driver {', '.join(sorted(versions))} (the GPUCluster needs 580+)")


def _selector_failures(result: MatchReport) -> list[tuple[Status, str, str]]:
    """One line per failing selector; an evaluation error usually repeats on many devices."""
    grouped: dict[tuple[str, int, str, str], list[str]] = defaultdict(list)
    for failure in result.errors:
        key = (failure.class_name, failure.selector_index, failure.kind, failure.message)
        grouped[key].extend([failure.device.label] if failure.device is not None else [])
    lines: list[tuple[Status, str, str]] = []
    for (class_name, index, kind, message), labels in grouped.items():
        check = f"device-class {class_name}"
        if kind == "unsupported":
            lines.append(("WARN", check, f"selectors[{index}] cannot be checked offline: {message}"))
        elif kind == "compile":
            lines.append(("FAIL", check, f"selectors[{index}] does not compile: {' '.join(message.split())}"))
        else:
            lines.append(
                (
                    "FAIL",
                    check,
                    f"selectors[{index}] fails on {_listed(labels)}: {message} (allocation would abort)",
                )
            )
    return lines
