"""The catalog file's shape (pydantic). Cross-entry rules live in `offerings.py`, `loading.py` and `product_table.py`."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from themelio_gpu.inputs.catalog.names import DEFAULT_NAMES, Names
from themelio_gpu.inputs.chart_sources import checked_chart_source

# The NVIDIA DRA driver chart's own DeviceClasses (charts 0.4.1 and 25.12.0 render the same five), which the
# GPU Operator's GPUCluster creates too (`driver_classes.py` says which, per installer).
# Chart >= 25.12.0 maps this name to its `gpu.nvidia.com` class on resource.k8s.io/v1.
# The GPU Operator's GPUCluster creates gpu.nvidia.com without an extendedResourceName: in that mode the stack
# creates a class of its own for a chart-served name, selecting what gpu.nvidia.com selects (any whole GPU):
# `Names.generic_gpu_class`, any-gpu.gpu.themelio.io by default.


class Strict(BaseModel):
    """Unknown keys are errors: a typo must never pass silently."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ServedBy(StrEnum):
    catalog = "catalog"
    """A DeviceClass generated from this catalog advertises the name."""
    dra_driver_chart = "dra-driver-chart"
    """The DRA driver chart's `gpu.nvidia.com` class advertises it (only `nvidia.com/gpu`)."""


class Lifecycle(StrEnum):
    active = "active"
    deprecated = "deprecated"


class Quota(Strict):
    waldur_component: str = Field(alias="waldurComponent", description="Waldur offering component type")
    unit: str = Field(default="GPU", description="Waldur measured unit")


class Kubeflow(Strict):
    ui_name: str = Field(alias="uiName", description="Shown in the notebook form's GPU vendor dropdown")


class Toleration(Strict):
    key: str
    operator: Literal["Exists", "Equal"] = "Exists"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None


class Placement(Strict):
    node_selector: dict[str, str] | None = Field(
        default=None, alias="nodeSelector", description="Default: derived from the product's node labels"
    )
    tolerations: tuple[Toleration, ...] | None = Field(
        default=None, description="Default: tolerate the GPU node taint nvidia.com/gpu"
    )


class Constraints(Strict):
    min_memory: str | None = Field(
        default=None,
        alias="minMemory",
        description="Kubernetes quantity, e.g. 40Gi; adds a capacity selector",
    )
    min_driver_version: str | None = Field(
        default=None, alias="minDriverVersion", description="Semantic version, e.g. 570.0.0"
    )


def _number_as_text(value: Any) -> Any:
    # YAML reads `9.0` and `570` as numbers; a version is text (`9.0`, `570`), so accept both spellings.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


Version = Annotated[str, BeforeValidator(_number_as_text)]


def _hex_id(value: Any) -> Any:
    # YAML reads an unquoted 0x2BB510DE as an integer; give it back the spelling mig-parted uses.
    if isinstance(value, int) and not isinstance(value, bool):
        return f"0x{value:08X}"
    return value


PciDeviceId = Annotated[str, BeforeValidator(_hex_id)]


class Capability(Strict):
    """Select every device that meets these facts, whatever its product (each key narrows the choice)."""

    min_memory: str | None = Field(
        default=None,
        alias="minMemory",
        description="Kubernetes quantity the device's published memory must reach, e.g. 48Gi "
        "(devices publish less than their marketed size: an 80GB H100 publishes 79.6Gi)",
    )
    architectures: tuple[str, ...] | None = Field(
        default=None, description="The driver's architecture attribute, any of: Ampere, Ada Lovelace, Hopper, ..."
    )
    min_compute_capability: Version | None = Field(
        default=None, alias="minComputeCapability", description="CUDA compute capability, e.g. '8.0'"
    )
    min_driver_version: Version | None = Field(
        default=None, alias="minDriverVersion", description="NVIDIA driver version, e.g. 570.0.0"
    )
    products: tuple[str, ...] | None = Field(default=None, description="Keys of the product table")
    type: Literal["gpu", "mig"] = Field(default="gpu", description="Whole GPUs (default) or MIG devices")


