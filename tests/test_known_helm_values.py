"""The known-values tables match the charts' real values.yaml, and the values helpers behave as documented.

The real charts live beside the checkout in ../shared/reference/charts (the project keeps no copy).
"""

from __future__ import annotations

import copy
import hashlib
import math
import os
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.requirements import binary, shared_path
from themelio_gpu.charts import values_table
from themelio_gpu.charts.helm import ChartError
from themelio_gpu.plan.helm.known_values import (
    TABLES_DIR,
    UnknownPath,
    UnsupportedChartVersion,
    deep_merge,
    format_path,
    iter_value_paths,
    known_chart_versions,
    known_paths,
    parse_path,
    render_values_yaml,
    unknown_value_paths,
)

PROJECT_ROOT = Path(__file__).resolve().parents[1]

OPERATOR = "gpu-operator"
OPERATOR_VERSIONS = ("v26.3.3", "v26.7.0")
DRA_NEW = ("dra-driver-nvidia-gpu", "0.4.1")
DRA_OLD = ("nvidia-dra-driver-gpu", "25.12.0")
ALL_TABLES = sorted((chart, version) for chart, versions in known_chart_versions().items() for version in versions)


def reference_chart(chart: str, version: str) -> Path:
    return shared_path("reference", "charts", f"{chart}-{version}")


def reference_values(chart: str, version: str) -> Path:
    return reference_chart(chart, version) / "values.yaml"


@cache
def real_values(chart: str, version: str) -> dict[str, Any]:
    data = yaml.safe_load(reference_values(chart, version).read_text())
    assert isinstance(data, dict)
    return data


def lookup(values: Mapping[str, Any], path: str) -> Any:
    node: Any = values
    for key in parse_path(path):
        assert isinstance(node, Mapping) and key in node, f"{path}: no key {key!r}"
        node = node[key]
    return node


def known(chart: str, version: str, path: str) -> bool:
    return path in known_paths(chart, version).paths


# --- the tables are derived from the real charts ------------------------------------------------------


def test_known_chart_versions() -> None:
    assert dict(known_chart_versions()) == {
        "dra-driver-nvidia-gpu": ("0.4.1",),
        "gpu-operator": ("v26.3.3", "v26.7.0"),
        "nvidia-dra-driver-gpu": ("25.12.0",),
    }


def test_the_tables_are_read_where_charts_known_values_writes_them() -> None:
    assert values_table.TABLES_DIR == TABLES_DIR
    assert sorted(p.name for p in TABLES_DIR.iterdir()) == [f"{c}-{v}.json" for c, v in ALL_TABLES]


@pytest.mark.parametrize(("chart", "version"), ALL_TABLES)
def test_each_table_is_exactly_what_charts_known_values_writes_from_the_real_chart(
    chart: str, version: str
) -> None:
    helm = binary("helm", "HELM")
    expected = values_table.chart_table_text(helm, chart, version, reference_chart(chart, version))
    actual = values_table.table_file(chart, version).read_text(encoding="utf-8")
    assert actual == expected, (
        f"stale or hand-edited: run `python -m themelio_gpu charts known-values {chart} {version}`"
    )


@pytest.mark.parametrize(("chart", "version"), ALL_TABLES)
def test_table_equals_derivation_from_real_values(chart: str, version: str) -> None:
    folder = reference_chart(chart, version)
    values = values_table.load_values((folder / "values.yaml").read_text(encoding="utf-8"), str(folder))
    paths, open_paths = values_table.derive(values, values_table.subcharts_of(folder))
    table = known_paths(chart, version)
    assert table.paths == paths
    assert table.open_paths == open_paths
    assert list(table.paths) == sorted(set(table.paths))


def test_the_generators_path_syntax_is_the_libraries() -> None:
    for segments in [("a",), ("a", "nvidia.com/gpu"), ('q"t', ""), ("node-feature-discovery", "gc")]:
        assert values_table.format_path(segments) == format_path(segments)


def test_a_values_file_with_a_duplicate_key_is_refused() -> None:
    with pytest.raises(ChartError, match="duplicate key 'a'"):
        values_table.load_values("a: 1\na: 2\n", "chart")


