#!/usr/bin/env python3
"""Regenerate themelio_gpu/plan/helm/_known_paths.py from the NVIDIA charts' real values.yaml files.

Usage (from the project root):
    .venv/bin/python scripts/gen_known_helm_values.py            # rewrite the data module
    .venv/bin/python scripts/gen_known_helm_values.py --check    # exit 1 if it is stale

The values files are read from ../shared/reference/nvidia/ beside the checkout; the project keeps no copy.
This script is deliberately self-contained (it does not import themelio_gpu), so that it still runs when
the data module is stale or broken; tests check that its path syntax matches `known_values.format_path`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REFERENCE_DIR = PROJECT_ROOT.parent / "shared" / "reference" / "nvidia"
DEFAULT_OUTPUT = PROJECT_ROOT / "themelio_gpu" / "plan" / "helm" / "_known_paths.py"
# How the header names the source directory: relative, so the output does not depend on the machine.
REFERENCE_DIR_LABEL = "../shared/reference/nvidia"


@dataclass(frozen=True)
class Source:
    chart: str
    version: str
    filename: str
    subcharts: tuple[str, ...] = ()  # top-level keys passed to a subchart whose values we do not tabulate


SOURCES: tuple[Source, ...] = (
    Source("dra-driver-nvidia-gpu", "0.4.1", "dra-driver-nvidia-gpu_chart-0.4.1_values.yaml"),
    Source("gpu-operator", "v26.3.3", "gpu-operator_v26.3.3_values.yaml", ("node-feature-discovery",)),
    Source("gpu-operator", "v26.7.0", "gpu-operator_v26.7.0_values.yaml", ("node-feature-discovery",)),
    Source("nvidia-dra-driver-gpu", "25.12.0", "nvidia-dra-driver-gpu_chart-25.12.0_values.yaml"),
)

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

_BARE_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")


def format_path(segments: tuple[str, ...]) -> str:
    """Same syntax as themelio_gpu.plan.helm.known_values.format_path."""
    return ".".join(s if _BARE_SEGMENT.fullmatch(s) else json.dumps(s) for s in segments)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys, which PyYAML would otherwise silently collapse."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Hashable, Any]:
    loader.flatten_mapping(node)
    seen: set[Hashable] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_values(path: Path) -> dict[str, Any]:
    """Parse a chart values.yaml; comments (including commented-out example keys) are not keys."""
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: top level is not a mapping")
    return data


def _walk(mapping: Mapping[Any, Any], prefix: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise ValueError(f"non-string key {key!r} under {format_path(prefix) or 'the root'}")
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
    """(all key paths, open paths) of a chart's values, each sorted."""
    paths: set[str] = set()
    open_paths: set[str] = set()
    for segments, value in _walk(values, ()):
        path = format_path(segments)
        paths.add(path)
        if _is_open(segments, value, subcharts):
            open_paths.add(path)
    return tuple(sorted(paths)), tuple(sorted(open_paths))


def _py_str(text: str) -> str:
    # Double quotes unless the text holds some (as ruff format would write it), so the output is format-clean.
    return repr(text) if '"' in text and "'" not in text else json.dumps(text)


def _tuple_literal(items: tuple[str, ...], indent: str) -> list[str]:
    return [f"{indent}{_py_str(item)}," for item in items]


def render_module(reference_dir: Path = DEFAULT_REFERENCE_DIR) -> str:
    """The full text of the data module, derived from the values files in `reference_dir`."""
    header = [
        '"""Known Helm values key paths per pinned NVIDIA chart version.',
        "",
        "GENERATED by scripts/gen_known_helm_values.py; do not edit by hand, re-run the script instead.",
        f"Sources ({REFERENCE_DIR_LABEL}/, relative to the project root):",
    ]
    body_paths = ["PATHS: Final[dict[tuple[str, str], tuple[str, ...]]] = {"]
    body_open = ["OPEN_PATHS: Final[dict[tuple[str, str], tuple[str, ...]]] = {"]
    body_files = ["SOURCE_FILES: Final[dict[tuple[str, str], str]] = {"]
    for source in sorted(SOURCES, key=lambda s: (s.chart, s.version)):
        file = reference_dir / source.filename
        if not file.is_file():
            raise FileNotFoundError(f"missing reference values file {file}")
        raw = file.read_bytes()
        paths, open_paths = derive(load_values(file), source.subcharts)
        key = f"({json.dumps(source.chart)}, {json.dumps(source.version)})"
        header += [
            f"  {source.chart} {source.version}: {source.filename}",
            f"    sha256 {hashlib.sha256(raw).hexdigest()}; {len(paths)} paths, {len(open_paths)} open",
        ]
        body_paths += [f"    {key}: (", *_tuple_literal(paths, "        "), "    ),"]
        body_open += [f"    {key}: (", *_tuple_literal(open_paths, "        "), "    ),"]
        body_files.append(f"    {key}: {json.dumps(source.filename)},")
    header += ["", "Path syntax and the meaning of open paths: see themelio_gpu/plan/helm/known_values.py.", '"""']
    lines = [
        *header,
        "",
        "from __future__ import annotations",
        "",
        "from typing import Final",
        "",
        *body_files,
        "}",
        "",
        *body_paths,
        "}",
        "",
        *body_open,
        "}",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference-dir", type=Path, default=DEFAULT_REFERENCE_DIR)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if the output is stale")
    args = parser.parse_args(argv)
    text = render_module(args.reference_dir)
    output: Path = args.output
    current = output.read_text(encoding="utf-8") if output.is_file() else None
    if args.check:
        if current != text:
            print(f"{output} is stale; run scripts/gen_known_helm_values.py", file=sys.stderr)
            return 1
        return 0
    if current != text:
        output.write_text(text, encoding="utf-8")
        print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
