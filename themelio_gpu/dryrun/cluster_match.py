"""The catalog's DeviceClasses, and the DRA driver installer's own, dry-run against real ResourceSlices.

Used by the `match` command (offline, from `kubectl get resourceslices -o json`) and by `preflight`
(live), so both judge a cluster the same way.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from themelio_gpu import exits
from themelio_gpu.dryrun.match import ClassUnderTest, MatchReport, match_classes, render_report, report_as_dict
from themelio_gpu.dryrun.resourceslices import Device, ResourceSliceError, load_resourceslices
from themelio_gpu.dryrun.trial import violations
from themelio_gpu.inputs.catalog.catalog import Catalog, ResolvedOffering
from themelio_gpu.inputs.catalog.driver_classes import DriverClass, driver_device_classes
from themelio_gpu.inputs.catalog.model import ServedBy
from themelio_gpu.inputs.catalog.products import GpuProduct
from themelio_gpu.k8s.nvidia import GPU, GPU_CLASS, MIG_CLASS
from themelio_gpu.plan.model import ClusterPlan, Fleet


def _chart_served(offerings: Iterable[ResolvedOffering], with_aliases: bool) -> bool:
    """Whether the catalog relies on a chart-served name (`nvidia.com/gpu`) in these offerings."""
    return any(
        name == GPU
        for o in offerings
        for name, served_by in ((o.name, o.served_by), *((a.name, a.served_by) for a in o.aliases if with_aliases))
        if served_by is ServedBy.dra_driver_chart
    )


def _driver_classes(drivers: Iterable[DriverClass], chart_served: bool) -> list[ClassUnderTest]:
    """The installer's GPU classes; `gpu.nvidia.com` counts as an offering when it maps the relied-on name."""
    classes = []
    for driver in drivers:
        if driver.name == GPU_CLASS:
            serves = chart_served and driver.extended_resource_name == GPU
            # Any whole GPU: the generic legacy name shares its devices with the product offerings.
            offering = GPU if serves else None
            classes.append(
                ClassUnderTest(
                    driver.name, driver.extended_resource_name, [driver.selector], offering, shares_devices=True
                )
            )
        elif driver.name == MIG_CLASS:
            classes.append(ClassUnderTest(driver.name, None, [driver.selector], None))
    return classes


def classes_for_cluster(plan: ClusterPlan) -> list[ClassUnderTest]:
    # A capability offering that declares `overlaps: allowed` shares devices with others on purpose.
    allowed = {o.name for o in plan.offerings if o.overlaps_allowed}
    classes = [
        # Our stand-in for a chart-served name selects any whole GPU, like the chart's class; so does a
        # capability offering with `overlaps: allowed`, on purpose.
        ClassUnderTest(
            c.name,
            c.extended_resource_name,
            [c.selector],
            c.offering,
            shares_devices=c.name == plan.names.generic_gpu_class or c.offering in allowed,
        )
        for c in plan.device_classes
    ]
    chart_served = _chart_served(plan.offerings, plan.definition.serve_migration_aliases)
    return classes + _driver_classes(plan.driver_classes, chart_served)


def offering_classes(offering: ResolvedOffering) -> list[ClassUnderTest]:
    """The catalog's own classes of one offering: its class and its aliases' (none when the chart serves it)."""
    classes = []
    if offering.served_by is ServedBy.catalog:
        classes.append(
            ClassUnderTest(
                offering.device_class, offering.name, [offering.selector], offering.name, offering.overlaps_allowed
            )
        )
    classes.extend(
        ClassUnderTest(
            alias.device_class, alias.name, [offering.selector], offering.name, offering.overlaps_allowed
        )
        for alias in offering.aliases
        if alias.served_by is ServedBy.catalog
    )
    return classes


def classes_for_catalog(catalog: Catalog) -> list[ClassUnderTest]:
    classes = [item for offering in catalog for item in offering_classes(offering)]
    # The catalog alone: the DRA chart's classes, as the default install has them.
    drivers = driver_device_classes(by_gpu_operator=False, compute_domains=False)
    return classes + _driver_classes(drivers, _chart_served(catalog, with_aliases=True))


def match_cluster(plan: ClusterPlan, devices: Sequence[Device]) -> MatchReport:
    return match_classes(classes_for_cluster(plan), devices)


def absent_offerings(
    offerings: Iterable[ResolvedOffering], devices: Sequence[Device], products: Mapping[str, GpuProduct]
) -> set[str]:
    """The offerings none of whose devices are among `devices`, judged on the catalog's facts (no CEL): on a
    whole-GPU node, the MIG offerings; on an A100 node, the H100 one."""
    return {o.name for o in offerings if all(violations(o, device, products) for device in devices)}


def match_command(fleet: Fleet, slices: Path, plan: ClusterPlan | None, as_json: bool) -> int:
    """Print the dry run of the classes of `plan` (None: every offering of the catalog); 0 when every offering
    whose devices the slices hold selects them and none overlap, 1 otherwise, 2 bad input. Slices of some nodes
    only are fine: an offering not there is not a problem."""
    if plan is not None:
        classes, offerings = classes_for_cluster(plan), plan.offerings
    else:
        classes, offerings = classes_for_catalog(fleet.catalog), tuple(fleet.catalog)
    try:
        devices = load_resourceslices(slices)
    except ResourceSliceError as error:
        print("\n".join(error.problems), file=sys.stderr)
        return exits.BAD_INPUT
    report = match_classes(classes, devices, absent_offerings(offerings, devices, fleet.catalog.products))
    if as_json:
        print(json.dumps(report_as_dict(report), indent=2, sort_keys=True))
    else:
        print(render_report(report), end="")
    return exits.OK if report.ok else exits.FAILED