@pytest.mark.parametrize(("chart", "version"), ALL_TABLES)
def test_every_table_path_exists_in_real_values(chart: str, version: str) -> None:
    values = real_values(chart, version)
    table = known_paths(chart, version)
    # Independent of the generator: the library's own path syntax over a plain yaml.safe_load.
    assert set(iter_value_paths(values)) == set(table.paths)
    for path in table.paths:
        lookup(values, path)
    for path in table.open_paths:
        assert path in table.paths
        default = lookup(values, path)
        assert default is None or isinstance(default, Mapping), path


@pytest.mark.parametrize(("chart", "version"), ALL_TABLES)
def test_table_paths_round_trip_through_the_path_syntax(chart: str, version: str) -> None:
    for path in known_paths(chart, version).paths:
        assert format_path(parse_path(path)) == path


@pytest.mark.user_fleet  # reads every YAML file of the checkout, the user's too (whatever they hold)
def test_project_holds_no_copy_of_the_reference_values() -> None:
    reference_hashes = {
        hashlib.sha256(reference_values(chart, version).read_bytes()).hexdigest(): f"{chart}-{version}/values.yaml"
        for chart, version in ALL_TABLES
    }
    # .cache holds the charts `charts fetch` pulled (gitignored): copies of the charts by design, not the project's.
    skip = {".git", ".venv", "node_modules", "cdktf.out", ".cache", ".mypy_cache", ".ruff_cache", ".pytest_cache"}
    for root, dirs, files in os.walk(PROJECT_ROOT):
        dirs[:] = [d for d in dirs if d not in skip]
        for name in files:
            if name.endswith((".yaml", ".yml")):
                digest = hashlib.sha256((Path(root) / name).read_bytes()).hexdigest()
                assert digest not in reference_hashes, f"{root}/{name} copies {reference_hashes[digest]}"


# --- facts from nvidia-facts.md ---------------------------------------------------------------------


@pytest.mark.parametrize("version", OPERATOR_VERSIONS)
@pytest.mark.parametrize(
    "path",
    [
        "devicePlugin.enabled",
        "driver.manager.env",
        "driver.enabled",
        "toolkit.enabled",
        "migManager.enabled",
        "migManager.config.name",
        "mig.strategy",
        "cdi.enabled",
        "nfd.enabled",
        "operator.runtimeClass",
        "node-feature-discovery",
    ],
)
def test_operator_keys_known_in_both_versions(version: str, path: str) -> None:
    assert known(OPERATOR, version, path)


@pytest.mark.parametrize("version", OPERATOR_VERSIONS)
def test_operator_default_runtime_is_gone(version: str) -> None:
    assert not known(OPERATOR, version, "operator.defaultRuntime")
    assert [u.path for u in unknown_value_paths(OPERATOR, version, {"operator": {"defaultRuntime": "x"}})] == [
        "operator.defaultRuntime"
    ]


@pytest.mark.parametrize("path", ["draDriver", "gpuCluster.deployCR", "clusterPolicy.deployCR"])
def test_gpucluster_keys_only_in_v26_7_0(path: str) -> None:
    assert known(OPERATOR, "v26.7.0", path)
    assert not known(OPERATOR, "v26.3.3", path)


def test_operator_top_level_keys() -> None:
    v26_3 = {
        "platform", "nfd", "psa", "cdi", "sandboxWorkloads", "hostPaths", "daemonsets", "validator",
        "operator", "mig", "driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "migManager",
        "nodeStatusExporter", "gds", "gdrcopy", "vgpuManager", "vgpuDeviceManager", "vfioManager",
        "kataManager", "sandboxDevicePlugin", "kataSandboxDevicePlugin", "ccManager", "extraObjects",
        "node-feature-discovery",
    }  # fmt: skip
    assert set(real_values(OPERATOR, "v26.3.3")) == v26_3
    assert set(real_values(OPERATOR, "v26.7.0")) == v26_3 | {"clusterPolicy", "gpuCluster", "draDriver"}


