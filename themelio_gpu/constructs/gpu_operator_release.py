"""The NVIDIA GPU Operator, configured to run beside the NVIDIA DRA driver (NVIDIA's documented install)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cdktf import TerraformStack

from themelio_gpu.constructs.release_settings import pinned_release
from themelio_gpu.plan.fleet import ClusterPlan
from themelio_gpu.plan.helm.values import OPERATOR_CHART


class GpuOperatorRelease:
    def __init__(self, stack: TerraformStack, plan: ClusterPlan, depends_on: Sequence[Any]) -> None:
        release = plan.definition.gpu_operator
        self.release = pinned_release(
            stack,
            name=OPERATOR_CHART,
            chart=OPERATOR_CHART,
            repository=release.repository,
            version=release.version,
            namespace=release.namespace,
            timeout_seconds=release.timeout_seconds,
            values=plan.operator_values,
            depends_on=depends_on,
        )
