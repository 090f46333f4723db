"""The fleet: the catalog and every cluster definition, checked together and planned once.

Everything a stack needs is computed here, in plain Python, before any construct exists: the constructs
then only turn a `ClusterPlan` into resources. That keeps the rules testable without cdktf and keeps
jsii round trips to the minimum that the output needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from themelio_gpu.inputs.catalog.capability import DeviceKind
from themelio_gpu.inputs.catalog.catalog import Catalog, ResolvedOffering, load_catalog
from themelio_gpu.inputs.catalog.driver_classes import DriverClass, driver_device_classes
from themelio_gpu.inputs.catalog.model import ServedBy
from themelio_gpu.inputs.catalog.names import BUILT_IN_NAMESPACES, DEFAULT_NAMES, Names
from themelio_gpu.inputs.catalog.products import (
    PRODUCTS,
    GpuProduct,
    unknown_product_message,
)
from themelio_gpu.inputs.catalog.selectors import CHART_CLASS_SELECTORS
from themelio_gpu.inputs.clusters.definition import ClusterDefinition, Component
from themelio_gpu.inputs.clusters.files import cluster_definition_files as cluster_definition_files  # re-exported
from themelio_gpu.inputs.clusters.files import clusters_beside_the_catalog, load_cluster_files
from themelio_gpu.inputs.clusters.pool_contract import PoolContract, pool_contract
from themelio_gpu.inputs.problems import KeyPath, Problems
from themelio_gpu.inputs.yaml_input import add_positions, display_path
from themelio_gpu.k8s import names as k8s_names
from themelio_gpu.k8s.dra import (
    EXTENDED_RESOURCE_GATE,
    RESOURCE_API_MINOR,
    RESOURCE_API_VERSION,
    extended_resource_gate,
    extended_resource_on_by_default_from,
)
from themelio_gpu.k8s.nvidia import GPU_CLASS, device_plugin_resource
from themelio_gpu.plan import dra_mode, kueue, renames
from themelio_gpu.plan.helm import values as helm_values
from themelio_gpu.plan.helm.known_values import (
    UnsupportedChartVersion,
    deep_merge,
    parse_path,
    render_values_yaml,
    unknown_value_paths,
)
from themelio_gpu.plan.kubernetes_version import version_warnings
from themelio_gpu.plan.model import ClusterPlan, ConfigMapSpec, DeviceClassSpec, Fleet, HelmReleaseSpec
from themelio_gpu.plan.terraform_version import required_terraform_version

ALL_COMPONENTS = tuple(Component)


def config_map_spec(cluster: ClusterDefinition, names: Names) -> ConfigMapSpec | None:
    given = cluster.catalog_config_map
    if given is None:
        return None
    namespace = names.namespace if given.namespace is None else given.namespace  # "" is checked, not replaced
    return ConfigMapSpec(namespace, names.config_map_name if given.name is None else given.name)


def load_fleet(catalog_path: Path, stacks_dir: Path, unchanged: Mapping[str, str] | None = None) -> Fleet:
    """The checked fleet; raises InputError listing every problem in every file.

    `unchanged` (incremental synthesis only): cluster files that need not be read again, if their bytes
    are the ones given (inputs/clusters/files.py); they end up in `Fleet.reused`, not `Fleet.clusters`."""
    problems = Problems()
    catalog = load_catalog(catalog_path, problems, display_path(catalog_path))
    # The cluster files are read and checked even when the catalog is broken: one run shows everything.
    files = load_cluster_files(stacks_dir, problems, unchanged)
    clusters_beside_the_catalog(catalog_path, stacks_dir, problems)
    plans = []
    for file, definition in files.definitions:
        plan = plan_cluster(catalog, definition, file, problems)
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
    add_positions(advice, files.documents)
    return Fleet(
        catalog=catalog,
        clusters=tuple(sorted(plans, key=lambda p: p.name)),
        warnings=tuple(warnings),
        advice=tuple(advice),
        reused=tuple(sorted(files.reused, key=lambda item: item[1])),
    )


def plan_cluster(
    catalog: Catalog | None, cluster: ClusterDefinition, file: str, problems: Problems
) -> ClusterPlan | None:
    """The cluster's plan, or None with its problems recorded.

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
    pools = _pool_contracts(cluster, catalog.products if catalog is not None else None, names, file, problems)
    renames.check_renames(cluster, file, problems)
    dra = any(p.dra for p in cluster.node_pools)
    if dra:
        _check_version_gates(cluster, file, problems)
    # A pool of an unknown product (reported above) is left out: every offering it would serve would be
    # reported as unplaced too, burying the cause under its consequences.
    every_pool = len(pools) == len(cluster.node_pools)
    placements = _check_coverage(cluster, offerings, pools, file, problems) if every_pool else MappingProxyType({})

    advertised: list[str] = []
    classes: list[DeviceClassSpec] = []
    for offering in offerings:
        advertised.extend(offering.advertised_names(cluster.serve_migration_aliases))
        if dra:
            classes.extend(_classes_of(offering, cluster.serve_migration_aliases, by_operator, names))

    operator = _merged_values(
        helm_values.OPERATOR_CHART,
        cluster.gpu_operator.version,
        helm_values.gpu_cluster_operator_values(cluster, pools)
        if by_operator
        else helm_values.operator_values(cluster, pools),
        cluster.gpu_operator.values,
        file,
        "gpuOperator",
        problems,
        check_derived=derivable,
    )
    dra_mode.check_operator_values(cluster, operator, file, problems)
    release = cluster.gpu_operator
    releases = [
        HelmReleaseSpec(
            helm_values.OPERATOR_CHART,
            helm_values.OPERATOR_CHART,
            release.version,
            release.repository,
            release.namespace,
            operator,
            release.timeout_seconds,
        )
    ]
    if dra and not by_operator:
        for message in _namespace_problems(cluster.dra_driver.namespace):
            problems.add(file, ("draDriver", "namespace"), message)
        dra_values = _merged_values(
            cluster.dra_driver.chart,
            cluster.dra_driver.version,
            helm_values.dra_driver_values(cluster, pools),
            cluster.dra_driver.values,
            file,
            "draDriver",
            problems,
        )
        chart = cluster.dra_driver
        releases.append(
            HelmReleaseSpec(
                helm_values.dra_release_name(cluster),
                chart.chart,
                chart.version,
                chart.chart_repository,
                chart.namespace,
                dra_values,
                chart.timeout_seconds,
            )
        )
    for message in k8s_names.dns1123_label(cluster.gpu_operator.namespace):
        problems.add(file, ("gpuOperator", "namespace"), message)
    config_map = config_map_spec(cluster, names)
    _check_catalog_config_map(cluster, config_map, dra, names, file, problems)
    driver_classes = (
        driver_device_classes(by_gpu_operator=by_operator, compute_domains=cluster.dra_driver.compute_domains)
        if dra
        else ()
    )
    _check_one_class_per_name(cluster, classes, driver_classes, file, problems)
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


