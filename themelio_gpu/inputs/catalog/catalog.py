"""The resolved catalog's types: the Catalog and each ResolvedOffering with its derived facts.

Types only, imported by every layer above: reading the file and resolving its offerings is in loading.py
and offerings.py, which build these.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from themelio_gpu.inputs.catalog.capability import DeviceKind, ResolvedCapability
from themelio_gpu.inputs.catalog.model import Constraints, Lifecycle, ServedBy, Toleration
from themelio_gpu.inputs.catalog.names import Names
from themelio_gpu.inputs.catalog.products import GpuProduct
from themelio_gpu.k8s.quota import requests_key


@dataclass(frozen=True)
class ResolvedAlias:
    name: str
    device_class: str
    served_by: ServedBy


@dataclass(frozen=True)
class ResolvedOffering:
    name: str
    device_class: str
    served_by: ServedBy
    product: GpuProduct | None
    mig_profile: str | None
    display_name: str
    description: str
    waldur_component: str
    unit: str
    kubeflow_ui_name: str | None
    node_selector: Mapping[str, str]
    tolerations: tuple[Toleration, ...]
    lifecycle: Lifecycle
    replaced_by: str | None
    aliases: tuple[ResolvedAlias, ...]
    selector: str
    """The CEL expression of the offering's DeviceClass (and of its aliases' classes)."""
    constraints: Constraints = field(default_factory=Constraints)
    """A product offering's selector constraints (minMemory, minDriverVersion)."""
    capability: ResolvedCapability | None = None
    """Set for a capability offering (then `product` and `mig_profile` are None)."""
    takes: tuple[DeviceKind, ...] = ()
    """The known device kinds (product, MIG profile) its class can select: for quota and overlap reasoning."""
    overlaps_allowed: bool = False
    overlaps_with: tuple[str, ...] = ()
    """Other offerings of the catalog that can take some of the same devices (see docs/catalog.md)."""

    @property
    def quota_key(self) -> str:
        return requests_key(self.name)

    @property
    def is_mig(self) -> bool:
        if self.capability is not None:
            return self.capability.device_type == "mig"
        return self.mig_profile is not None

    @property
    def is_generic(self) -> bool:
        """The chart-served legacy name: any whole GPU, sharing its devices with every whole-GPU offering."""
        return self.served_by is ServedBy.dra_driver_chart

    def advertised_names(self, with_aliases: bool) -> tuple[str, ...]:
        return (self.name, *(a.name for a in self.aliases)) if with_aliases else (self.name,)


@dataclass(frozen=True)
class Catalog:
    file: str
    offerings: Mapping[str, ResolvedOffering]
    products: Mapping[str, GpuProduct]
    """The merged product table: built-in products plus the catalog's own (these win)."""
    names: Names
    """The fleet's own names (label domain, field manager, ...): the catalog's `names:`, or this project's."""
    chart_mirror: str | None = None
    """`charts.mirror`: where every cluster's charts come from unless its file names a repository."""

    def __iter__(self) -> Iterator[ResolvedOffering]:
        return iter(self.offerings.values())

    def find(self, name: str) -> ResolvedOffering | None:
        """The offering serving `name`, by its own name or a migration alias."""
        if name in self.offerings:
            return self.offerings[name]
        for offering in self.offerings.values():
            if any(alias.name == name for alias in offering.aliases):
                return offering
        return None
