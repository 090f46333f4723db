"""Which Helm values keys the pinned NVIDIA charts accept, and safe helpers to build values.

The charts ship no `values.schema.json`, so Helm silently ignores a misspelt key (for example
`devicePlugin.enable: false` leaves the device plugin running next to the DRA driver). One table per chart
version, `tables/<chart>-<version>.json`, derived from the chart's real values (`helm show values`) by
`python -m themelio_gpu charts known-values CHART VERSION` (themelio_gpu/charts/values_table.py), lets us
reject such keys before anything reaches a cluster.

Path syntax (used by the tables, `iter_value_paths`, `unknown_value_paths` and `UnknownPath.path`):

- A path is the sequence of mapping keys from the root, joined with `.`: `driver.manager.env`.
- A key made only of ASCII letters, digits, `_` and `-` is written bare: `node-feature-discovery.gc`.
- Any other key (containing `.`, `/`, `"`, a space, non-ASCII, or empty) is written as a JSON string
  literal, double-quoted with backslash escapes: `kubeletPlugin.nodeSelector."nvidia.com/dra-kubelet-plugin"`.
  This is the canonical form; `parse_path` also accepts a quoted bare key, `format_path` never writes one.
- Lists are leaves: a list override replaces the whole list in Helm, so no path goes into a list.

Table semantics: `paths` holds every real mapping key of the chart's values.yaml (keys that appear only in
comments do not count, e.g. `operator.version` or `hostPaths.kubeletRootDir`). `openPaths` are the paths
under which any sub-key is accepted: defaults that are `{}` or null (nodeSelector, podAnnotations,
featureGates, resources, ...), mappings with a free-form Kubernetes type by name (nodeSelector, annotations,
labels, podAnnotations, affinity, securityContext, podSecurityContext; `resources` when it holds only
limits/requests/claims), and subchart roots (`node-feature-discovery`), whose values we do not tabulate.
"""

from __future__ import annotations

import copy
import difflib
import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import yaml

from themelio_gpu.inputs.yaml_input import display_path

__all__ = [
    "TABLES_DIR",
    "ChartPaths",
    "KnownValuesTableError",
    "UnknownPath",
    "UnsupportedChartVersion",
    "deep_merge",
    "format_path",
    "iter_value_paths",
    "known_chart_versions",
    "known_paths",
    "parse_path",
    "render_values_yaml",
    "unknown_value_paths",
]

_BARE_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")

TABLES_DIR = Path(__file__).resolve().parent / "tables"
"""One JSON file per chart version: `<chart>-<version>.json`."""


class KnownValuesTableError(ValueError):
    """A file in tables/ is not a known-values table."""


class ChartPaths(NamedTuple):
    """The known values paths of one chart version (both sorted, in the path syntax above)."""

    paths: tuple[str, ...]
    open_paths: tuple[str, ...]


@functools.cache
def _tables() -> Mapping[tuple[str, str], ChartPaths]:
    tables: dict[tuple[str, str], ChartPaths] = {}
    for file in sorted(TABLES_DIR.glob("*.json")):
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
            key = (str(data["chart"]), str(data["version"]))
            tables[key] = ChartPaths(tuple(data["paths"]), tuple(data["openPaths"]))
        except (ValueError, KeyError, TypeError) as error:
            raise KnownValuesTableError(
                f"{display_path(file)}: not a known-values table ({error}); write it again with "
                "`python -m themelio_gpu charts known-values CHART VERSION`"
            ) from None
    return MappingProxyType(tables)


@functools.cache
def known_chart_versions() -> Mapping[str, tuple[str, ...]]:
    """Chart name -> the chart versions that have a table of known values paths."""
    by_chart: dict[str, list[str]] = {}
    for chart, version in _tables():
        by_chart.setdefault(chart, []).append(version)
    return MappingProxyType({chart: tuple(sorted(vs)) for chart, vs in sorted(by_chart.items())})


@dataclass(frozen=True)
class UnknownPath:
    """A values path the chart does not accept, with the closest sibling key as a "did you mean"."""

    path: str
    suggestion: str | None

    def __str__(self) -> str:
        hint = f" (did you mean {self.suggestion}?)" if self.suggestion else ""
        return f"unknown values key {self.path}{hint}"