def test_alt_proc_devices_only_in_0_4_1() -> None:
    assert known(*DRA_NEW, "altProcDevices")
    assert not known(*DRA_OLD, "altProcDevices")
    assert set(real_values(*DRA_NEW)) - set(real_values(*DRA_OLD)) == {"altProcDevices"}


@pytest.mark.parametrize("table", [DRA_NEW, DRA_OLD])
@pytest.mark.parametrize(
    "path",
    [
        "gpuResourcesEnabledOverride",
        "resourceApiVersion",
        "nvidiaDriverRoot",
        "kubeletPlugin.nodeSelector",
        "resources.computeDomains.enabled",
        "resources.gpus.enabled",
        "nameOverride",
        "allowDefaultNamespace",
        "image.pullPolicy",
        "featureGates",
        "controller.priorityClassName",
        "controller.affinity",
        "kubeletPlugin.priorityClassName",
        "kubeletPlugin.tolerations",
    ],
)
def test_dra_keys_known_in_both_charts(table: tuple[str, str], path: str) -> None:
    assert known(*table, path)


@pytest.mark.parametrize(
    ("chart", "version", "path", "comment"),
    [
        (OPERATOR, "v26.7.0", "hostPaths.kubeletRootDir", "# kubeletRootDir:"),
        (OPERATOR, "v26.7.0", "operator.metrics", "# metrics:"),
        (OPERATOR, "v26.7.0", "operator.version", "#version:"),
        (OPERATOR, "v26.3.3", "driver.useOpenKernelModules", "# useOpenKernelModules:"),
        (OPERATOR, "v26.3.3", "dcgmExporter.config", "# config:"),
    ],
)
def test_commented_out_keys_are_not_known(chart: str, version: str, path: str, comment: str) -> None:
    text = reference_values(chart, version).read_text()
    assert comment in text  # the key is documented in a comment...
    assert not known(chart, version, path)  # ...but is not a real key


# --- unknown_value_paths ----------------------------------------------------------------------------


def test_accepts_the_documented_install_values() -> None:
    operator = {"devicePlugin": {"enabled": False}, "driver": {"manager": {"env": [{"name": "N", "value": "v"}]}}}
    dra = {
        "nvidiaDriverRoot": "/run/nvidia/driver",
        "gpuResourcesEnabledOverride": True,
        "resourceApiVersion": "resource.k8s.io/v1",
        "image": {"pullPolicy": "IfNotPresent"},
        "kubeletPlugin": {"nodeSelector": {"nvidia.com/dra-kubelet-plugin": "true"}, "priorityClassName": ""},
        "featureGates": {"DynamicMIG": True},
        "controller": {"affinity": None, "priorityClassName": ""},
    }
    for version in OPERATOR_VERSIONS:
        assert unknown_value_paths(OPERATOR, version, operator) == []
    for table in (DRA_NEW, DRA_OLD):
        assert unknown_value_paths(*table, dra) == []


def test_open_maps_accept_any_sub_key_at_any_depth() -> None:
    values = {
        "kubeletPlugin": {
            "nodeSelector": {"nvidia.com/dra-kubelet-plugin": "true"},
            "affinity": {"podAntiAffinity": {"anything": {"deep": 1}}},
            "containers": {"gpus": {"resources": {"limits": {"memory": "1Gi"}}}},
        },
        "featureGates": {"DynamicMIG": True, "Made.Up/Gate": False},
    }
    assert unknown_value_paths(*DRA_NEW, values) == []
    assert unknown_value_paths(OPERATOR, "v26.7.0", {"draDriver": {"gpus": {"kubeletPlugin": {"env": []}}}}) == []


def test_typo_is_rejected_with_a_sibling_suggestion() -> None:
    assert unknown_value_paths(OPERATOR, "v26.3.3", {"devicePlugin": {"enable": False}}) == [
        UnknownPath("devicePlugin.enable", "devicePlugin.enabled")
    ]
    [typo] = unknown_value_paths(*DRA_NEW, {"kubeletPlugin": {"nodeSelectr": {"a": "b"}}})
    assert typo == UnknownPath("kubeletPlugin.nodeSelectr", "kubeletPlugin.nodeSelector")
    assert str(typo) == "unknown values key kubeletPlugin.nodeSelectr (did you mean kubeletPlugin.nodeSelector?)"


