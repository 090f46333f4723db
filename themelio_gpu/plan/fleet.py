"""The fleet: the catalog and every cluster definition, checked together and planned once.

Everything a stack needs is computed here, in plain Python, before any construct exists: the constructs
then only turn a `ClusterPlan` into resources. That keeps the rules testable without cdktf and keeps
jsii round trips to the minimum that the output needs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themelio_gpu.inputs import k8s_names
from themelio_gpu.inputs.catalog.catalog import Catalog, ResolvedOffering, load_catalog
from themelio_gpu.inputs.catalog.model import ServedBy
from themelio_gpu.inputs.catalog.products import PRODUCTS, mig_profile_resource_spelling, unknown_product_message
from themelio_gpu.inputs.clusters.definition import ClusterDefinition, Component
from themelio_gpu.inputs.clusters.pool_contract import PoolContract, pool_contract
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.secrets import find_secrets
from themelio_gpu.inputs.yaml_input import (
    YamlDocument,
    add_positions,
    display_path,
    format_location,
    load_yaml_document,
    validate_model,
)
from themelio_gpu.plan.helm import values as helm_values
from themelio_gpu.plan.helm.known_values import (
    UnsupportedChartVersion,
    deep_merge,
    render_values_yaml,
    unknown_value_paths,
)

ALL_COMPONENTS = tuple(Component)


@dataclass(frozen=True)
class DeviceClassSpec:
    name: str
    extended_resource_name: str
    selector: str
    offering: str
    is_alias: bool


@dataclass(frozen=True)
class ClusterPlan:
    definition: ClusterDefinition
    file: str
    offerings: tuple[ResolvedOffering, ...]
    advertised_names: tuple[str, ...]
    """Every extended resource name this cluster serves: offerings, plus aliases while migrating."""
    device_classes: tuple[DeviceClassSpec, ...]
    pools: tuple[PoolContract, ...]
    operator_values: Mapping[str, Any]
    dra_values: Mapping[str, Any] | None
    """None when no pool uses DRA: then neither the DRA driver nor DeviceClasses are installed."""

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def dra_enabled(self) -> bool:
        return self.dra_values is not None


@dataclass(frozen=True)
class Fleet:
    catalog: Catalog
    clusters: tuple[ClusterPlan, ...]

    def cluster(self, name: str) -> ClusterPlan | None:
        return next((c for c in self.clusters if c.name == name), None)

    def clusters_serving(self, offering: str) -> tuple[str, ...]:
        return tuple(c.name for c in self.clusters if any(o.name == offering for o in c.offerings))


def cluster_definition_files(stacks_dir: Path, problems: Problems) -> list[Path]:
    shown = display_path(stacks_dir)
    if not stacks_dir.is_dir():
        problems.add(shown, "", "folder of cluster definitions not found")
        return []
    files = sorted(p for p in stacks_dir.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    if not files:
        problems.add(shown, "", "no cluster definitions (*.yaml) in this folder")
    return files


def load_fleet(catalog_path: Path, stacks_dir: Path) -> Fleet:
    """The checked fleet; raises InputError listing every problem in every file."""
    problems = Problems()
    catalog = load_catalog(catalog_path, problems, display_path(catalog_path))
    # The cluster files are read and checked even when the catalog is broken: one run shows everything.
    documents: dict[str, YamlDocument] = {}
    secrets: list[str] = []
    definitions: list[tuple[str, ClusterDefinition]] = []
    for path in cluster_definition_files(stacks_dir, problems):
        shown = display_path(path)
        before = len(problems)
        document = load_yaml_document(path, problems, shown)
        if document is None or document.data is None:
            if len(problems) == before:
                problems.add(shown, "", "the file is empty")
            continue
        documents[shown] = document
        for finding in find_secrets(document.data):
            problems.add(shown, format_location(finding.path), finding.message)
            secrets += [finding.secret] if finding.secret else []
        definition = validate_model(ClusterDefinition, document.data, shown, problems, document=document)
        if definition is not None:
            definitions.append((shown, definition))
    seen: dict[str, str] = {}
    for file, definition in definitions:
        if definition.name in seen:
            problems.add(file, "name", f"cluster {definition.name!r} is also defined in {seen[definition.name]}")
        seen.setdefault(definition.name, file)
    plans = []
    for file, definition in definitions:
        plan = plan_cluster(catalog, definition, file, problems)
        if plan is not None:
            plans.append(plan)
    problems.redact(secrets)
    add_positions(problems, documents)
    problems.raise_if_any()
    assert catalog is not None  # no problems means the catalog loaded
    return Fleet(catalog=catalog, clusters=tuple(sorted(plans, key=lambda p: p.name)))


def plan_cluster(
    catalog: Catalog | None, cluster: ClusterDefinition, file: str, problems: Problems
) -> ClusterPlan | None:
    """The cluster's plan, or None with its problems recorded.

    Without a catalog (it failed to load) every check that does not need one still runs, and None is returned.
    """
    count = len(problems)
    for message in k8s_names.dns1123_label(cluster.name):
        problems.add(file, "name", message)

    offerings = _served_offerings(catalog, cluster, file, problems) if catalog is not None else ()
    pools = _pool_contracts(cluster, file, problems)
    dra = any(p.dra for p in cluster.node_pools)
    if dra:
        _check_version_gates(cluster, file, problems)
    _check_coverage(cluster, offerings, pools, file, problems)

    names: list[str] = []
    classes: list[DeviceClassSpec] = []
    for offering in offerings:
        names.extend(offering.advertised_names(cluster.serve_migration_aliases))
        if not dra:
            continue
        if offering.served_by is ServedBy.catalog:
            classes.append(
                DeviceClassSpec(offering.device_class, offering.name, offering.selector, offering.name, False)
            )
        if cluster.serve_migration_aliases:
            classes.extend(
                DeviceClassSpec(a.device_class, a.name, offering.selector, offering.name, True)
                for a in offering.aliases
                if a.served_by is ServedBy.catalog
            )

    operator = _merged_values(
        helm_values.OPERATOR_CHART,
        cluster.gpu_operator.version,
        helm_values.operator_values(cluster, pools),
        cluster.gpu_operator.values,
        file,
        "gpuOperator",
        problems,
    )
    dra_values = None
    if dra:
        for message in _namespace_problems(cluster.dra_driver.namespace):
            problems.add(file, "draDriver.namespace", message)
        dra_values = _merged_values(
            cluster.dra_driver.chart,
            cluster.dra_driver.version,
            helm_values.dra_driver_values(cluster, pools),
            cluster.dra_driver.values,
            file,
            "draDriver",
            problems,
        )
    for message in k8s_names.dns1123_label(cluster.gpu_operator.namespace):
        problems.add(file, "gpuOperator.namespace", message)
    if len(problems) > count or catalog is None:
        return None
    return ClusterPlan(
        definition=cluster,
        file=file,
        offerings=offerings,
        advertised_names=tuple(sorted(names)),
        device_classes=tuple(sorted(classes, key=lambda c: c.name)),
        pools=pools,
        operator_values=operator,
        dra_values=dra_values,
    )


def _namespace_problems(namespace: str) -> list[str]:
    if namespace == "default":
        return ["the DRA driver chart refuses the default namespace; use e.g. nvidia-dra-driver-gpu"]
    return k8s_names.dns1123_label(namespace)


def _served_offerings(
    catalog: Catalog, cluster: ClusterDefinition, file: str, problems: Problems
) -> tuple[ResolvedOffering, ...]:
    served: dict[str, ResolvedOffering] = {}
    for index, name in enumerate(cluster.offerings):
        where = f"offerings[{index}]"
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


def _pool_contracts(cluster: ClusterDefinition, file: str, problems: Problems) -> tuple[PoolContract, ...]:
    device_plugin = any(not p.dra for p in cluster.node_pools)
    contracts = []
    pool_names: dict[str, int] = {}
    node_owner: dict[str, str] = {}
    for index, pool in enumerate(cluster.node_pools):
        where = f"nodePools[{index}]"
        for message in k8s_names.dns1123_label(pool.name):
            problems.add(file, f"{where}.name", message)
        if pool.name in pool_names:
            problems.add(file, f"{where}.name", f"pool {pool.name!r} is also nodePools[{pool_names[pool.name]}]")
        pool_names.setdefault(pool.name, index)
        static = pool.provisioning.static
        for node in static.nodes if static else ():
            for message in k8s_names.dns1123_subdomain(node):
                problems.add(file, f"{where}.provisioning.static.nodes", message)
            if node in node_owner:
                problems.add(
                    file,
                    f"{where}.provisioning.static.nodes",
                    f"node {node} is already in pool {node_owner[node]}; a node belongs to one pool",
                )
            node_owner.setdefault(node, pool.name)
        if pool.provisioning.karpenter is not None and not cluster.karpenter:
            problems.add(
                file,
                f"{where}.provisioning.karpenter",
                "the cluster does not declare karpenter: true (Karpenter's CRDs)",
            )
        product = PRODUCTS.get(pool.product)
        if product is None:
            problems.add(file, f"{where}.product", unknown_product_message(pool.product))
            continue
        found: list[tuple[str, str]] = []
        contract = pool_contract(pool, product, device_plugin, found)
        for field, message in found:
            problems.add(file, f"{where}.{field}", message)
        contracts.append(contract)
    return tuple(contracts)


def _check_version_gates(cluster: ClusterDefinition, file: str, problems: Problems) -> None:
    """resource.k8s.io/v1 needs 1.34; extendedResourceName needs DRAExtendedResource (KEP-5004)."""
    minor = cluster.minor_version
    gate = cluster.feature_gates.dra_extended_resource
    if minor < 34:
        problems.add(
            file,
            "kubernetesVersion",
            f"cluster {cluster.name} runs Kubernetes {cluster.kubernetes_version}, but DeviceClasses need "
            "resource.k8s.io/v1 (Kubernetes 1.34 or later). Upgrade the cluster, or set dra: false on every pool",
        )
    elif minor in (34, 35):
        missing = [c.value for c in ALL_COMPONENTS if gate is None or not gate.enabled or c not in gate.components]
        if missing:
            problems.add(
                file,
                "featureGates.DRAExtendedResource",
                f"cluster {cluster.name} runs Kubernetes {cluster.kubernetes_version}, where DRAExtendedResource is "
                "alpha and off: without it the API server silently drops spec.extendedResourceName and GPU requests "
                f"are never satisfied. Enable the gate on {', '.join(missing)} and declare it here "
                "(featureGates.DRAExtendedResource.components), or upgrade to 1.36",
            )
    elif gate is not None and not gate.enabled:
        stage = "beta and on by default" if minor == 36 else "GA and locked on"
        problems.add(
            file,
            "featureGates.DRAExtendedResource.enabled",
            f"DRAExtendedResource is {stage} in {cluster.kubernetes_version}; extended resource names need it on"
            + (" (it cannot be turned off)" if minor >= 37 else ""),
        )


def _device_plugin_name(offering_mig_profile: str | None) -> str:
    if offering_mig_profile is None:
        return "nvidia.com/gpu"
    return f"nvidia.com/mig-{mig_profile_resource_spelling(offering_mig_profile)}"


def _check_coverage(
    cluster: ClusterDefinition,
    offerings: Sequence[ResolvedOffering],
    pools: Sequence[PoolContract],
    file: str,
    problems: Problems,
) -> None:
    """Every offering the cluster serves needs a pool whose GPUs publish its devices."""
    for offering in offerings:
        names = offering.advertised_names(cluster.serve_migration_aliases)
        ok = False
        reasons = []
        for pool in pools:
            if offering.product is not None and pool.product.key != offering.product.key:
                continue
            if offering.mig_profile is None and not pool.provides_whole():
                reasons.append(f"pool {pool.name} runs its GPUs in MIG mode, which publishes no whole GPU")
                continue
            if offering.mig_profile is not None and not pool.provides_mig(offering.mig_profile):
                layout = "MIG off" if pool.mig_devices is None else ", ".join(pool.mig_devices)
                reasons.append(f"pool {pool.name} has no {offering.mig_profile} devices ({layout})")
                continue
            if not pool.dra and _device_plugin_name(offering.mig_profile) not in names:
                reasons.append(
                    f"pool {pool.name} uses the device plugin, which advertises "
                    f"{_device_plugin_name(offering.mig_profile)}, not {offering.name}"
                )
                continue
            ok = True
            break
        if not ok:
            what = offering.product.display_name if offering.product else "whole"
            detail = "; ".join(reasons) or f"no pool has {what} GPUs"
            index = cluster.offerings.index(offering.name)
            problems.add(file, f"offerings[{index}]", f"no node pool can provide {offering.name}: {detail}")


def _merged_values(
    chart: str,
    version: str,
    derived: dict[str, Any],
    overrides: Mapping[str, Any],
    file: str,
    where: str,
    problems: Problems,
) -> dict[str, Any]:
    try:
        unknown = unknown_value_paths(chart, version, overrides)
        # Derived values must exist too: this catches a chart upgrade that renamed a key we set.
        unknown_derived = unknown_value_paths(chart, version, derived)
        # Helm values are YAML: string keys and plain scalars only (no dates, no integer keys).
        render_values_yaml(overrides)
    except UnsupportedChartVersion as error:
        problems.add(file, f"{where}.version", str(error))
        return derived
    except TypeError as error:
        problems.add(file, f"{where}.values", f"{error}; quote it in YAML to make it a string")
        return derived
    for item in unknown:
        problems.add(file, f"{where}.values", f"{item} for chart {chart} {version}")
    for item in unknown_derived:
        problems.add(
            file, f"{where}.version", f"chart {chart} {version} has no key {item.path}, which this tool sets"
        )
    return deep_merge(derived, overrides)