class UnsupportedChartVersion(ValueError):  # noqa: N818 - the name is the agreed public API
    """No table of known values paths exists for this chart and version; the message says how to add one."""

    def __init__(self, chart: str, version: str) -> None:
        self.chart = chart
        self.version = version
        self.supported: tuple[str, ...] = known_chart_versions().get(chart, ())
        if self.supported:
            detail = f"tables exist for {', '.join(self.supported)}"
        else:
            detail = f"tables exist for the charts {', '.join(known_chart_versions())}"
        super().__init__(
            f"no known values table for chart {chart!r} version {version!r} ({detail}). To add it: "
            f"`python -m themelio_gpu charts fetch` (pulls the versions your clusters pin into the chart cache), "
            f"then `python -m themelio_gpu charts known-values {chart} {version}` (writes "
            f"themelio_gpu/plan/helm/tables/{chart}-{version}.json; commit it); see docs/charts.md"
        )


# --- path syntax ------------------------------------------------------------------------------------


def _format_segment(key: str) -> str:
    return key if _BARE_SEGMENT.fullmatch(key) else json.dumps(key)


def format_path(segments: tuple[str, ...] | list[str]) -> str:
    """Join keys into a path, quoting the keys that are not bare (see the module docstring)."""
    if not segments:
        raise ValueError("a values path needs at least one key")
    return ".".join(_format_segment(s) for s in segments)


_DECODER = json.JSONDecoder()


def parse_path(path: str) -> tuple[str, ...]:
    """Split a path into its keys; the inverse of `format_path`. Raises ValueError if malformed."""
    segments: list[str] = []
    i = 0
    while True:
        if path.startswith('"', i):
            try:
                segment, i = _DECODER.raw_decode(path, i)
            except json.JSONDecodeError as exc:
                raise ValueError(f"bad quoted key in values path {path!r}: {exc.msg}") from None
            if not isinstance(segment, str):  # pragma: no cover - raw_decode at '"' always yields a str
                raise ValueError(f"bad quoted key in values path {path!r}")
        else:
            match = _BARE_SEGMENT.match(path, i)
            if match is None:
                raise ValueError(f"bad values path {path!r} at offset {i}")
            segment, i = match.group(), match.end()
        segments.append(segment)
        if i == len(path):
            return tuple(segments)
        if path[i] != ".":
            raise ValueError(f"bad values path {path!r}: expected '.' at offset {i}")
        i += 1


# --- the table --------------------------------------------------------------------------------------


class _Table(NamedTuple):
    paths: frozenset[str]
    open_paths: frozenset[str]
    # parent path ("" for the root) -> its child keys, for "did you mean" among siblings
    children: Mapping[str, tuple[str, ...]]


@functools.cache
def _table(chart: str, version: str) -> _Table:
    key = (chart, version)
    if key not in _tables():
        raise UnsupportedChartVersion(chart, version)
    paths, open_paths = _tables()[key]
    children: dict[str, list[str]] = {}
    for path in paths:
        segments = parse_path(path)
        parent = format_path(segments[:-1]) if len(segments) > 1 else ""
        children.setdefault(parent, []).append(segments[-1])
    return _Table(
        paths=frozenset(paths),
        open_paths=frozenset(open_paths),
        children=MappingProxyType({p: tuple(c) for p, c in children.items()}),
    )


def known_paths(chart: str, version: str) -> ChartPaths:
    """The table for one chart version; raises UnsupportedChartVersion if there is none."""
    _table(chart, version)  # raises the typed error for an unknown chart/version
    return _tables()[(chart, version)]


def _key(key: object, parent: str) -> str:
    # Helm values are JSON objects, so a non-string key (e.g. YAML 1.1 `on:` -> True) is a bug upstream.
    if not isinstance(key, str):
        where = f" under {parent}" if parent else ""
        raise TypeError(f"values keys must be strings, got {key!r}{where}")
    return key


def _join(parent: str, key: str) -> str:
    segment = _format_segment(key)
    return f"{parent}.{segment}" if parent else segment


def iter_value_paths(values: Mapping[str, Any]) -> Iterator[str]:
    """Every key path of `values`, parents before children, in mapping order; lists are not entered."""

    def walk(mapping: Mapping[Any, Any], parent: str) -> Iterator[str]:
        for key, value in mapping.items():
            path = _join(parent, _key(key, parent))
            yield path
            if isinstance(value, Mapping):
                yield from walk(value, path)

    return walk(values, "")


def unknown_value_paths(chart: str, version: str, values: Mapping[str, Any]) -> list[UnknownPath]:
    """The paths in `values` that the chart version does not accept, in mapping order.

    Only the outermost unknown key of a subtree is reported, and nothing under an open path is checked.
    Raises UnsupportedChartVersion if the chart version has no table.
    """
    table = _table(chart, version)
    unknown: list[UnknownPath] = []

    def walk(mapping: Mapping[Any, Any], parent: str) -> None:
        for key, value in mapping.items():
            path = _join(parent, _key(key, parent))
            if path not in table.paths:
                unknown.append(UnknownPath(path, _suggest(table, parent, key)))
            elif path not in table.open_paths and isinstance(value, Mapping):
                walk(value, path)

    walk(values, "")
    return unknown


