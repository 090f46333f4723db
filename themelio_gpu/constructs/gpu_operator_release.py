"""The NVIDIA GPU Operator: beside the DRA driver chart (a ClusterPolicy), or managing the DRA driver itself
through a GPUCluster (`draDriver.managedBy: gpu-operator`); the plan's values say which."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from themelio_gpu.constructs.providers import TerraformStack
from themelio_gpu.constructs.release_settings import pinned_release
from themelio_gpu.plan.model import ClusterPlan


class GpuOperatorRelease:
    def __init__(self, stack: TerraformStack, plan: ClusterPlan, depends_on: Sequence[Any]) -> None:
        self.release = pinned_release(stack, plan.operator_release, depends_on)