def test_only_the_outermost_unknown_key_is_reported() -> None:
    unknown = unknown_value_paths(*DRA_NEW, {"resources": {"gpu": {"enabled": True}}, "zzz": {"a": {"b": 1}}})
    assert unknown == [UnknownPath("resources.gpu", "resources.gpus"), UnknownPath("zzz", None)]


def test_free_form_check_stops_at_real_structures() -> None:
    # The DRA chart's top-level `resources` is {gpus, computeDomains}, not ResourceRequirements: checked.
    assert "resources" not in known_paths(*DRA_NEW).open_paths
    assert [u.path for u in unknown_value_paths(*DRA_NEW, {"resources": {"limits": {}}})] == ["resources.limits"]


def test_lists_are_leaves() -> None:
    # Anything inside a list override is opaque...
    assert unknown_value_paths(*DRA_NEW, {"kubeletPlugin": {"tolerations": [{"bogus": {"x": 1}}]}}) == []
    # ...and a chart list has no sub-keys.
    assert [u.path for u in unknown_value_paths(OPERATOR, "v26.7.0", {"driver": {"env": {"A": "b"}}})] == [
        "driver.env.A"
    ]
    assert not any(p.startswith("kubeletPlugin.tolerations.") for p in known_paths(*DRA_NEW).paths)


def test_version_specific_keys() -> None:
    assert [u.path for u in unknown_value_paths(OPERATOR, "v26.3.3", {"gpuCluster": {"deployCR": True}})] == [
        "gpuCluster"
    ]
    assert unknown_value_paths(OPERATOR, "v26.7.0", {"gpuCluster": {"deployCR": True}}) == []
    assert [u.path for u in unknown_value_paths(*DRA_OLD, {"altProcDevices": "/x"})] == ["altProcDevices"]
    # Nested additions the top-level key lists do not show.
    assert not known(OPERATOR, "v26.3.3", "operator.nodeSelector")
    assert known(OPERATOR, "v26.7.0", "operator.nodeSelector")
    for path in (
        "controller.metrics",
        "controller.leaderElection",
        "controller.replicas",
        "kubeletPlugin.metrics",
    ):
        assert known(*DRA_NEW, path)
        assert not known(*DRA_OLD, path)


def test_scalar_where_chart_has_a_mapping_is_accepted() -> None:
    # Helm allows replacing a subtree with null (delete) or another value; the key itself is known.
    assert unknown_value_paths(*DRA_NEW, {"controller": {"affinity": None}, "webhook": {"tls": None}}) == []


def test_unsupported_chart_version() -> None:
    with pytest.raises(UnsupportedChartVersion) as excinfo:
        unknown_value_paths(OPERATOR, "26.3.3", {})
    assert excinfo.value.supported == ("v26.3.3", "v26.7.0")
    assert "v26.3.3, v26.7.0" in str(excinfo.value)
    with pytest.raises(UnsupportedChartVersion) as excinfo:
        known_paths("nvidia/gpu-operator", "v26.3.3")
    assert excinfo.value.supported == ()
    assert isinstance(excinfo.value, ValueError)


def test_non_string_keys_are_rejected() -> None:
    with pytest.raises(TypeError, match="under controller"):
        unknown_value_paths(*DRA_NEW, {"kubeletPlugin": {}, "controller": {True: 1}})


# --- path syntax ------------------------------------------------------------------------------------


def test_path_syntax() -> None:
    assert format_path(("node-feature-discovery", "gc", "enable")) == "node-feature-discovery.gc.enable"
    assert format_path(["a", "nvidia.com/gpu", 'q"t', ""]) == 'a."nvidia.com/gpu"."q\\"t".""'
    assert parse_path('a."nvidia.com/gpu"."q\\"t".""') == ("a", "nvidia.com/gpu", 'q"t', "")
    assert parse_path('"plain".x') == ("plain", "x")
    assert list(iter_value_paths({"a": {"b.c": [{"x": 1}], "d": {}}, "e": 1})) == ["a", 'a."b.c"', "a.d", "e"]