def _check_one_class_per_name(
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


def _classes_of(
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


def _namespace_problems(namespace: str) -> list[str]:
    if namespace == "default":
        return ["the DRA driver chart refuses the default namespace; use e.g. nvidia-dra-driver-gpu"]
    return k8s_names.dns1123_label(namespace)


def _check_catalog_config_map(
    cluster: ClusterDefinition,
    config_map: ConfigMapSpec | None,
    dra: bool,
    names: Names,
    file: str,
    problems: Problems,
) -> None:
    if config_map is None:
        return
    namespace = config_map.namespace
    # Where the fleet's default namespace is the problem, the example would be the problem itself.
    own = (
        f"e.g. {names.namespace}"
        if namespace != names.namespace
        else "with catalogConfigMap.namespace here or names.namespace in the catalog"
    )
    # The provider checks both names as DNS subdomains; the API server wants a namespace to be a DNS label.
    for message in k8s_names.dns1123_label(namespace):
        problems.add(file, ("catalogConfigMap", "namespace"), message)
    for message in k8s_names.dns1123_subdomain(config_map.name):
        problems.add(file, ("catalogConfigMap", "name"), message)
    releases = {cluster.gpu_operator.namespace: "the GPU Operator release"}
    if dra:
        releases.setdefault(cluster.dra_driver.namespace, "the DRA driver release")
    if namespace in BUILT_IN_NAMESPACES:
        problems.add(
            file,
            ("catalogConfigMap", "namespace"),
            f"{namespace} exists in every cluster, and the stack creates this namespace "
            f"(kubernetes_namespace_v1 fails when it exists): choose one of its own, {own}",
        )
    elif namespace in releases:
        problems.add(
            file,
            ("catalogConfigMap", "namespace"),
            f"{namespace} is also the namespace of {releases[namespace]}, which creates it (create_namespace); "
            f"two resources creating one namespace race on apply: choose one of its own, {own}",
        )


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


def _pool_contracts(
    cluster: ClusterDefinition,
    products: Mapping[str, GpuProduct] | None,
    names: Names,
    file: str,
    problems: Problems,
) -> tuple[PoolContract, ...]:
    device_plugin = any(not p.dra for p in cluster.node_pools)
    contracts = []
    pool_names: dict[str, int] = {}
    node_owner: dict[str, str] = {}
    for index, pool in enumerate(cluster.node_pools):
        where = ("nodePools", index)
        for message in k8s_names.dns1123_label(pool.name):
            problems.add(file, (*where, "name"), message)
        if pool.name in pool_names:
            problems.add(file, (*where, "name"), f"pool {pool.name!r} is also nodePools[{pool_names[pool.name]}]")
        pool_names.setdefault(pool.name, index)
        static = pool.provisioning.static
        for node in static.nodes if static else ():
            for message in k8s_names.dns1123_subdomain(node):
                problems.add(file, (*where, "provisioning", "static", "nodes"), message)
            if node in node_owner:
                problems.add(
                    file,
                    (*where, "provisioning", "static", "nodes"),
                    f"node {node} is already in pool {node_owner[node]}; a node belongs to one pool",
                )
            node_owner.setdefault(node, pool.name)
        karpenter = pool.provisioning.karpenter
        if karpenter is not None and not cluster.karpenter:
            problems.add(
                file,
                (*where, "provisioning", "karpenter"),
                "the cluster does not declare karpenter: true (Karpenter's CRDs)",
            )
        for i, instance_type in enumerate(karpenter.instance_types if karpenter else ()):
            # Values of a node.kubernetes.io/instance-type requirement: label values, as the NodePool CRD checks.
            for message in k8s_names.label_value(instance_type):
                problems.add(file, (*where, "provisioning", "karpenter", "instanceTypes", i), message)
        # Without a catalog (it failed to load) only the built-in products are known; the others may be
        # the catalog's own, so they are not called unknown.
        product = (PRODUCTS if products is None else products).get(pool.product)
        if product is None:
            if products is not None:
                problems.add(file, (*where, "product"), unknown_product_message(pool.product, products))
            continue
        found: list[tuple[KeyPath, str]] = []
        contract = pool_contract(
            pool, product, device_plugin, found, names, mig_manager=not cluster.dra_by_gpu_operator
        )
        for field, message in found:
            problems.add(file, (*where, *field), message)
        contracts.append(contract)
    return tuple(contracts)


def _check_version_gates(cluster: ClusterDefinition, file: str, problems: Problems) -> None:
    """resource.k8s.io/v1 needs 1.34; extendedResourceName needs DRAExtendedResource (KEP-5004)."""
    minor = cluster.minor_version
    gate = cluster.feature_gates.dra_extended_resource
    stage = extended_resource_gate(minor)
    if minor < RESOURCE_API_MINOR and not cluster.dra_by_gpu_operator:  # that mode says why itself (dra_mode.py)
        problems.add(
            file,
            ("kubernetesVersion",),
            f"cluster {cluster.name} runs Kubernetes {cluster.kubernetes_version}, but DeviceClasses need "
            f"{RESOURCE_API_VERSION} (Kubernetes 1.{RESOURCE_API_MINOR} or later). Upgrade the cluster, or set dra: "
            "false on every pool",
        )
    elif stage is not None and not stage.on_by_default:
        missing = [c.value for c in ALL_COMPONENTS if gate is None or not gate.enabled or c not in gate.components]
        if missing:
            problems.add(
                file,
                ("featureGates", EXTENDED_RESOURCE_GATE),
                f"cluster {cluster.name} runs Kubernetes {cluster.kubernetes_version}, where {EXTENDED_RESOURCE_GATE} "
                f"is {stage.describe()}: without it the API server silently drops spec.extendedResourceName and GPU "
                f"requests are never satisfied. Enable the gate on {', '.join(missing)} and declare it here "
                f"(featureGates.{EXTENDED_RESOURCE_GATE}.components), or upgrade to "
                f"1.{extended_resource_on_by_default_from()}",
            )
    elif stage is not None and gate is not None and not gate.enabled:
        problems.add(
            file,
            ("featureGates", EXTENDED_RESOURCE_GATE, "enabled"),
            f"{EXTENDED_RESOURCE_GATE} is {stage.describe()} in {cluster.kubernetes_version}; extended resource "
            "names need it on" + (" (it cannot be turned off)" if stage.locked else ""),
        )


def _device_plugin_names(offering: ResolvedOffering, pool: PoolContract) -> list[str]:
    """The names the device plugin would advertise on `pool` for the devices `offering` selects."""
    if offering.capability is None:
        return [device_plugin_resource(offering.mig_profile)]
    if pool.mig_devices is None:
        return [device_plugin_resource(None)]
    taken = set(offering.takes)
    return [device_plugin_resource(p) for p in pool.mig_devices if DeviceKind(pool.product.key, p) in taken]


def _pool_misses(
    offering: ResolvedOffering, pool: PoolContract, advertised: Sequence[str], refused_mig: str | None = None
) -> str | None:
    """Why `pool` cannot provide `offering` (None: it can), judged on the facts its class selects on.

    `refused_mig`: where the pool's MIG setting was refused (its own problem says why), so that its missing MIG
    devices are not put down to MIG being off."""
    capability = offering.capability
    if capability is not None:
        misses = capability.product_misses(pool.product)
        if misses:
            return f"pool {pool.name}: {'; '.join(misses)}"
    elif offering.product is not None and pool.product.key != offering.product.key:
        return ""  # another product: not worth a reason
    if not offering.is_mig and not pool.provides_whole():
        return f"pool {pool.name} runs its GPUs in MIG mode, which publishes no whole GPU"
    if offering.is_mig:
        if pool.mig_devices is None:
            layout = f"its MIG setting {refused_mig} is refused" if refused_mig else "MIG off"
        else:
            layout = ", ".join(pool.mig_devices)
        if offering.mig_profile is not None and not pool.provides_mig(offering.mig_profile):
            return f"pool {pool.name} has no {offering.mig_profile} devices ({layout})"
        kinds = set(offering.takes)
        if capability is not None and not any(
            DeviceKind(pool.product.key, p) in kinds for p in (pool.mig_devices or {})
        ):
            return f"pool {pool.name} has no MIG devices that can meet it ({layout})"
    plugin_names = _device_plugin_names(offering, pool)
    if not pool.dra and not set(plugin_names) & set(advertised):
        shown = ", ".join(plugin_names)
        return f"pool {pool.name} uses the device plugin, which advertises {shown}, not {offering.name}"
    return None


def _check_coverage(
    cluster: ClusterDefinition,
    offerings: Sequence[ResolvedOffering],
    pools: Sequence[PoolContract],
    file: str,
    problems: Problems,
) -> Mapping[str, tuple[str, ...]]:
    """Every offering the cluster serves needs a pool whose GPUs publish its devices; returns the placements."""
    placements: dict[str, tuple[str, ...]] = {}
    refused = {
        p.name: f"nodePools[{i}].mig"
        for i, p in enumerate(cluster.node_pools)
        if p.mig is not None and any(c.name == p.name and c.mig_devices is None for c in pools)
    }
    for offering in offerings:
        names = offering.advertised_names(cluster.serve_migration_aliases)
        found = [(pool, _pool_misses(offering, pool, names, refused.get(pool.name))) for pool in pools]
        placements[offering.name] = tuple(pool.name for pool, miss in found if miss is None)
        if placements[offering.name]:
            continue
        reasons = [miss for _, miss in found if miss]
        if offering.capability is not None:
            what = offering.capability.describe()
        else:
            what = f"{offering.product.display_name if offering.product else 'whole'} GPUs"
        detail = "; ".join(reasons) or f"no pool has {what}"
        index = cluster.offerings.index(offering.name)
        problems.add(file, ("offerings", index), f"no node pool can provide {offering.name}: {detail}")
    return MappingProxyType(placements)


def _merged_values(
    chart: str,
    version: str,
    derived: dict[str, Any],
    overrides: Mapping[str, Any],
    file: str,
    where: str,
    problems: Problems,
    *,
    check_derived: bool = True,
) -> dict[str, Any]:
    try:
        unknown = unknown_value_paths(chart, version, overrides)
        # Derived values must exist too: this catches a chart upgrade that renamed a key we set. Not where
        # the chart version was already refused for the mode: each missing key would repeat that message.
        unknown_derived = unknown_value_paths(chart, version, derived) if check_derived else []
        # Helm values are YAML: string keys and plain scalars only (no dates, no integer keys).
        render_values_yaml(overrides)
    except UnsupportedChartVersion as error:
        problems.add(file, (where, "version"), str(error))
        return derived
    except TypeError as error:
        problems.add(file, (where, "values"), f"{error}; quote it in YAML to make it a string")
        return derived
    for item in unknown:
        # At the key itself: its line, not the line of `values:`.
        problems.add(file, (where, "values", *parse_path(item.path)), f"{item} for chart {chart} {version}")
    for item in unknown_derived:
        problems.add(
            file, (where, "version"), f"chart {chart} {version} has no key {item.path}, which this tool sets"
        )
    return deep_merge(derived, overrides)
