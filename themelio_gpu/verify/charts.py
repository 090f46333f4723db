"""The charts `verify` renders: pulled with `helm pull` from each release's configured repository, or taken
from a local folder of chart directories named `<chart>-<version>` (CI: ../shared/reference/charts)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import yaml

from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.plan.fleet import HelmReleaseSpec

HELM_ENV = "HELM"
HELM_TIMEOUT_SECONDS = 300


class VerifyError(Exception):
    """verify cannot run at all (no helm, no kubernetes-validate): one clear message, exit 2."""


class ChartError(Exception):
    """One release's chart cannot be obtained or rendered: a failure of that cluster's proof."""


def helm_binary() -> str:
    """helm named by $HELM, else the one on PATH."""
    named = os.environ.get(HELM_ENV)
    if named:
        if shutil.which(named) is None:
            raise VerifyError(f"${HELM_ENV} is {named!r}, which is not an executable helm")
        return named
    found = shutil.which("helm")
    if found is None:
        raise VerifyError(
            "helm is not installed: verify renders the real charts with `helm template`. Install helm "
            f"(v3.8 or later) on PATH or name it in ${HELM_ENV}"
        )
    return found


def run_helm(helm: str, args: list[str], what: str) -> str:
    """helm's stdout; ChartError with helm's own message when it fails."""
    try:
        done = subprocess.run(
            [helm, *args], capture_output=True, text=True, timeout=HELM_TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        raise ChartError(f"{what}: helm did not finish within {HELM_TIMEOUT_SECONDS}s") from None
    except OSError as error:
        raise VerifyError(f"cannot run {helm}: {error.strerror or error}") from None
    if done.returncode != 0:
        message = " ".join(line.strip() for line in done.stderr.strip().splitlines() if line.strip())
        raise ChartError(f"{what}: {message or f'helm exited with {done.returncode}'}")
    return done.stdout


def _check_chart_yaml(folder: Path, spec: HelmReleaseSpec) -> None:
    chart_yaml = folder / "Chart.yaml"
    try:
        meta = yaml.safe_load(chart_yaml.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise ChartError(f"{display_path(chart_yaml)}: not a readable Chart.yaml ({error})") from None
    if not isinstance(meta, dict) or (str(meta.get("name")), str(meta.get("version"))) != (
        spec.chart,
        spec.version,
    ):
        found = f"{meta.get('name')} {meta.get('version')}" if isinstance(meta, dict) else "no chart"
        raise ChartError(f"{display_path(chart_yaml)}: is {found}, not {spec.chart} {spec.version}")


class ChartSource:
    """Chart folders for releases, each fetched at most once per run."""

    def __init__(self, helm: str, work_dir: Path, charts_dir: Path | None = None) -> None:
        self.helm = helm
        self.work_dir = work_dir
        self.charts_dir = charts_dir
        self._pulled: dict[tuple[str, str, str], Path] = {}

    def describe(self, spec: HelmReleaseSpec) -> str:
        if self.charts_dir is not None:
            return display_path(self.charts_dir / f"{spec.chart}-{spec.version}")
        return f"{spec.repository} (helm pull)"

    def chart_dir(self, spec: HelmReleaseSpec) -> Path:
        if self.charts_dir is not None:
            folder = self.charts_dir / f"{spec.chart}-{spec.version}"
            if not folder.is_dir():
                raise ChartError(
                    f"{display_path(folder)}: no such chart folder (expected <chart>-<version> for "
                    f"{spec.chart} {spec.version} in {display_path(self.charts_dir)})"
                )
            _check_chart_yaml(folder, spec)
            return folder
        key = (spec.repository, spec.chart, spec.version)
        if key not in self._pulled:
            self._pulled[key] = self._pull(spec)
        return self._pulled[key]

    def _pull(self, spec: HelmReleaseSpec) -> Path:
        dest = self.work_dir / f"pulled-{len(self._pulled)}"
        dest.mkdir(parents=True)
        if spec.repository.startswith("oci://"):
            ref = [f"{spec.repository.rstrip('/')}/{spec.chart}"]
        else:
            ref = [spec.chart, "--repo", spec.repository]
        run_helm(
            self.helm,
            ["pull", *ref, "--version", spec.version, "--untar", "--untardir", str(dest)],
            f"cannot pull chart {spec.chart} {spec.version} from {spec.repository}",
        )
        folder = dest / spec.chart
        if not folder.is_dir():
            raise ChartError(
                f"helm pull of {spec.chart} {spec.version} from {spec.repository} left no {spec.chart}/"
            )
        _check_chart_yaml(folder, spec)
        return folder