@pytest.mark.parametrize("bad", ["", ".", "a.", ".a", "a..b", 'a."b', 'a."b"c', "a b", "a/b", "a.[0]"])
def test_malformed_paths_are_rejected(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_path(bad)


def test_format_path_needs_a_key() -> None:
    with pytest.raises(ValueError):
        format_path(())


@given(st.lists(st.text(), min_size=1, max_size=5))
def test_path_syntax_round_trips(segments: list[str]) -> None:
    assert parse_path(format_path(segments)) == tuple(segments)


# --- deep_merge -------------------------------------------------------------------------------------


def test_deep_merge_examples() -> None:
    base = {"a": {"b": 1, "c": [1, 2], "d": {"e": "x"}}, "f": "keep"}
    override = {"a": {"c": [3], "d": {"g": True}, "h": None}, "i": {"j": 1}}
    assert deep_merge(base, override) == {
        "a": {"b": 1, "c": [3], "d": {"e": "x", "g": True}, "h": None},
        "f": "keep",
        "i": {"j": 1},
    }


def test_deep_merge_null_and_type_changes() -> None:
    assert deep_merge({"a": {"b": 1}}, {"a": None}) == {"a": None}  # kept as null for Helm to delete
    assert deep_merge({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}
    assert deep_merge({"a": {"b": 2}}, {"a": "x"}) == {"a": "x"}
    assert deep_merge({"a": [1, {"b": 1}]}, {"a": []}) == {"a": []}


def test_deep_merge_result_shares_nothing_with_inputs() -> None:
    base: dict[str, Any] = {"a": {"l": [1, {"x": 1}]}}
    override: dict[str, Any] = {"b": {"l": [2]}}
    merged = deep_merge(base, override)
    merged["a"]["l"][1]["x"] = 99
    merged["a"]["l"].append(3)
    merged["b"]["l"].append(4)
    assert base == {"a": {"l": [1, {"x": 1}]}}
    assert override == {"b": {"l": [2]}}


def test_deep_merge_accepts_read_only_mappings() -> None:
    merged = deep_merge(MappingProxyType({"a": MappingProxyType({"b": 1})}), MappingProxyType({"a": {"c": 2}}))
    assert merged == {"a": {"b": 1, "c": 2}}
    assert type(merged["a"]) is dict


_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=3)
_values = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.sampled_from("abc"), children, max_size=3)
    ),
    max_leaves=12,
)
_mappings = st.dictionaries(st.sampled_from("abcd"), _values, max_size=4)


