"""The charts `verify` renders: from a folder of chart directories named `<chart>-<version>`, by default the
chart cache that `charts fetch` fills (docs/charts.md); `--charts DIR` names another (CI:
../shared/reference/charts)."""

from __future__ import annotations

from pathlib import Path

from themelio_gpu.charts.cache import check_chart_folder
from themelio_gpu.charts.helm import ChartError
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.plan.model import HelmReleaseSpec


class VerifyError(Exception):
    """verify cannot run at all (no kubernetes-validate): one clear message, exit 2."""


class ChartSource:
    """The chart folders of the releases, from `charts_dir`; `is_cache`: that folder is the chart cache."""

    def __init__(self, helm: str, charts_dir: Path, *, is_cache: bool = False) -> None:
        self.helm = helm
        self.charts_dir = charts_dir
        self.is_cache = is_cache

    def describe(self, spec: HelmReleaseSpec) -> str:
        return display_path(self.charts_dir / f"{spec.chart}-{spec.version}")

    def chart_dir(self, spec: HelmReleaseSpec) -> Path:
        folder = self.charts_dir / f"{spec.chart}-{spec.version}"
        if not folder.is_dir():
            if self.is_cache:
                hint = "the chart cache does not hold it yet: run `python -m themelio_gpu charts fetch`"
            else:
                hint = f"expected <chart>-<version> for {spec.chart} {spec.version} in {display_path(self.charts_dir)}"
            raise ChartError(f"{display_path(folder)}: no such chart folder ({hint})")
        check_chart_folder(folder, spec.chart, spec.version)
        return folder
