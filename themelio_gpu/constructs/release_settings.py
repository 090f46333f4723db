"""The settings every Helm release of this tool shares: what a production install needs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from themelio_gpu.constructs.literal import literal
from themelio_gpu.constructs.naming import logical_id
from themelio_gpu.constructs.providers import Release, TerraformStack
from themelio_gpu.plan.helm.known_values import render_values_yaml
from themelio_gpu.plan.model import HelmReleaseSpec

MAX_HISTORY = 10


def pinned_release(stack: TerraformStack, spec: HelmReleaseSpec, depends_on: Sequence[Any]) -> Release:
    return Release(
        stack,
        logical_id(spec.name.replace("-", "_")),
        name=spec.name,
        chart=spec.chart,
        repository=literal(spec.repository),
        version=literal(spec.version),
        namespace=spec.namespace,
        create_namespace=True,
        # atomic rolls a failed upgrade back (and implies wait); a half-installed GPU stack is worse.
        atomic=True,
        wait=True,
        timeout=spec.timeout_seconds,
        cleanup_on_fail=True,
        max_history=MAX_HISTORY,
        # One YAML document with sorted keys, so a review shows each value on its own line (`verify`
        # renders the charts with this same text). literal(): the cluster's own values are free text, and
        # Terraform would read `${` as a reference.
        values=[literal(render_values_yaml(spec.values))],
        depends_on=list(depends_on) or None,
    )
