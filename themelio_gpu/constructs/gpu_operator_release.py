"""The NVIDIA GPU Operator, configured to run beside the NVIDIA DRA driver (NVIDIA's documented install)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cdktf import TerraformStack

from themelio_gpu.constructs.release_settings import pinned_release
from themelio_gpu.plan.fleet import ClusterPlan


class GpuOperatorRelease:
    def __init__(self, stack: TerraformStack, plan: ClusterPlan, depends_on: Sequence[Any]) -> None:
        self.release = pinned_release(stack, plan.operator_release, depends_on)
