"""Loading ResourceSlices as kubectl prints them, and clear errors for bad input."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from themelio_gpu.dryrun.resourceslices import (
    ALL_NODES,
    Device,
    ResourceSliceError,
    load_resourceslices,
    parse_resourceslices,
)
from themelio_gpu.k8s.quantity import parse_quantity
from themelio_gpu.k8s.semver import Semver, parse_semver

FIXTURES = Path(__file__).parent / "fixtures" / "resourceslices"
NV = "gpu.nvidia.com"
WHOLE_GPU_NAME = re.compile(r"gpu-\d+")
MIG_NAME = re.compile(r"gpu-(?P<parent>\d+)-mig-(?P<profile>[0-9a-z+]+)-(?P<gi>\d+)-(?P<start>\d+)")


def load(name: str) -> list[Device]:
    return load_resourceslices(FIXTURES / name)


@functools.cache
def _fixture_items(name: str) -> str:
    document = yaml.safe_load((FIXTURES / name).read_text())
    items = document["items"] if document["kind"] == "List" else [document]
    return json.dumps(items, default=str)


def slice_objects(name: str) -> list[dict[str, object]]:
    """The ResourceSlice objects of a fixture file, unwrapping a List (a fresh copy each call)."""
    items: list[dict[str, object]] = json.loads(_fixture_items(name))
    return items


def minimal_slice(**spec_overrides: object) -> dict[str, object]:
    spec: dict[str, object] = {
        "driver": NV,
        "nodeName": "node-a",
        "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
        "devices": [
            {
                "name": "gpu-0",
                "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA L4"}},
                "capacity": {"memory": {"value": "23034Mi"}},
            }
        ],
    }
    spec.update(spec_overrides)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s1"}, "spec": spec}


def problems_of(text: str, source: str = "bad.yaml") -> tuple[str, ...]:
    with pytest.raises(ResourceSliceError) as raised:
        parse_resourceslices(text, source)
    return raised.value.problems


# --------------------------------------------------------------------------------------------
# Fixtures: shaped like the NVIDIA driver's output
# --------------------------------------------------------------------------------------------

WHOLE_GPU_FIXTURES = [
    ("a10g-node.yaml", "gpu-a10g-1", 4, "NVIDIA A10G", "Ampere", "8.6.0", "23028Mi"),
    ("a100-40gb-node.yaml", "gpu-a100-40-1", 8, "NVIDIA A100-SXM4-40GB", "Ampere", "8.0.0", "40960Mi"),
    ("a100-80gb-node.yaml", "gpu-a100-80-1", 8, "NVIDIA A100-SXM4-80GB", "Ampere", "8.0.0", "81920Mi"),
    ("h100-node.yaml", "gpu-h100-1", 8, "NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", "81559Mi"),
]


@pytest.mark.parametrize(("name", "node", "count", "product", "architecture", "cc", "memory"), WHOLE_GPU_FIXTURES)
def test_whole_gpu_fixtures(
    name: str, node: str, count: int, product: str, architecture: str, cc: str, memory: str
) -> None:
    devices = load(name)
    assert [d.name for d in devices] == [f"gpu-{i}" for i in range(count)]
    for device in devices:
        assert (device.node, device.pool, device.driver) == (node, node, NV)
        assert device.device_type == "gpu"
        assert device.product_name == product
        assert device.profile is None
        assert device.attribute("architecture") == architecture
        assert device.attribute("brand") == "Nvidia"
        assert device.attribute("cudaComputeCapability") == parse_semver(cc)
        assert device.attribute("driverVersion") == parse_semver("580.105.8")
        assert isinstance(device.attribute("cudaDriverVersion"), Semver)
        assert str(device.attribute("uuid")).startswith("GPU-")
        # Qualified names live under their own domain, not the driver's.
        assert re.fullmatch(
            r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d",
            str(device.attributes["resource.kubernetes.io"]["pciBusID"]),
        )
        assert "pciBusID" not in device.attributes[NV]
        assert device.capacity_of("memory") == parse_quantity(memory)
    uuids = {d.attribute("uuid") for d in devices}
    assert len(uuids) == count
    hmm = {d.attribute("addressingMode") for d in devices}
    assert hmm == ({"HMM"} if "H100" in product else {None})


def test_mig_fixtures_publish_only_mig_devices() -> None:
    for name, product, profiles in (
        (
            "a100-40gb-mig-node.yaml",
            "NVIDIA A100-SXM4-40GB",
            {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 2, "1g.10gb": 2},
        ),
        ("a100-80gb-mig-node.yaml", "NVIDIA A100-SXM4-80GB", {"1g.10gb": 7}),
    ):
        devices = load(name)
        assert all(d.device_type == "mig" for d in devices), "a MIG-enabled GPU publishes no type=gpu device"
        assert all(d.product_name == product for d in devices)
        counts: dict[str, int] = {}
        for device in devices:
            assert device.profile is not None
            counts[device.profile] = counts.get(device.profile, 0) + 1
            match = MIG_NAME.fullmatch(device.name)
            assert match is not None, device.name
            assert match["profile"] == device.profile.replace(".", "")
            assert str(device.attribute("uuid")).startswith("MIG-")
            assert str(device.attribute("parentUUID")).startswith("GPU-")
            for capacity in ("multiprocessors", "memory", "copyEngines", "decoders", "encoders"):
                assert device.capacity_of(capacity) is not None
            slices = sorted(
                int(k.removeprefix("memorySlice")) for k in device.capacity[NV] if k.startswith("memorySlice")
            )
            assert slices and slices[0] == int(match["start"])
            assert slices == list(range(slices[0], slices[0] + len(slices)))
        assert counts == profiles


def test_mig_memory_slices_do_not_overlap_per_gpu() -> None:
    for name in ("a100-40gb-mig-node.yaml", "a100-80gb-mig-node.yaml"):
        used: dict[str, set[str]] = {}
        for device in load(name):
            parent = str(device.attribute("parentUUID"))
            slices = {k for k in device.capacity[NV] if k.startswith("memorySlice")}
            assert not used.setdefault(parent, set()) & slices, device.name
            used[parent] |= slices


def test_1g10gb_is_a_different_slice_on_40gb_and_80gb() -> None:
    small = [d for d in load("a100-40gb-mig-node.yaml") if d.profile == "1g.10gb"]
    large = [d for d in load("a100-80gb-mig-node.yaml") if d.profile == "1g.10gb"]
    assert small and large

    def slices(device: Device) -> int:
        return sum(1 for k in device.capacity[NV] if k.startswith("memorySlice"))

    assert {slices(d) for d in small} == {2}
    assert {slices(d) for d in large} == {1}


def test_kubectl_json_list_of_all_fixtures() -> None:
    items = [item for path in sorted(FIXTURES.glob("*.yaml")) for item in slice_objects(path.name)]
    text = json.dumps(
        {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}, indent=4
    )
    devices = parse_resourceslices(text, "all.json")
    separately = [d for path in sorted(FIXTURES.glob("*.yaml")) for d in load_resourceslices(path)]
    assert devices == separately
    assert len({d.node for d in devices}) == 6
    assert len(devices) == 4 + 8 + 8 + 8 + 7 + 7


def test_yaml_stream_and_bare_sequence() -> None:
    parts = [(FIXTURES / name).read_text() for name in ("a10g-node.yaml", "a100-80gb-mig-node.yaml")]
    stream = parse_resourceslices("\n---\n".join(parts), "stream.yaml")
    assert [d.node for d in stream] == ["gpu-a10g-1"] * 4 + ["gpu-a100-80-mig-1"] * 7
    sequence = yaml.safe_dump([minimal_slice(), minimal_slice(nodeName="node-b", pool={"name": "node-b"})])
    assert [d.node for d in parse_resourceslices(sequence)] == ["node-a", "node-b"]


def test_device_identity_and_helpers() -> None:
    devices = load("a10g-node.yaml")
    assert len(set(devices)) == 4
    first = devices[0]
    assert first.attribute("resource.kubernetes.io/pcieRoot") == "pci0000:00"
    assert first.attribute("nonexistent") is None
    assert first.capacity_of("example.com/memory") is None


# --------------------------------------------------------------------------------------------
# API versions and node selection
# --------------------------------------------------------------------------------------------


def test_v1beta2_has_the_same_shape() -> None:
    raw = minimal_slice()
    raw["apiVersion"] = "resource.k8s.io/v1beta2"
    (device,) = parse_resourceslices(json.dumps(raw))
    assert device.product_name == "NVIDIA L4"


def test_v1beta1_nests_under_basic() -> None:
    raw = minimal_slice()
    raw["apiVersion"] = "resource.k8s.io/v1beta1"
    spec = raw["spec"]
    assert isinstance(spec, dict)
    spec["devices"] = [{"name": "gpu-0", "basic": spec["devices"][0] | {"name": None}}]
    del spec["devices"][0]["basic"]["name"]
    (device,) = parse_resourceslices(yaml.safe_dump(raw))
    assert device.product_name == "NVIDIA L4"
    assert device.capacity_of("memory") == parse_quantity("23034Mi")


def test_node_of_a_slice() -> None:
    (all_nodes,) = parse_resourceslices(json.dumps(minimal_slice(nodeName=None, allNodes=True)))
    assert all_nodes.node == ALL_NODES
    selector = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]
    }
    (selected,) = parse_resourceslices(json.dumps(minimal_slice(nodeName=None, nodeSelector=selector)))
    assert selected.node == "<nodes: zone In (a,b)>"
    per_device = minimal_slice(nodeName=None, perDeviceNodeSelection=True)
    spec = per_device["spec"]
    assert isinstance(spec, dict)
    spec["devices"][0]["nodeName"] = "node-z"
    (device,) = parse_resourceslices(json.dumps(per_device))
    assert device.node == "node-z"


def test_only_the_newest_pool_generation_counts() -> None:
    old = minimal_slice(pool={"name": "node-a", "generation": 1, "resourceSliceCount": 1})
    new = minimal_slice(pool={"name": "node-a", "generation": 2, "resourceSliceCount": 1})
    new_spec = new["spec"]
    assert isinstance(new_spec, dict)
    new_spec["devices"][0]["name"] = "gpu-9"
    devices = parse_resourceslices(yaml.safe_dump_all([old, new]))
    assert [d.name for d in devices] == ["gpu-9"]


def test_empty_list_is_no_devices() -> None:
    assert parse_resourceslices('{"apiVersion": "v1", "items": [], "kind": "List"}') == []


# --------------------------------------------------------------------------------------------
# Bad input: one clear line per problem, never a traceback
# --------------------------------------------------------------------------------------------


def test_not_yaml_or_json() -> None:
    (problem,) = problems_of("spec: [unclosed\n  driver: x")
    assert problem.startswith("bad.yaml: not valid JSON or YAML (line ")


def test_wrong_kind_and_api_version() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}}
    (problem,) = problems_of(json.dumps(pod))
    assert problem == "bad.yaml: ResourceSlice web: kind is 'Pod', expected 'ResourceSlice' (or a List of them)"
    alpha = minimal_slice()
    alpha["apiVersion"] = "resource.k8s.io/v1alpha3"
    (problem,) = problems_of(json.dumps(alpha))
    assert "ResourceSlice s1: apiVersion: 'resource.k8s.io/v1alpha3' is not supported" in problem


def test_messages_name_file_slice_device_and_field() -> None:
    broken = minimal_slice()
    spec = broken["spec"]
    assert isinstance(spec, dict)
    attributes = spec["devices"][0]["attributes"]
    attributes["productName"] = {}
    attributes["index"] = {"int": 0, "string": "0"}
    attributes["driverVersion"] = {"version": "580.105.08"}
    spec["devices"][0]["capacity"]["memory"] = {"value": "40GB"}
    listing = {"apiVersion": "v1", "kind": "List", "items": [minimal_slice(), broken]}
    broken["metadata"] = {"name": "node-b-slice"}
    problems = problems_of(yaml.safe_dump(listing), "cluster.yaml")
    prefix = "cluster.yaml: items[1] (node-b-slice): spec.devices[0] (gpu-0): "
    assert problems == (
        prefix + "attributes.driverVersion.version: '580.105.08' is not a semantic version: "
        "Patch number must not contain leading zeroes '08'",
        prefix + "attributes.index: must have exactly one of int, bool, string, version (found int, string)",
        prefix + "attributes.productName: must have exactly one of int, bool, string, version (found none)",
        prefix + "capacity.memory.value: '40GB' is not a quantity: quantities must match the regular expression "
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    )


def test_unquoted_yaml_number_is_explained() -> None:
    # YAML 1.1 reads an unquoted 0000:53:00.0 as a base-60 float.
    text = (FIXTURES / "h100-node.yaml").read_text().replace("'0000:53:00.0'", "0000:53:00.0")
    (problem,) = problems_of(text, "h100.yaml")
    assert problem.endswith(
        "spec.devices[0] (gpu-0): attributes.resource.kubernetes.io/pciBusID.string: "
        "expected a string, got a number (quote it in YAML)"
    )
    assert "items[0] (gpu-h100-1-gpu.nvidia.com-zk5rb)" in problem


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"driver": None}, "spec.driver: missing or not a string"),
        ({"pool": {"generation": 1}}, "spec.pool.name: missing or not a string"),
        ({"nodeName": None}, "exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection"),
        ({"allNodes": True}, "(found nodeName, allNodes)"),
        ({"devices": {"gpu-0": {}}}, "spec.devices: expected a list, got a mapping"),
        ({"devices": [{"attributes": {}}]}, "spec.devices[0].name: missing or not a string"),
        (
            {"devices": [{"name": "gpu-0", "attributes": {"Example.COM/x": {"int": 1}}}]},
            "invalid domain 'Example.COM'",
        ),
        ({"devices": [{"name": "gpu-0", "attributes": {"bad-name": {"int": 1}}}]}, "invalid name 'bad-name'"),
        ({"devices": [{"name": "gpu-0", "attributes": {"x": {"list": [1]}}}]}, "unsupported value type(s) list"),
        (
            {"devices": [{"name": "gpu-0", "attributes": {"x": {"int": True}}}]},
            "x.int: expected an integer, got a boolean",
        ),
        ({"devices": [{"name": "gpu-0", "capacity": {"memory": "80Gi"}}]}, "expected a mapping with 'value'"),
        ({"devices": [{"name": "g", "capacity": {}}, {"name": "g"}]}, "device 'g' of pool 'node-a'"),
    ],
)
def test_field_errors(change: dict[str, object], message: str) -> None:
    (problem,) = problems_of(json.dumps(minimal_slice(**change)))
    assert problem.startswith("bad.yaml: ResourceSlice s1")
    assert message in problem


def test_empty_and_unreadable_files(tmp_path: Path) -> None:
    assert problems_of("") == ("bad.yaml: no ResourceSlice found (empty document)",)
    with pytest.raises(ResourceSliceError, match="cannot read"):
        load_resourceslices(tmp_path / "missing.yaml")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.floats(allow_nan=False),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=120, deadline=None)
@given(st.data())
def test_corrupting_any_field_never_raises_anything_else(data: st.DataObject) -> None:
    document = slice_objects("a100-40gb-mig-node.yaml")[0]
    # Walk to a random place in the slice and replace it with arbitrary JSON.
    node: object = document
    replace: tuple[dict[str, object], str] | tuple[list[object], int] | None = None
    for _ in range(data.draw(st.integers(min_value=1, max_value=6))):
        if isinstance(node, dict) and node:
            key = data.draw(st.sampled_from(sorted(node)))
            replace, node = (node, key), node[key]
        elif isinstance(node, list) and node:
            index = data.draw(st.integers(min_value=0, max_value=len(node) - 1))
            replace, node = (node, index), node[index]
        else:
            break
    junk = data.draw(json_values)
    if replace is not None and isinstance(replace[0], dict):
        replace[0][str(replace[1])] = junk
    elif replace is not None and isinstance(replace[0], list):
        replace[0][int(replace[1])] = junk
    try:
        devices = parse_resourceslices(json.dumps(document, default=str), "fuzz.json")
    except ResourceSliceError as error:
        assert error.problems and all(p.startswith("fuzz.json: ") for p in error.problems)
    else:
        assert all(isinstance(d, Device) for d in devices)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "not valid JSON: nested too deeply"),
        ("a: " + "[" * 3000, "nested too deeply"),
    ],
    ids=["json", "yaml"],
)
def test_deeply_nested_input_is_a_problem_not_a_traceback(text: str, message: str) -> None:
    assert any(message in problem for problem in problems_of(text))
