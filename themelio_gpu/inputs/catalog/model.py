"""The catalog file's shape (pydantic). Cross-entry rules live in `checks.py`."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# The NVIDIA DRA driver chart's own DeviceClasses (charts 0.4.1 and 25.12.0 render the same five), which the
# GPU Operator's GPUCluster creates too (`driver_classes.py` says which, per installer).
CHART_DEVICE_CLASSES = (
    "gpu.nvidia.com",
    "mig.nvidia.com",
    "vfio.gpu.nvidia.com",
    "compute-domain-daemon.nvidia.com",
    "compute-domain-default-channel.nvidia.com",
)
# Chart >= 25.12.0 maps this name to its `gpu.nvidia.com` class on resource.k8s.io/v1.
CHART_SERVED_NAME = "nvidia.com/gpu"
CHART_GPU_CLASS = "gpu.nvidia.com"
# The GPU Operator's GPUCluster creates gpu.nvidia.com without an extendedResourceName: in that mode the stack
# creates this class for a chart-served name, selecting what gpu.nvidia.com selects (any whole GPU).
GENERIC_GPU_CLASS = "any-gpu.gpu.themelio.io"


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


class CatalogFile(Strict):
    schema_ref: str | None = Field(default=None, alias="$schema")
    offerings: dict[str, Offering] = Field(description="Keyed by the extended resource name workloads request")
