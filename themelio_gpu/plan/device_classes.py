"""The DeviceClasses a cluster's stack creates for its offerings, and the one-class-per-name rule.

Apart from the fleet's orchestration because which classes exist depends on who serves each name (the
catalog, the DRA driver chart, or the GPU Operator's driver), and two classes for one extended resource
name must never coexist.
"""

from __future__ import annotations

from collections.abc import Sequence

from themelio_gpu.inputs.catalog.catalog import ResolvedOffering
from themelio_gpu.inputs.catalog.driver_classes import DriverClass
from themelio_gpu.inputs.catalog.model import ServedBy
from themelio_gpu.inputs.catalog.names import Names
from themelio_gpu.inputs.catalog.selectors import CHART_CLASS_SELECTORS
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.k8s.nvidia import GPU_CLASS
from themelio_gpu.plan.model import DeviceClassSpec


def check_one_class_per_name(
    cluster: ClusterDefinition,
    classes: Sequence[DeviceClassSpec],
    driver_classes: Sequence[DriverClass],
    file: str,
    problems: Problems,
) -> None:
    """Never two DeviceClasses for one extended resource name: the scheduler takes the most recently created,
    so which devices a request gets would change whenever either class is recreated (a chart upgrade)."""
    installer = {d.extended_resource_name: d.name for d in driver_classes if d.extended_resource_name}
    for spec in classes:
        other = installer.get(spec.extended_resource_name)
        if other is None:
            continue
        name = spec.extended_resource_name
        problems.add(
            file,
            ("offerings", cluster.offerings.index(spec.offering)),
            f"{name} would be advertised by two DeviceClasses: {spec.name} of the catalog and {other} of the "
            f"DRA driver chart, which always maps {name} on resource.k8s.io/v1 (no value turns it off), and the "
            f"scheduler uses whichever was created last. Serve {name} with servedBy: dra-driver-chart in the "
            "catalog, or let the GPU Operator install the DRA driver (draDriver.managedBy: gpu-operator), whose "
            f"{other} advertises no name",
        )


def classes_of(
    offering: ResolvedOffering, with_aliases: bool, by_operator: bool, names: Names
) -> list[DeviceClassSpec]:
    """The classes the stack creates for one offering (and its aliases, while the cluster migrates).

    A chart-served name needs no class of ours beside the DRA chart, whose gpu.nvidia.com maps it. The GPU
    Operator's gpu.nvidia.com maps no name, so there the stack creates `names.generic_gpu_class` with the same
    selector (any whole GPU): without it, requests for the name would never be satisfied.
    """
    served = [(offering.name, offering.served_by, offering.device_class, False)]
    if with_aliases:
        served += [(a.name, a.served_by, a.device_class, True) for a in offering.aliases]
    classes = []
    for name, served_by, device_class, is_alias in served:
        if served_by is ServedBy.catalog:
            classes.append(DeviceClassSpec(device_class, name, offering.selector, offering.name, is_alias))
        elif by_operator:
            selector = CHART_CLASS_SELECTORS[GPU_CLASS]
            classes.append(DeviceClassSpec(names.generic_gpu_class, name, selector, offering.name, is_alias))
    return classes
