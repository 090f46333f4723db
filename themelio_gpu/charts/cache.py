"""The chart cache: one folder per chart version, `<cache>/<chart>-<version>/` (the `<chart>/` folder that
`helm pull --untar` makes, renamed). `charts fetch` fills it (helm pull from the chart's repository, the
archive unpacked from a local chart folder, or a copy from a folder of such chart folders); `verify` renders
from it; `charts known-values` reads a new version's values from it.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import yaml

from themelio_gpu.charts.helm import ChartError, run_helm
from themelio_gpu.inputs.chart_sources import (
    ChartFolderError,
    chart_identity_problem,
    is_local_folder,
    local_chart,
)
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.clusters.files import load_cluster_files
from themelio_gpu.inputs.clusters.releases import DraDriverRelease, GpuOperatorRelease
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.plan.helm.values import OPERATOR_CHART


@dataclass(frozen=True, order=True)
class ChartRef:
    """A chart version and where it comes from: the repository it is pulled from (https, or oci://), or a local
    chart folder (inputs/chart_sources.py) of the project at `root`."""

    chart: str
    version: str
    repository: str
    root: Path | None = field(default=None, compare=False)
    """The project root a local chart folder is relative to."""

    @property
    def local(self) -> bool:
        """From a local chart folder: unpacked from its archive, never pulled."""
        return is_local_folder(self.repository)

    @property
    def folder(self) -> str:
        """Its folder name in a cache: `<chart>-<version>`."""
        return f"{self.chart}-{self.version}"

    def __str__(self) -> str:
        return f"{self.chart} {self.version}"


def cluster_charts(
    cluster: ClusterDefinition, mirror: str | None = None, root: Path | None = None
) -> list[ChartRef]:
    """The charts a cluster's stack installs, as `plan_cluster` makes its releases: the GPU Operator, and the DRA
    driver chart when a pool uses DRA and the GPU Operator does not manage the driver; from where the releases
    install them (the cluster's own repository, the catalog's mirror, or where the chart is published; a local
    chart folder of the project at `root`)."""
    operator = cluster.gpu_operator
    charts = [ChartRef(OPERATOR_CHART, operator.version, operator.chart_repository(mirror), root)]
    if any(pool.dra for pool in cluster.node_pools) and not cluster.dra_by_gpu_operator:
        dra = cluster.dra_driver
        charts.append(ChartRef(dra.chart, dra.version, dra.chart_repository(mirror), root))
    return charts


def pinned_charts(stacks_dir: Path, mirror: str | None = None, root: Path | None = None) -> list[ChartRef]:
    """Every chart version the fleet's clusters pin, each once; raises InputError for unreadable cluster files.

    Only the cluster files are read (not the catalog, nothing planned): a version without a known-values
    table yet must still be fetchable, to tabulate it.
    """
    problems = Problems()
    files = load_cluster_files(stacks_dir, problems)
    problems.redact(files.secrets)
    problems.raise_if_any()
    found: dict[tuple[str, str], ChartRef] = {}
    for _, definition in files.definitions:
        for ref in cluster_charts(definition, mirror, root):
            found.setdefault((ref.chart, ref.version), ref)
    return sorted(found.values())


CHARTS = (OPERATOR_CHART, *typing.get_args(DraDriverRelease.model_fields["chart"].annotation))
"""The charts a cluster can install."""


def default_repository(chart: str) -> str:
    """Where a cluster that names no repository gets `chart` from."""
    if chart not in CHARTS:
        raise ChartError(f"{chart}: not a chart a cluster installs; the charts are {', '.join(CHARTS)}")
    if chart == OPERATOR_CHART:
        return GpuOperatorRelease().chart_repository()
    return DraDriverRelease.model_validate({"chart": chart}).chart_repository()


def known_charts(
    versions: dict[str, tuple[str, ...]], mirror: str | None = None, root: Path | None = None
) -> list[ChartRef]:
    """Every chart version with a known-values table, from the fleet's mirror (a local chart folder of the
    project at `root` too) or its default repository."""
    return sorted(
        ChartRef(chart, v, mirror or default_repository(chart), root) for chart, vs in versions.items() for v in vs
    )


def check_chart_folder(folder: Path, chart: str, version: str) -> None:
    """ChartError unless `folder` holds the chart `chart` at `version` (its Chart.yaml says so)."""
    chart_yaml = folder / "Chart.yaml"
    try:
        meta = yaml.safe_load(chart_yaml.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as error:
        raise ChartError(f"{display_path(chart_yaml)}: not a readable Chart.yaml ({error})") from None
    problem = chart_identity_problem(meta, chart, version)
    if problem is not None:
        raise ChartError(f"{display_path(chart_yaml)}: {problem}")


def pull_command(ref: ChartRef, into: Path) -> list[str]:
    """helm's arguments to pull `ref` untarred into `into` (as `<into>/<chart>/`)."""
    if ref.repository.startswith("oci://"):
        source = [f"{ref.repository.rstrip('/')}/{ref.chart}"]
    else:
        source = [ref.chart, "--repo", ref.repository]
    return ["pull", *source, "--version", ref.version, "--untar", "--untardir", str(into)]