class Product(Strict):
    """A GPU product the driver publishes: new (every fact required) or a correction of a built-in one."""

    display_name: str | None = Field(default=None, alias="displayName")
    product_names: tuple[str, ...] | None = Field(
        default=None, alias="productNames", description="NVML names the driver publishes (nvidia-smi -L)"
    )
    memory_gib: float | None = Field(
        default=None,
        alias="memoryGiB",
        description="Memory one GPU publishes, in GiB (nvidia-smi memory.total in MiB / 1024, e.g. 95.59)",
    )
    architecture: str | None = Field(default=None, description="e.g. Blackwell (the driver's architecture)")
    compute_capability: Version | None = Field(default=None, alias="computeCapability", description="e.g. '12.0'")
    pci_device_ids: tuple[PciDeviceId, ...] | None = Field(
        default=None, alias="pciDeviceIds", description="As mig-parted's device-filter spells them: 0x2BB510DE"
    )
    mig_profiles: dict[str, int] | None = Field(
        default=None, alias="migProfiles", description="MIG profile: maximum instances per GPU"
    )
    mig_layouts: dict[str, dict[str, int]] | None = Field(
        default=None, alias="migLayouts", description="MIG Manager config name: MIG devices per GPU"
    )


class Alias(Strict):
    name: str = Field(description="Old extended resource name that still resolves to the offering")
    device_class: str | None = Field(
        default=None, alias="deviceClass", description="DeviceClass advertising the old name"
    )
    served_by: ServedBy | None = Field(default=None, alias="servedBy")


class Offering(Strict):
    device_class: str | None = Field(
        default=None, alias="deviceClass", description="The DRA DeviceClass advertising this name"
    )
    served_by: ServedBy | None = Field(default=None, alias="servedBy")
    product: str | None = Field(default=None, description="Key of the GPU product table")
    capability: Capability | None = Field(
        default=None, description="Instead of product: every device meeting these facts"
    )
    overlaps: Literal["allowed"] | None = Field(
        default=None,
        description="A capability offering that can take devices another offering also takes must say so",
    )
    mig_profile: str | None = Field(default=None, alias="migProfile", description="MIG profile, e.g. 1g.5gb")
    display_name: str = Field(alias="displayName")
    description: str = ""
    quota: Quota
    kubeflow: Kubeflow | None = None
    placement: Placement = Placement()
    lifecycle: Lifecycle = Lifecycle.active
    replaced_by: str | None = Field(default=None, alias="replacedBy")
    aliases: tuple[Alias, ...] = ()
    constraints: Constraints = Constraints()


class ChartSettings(Strict):
    """Where every cluster's charts come from unless its file names a repository of its own."""

    mirror: str | None = Field(
        default=None,
        description="A Helm repository (https://) or OCI registry (oci://) holding NVIDIA's charts under their own "
        "names, or a local chart folder (a path relative to the project root, the folder holding the catalog's "
        "folder, with each chart packaged as <chart>-<version>.tgz), for clusters that cannot reach NVIDIA's "
        "(air-gapped): every release installs from it, and `charts fetch` takes the charts from it, unless a "
        "cluster file names its own repository",
    )

    _source = field_validator("mirror")(checked_chart_source)


class CatalogFile(Strict):
    schema_ref: str | None = Field(default=None, alias="$schema")
    charts: ChartSettings = Field(
        default_factory=ChartSettings, description="The fleet's chart source (charts.mirror, docs/charts.md)"
    )
    names: Names = Field(
        default=DEFAULT_NAMES,
        description="Your own names for what the stacks create (docs/names.md); every default is this project's",
    )
    products: dict[str, Product] = Field(
        default_factory=dict, description="Products beyond the built-in table, or corrections to it (these win)"
    )
    offerings: dict[str, Offering] = Field(description="Keyed by the extended resource name workloads request")