def leaves(values: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for key, value in values.items():
        if isinstance(value, Mapping):
            yield from leaves(value, (*prefix, key))
        else:
            yield (*prefix, key), value


def key_paths(values: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, value in values.items():
        yield (*prefix, key)
        if isinstance(value, Mapping):
            yield from key_paths(value, (*prefix, key))


def get(values: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = values
    for key in path:
        node = node[key]
    return node


@given(_mappings, _mappings)
@settings(max_examples=200, deadline=None)
def test_deep_merge_properties(base: dict[str, Any], override: dict[str, Any]) -> None:
    base_before, override_before = copy.deepcopy(base), copy.deepcopy(override)
    merged = deep_merge(base, override)
    assert base == base_before and override == override_before
    for path, value in leaves(override):
        assert get(merged, path) == value
    override_paths = set(key_paths(override))
    for path, value in leaves(base):
        if not any(path[:i] in override_paths for i in range(1, len(path) + 1)):
            assert get(merged, path) == value
    assert set(merged) == set(base) | set(override)
    assert deep_merge(merged, override) == merged  # idempotent


# --- render_values_yaml -----------------------------------------------------------------------------


def test_render_is_sorted_block_style_and_keeps_strings() -> None:
    values = {
        "kubeletPlugin": {"nodeSelector": {"nvidia.com/dra-kubelet-plugin": "true"}},
        "b": {"z": 1, "a": ["x", {"k": None}]},
        "a": "",
    }
    text = render_values_yaml(values)
    assert text == (
        'a: ""\n'
        "b:\n"
        "  a:\n"
        "  - x\n"
        "  - k: null\n"
        "  z: 1\n"
        "kubeletPlugin:\n"
        "  nodeSelector:\n"
        '    nvidia.com/dra-kubelet-plugin: "true"\n'
    )
    assert yaml.safe_load(text) == values


@pytest.mark.parametrize(
    "ambiguous",
    ["true", "True", "no", "off", "y", "N", "~", "null", "", "1", "0x1f", "0o17", "1e3", "1.5", ".inf"],
)
def test_render_quotes_strings_that_yaml_or_helm_would_retype(ambiguous: str) -> None:
    text = render_values_yaml({"k": ambiguous})
    assert text == f'k: "{ambiguous}"\n'
    assert yaml.safe_load(text) == {"k": ambiguous}


def test_render_has_no_anchors_or_aliases() -> None:
    shared = {"key": "value"}
    text = render_values_yaml({"a": shared, "b": shared, "c": [shared, shared]})
    assert "&" not in text and "*" not in text
    assert yaml.safe_load(text) == {"a": shared, "b": shared, "c": [shared, shared]}


def test_render_multiline_and_empty() -> None:
    assert render_values_yaml({}) == "{}\n"
    text = render_values_yaml({"data": {"config.yaml": "version: v1\nflags: {}\n"}})
    assert text == "data:\n  config.yaml: |\n    version: v1\n    flags: {}\n"


def test_render_rejects_what_helm_values_cannot_hold() -> None:
    with pytest.raises(TypeError, match="values keys must be strings"):
        render_values_yaml({"a": {1: "x"}})
    with pytest.raises(TypeError, match="at a"):
        render_values_yaml({"a": {1, 2}})


def test_render_normalises_subclasses() -> None:
    import enum

    class Mode(enum.StrEnum):
        ON = "true"

    class Count(enum.IntEnum):
        ONE = 1

    assert render_values_yaml({"m": Mode.ON, "c": Count.ONE, "t": ("a",)}) == 'c: 1\nm: "true"\nt:\n- a\n'


def test_render_memo_tells_equal_values_of_other_types_apart() -> None:
    # 1 == 1.0 == True in Python: renderings are memoized by the values' JSON text, which keeps them apart.
    rendered = [render_values_yaml({"k": v}) for v in (1, 1.0, True, "1", 1, True)]
    assert rendered == ["k: 1\n", "k: 1.0\n", "k: true\n", 'k: "1"\n', "k: 1\n", "k: true\n"]


_render_keys = st.text(max_size=8)
_render_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.sampled_from(["true", "yes", "y", "1e3", "0o7", "~", "", " a", "a\n", "\n", "a\n b\n", "#x", "- x"])
)
_render_values = st.recursive(
    _render_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_render_keys, children, max_size=3),
    max_leaves=15,
)


@given(st.dictionaries(_render_keys, _render_values, max_size=5))
@settings(max_examples=150, deadline=None)
def test_render_round_trips_and_is_deterministic(values: dict[str, Any]) -> None:
    text = render_values_yaml(values)
    assert text.endswith("\n")
    assert render_values_yaml(copy.deepcopy(values)) == text
    assert render_values_yaml(dict(reversed(values.items()))) == text  # key order does not matter
    loaded = yaml.safe_load(text)
    assert loaded == values
    assert _same_types(loaded, values)


def _same_types(a: Any, b: Any) -> bool:
    # `==` treats True == 1 and 1 == 1.0; a values file must not turn one into the other.
    if isinstance(b, dict):
        return isinstance(a, dict) and all(_same_types(a[k], v) for k, v in b.items())
    if isinstance(b, list):
        return isinstance(a, list) and all(_same_types(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(b, float) and math.isinf(b):
        return isinstance(a, float) and a == b
    return type(a) is type(b)