OFFLINE_ADVICE = (
    "Without access to the charts' repositories (NVIDIA's are helm.ngc.nvidia.com and registry.k8s.io; helm "
    "honours HTTPS_PROXY): run `charts fetch` where they can be reached and copy the {cache} folder here, or "
    "fetch from a folder of chart folders named <chart>-<version> (the <chart>/ folder `helm pull --untar` makes, "
    "renamed) with "
    "`charts fetch --from DIR`"
)


def fetch_charts(
    refs: Iterable[ChartRef], cache: Path, out: TextIO, helm: str | None, source: Path | None
) -> bool:
    """Put every chart of `refs` into `cache` (skipping those already there); True when all are there.

    From `source` (a folder of chart folders) when given, else with `helm pull`. Each chart lands in one rename,
    so the cache never holds half a chart.
    """
    ok = True
    offline = False
    for ref in refs:
        target = cache / ref.folder
        if target.is_dir():
            try:
                check_chart_folder(target, ref.chart, ref.version)
                print(f"{ref}: already in {display_path(target)}", file=out)
            except ChartError as error:
                ok = False
                print(f"{ref}: FAILED: {error}; remove {display_path(target)} and fetch again", file=out)
            continue
        try:
            cache.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix=".fetching-", dir=cache) as staging:
                if ref.local:
                    fetched, origin = _unpack(ref, Path(staging))
                elif source is not None:
                    fetched, origin = _copy(ref, source, Path(staging)), f"copied from {display_path(source)}"
                else:
                    assert helm is not None
                    fetched, origin = _pull(ref, helm, Path(staging)), f"pulled from {ref.repository}"
                fetched.rename(target)
            print(f"{ref}: {origin} into {display_path(target)}", file=out)
        except ChartError as error:
            ok = False
            offline = offline or (source is None and not ref.local)
            print(f"{ref}: FAILED: {error}", file=out)
    if offline:
        print(OFFLINE_ADVICE.format(cache=display_path(cache)), file=out)
    return ok


def _pull(ref: ChartRef, helm: str, staging: Path) -> Path:
    run_helm(helm, pull_command(ref, staging), f"cannot pull chart {ref} from {ref.repository}")
    folder = staging / ref.chart
    if not folder.is_dir():
        raise ChartError(f"helm pull of {ref} from {ref.repository} left no {ref.chart}/")
    check_chart_folder(folder, ref.chart, ref.version)
    return folder


def _unpack(ref: ChartRef, staging: Path) -> tuple[Path, str]:
    """The chart from its local chart folder's archive (the one the stacks ship), unpacked into `staging`."""
    assert ref.root is not None, "a chart from a local chart folder comes with its project root"
    try:
        found = local_chart(ref.root, ref.repository, ref.chart, ref.version)
    except ChartFolderError as error:
        raise ChartError(str(error)) from None
    with tarfile.open(found.source, mode="r:gz") as archive:
        archive.extractall(staging / "unpacked", filter="data")
    folder = staging / "unpacked" / ref.chart
    if not folder.is_dir():
        raise ChartError(f"{found.archive} holds no {ref.chart}/ folder at its top")
    check_chart_folder(folder, ref.chart, ref.version)
    return folder, f"unpacked from {found.archive}"


def _copy(ref: ChartRef, source: Path, staging: Path) -> Path:
    origin = source / ref.folder
    if not origin.is_dir():
        raise ChartError(f"{display_path(origin)}: no such chart folder (--from holds <chart>-<version> folders)")
    check_chart_folder(origin, ref.chart, ref.version)
    folder = staging / ref.chart
    shutil.copytree(origin, folder, symlinks=True)
    for path in [folder, *folder.rglob("*")]:  # a read-only source gives read-only copies: the cache is ours
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)
    return folder
