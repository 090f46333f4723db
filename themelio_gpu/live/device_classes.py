"""The live DeviceClasses against the plan's: each present, serving its extended resource name with the
planned selector, and every name served by one class only (the scheduler would pick the newest).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from themelio_gpu.inputs.catalog.model import ServedBy
from themelio_gpu.k8s.dra import serving_class
from themelio_gpu.k8s.nvidia import GPU_CLASS
from themelio_gpu.live.api import DEVICE_CLASSES, Api
from themelio_gpu.live.report import Report
from themelio_gpu.plan.model import ClusterPlan, DeviceClassSpec
from themelio_gpu.words import count


@dataclass(frozen=True)
class LiveClass:
    name: str
    extended_resource_name: str | None
    selectors: tuple[str, ...]
    created: str


def expected_device_classes(plan: ClusterPlan) -> tuple[DeviceClassSpec, ...]:
    """The plan's classes plus the installer's class that maps a chart-served name an offering relies on.

    With the DRA chart that is its `gpu.nvidia.com`; the GPU Operator's maps no name, and the plan's own
    classes already hold the stand-in for it.
    """
    classes = {c.name: c for c in plan.device_classes}
    mapped = {d.extended_resource_name: d for d in plan.driver_classes if d.extended_resource_name}
    for offering in plan.offerings:
        names = [offering.name] if offering.served_by is ServedBy.dra_driver_chart else []
        if plan.definition.serve_migration_aliases:
            names += [a.name for a in offering.aliases if a.served_by is ServedBy.dra_driver_chart]
        for name in names:
            if name in mapped:
                driver = mapped[name]
                classes.setdefault(
                    driver.name, DeviceClassSpec(driver.name, name, driver.selector, offering.name, False)
                )
    return tuple(sorted(classes.values(), key=lambda c: c.name))


def _live_class(item: Mapping[str, Any]) -> LiveClass:
    metadata = item.get("metadata") or {}
    spec = item.get("spec") or {}
    selectors = tuple(
        str((s.get("cel") or {}).get("expression", "")) for s in spec.get("selectors") or [] if isinstance(s, dict)
    )
    return LiveClass(
        name=str(metadata.get("name", "")),
        extended_resource_name=spec.get("extendedResourceName") or None,
        selectors=selectors,
        created=str(metadata.get("creationTimestamp", "")),
    )


def winning_class(classes: Sequence[LiveClass]) -> LiveClass:
    """The class the scheduler picks (k8s/dra.py `serving_class`)."""
    return serving_class(classes, created=lambda c: c.created, name=lambda c: c.name)


def _installer(plan: ClusterPlan) -> str:
    if plan.definition.dra_by_gpu_operator:
        return f"the GPU Operator's GPUCluster (release in namespace {plan.definition.gpu_operator.namespace})"
    return f"the DRA driver release in namespace {plan.definition.dra_driver.namespace}"


def check_device_classes(plan: ClusterPlan, api: Api, report: Report) -> tuple[LiveClass, ...]:
    live = tuple(_live_class(item) for item in api.list_items(DEVICE_CLASSES))
    by_name = {c.name: c for c in live}
    by_resource: dict[str, list[LiveClass]] = defaultdict(list)
    for cls in live:
        if cls.extended_resource_name:
            by_resource[cls.extended_resource_name].append(cls)

    expected = expected_device_classes(plan)
    driver_names = {d.name for d in plan.driver_classes}
    for spec in expected:
        check = f"device-class {spec.name}"
        found = by_name.get(spec.name)
        if spec.name in driver_names:
            creator = _installer(plan)
            fix = f"upgrade {creator}"
        else:
            creator = f"the stack {plan.name}"
            fix = f"apply the stack again (cdktf deploy {plan.name})"
        if found is None:
            others = [c.name for c in by_resource.get(spec.extended_resource_name, [])]
            instead = f"; {spec.extended_resource_name} is served by {', '.join(others)} instead" if others else ""
            report.fail(check, f"missing: {creator} has not created it{instead}")
        elif found.extended_resource_name is None:
            report.fail(
                check,
                f"has no spec.extendedResourceName, the plan expects {spec.extended_resource_name}: the API server "
                f"drops the field while DRAExtendedResource is off. Enable the gate, then {fix}",
            )
        elif found.extended_resource_name != spec.extended_resource_name:
            report.fail(
                check,
                f"serves {found.extended_resource_name}, the plan expects {spec.extended_resource_name}: {fix}",
            )
        elif found.selectors != (spec.selector,):
            live_sel = " && ".join(found.selectors) or "(none)"
            report.warn(
                check,
                f"serves {spec.extended_resource_name} but its selector differs from the plan (not applied yet? "
                f"{fix}). Live: {live_sel}; planned: {spec.selector}",
            )
        else:
            report.ok(check, f"serves {spec.extended_resource_name}")

    planned_for = {c.extended_resource_name: c.name for c in expected}
    duplicates = {name: classes for name, classes in sorted(by_resource.items()) if len(classes) > 1}
    for resource, classes in duplicates.items():
        winner = winning_class(classes)
        listed = ", ".join(
            f"{c.name} (created {c.created or 'unknown'})" for c in sorted(classes, key=lambda c: c.name)
        )
        planned = planned_for.get(resource)
        verdict = f"{winner.name}, created later, wins"
        if planned is not None and planned != winner.name:
            verdict += f", not the planned {planned}"
        if planned == winner.name and planned != GPU_CLASS and {c.name for c in classes} == {planned, GPU_CLASS}:
            # servedBy: catalog for the chart's own name: replacing gpu.nvidia.com is deliberate.
            report.warn(
                f"extended-resource {resource}",
                f"served by {listed}; {verdict} as the catalog intends (servedBy: catalog). Reinstalling the "
                "DRA driver chart would make gpu.nvidia.com the newer class",
            )
            continue
        report.fail(
            f"extended-resource {resource}",
            f"served by {len(classes)} DeviceClasses: {listed}; {verdict}. Remove the name from all but one",
        )
    if not duplicates:
        report.ok("extended-resources", f"{count(len(by_resource), 'name')}, each served by one DeviceClass")
    return live
