"""A cluster definition's two Helm releases (`gpuOperator`, `draDriver`) and where their charts come from.

A chart comes from the cluster's own `repository`, else the fleet's mirror (the catalog's `charts.mirror`),
else where NVIDIA publishes it; each of these is a repository address or a local chart folder
(inputs/chart_sources.py, docs/charts.md).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, field_validator

from themelio_gpu.inputs.catalog.model import Strict
from themelio_gpu.inputs.chart_sources import checked_chart_source

NGC_REPOSITORY = "https://helm.ngc.nvidia.com/nvidia"
_SOURCE = (
    "A chart repository's address (https://, http://, oci://) or a local chart folder: a path relative to the "
    "project root (the folder holding the catalog's folder) holding the packaged chart, <chart>-<version>.tgz"
)


class GpuOperatorRelease(Strict):
    version: str = "v26.3.3"
    repository: str | None = Field(
        default=None,
        description=f"{_SOURCE}. Default: the catalog's charts.mirror, else https://helm.ngc.nvidia.com/nvidia",
    )
    namespace: str = "gpu-operator"
    timeout_seconds: int = Field(default=900, alias="timeoutSeconds", gt=0)
    values: dict[str, Any] = Field(default_factory=dict, description="Deep-merged over the derived values")

    _source = field_validator("repository")(checked_chart_source)

    def chart_repository(self, mirror: str | None = None) -> str:
        """Where the chart comes from: the cluster's own repository, else the fleet's mirror, else NVIDIA's."""
        return self.repository or mirror or NGC_REPOSITORY


class DraManagedBy(StrEnum):
    chart = "chart"
    """A separate DRA driver Helm release beside the GPU Operator's ClusterPolicy (NVIDIA's documented install)."""
    gpu_operator = "gpu-operator"
    """GPU Operator v26.7.0+ installs the DRA driver itself from a GPUCluster (no ClusterPolicy, no DRA release)."""


class DraDriverRelease(Strict):
    managed_by: DraManagedBy = Field(
        default=DraManagedBy.chart,
        alias="managedBy",
        description="chart: a separate DRA driver release beside a ClusterPolicy; gpu-operator: the GPU "
        "Operator's GPUCluster (v26.7.0+, Technology Preview, new clusters only) manages the DRA driver",
    )
    new_cluster: bool | None = Field(
        default=None,
        alias="newCluster",
        description="Only with managedBy: gpu-operator, and required there: true states that the cluster has "
        "no ClusterPolicy and no DRA driver release (NVIDIA supports no in-place migration to a GPUCluster)",
    )
    chart: Literal["dra-driver-nvidia-gpu", "nvidia-dra-driver-gpu"] = "dra-driver-nvidia-gpu"
    version: str = "0.4.1"
    repository: str | None = Field(
        default=None,
        description=f"{_SOURCE}. Default: the catalog's charts.mirror, else "
        "oci://registry.k8s.io/dra-driver-nvidia/charts for dra-driver-nvidia-gpu, "
        "https://helm.ngc.nvidia.com/nvidia for the 25.x chart nvidia-dra-driver-gpu (only published there)",
    )
    namespace: str = "nvidia-dra-driver-gpu"
    compute_domains: bool = Field(default=False, alias="computeDomains", description="ComputeDomains (MNNVL/IMEX)")
    upgrade_from_25x: bool = Field(
        default=False,
        alias="upgradeFrom25x",
        description="Keep resource names of an existing nvidia-dra-driver-gpu 25.x release (nameOverride)",
    )
    timeout_seconds: int = Field(default=600, alias="timeoutSeconds", gt=0)
    values: dict[str, Any] = Field(default_factory=dict, description="Deep-merged over the derived values")

    _source = field_validator("repository")(checked_chart_source)

    def chart_repository(self, mirror: str | None = None) -> str:
        """Where the chart comes from: the cluster's own repository, else the fleet's mirror, else where the
        chart is published."""
        if self.repository is not None:
            return self.repository
        if mirror is not None:
            return mirror
        if self.chart == "nvidia-dra-driver-gpu":
            return NGC_REPOSITORY
        return "oci://registry.k8s.io/dra-driver-nvidia/charts"