def _suggest(table: _Table, parent: str, key: str) -> str | None:
    # Only siblings: comparing whole paths would let a long shared prefix "match" unrelated keys.
    matches = difflib.get_close_matches(key, table.children.get(parent, ()), n=1, cutoff=0.6)
    return _join(parent, matches[0]) if matches else None


# --- building values --------------------------------------------------------------------------------


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Merge `override` into a deep copy of `base`; neither input is mutated or shared with the result.

    Mappings merge key by key, recursively; any other override value (list, scalar) replaces the base
    value whole. An override of None is kept as an explicit null rather than deleting the key: the result
    is handed to Helm, and a null in user values is what makes Helm delete the *chart's* default (e.g.
    `controller.affinity: null`). Dropping the key here would bring the chart default back.
    """
    merged: dict[str, Any] = {key: _copy(value) for key, value in base.items()}
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = _copy(value)
    return merged


def _copy(value: Any) -> Any:
    # Mappings become plain dicts so that results are uniform and can be merged again.
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    return copy.deepcopy(value)


# --- rendering --------------------------------------------------------------------------------------

_STR_TAG = "tag:yaml.org,2002:str"

# Plain scalars that Go's YAML decoder (used by Helm) reads as non-strings but PyYAML does not, so PyYAML
# would leave them unquoted: y/n booleans (YAML 1.1), exponents without a dot or sign, 0o/0b/0x integers.
_GO_YAML_NON_STRINGS = re.compile(
    r"""[yYnN]
    | [-+]?(?:\.[0-9_]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?
    | [-+]?0[oObBxX][0-9a-fA-F_]+
    """,
    re.VERBOSE,
)


# Unicode line breaks and BOM: with allow_unicode PyYAML writes them raw in plain, single-quoted and
# block scalars, then folds them into spaces when reading.
_UNICODE_BREAKS = re.compile("[\x85\u2028\u2029\ufeff]")


# libyaml's emitter when PyYAML has it (its wheels do): the same output, several times faster.
_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _ValuesDumper(_SafeDumper):  # type: ignore[valid-type,misc]
    def ignore_aliases(self, data: Any) -> bool:
        # Anchors/aliases are legal YAML but make values files hard to read and diff.
        return True


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style: str | None = None
    # The tag a plain (unquoted) scalar would get; types-pyyaml leaves resolve() untyped.
    plain_tag = dumper.resolve(yaml.ScalarNode, data, (True, False))  # type: ignore[no-untyped-call]
    if plain_tag != _STR_TAG or _GO_YAML_NON_STRINGS.fullmatch(data):
        style = '"'  # e.g. "true" must stay a string for nodeSelector label values
    elif _UNICODE_BREAKS.search(data):
        style = '"'  # only the double-quoted style escapes these; elsewhere PyYAML misreads them
    elif "\n" in data:
        style = "|"  # readable multi-line data (the emitter falls back to quotes where | is not exact)
    return dumper.represent_scalar(_STR_TAG, data, style=style)


_ValuesDumper.add_representer(str, _represent_str)


def _plain(value: Any, path: str) -> Any:
    # Normalise to the types SafeDumper knows exactly (it dispatches on exact type, so subclasses such
    # as str/int enums would fail) and reject anything Helm values cannot hold.
    if value is None or type(value) in (str, bool, int, float):
        return value
    if isinstance(value, Mapping):
        return {_key(k, path): _plain(v, _join(path, k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item, path) for item in value]
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    where = f" at {path}" if path else ""
    raise TypeError(f"cannot render {type(value).__name__} value{where} as Helm values")


def render_values_yaml(values: Mapping[str, Any]) -> str:
    """Deterministic block-style YAML: sorted keys, no aliases, type-preserving string quoting, final newline."""
    # Plain values are JSON (string keys, exact scalar types), so their JSON text keys the rendering: the
    # clusters of a fleet mostly share their releases' values.
    return _yaml_of_plain_json(json.dumps(_plain(values, ""), sort_keys=True))


@functools.lru_cache(maxsize=256)
def _yaml_of_plain_json(text: str) -> str:
    return yaml.dump(
        json.loads(text),
        Dumper=_ValuesDumper,
        sort_keys=True,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 30,  # never fold long strings
        explicit_start=False,
    )
