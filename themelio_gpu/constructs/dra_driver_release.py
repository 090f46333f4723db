"""The DRA Driver for NVIDIA GPUs (chart dra-driver-nvidia-gpu; nvidia-dra-driver-gpu before 0.4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cdktf import TerraformStack

from themelio_gpu.constructs.release_settings import pinned_release
from themelio_gpu.plan.fleet import ClusterPlan
from themelio_gpu.plan.helm.values import dra_release_name


class DraDriverRelease:
    def __init__(self, stack: TerraformStack, plan: ClusterPlan, depends_on: Sequence[Any]) -> None:
        assert plan.dra_values is not None, "only clusters with DRA pools install the DRA driver"
        release = plan.definition.dra_driver
        self.release = pinned_release(
            stack,
            name=dra_release_name(plan.definition),
            chart=release.chart,
            repository=release.chart_repository,
            version=release.version,
            namespace=release.namespace,
            timeout_seconds=release.timeout_seconds,
            values=plan.dra_values,
            depends_on=depends_on,
        )
