"""The known-values table of a chart version, derived from `helm show values` of the chart (docs/charts.md).

The NVIDIA charts ship no values.schema.json, so Helm silently ignores a misspelt key; each table lists the
keys the chart's values.yaml really has, and `plan/helm/known_values.py` refuses the others. A table is one
JSON file, `themelio_gpu/plan/helm/tables/<chart>-<version>.json`, written by
`python -m themelio_gpu charts known-values CHART VERSION` from the chart in the chart cache. Path syntax
and the meaning of open paths: see known_values.py.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from themelio_gpu.charts.cache import check_chart_folder
from themelio_gpu.charts.helm import ChartError, run_helm
from themelio_gpu.inputs.problems import Problems, format_location
from themelio_gpu.inputs.yaml_input import parse_yaml_text
from themelio_gpu.plan.helm.known_values import TABLES_DIR as TABLES_DIR
from themelio_gpu.plan.helm.known_values import format_path as format_path

# Mappings of these Kubernetes types take arbitrary keys even when the chart default is not empty
# (e.g. gpu-operator `operator.nodeSelector: {kubernetes.io/os: linux}`).
FREE_FORM_KEYS = frozenset(
    {
        "nodeSelector",
        "annotations",
        "labels",
        "podAnnotations",
        "affinity",
        "securityContext",
        "podSecurityContext",
    }
)
# `resources` is free-form only as a ResourceRequirements; the DRA chart's top-level `resources`
# ({gpus, computeDomains}) is a real, checkable structure.
RESOURCE_REQUIREMENTS_KEYS = frozenset({"limits", "requests", "claims"})


def table_file(chart: str, version: str, tables: Path = TABLES_DIR) -> Path:
    return tables / f"{chart}-{version}.json"


def load_values(text: str, source: str) -> dict[str, Any]:
    """A chart's values; comments (commented-out example keys too) are not keys. ChartError when unreadable."""
    problems = Problems()
    data = parse_yaml_text(text, source, problems)  # the input files' loader: duplicate keys refused
    if problems:
        reasons = "; ".join(
            f"{p.message} ({where})" if (where := format_location(p.location)) else p.message for p in problems
        )
        raise ChartError(f"{source}: the chart's values are not valid YAML: {reasons}")
    if not isinstance(data, dict):
        raise ChartError(f"{source}: the chart's values are not a mapping")
    return data


def _walk(mapping: Mapping[Any, Any], prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise ChartError(
                f"non-string values key {key!r} under {format_path(prefix) if prefix else 'the root'}"
            )
        segments = (*prefix, key)
        yield segments, value
        if isinstance(value, Mapping):  # lists are leaves: never entered
            yield from _walk(value, segments)


def _is_open(segments: tuple[str, ...], value: Any, subcharts: tuple[str, ...]) -> bool:
    if value is None or (isinstance(value, Mapping) and not value):
        return True
    if not isinstance(value, Mapping):
        return False
    if len(segments) == 1 and segments[0] in subcharts:
        return True
    name = segments[-1]
    return name in FREE_FORM_KEYS or (name == "resources" and set(value) <= RESOURCE_REQUIREMENTS_KEYS)


def derive(values: Mapping[str, Any], subcharts: tuple[str, ...] = ()) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(every key path, the open paths) of a chart's values, each sorted."""
    paths: set[str] = set()
    open_paths: set[str] = set()
    for segments, value in _walk(values, ()):
        path = format_path(segments)
        paths.add(path)
        if _is_open(segments, value, subcharts):
            open_paths.add(path)
    return tuple(sorted(paths)), tuple(sorted(open_paths))


def subcharts_of(chart_dir: Path) -> tuple[str, ...]:
    """The top-level values keys Helm hands to subcharts: Chart.yaml's dependencies, by alias or name."""
    meta = yaml.safe_load((chart_dir / "Chart.yaml").read_text(encoding="utf-8"))
    dependencies = (meta.get("dependencies") or []) if isinstance(meta, dict) else []
    return tuple(sorted(str(d.get("alias") or d.get("name")) for d in dependencies if isinstance(d, dict)))


def table_text(chart: str, version: str, values_text: str, subcharts: tuple[str, ...]) -> str:
    """The table file's text: JSON, one path per line, so a new chart version's table diffs well."""
    paths, open_paths = derive(load_values(values_text, f"{chart} {version}"), subcharts)
    table = {
        "chart": chart,
        "version": version,
        "generatedBy": f"python -m themelio_gpu charts known-values {chart} {version}",
        "helmShowValuesSha256": hashlib.sha256(values_text.encode("utf-8")).hexdigest(),
        "subcharts": list(subcharts),
        "paths": list(paths),
        "openPaths": list(open_paths),
    }
    return json.dumps(table, indent=1, ensure_ascii=False) + "\n"


def chart_table_text(helm: str, chart: str, version: str, chart_dir: Path) -> str:
    """The table of the chart in `chart_dir`, from `helm show values` (ChartError when it is not that chart)."""
    check_chart_folder(chart_dir, chart, version)
    values = run_helm(helm, ["show", "values", str(chart_dir)], f"helm show values {chart_dir}")
    return table_text(chart, version, values, subcharts_of(chart_dir))
