"""The cluster's Helm releases: the values derived from its definition, merged with the user's own.

Apart from the fleet's orchestration because merging is where the pinned charts' known values are checked
(plan/helm/known_values.py): a key the chart does not have, a chart version this tool has no table for, and a
value Helm's YAML cannot carry are each reported at the definition's key. Where each chart comes from is
decided here too: a repository's address, or the archive in a local chart folder (inputs/chart_sources.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from themelio_gpu.inputs.chart_sources import ChartFolderError, LocalChart, is_local_folder, local_chart
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.inputs.clusters.releases import DraDriverRelease, GpuOperatorRelease
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.k8s import names as k8s_names
from themelio_gpu.plan.helm import values as helm_values
from themelio_gpu.plan.helm.known_values import (
    UnsupportedChartVersion,
    deep_merge,
    parse_path,
    render_values_yaml,
    unknown_value_paths,
)
from themelio_gpu.plan.model import HelmReleaseSpec


def operator_release(
    cluster: ClusterDefinition,
    pools: Sequence[PoolContract],
    file: str,
    problems: Problems,
    *,
    check_derived: bool,
    mirror: str | None = None,
    root: Path | None = None,
) -> HelmReleaseSpec:
    """The GPU Operator's release; `check_derived`: whether the derived values' keys are checked too (not
    where the mode already refused the chart version)."""
    operator = _merged_values(
        helm_values.OPERATOR_CHART,
        cluster.gpu_operator.version,
        helm_values.gpu_cluster_operator_values(cluster, pools)
        if cluster.dra_by_gpu_operator
        else helm_values.operator_values(cluster, pools),
        cluster.gpu_operator.values,
        file,
        "gpuOperator",
        problems,
        check_derived=check_derived,
    )
    release = cluster.gpu_operator
    chart = helm_values.OPERATOR_CHART
    repository, archive = _chart_source(release, chart, mirror, root, file, "gpuOperator", problems)
    return HelmReleaseSpec(
        chart, chart, release.version, repository, release.namespace, operator, release.timeout_seconds, archive
    )


def dra_driver_release(
    cluster: ClusterDefinition,
    file: str,
    problems: Problems,
    mirror: str | None = None,
    root: Path | None = None,
) -> HelmReleaseSpec:
    """The DRA driver chart's own release (when the GPU Operator does not install the driver)."""
    for message in _namespace_problems(cluster.dra_driver.namespace):
        problems.add(file, ("draDriver", "namespace"), message)
    dra_values = _merged_values(
        cluster.dra_driver.chart,
        cluster.dra_driver.version,
        helm_values.dra_driver_values(cluster),
        cluster.dra_driver.values,
        file,
        "draDriver",
        problems,
    )
    chart = cluster.dra_driver
    repository, archive = _chart_source(chart, chart.chart, mirror, root, file, "draDriver", problems)
    return HelmReleaseSpec(
        helm_values.dra_release_name(cluster),
        chart.chart,
        chart.version,
        repository,
        chart.namespace,
        dra_values,
        chart.timeout_seconds,
        archive,
    )


def _chart_source(
    release: GpuOperatorRelease | DraDriverRelease,
    chart: str,
    mirror: str | None,
    root: Path | None,
    file: str,
    where: str,
    problems: Problems,
) -> tuple[str | None, LocalChart | None]:
    """(repository address, None), or (None, the archive) when the chart comes from a local chart folder: the
    cluster's own (its problems at `<where>.repository`) or the fleet's mirror (the folder's own problems are the
    catalog's, at charts.mirror; a missing archive is this cluster's, at its `<where>.version`)."""
    source = release.chart_repository(mirror)
    if not is_local_folder(source):
        return source, None
    assert root is not None, "a fleet with local chart folders is planned with its project root"
    try:
        return None, local_chart(root, source, chart, release.version)
    except ChartFolderError as error:
        if release.repository is not None:
            problems.add(file, (where, "repository"), str(error))
        elif not error.about_folder:
            problems.add(file, (where, "version"), f"from the fleet's mirror, a local chart folder: {error}")
        return None, None


def _namespace_problems(namespace: str) -> list[str]:
    if namespace == "default":
        return ["the DRA driver chart refuses the default namespace; use e.g. nvidia-dra-driver-gpu"]
    return k8s_names.dns1123_label(namespace)


def _merged_values(
    chart: str,
    version: str,
    derived: dict[str, Any],
    overrides: Mapping[str, Any],
    file: str,
    where: str,
    problems: Problems,
    *,
    check_derived: bool = True,
) -> dict[str, Any]:
    try:
        unknown = unknown_value_paths(chart, version, overrides)
        # Derived values must exist too: this catches a chart upgrade that renamed a key we set. Not where
        # the chart version was already refused for the mode: each missing key would repeat that message.
        unknown_derived = unknown_value_paths(chart, version, derived) if check_derived else []
        # Helm values are YAML: string keys and plain scalars only (no dates, no integer keys).
        render_values_yaml(overrides)
    except UnsupportedChartVersion as error:
        problems.add(file, (where, "version"), str(error))
        return derived
    except TypeError as error:
        problems.add(file, (where, "values"), f"{error}; quote it in YAML to make it a string")
        return derived
    for item in unknown:
        # At the key itself: its line, not the line of `values:`.
        problems.add(file, (where, "values", *parse_path(item.path)), f"{item} for chart {chart} {version}")
    for item in unknown_derived:
        problems.add(
            file, (where, "version"), f"chart {chart} {version} has no key {item.path}, which this tool sets"
        )
    return deep_merge(derived, overrides)
