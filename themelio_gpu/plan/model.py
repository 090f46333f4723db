"""The plan's types: what plan/fleet.py computes for the fleet and each cluster, and what every layer above
reads (the renderers, the constructs, the synthesis, the tools). Types only: the planning is in fleet.py,
kueue.py and quota.py, which import these rather than each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from themelio_gpu.inputs.catalog.catalog import Catalog, ResolvedOffering
from themelio_gpu.inputs.catalog.driver_classes import DriverClass
from themelio_gpu.inputs.catalog.names import Names
from themelio_gpu.inputs.catalog.products import GpuProduct
from themelio_gpu.inputs.chart_sources import LocalChart
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.inputs.problems import Problem


@dataclass(frozen=True)
class DeviceClassSpec:
    name: str
    extended_resource_name: str
    selector: str
    offering: str
    is_alias: bool


@dataclass(frozen=True)
class HelmReleaseSpec:
    """One Helm release of a cluster's stack: what Terraform installs and what `verify` renders."""

    name: str
    chart: str
    version: str
    repository: str | None
    """The chart repository's address; None for a chart from a local chart folder (`archive`)."""
    namespace: str
    values: Mapping[str, Any]
    timeout_seconds: int
    archive: LocalChart | None = None
    """The packaged chart in a local chart folder, which the stack ships as an asset; None: from `repository`."""


@dataclass(frozen=True)
class ConfigMapSpec:
    """Where a cluster publishes the catalog outputs: its catalogConfigMap, the fleet's names filling in."""

    namespace: str
    name: str


@dataclass(frozen=True)
class ClusterPlan:
    definition: ClusterDefinition
    file: str
    offerings: tuple[ResolvedOffering, ...]
    advertised_names: tuple[str, ...]
    """Every extended resource name this cluster serves: offerings, plus aliases while migrating."""
    device_classes: tuple[DeviceClassSpec, ...]
    """The classes this stack creates."""
    driver_classes: tuple[DriverClass, ...]
    """The classes the DRA driver's installer (chart or GPU Operator) creates; empty when no pool uses DRA."""
    pools: tuple[PoolContract, ...]
    placements: Mapping[str, tuple[str, ...]]
    """Offering -> the pools whose GPUs publish devices its class selects (a capability: every such pool)."""
    products: Mapping[str, GpuProduct]
    """The catalog's merged product table: what a class selecting any GPU (the chart's) can take."""
    releases: tuple[HelmReleaseSpec, ...]
    """In install order: the GPU Operator, then the DRA driver chart when the cluster has one."""
    terraform_version: str
    """`terraform.required_version`: the oldest Terraform with every feature the stack uses."""
    names: Names
    """The fleet's own names (the catalog's `names:`): label domain, field manager, namespace, ..."""
    config_map: ConfigMapSpec | None
    """The ConfigMap publishing the catalog outputs in the cluster, if the definition asks for one."""

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def dra_enabled(self) -> bool:
        """Some pool uses DRA: the cluster gets a DRA driver (chart or GPU Operator) and DeviceClasses."""
        return any(p.dra for p in self.pools)

    @property
    def operator_release(self) -> HelmReleaseSpec:
        return self.releases[0]

    @property
    def dra_release(self) -> HelmReleaseSpec | None:
        """The separate DRA driver release; None without DRA pools or when the GPU Operator manages it."""
        return self.releases[1] if len(self.releases) > 1 else None

    @property
    def chart_archives(self) -> tuple[LocalChart, ...]:
        """The packaged charts this stack ships from local chart folders (none when every chart comes from a
        repository)."""
        return tuple(r.archive for r in self.releases if r.archive is not None)

    @property
    def operator_values(self) -> Mapping[str, Any]:
        return self.operator_release.values

    @property
    def dra_values(self) -> Mapping[str, Any] | None:
        return self.dra_release.values if self.dra_release is not None else None


@dataclass(frozen=True)
class Fleet:
    catalog: Catalog
    clusters: tuple[ClusterPlan, ...]
    warnings: tuple[Problem, ...] = ()
    """What the fleet may get wrong without being wrong (a Kubernetes version newer than any known), by file."""
    advice: tuple[Problem, ...] = ()
    """What may be meant but often is not (a reserved pool no Kueue queue grants): `validate` says it, by file."""
    reused: tuple[tuple[str, str], ...] = ()
    """(file, cluster name) of the clusters left unplanned, their files unchanged (load_fleet's `unchanged`);
    empty unless asked for. Their plans are not in `clusters`."""

    def cluster(self, name: str) -> ClusterPlan | None:
        return next((c for c in self.clusters if c.name == name), None)

    def clusters_serving(self, offering: str) -> tuple[str, ...]:
        return tuple(c.name for c in self.clusters if any(o.name == offering for o in c.offerings))
