"""The DRA Driver for NVIDIA GPUs (chart dra-driver-nvidia-gpu; nvidia-dra-driver-gpu before 0.4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from themelio_gpu.constructs.providers import TerraformStack
from themelio_gpu.constructs.release_settings import pinned_release
from themelio_gpu.plan.model import ClusterPlan


class DraDriverRelease:
    def __init__(self, stack: TerraformStack, plan: ClusterPlan, depends_on: Sequence[Any]) -> None:
        spec = plan.dra_release
        assert spec is not None, "only clusters with DRA pools install the DRA driver"
        self.release = pinned_release(stack, spec, depends_on)
