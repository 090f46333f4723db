"""The fleet: the catalog and every cluster definition, checked together and planned once.

Everything a stack needs is computed here, in plain Python, before any construct exists: the constructs
then only turn a `ClusterPlan` into resources. That keeps the rules testable without cdktf and keeps
jsii round trips to the minimum that the output needs. This module runs the checks in order and assembles
each `ClusterPlan`; each concern is a module of its own (pools, coverage, device_classes, releases,
config_map, kubernetes_version, dra_mode, kueue, renames).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from themelio_gpu.inputs.catalog.catalog import Catalog, ResolvedOffering
from themelio_gpu.inputs.catalog.driver_classes import driver_device_classes
from themelio_gpu.inputs.catalog.loading import load_catalog
from themelio_gpu.inputs.catalog.names import DEFAULT_NAMES
from themelio_gpu.inputs.chart_sources import project_root
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.clusters.files import cluster_definition_files as cluster_definition_files  # re-exported
from themelio_gpu.inputs.clusters.files import clusters_beside_the_catalog, load_cluster_files
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import add_positions, display_path
from themelio_gpu.k8s import names as k8s_names
from themelio_gpu.plan import dra_mode, kueue, renames
from themelio_gpu.plan.config_map import check_catalog_config_map, config_map_spec
from themelio_gpu.plan.coverage import check_coverage
from themelio_gpu.plan.device_classes import check_one_class_per_name, classes_of
from themelio_gpu.plan.kubernetes_version import check_version_gates, version_warnings
from themelio_gpu.plan.model import ClusterPlan, DeviceClassSpec, Fleet
from themelio_gpu.plan.pools import karpenter_dra_pools, pool_contracts
from themelio_gpu.plan.releases import dra_driver_release, operator_release
from themelio_gpu.plan.terraform_version import required_terraform_version
from themelio_gpu.speedups import paused_collector


def load_fleet(catalog_path: Path, stacks_dir: Path, unchanged: Mapping[str, str] | None = None) -> Fleet:
    """The checked fleet; raises InputError listing every problem in every file.

    `unchanged` (incremental synthesis only): cluster files that need not be read again, if their bytes
    are the ones given (inputs/clusters/files.py); they end up in `Fleet.reused`, not `Fleet.clusters`."""
    with paused_collector():
        return _load_fleet(catalog_path, stacks_dir, unchanged)


def _load_fleet(catalog_path: Path, stacks_dir: Path, unchanged: Mapping[str, str] | None) -> Fleet:
    problems = Problems()
    catalog = load_catalog(catalog_path, problems, display_path(catalog_path))
    # The cluster files are read and checked even when the catalog is broken: one run shows everything.
    files = load_cluster_files(stacks_dir, problems, unchanged)
    clusters_beside_the_catalog(catalog_path, stacks_dir, problems)
    plans = []
    root = project_root(catalog_path)
    for file, definition in files.definitions:
        plan = plan_cluster(catalog, definition, file, problems, root)
        if plan is not None:
            plans.append(plan)
    problems.redact(files.secrets)
    add_positions(problems, files.documents)
    problems.raise_if_any()
    assert catalog is not None  # no problems means the catalog loaded
    warnings = Problems()
    for file, definition in files.definitions:
        for location, message in version_warnings(definition):
            warnings.add(file, location, message)
    add_positions(warnings, files.documents)
    advice = Problems()
    for plan in plans:
        for location, message in kueue.ungranted_reserved_pools(plan.definition, plan.pools):
            advice.add(plan.file, location, message)
        for location, message in karpenter_dra_pools(plan.definition):
            advice.add(plan.file, location, message)
    add_positions(advice, files.documents)
    return Fleet(
        catalog=catalog,
        clusters=tuple(sorted(plans, key=lambda p: p.name)),
        warnings=tuple(warnings),
        advice=tuple(advice),
        reused=tuple(sorted(files.reused, key=lambda item: item[1])),
    )


def plan_cluster(
    catalog: Catalog | None, cluster: ClusterDefinition, file: str, problems: Problems, root: Path
) -> ClusterPlan | None:
    """The cluster's plan, or None with its problems recorded; `root`: the project root, which local chart
    folders are relative to (inputs/chart_sources.py).

    Without a catalog (it failed to load) every check that does not need one still runs, and None is returned.
    """
    count = len(problems)
    for message in k8s_names.dns1123_label(cluster.name):
        problems.add(file, ("name",), message)
    # Without a catalog (its problems are reported) this project's names stand in, so every other check runs.
    names = catalog.names if catalog is not None else DEFAULT_NAMES

    by_operator = cluster.dra_by_gpu_operator
    derivable = dra_mode.check_mode(cluster, file, problems)
    offerings = _served_offerings(catalog, cluster, file, problems) if catalog is not None else ()
    pools = pool_contracts(cluster, catalog.products if catalog is not None else None, names, file, problems)
    renames.check_renames(cluster, file, problems)
    dra = any(p.dra for p in cluster.node_pools)
    if dra:
        check_version_gates(cluster, file, problems)
    # A pool of an unknown product (reported above) is left out: every offering it would serve would be
    # reported as unplaced too, burying the cause under its consequences.
    every_pool = len(pools) == len(cluster.node_pools)
    placements = check_coverage(cluster, offerings, pools, file, problems) if every_pool else MappingProxyType({})

    advertised: list[str] = []
    classes: list[DeviceClassSpec] = []
    for offering in offerings:
        advertised.extend(offering.advertised_names(cluster.serve_migration_aliases))
        if dra:
            classes.extend(classes_of(offering, cluster.serve_migration_aliases, by_operator, names))

    mirror = catalog.chart_mirror if catalog is not None else None
    operator = operator_release(cluster, pools, file, problems, check_derived=derivable, mirror=mirror, root=root)
    dra_mode.check_operator_values(cluster, operator.values, file, problems)
    releases = [operator]
    if dra and not by_operator:
        releases.append(dra_driver_release(cluster, file, problems, mirror, root))
    for message in k8s_names.dns1123_label(cluster.gpu_operator.namespace):
        problems.add(file, ("gpuOperator", "namespace"), message)
    config_map = config_map_spec(cluster, names)
    check_catalog_config_map(cluster, config_map, dra, names, file, problems)
    driver_classes = (
        driver_device_classes(by_gpu_operator=by_operator, compute_domains=cluster.dra_driver.compute_domains)
        if dra
        else ()
    )
    check_one_class_per_name(cluster, classes, driver_classes, file, problems)
    for where, message in kueue.check_queues(cluster, pools, names):
        problems.add(file, where, message)
    if len(problems) > count or catalog is None:
        return None
    plan = ClusterPlan(
        definition=cluster,
        file=file,
        offerings=offerings,
        advertised_names=tuple(sorted(advertised)),
        device_classes=tuple(sorted(classes, key=lambda c: c.name)),
        driver_classes=driver_classes,
        pools=pools,
        placements=placements,
        products=catalog.products,
        releases=tuple(releases),
        terraform_version=required_terraform_version(cluster),
        names=names,
        config_map=config_map,
    )
    # What Kueue's CRDs would refuse in the cluster's kueue.yaml (catalog export) is refused here, as input.
    limits = kueue.limit_problems(plan)
    for where, message in limits:
        problems.add(file, where, message)
    return None if limits else plan


def _served_offerings(
    catalog: Catalog, cluster: ClusterDefinition, file: str, problems: Problems
) -> tuple[ResolvedOffering, ...]:
    served: dict[str, ResolvedOffering] = {}
    for index, name in enumerate(cluster.offerings):
        where = ("offerings", index)
        offering = catalog.offerings.get(name)
        if offering is None:
            target = catalog.find(name)
            if target is not None:
                problems.add(file, where, f"{name} is a migration alias of {target.name}; list {target.name}")
            else:
                problems.add(
                    file,
                    where,
                    f"{name} is not in the catalog {catalog.file}; known: {', '.join(catalog.offerings)}",
                )
        elif name in served:
            problems.add(file, where, f"{name} is listed twice")
        else:
            served[name] = offering
    return tuple(served[n] for n in sorted(served))
