"""The settings every Helm release of this tool shares: what a production install needs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from themelio_gpu.constructs.literal import literal
from themelio_gpu.constructs.naming import logical_id
from themelio_gpu.constructs.providers import AssetType, Release, TerraformAsset, TerraformStack
from themelio_gpu.inputs.chart_sources import LocalChart
from themelio_gpu.plan.helm.known_values import render_values_yaml
from themelio_gpu.plan.model import HelmReleaseSpec

MAX_HISTORY = 10


def pinned_release(stack: TerraformStack, spec: HelmReleaseSpec, depends_on: Sequence[Any]) -> Release:
    release_id = logical_id(spec.name.replace("-", "_"))
    chart, repository = spec.chart, spec.repository
    if spec.archive is not None:
        chart = shipped_chart(stack, f"{release_id}_chart", spec.archive)
    return Release(
        stack,
        release_id,
        name=spec.name,
        chart=literal(chart),
        repository=literal(repository) if repository is not None else None,
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


def shipped_chart(stack: TerraformStack, asset_id: str, archive: LocalChart) -> str:
    """The archive copied into the stack's folder by cdktf (`assets/<asset_id>/<sha256>/<chart>-<version>.tgz`)
    and that path, relative to the stack's folder: what `helm_release.chart` installs, with no `repository`
    (the helm provider then loads the chart from the file, as `helm install ./chart.tgz` does). The folder is
    named by the archive's SHA-256 (our hash, so both engines name it alike): other bytes, another path, and
    Terraform sees the change of chart even when its version stays."""
    asset = TerraformAsset(
        stack, asset_id, path=str(archive.source), type=AssetType.FILE, asset_hash=archive.sha256
    )
    return str(asset.path)
