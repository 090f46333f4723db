"""Capability offerings (issue 15): classes select exactly the devices meeting the capability, on ResourceSlices of
mixed generations; placement, overlaps, contracts and malformed entries.

The oracle below reads the fixture's raw YAML with plain Python (MiB integers, version tuples), independent of the
CEL engine, the ResourceSlice loader and the trial's own check.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import cluster, fleet_of, problems_of
from tests.conftest import FIXTURES
from themelio_gpu.dryrun.cluster_match import classes_for_catalog, match_cluster
from themelio_gpu.dryrun.match import match_classes
from themelio_gpu.dryrun.resourceslices import Device, load_resourceslices
from themelio_gpu.inputs.catalog.capability import DeviceKind
from themelio_gpu.inputs.catalog.catalog import Catalog
from themelio_gpu.inputs.catalog.loading import load_catalog
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.plan.quota import plan_quota
from themelio_gpu.render.contracts import gpu_labels_config, kubeflow_spawner_gpus, waldur_quota_mapping

MIXED = FIXTURES / "resourceslices" / "mixed" / "mixed-generations.yaml"
FLEET = FIXTURES / "fleets" / "capability"


# --- the independent oracle ---------------------------------------------------------------------------------


def _mib(text: str) -> int:
    assert text.endswith("Mi"), text  # the fixture writes every memory in Mi
    return int(text[:-2])


def _version(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def raw_devices() -> list[dict[str, Any]]:
    """Every device of the fixture as {node, name, driver, attrs, memory}, read straight from the YAML."""
    data = yaml.safe_load(MIXED.read_text(encoding="utf-8"))
    found = []
    for item in data["items"]:
        for device in item["spec"]["devices"]:
            body = device.get("basic", device)  # v1beta1 wraps the device in `basic`
            attrs = {k: next(iter(v.values())) for k, v in body.get("attributes", {}).items()}
            memory = body.get("capacity", {}).get("memory", {}).get("value")
            found.append(
                {
                    "label": f"{item['spec']['nodeName']}/{device['name']}",
                    "driver": item["spec"]["driver"],
                    "attrs": attrs,
                    "memory": _mib(memory) if memory else None,
                }
            )
    return found


NAMES = {
    "a10g": {"NVIDIA A10G"},
    "a100-80gb": {"NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"},
    "h100-80gb": {"NVIDIA H100 80GB HBM3"},
    "b200": {"NVIDIA B200"},
}


def meets(capability: dict[str, Any], device: dict[str, Any]) -> bool:
    attrs = device["attrs"]
    if device["driver"] != "gpu.nvidia.com" or attrs.get("type") != capability.get("type", "gpu"):
        return False
    if "minMemory" in capability and (
        device["memory"] is None or device["memory"] < _mib_of(capability["minMemory"])
    ):
        return False
    if "architectures" in capability and attrs["architecture"] not in capability["architectures"]:
        return False
    if "minComputeCapability" in capability and _version(attrs["cudaComputeCapability"]) < _version(
        str(capability["minComputeCapability"])
    ):
        return False
    if "minDriverVersion" in capability and _version(attrs["driverVersion"]) < _version(
        str(capability["minDriverVersion"])
    ):
        return False
    return "products" not in capability or attrs["productName"] in set().union(
        *(NAMES[p] for p in capability["products"])
    )


def _mib_of(quantity: str) -> int:
    number, unit = quantity[:-2], quantity[-2:]
    return int(float(number) * {"Gi": 1024, "Mi": 1, "Ti": 1024 * 1024}[unit])


# --- helpers --------------------------------------------------------------------------------------------------


def capability_offering(capability: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "deviceClass": "cap.gpu.themelio.io",
        "capability": capability,
        "displayName": "By capability",
        "quota": {"waldurComponent": "gpu_cap"},
        **extra,
    }


def write_catalog(tmp_path: Path, data: dict[str, Any], text: str | None = None) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def load(tmp_path: Path, data: dict[str, Any]) -> tuple[Catalog | None, list[str]]:
    problems = Problems()
    catalog = load_catalog(write_catalog(tmp_path, data), problems, "catalog.yaml")
    return catalog, [str(p) for p in problems]


@pytest.fixture(scope="module")
def devices() -> list[Device]:
    return load_resourceslices(MIXED)


# --- the fixture is what its generator writes -------------------------------------------------------------------


def test_mixed_fixture_is_what_its_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location("make_fixture", MIXED.parent / "make_fixture.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    assert MIXED.read_text(encoding="utf-8") == module.render()


def test_mixed_fixture_has_what_the_tests_need() -> None:
    raw = raw_devices()
    kinds = {(d["attrs"].get("type"), d["driver"]) for d in raw}
    assert {("gpu", "gpu.nvidia.com"), ("mig", "gpu.nvidia.com"), ("vfio", "gpu.nvidia.com")} <= kinds
    assert ("channel", "compute-domain.nvidia.com") in kinds
    assert len({d["attrs"]["driverVersion"] for d in raw if "driverVersion" in d["attrs"]}) >= 4
    assert len({d["attrs"]["architecture"] for d in raw if "architecture" in d["attrs"]}) == 4


# --- classes select exactly the devices meeting the capability ---------------------------------------------------

CAPABILITIES = [
    {"minMemory": "48Gi"},
    {"minMemory": "40Gi"},  # the A100 40GB publishes exactly 40960Mi: included
    {"minMemory": "44Gi", "type": "mig"},  # B200 2g.45gb (44.25Gi) and RTX PRO 2g.48gb (45.75Gi); not H100 3g.40gb
    {"minMemory": "20Gi", "type": "mig"},
    {"architectures": ["Hopper"]},
    {"architectures": ["Hopper", "Blackwell"], "type": "mig"},
    {"minComputeCapability": "9.0"},
    {"minComputeCapability": 8.9},  # a YAML number works too
    {"minDriverVersion": "570"},
    {"minDriverVersion": "580.100.0"},  # 580.105.8 yes, 580.95.5 no
    {"products": ["a100-80gb", "a10g"]},
    {"products": ["h100-80gb"], "type": "mig", "minMemory": "19Gi"},
    {"minMemory": "24Gi", "architectures": ["Ampere", "Ada Lovelace"], "minDriverVersion": "550.0.0"},
    {"products": ["b200"], "minComputeCapability": "10.0", "minDriverVersion": "580.0.0", "type": "mig"},
]


@pytest.mark.parametrize("capability", CAPABILITIES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_capability_class_selects_exactly_the_devices_meeting_it(
    tmp_path: Path, devices: list[Device], capability: dict[str, Any]
) -> None:
    catalog, problems = load(tmp_path, {"offerings": {"nvidia.com/cap": capability_offering(capability)}})
    assert catalog is not None, problems
    report = match_classes(classes_for_catalog(catalog), devices)
    (item,) = [c for c in report.classes if c.offering == "nvidia.com/cap"]
    expected = {d["label"] for d in raw_devices() if meets(capability, d)}
    assert expected, "each case must select something, or it proves little"
    assert {d.label for d in item.devices} == expected
    assert report.errors == ()  # the vfio device (no memory capacity) and other drivers never abort allocation


def test_a_capability_selects_hardware_the_product_table_does_not_know(
    tmp_path: Path, devices: list[Device]
) -> None:
    # The RTX PRO 6000 is not built in; a memory capability still takes it: selectors test what the driver publishes.
    catalog, _ = load(tmp_path, {"offerings": {"nvidia.com/cap": capability_offering({"minMemory": "90Gi"})}})
    assert catalog is not None
    report = match_classes(classes_for_catalog(catalog), devices)
    (item,) = [c for c in report.classes if c.offering == "nvidia.com/cap"]
    assert {d.label for d in item.devices} == {"gpu-b200/gpu-0", "gpu-rtxpro/gpu-0"}


def test_capability_selector_uses_the_driver_attribute_names_and_types(tmp_path: Path) -> None:
    capability = {
        "minMemory": "48Gi",
        "architectures": ["Hopper", "Blackwell"],
        "minComputeCapability": "9.0",
        "minDriverVersion": "570.0.0",
        "products": ["h100-80gb", "b200"],
    }
    catalog, problems = load(tmp_path, {"offerings": {"nvidia.com/cap": capability_offering(capability)}})
    assert catalog is not None, problems
    assert catalog.offerings["nvidia.com/cap"].selector == (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
        " && device.attributes['gpu.nvidia.com'].productName in ['NVIDIA H100 80GB HBM3', 'NVIDIA B200']"
        " && device.attributes['gpu.nvidia.com'].architecture in ['Hopper', 'Blackwell']"
        " && device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('9.0', true)) >= 0"
        " && device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('570.0.0', true)) >= 0"
        " && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('48Gi')) >= 0"
    )


# --- what the catalog derives: takes, placement facts, node selector, contracts ---------------------------------


def test_takes_follows_the_published_memory_not_the_marketed_size(tmp_path: Path) -> None:
    catalog, _ = load(tmp_path, {"offerings": {"nvidia.com/cap": capability_offering({"minMemory": "48Gi"})}})
    assert catalog is not None
    takes = {k.product for k in catalog.offerings["nvidia.com/cap"].takes}
    # The L40S is sold as 48 GB and publishes 46068Mi (45 GiB): out. The H100 "80GB" publishes 79.65 GiB: in.
    assert takes == {"a100-80gb", "h100-80gb", "h100-nvl", "h200-141gb", "b200"}
    catalog, _ = load(tmp_path, {"offerings": {"nvidia.com/cap": capability_offering({"minMemory": "80Gi"})}})
    assert catalog is not None
    assert {k.product for k in catalog.offerings["nvidia.com/cap"].takes} == {
        "a100-80gb",
        "h100-nvl",
        "h200-141gb",
        "b200",
    }


def test_mig_capability_takes_profiles_whose_size_may_reach_it(tmp_path: Path) -> None:
    capability = {"type": "mig", "minMemory": "40Gi", "products": ["a100-80gb"]}
    catalog, _ = load(tmp_path, {"offerings": {"nvidia.com/cap": capability_offering(capability)}})
    assert catalog is not None
    offering = catalog.offerings["nvidia.com/cap"]
    assert offering.takes == tuple(DeviceKind("a100-80gb", p) for p in ("3g.40gb", "4g.40gb", "7g.80gb"))
    assert dict(offering.node_selector) == {"mig_enabled": "true", "nvidia.com/gpu": "true"}
    assert offering.is_mig and offering.product is None


def test_capability_node_selector_has_no_accelerator_label(tmp_path: Path) -> None:
    catalog, _ = load(tmp_path, {"offerings": {"nvidia.com/cap": capability_offering({"minMemory": "48Gi"})}})
    assert catalog is not None
    # Several products qualify: one accelerator=<product> label would exclude all but one of them.
    assert dict(catalog.offerings["nvidia.com/cap"].node_selector) == {
        "mig_enabled": "false",
        "nvidia.com/gpu": "true",
    }


def test_fixture_fleet_places_capability_offerings_on_every_qualifying_pool() -> None:
    from themelio_gpu.plan.fleet import load_fleet

    fleet = load_fleet(FLEET / "catalog" / "gpu-catalog.yaml", FLEET / "stacks")
    (plan,) = fleet.clusters
    assert plan.placements["nvidia.com/gpu-48gb"] == ("rtx-pro", "h100")
    assert plan.placements["nvidia.com/gpu-eval"] == ("h100", "a10g")  # Ampere or Hopper, >= 20Gi
    assert plan.placements["nvidia.com/rtx-pro-6000"] == ("rtx-pro",)
    assert plan.placements["nvidia.com/rtx-pro-6000-mig-2g.48gb"] == ("rtx-pro-mig",)
    classes = {c.extended_resource_name: c.selector for c in plan.device_classes}
    assert "productName == 'NVIDIA RTX PRO 6000 Blackwell Server Edition'" in classes["nvidia.com/rtx-pro-6000"]
    assert "profile == '2g.48gb'" in classes["nvidia.com/rtx-pro-6000-mig-2g.48gb"]
    rtx_mig = next(p for p in plan.pools if p.name == "rtx-pro-mig")
    assert rtx_mig.labels["accelerator"] == "nvidia-rtx-pro-6000"
    assert rtx_mig.labels["nvidia.com/mig.config"] == "all-balanced"
    assert dict(rtx_mig.devices_per_node()) == {"1g.24gb": 8, "2g.48gb": 4}


def test_fixture_fleet_classes_on_the_mixed_slices(devices: list[Device]) -> None:
    from themelio_gpu.plan.fleet import load_fleet

    (plan,) = load_fleet(FLEET / "catalog" / "gpu-catalog.yaml", FLEET / "stacks").clusters
    report = match_cluster(plan, devices)
    chosen = {c.name: {d.label for d in c.devices} for c in report.classes}
    assert chosen["rtx-pro-6000.gpu.themelio.io"] == {"gpu-rtxpro/gpu-0"}
    assert chosen["rtx-pro-6000-mig-2g.48gb.gpu.themelio.io"] == {"gpu-rtxpro/gpu-1-mig-2g48gb-14-0"}
    # The declared overlaps are warnings, not problems: the capability offerings share devices on purpose.
    assert report.overlaps == ()
    assert report.shared_devices


def test_coverage_explains_why_no_pool_meets_a_capability(tmp_path: Path) -> None:
    catalog = yaml.safe_load((FLEET / "catalog" / "gpu-catalog.yaml").read_text())
    pools = [{"name": "small", "product": "a10g", "gpusPerNode": 4, "provisioning": {"provisioned": {}}}]
    problems = problems_of(tmp_path, cluster(offerings=["nvidia.com/gpu-48gb"], nodePools=pools), catalog=catalog)
    assert problems == [
        "stacks/test.yaml: offerings[0]: no node pool can provide nvidia.com/gpu-48gb: "
        "pool small: it publishes 22.49 GiB, below 48Gi (line 16, column 3)"
    ]


def test_coverage_of_a_mig_capability_needs_a_layout_with_qualifying_profiles(tmp_path: Path) -> None:
    data = {
        "offerings": {
            "nvidia.com/mig-big": capability_offering(
                {"type": "mig", "minMemory": "20Gi", "products": ["a100-40gb"]}
            )
        }
    }
    small = {"name": "sliced", "product": "a100-40gb", "gpusPerNode": 8, "mig": {"profile": "1g.5gb"}}
    small["provisioning"] = {"provisioned": {}}
    problems = problems_of(tmp_path, cluster(offerings=["nvidia.com/mig-big"], nodePools=[small]), catalog=data)
    assert problems == [
        "stacks/test.yaml: offerings[0]: no node pool can provide nvidia.com/mig-big: "
        "pool sliced has no MIG devices that can meet it (1g.5gb) (line 18, column 3)"
    ]
    balanced = {**small, "mig": {"config": "all-balanced"}}
    plan = fleet_of(
        tmp_path, cluster(offerings=["nvidia.com/mig-big"], nodePools=[balanced]), catalog=data
    ).clusters[0]
    assert plan.placements["nvidia.com/mig-big"] == ("sliced",)  # all-balanced has a 3g.20gb


def test_device_plugin_pools_do_not_serve_a_capability_name(tmp_path: Path) -> None:
    data = {"offerings": {"nvidia.com/cap": capability_offering({"minMemory": "40Gi"})}}
    legacy = {"name": "legacy", "product": "a100-40gb", "gpusPerNode": 8, "dra": False}
    legacy["provisioning"] = {"provisioned": {}}
    problems = problems_of(tmp_path, cluster(offerings=["nvidia.com/cap"], nodePools=[legacy]), catalog=data)
    assert problems == [
        "stacks/test.yaml: offerings[0]: no node pool can provide nvidia.com/cap: "
        "pool legacy uses the device plugin, which advertises nvidia.com/gpu, not nvidia.com/cap (line 17, column 3)"
    ]


def test_contracts_carry_capability_offerings_and_shared_devices() -> None:
    from themelio_gpu.plan.fleet import load_fleet

    (plan,) = load_fleet(FLEET / "catalog" / "gpu-catalog.yaml", FLEET / "stacks").clusters
    mapping = waldur_quota_mapping(plan, plan_quota(plan))
    rows = {r["offering"]: r for r in mapping["components"]}
    assert rows["nvidia.com/gpu-48gb"]["quotaKey"] == "requests.nvidia.com/gpu-48gb"
    assert rows["nvidia.com/gpu-48gb"]["sharesDevicesWith"] == [
        "nvidia.com/gpu-eval",
        "nvidia.com/h100",
        "nvidia.com/rtx-pro-6000",
    ]
    assert rows["nvidia.com/a10g"]["sharesDevicesWith"] == ["nvidia.com/gpu-eval"]
    assert "sharesDevicesWith" not in rows["nvidia.com/rtx-pro-6000-mig-2g.48gb"]
    vendors = kubeflow_spawner_gpus(plan.offerings)["spawnerFormDefaults"]["gpus"]["value"]["vendors"]
    assert {"limitsKey": "nvidia.com/gpu-48gb", "uiName": "Any GPU (48 GiB or more)"} in vendors
    labels = gpu_labels_config(plan.offerings)["gpuLabels"]
    assert labels["nvidia.com/gpu-48gb"]["nodeSelector"] == {"mig_enabled": "false", "nvidia.com/gpu": "true"}
    assert labels["nvidia.com/gpu-48gb"]["tolerations"] == [
        {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}
    ]


# --- overlaps ---------------------------------------------------------------------------------------------------

A100_80 = {
    "deviceClass": "a100-80gb.gpu.themelio.io",
    "product": "a100-80gb",
    "displayName": "A100 80GB",
    "quota": {"waldurComponent": "gpu_a100_80gb"},
}


def test_an_overlap_must_be_declared_on_the_capability_offering(tmp_path: Path) -> None:
    data = {
        "offerings": {
            "nvidia.com/a100-80gb": A100_80,
            "nvidia.com/gpu-48gb": capability_offering({"minMemory": "48Gi"}),
        }
    }
    catalog, problems = load(tmp_path, data)
    assert catalog is None
    assert problems == [
        'catalog.yaml: offerings["nvidia.com/gpu-48gb"].capability: nvidia.com/gpu-48gb overlaps '
        "nvidia.com/a100-80gb: both can take whole a100-80gb. Requests for one would use devices the other "
        "counts on; set overlaps: allowed on nvidia.com/gpu-48gb if that is intended (README: Overlapping "
        "offerings and quotas), or narrow the capability (line 10, column 5)"
    ]


def test_a_declared_overlap_is_exposed_for_quotas(tmp_path: Path) -> None:
    data = {
        "offerings": {
            "nvidia.com/a100-80gb": A100_80,
            "nvidia.com/gpu-48gb": capability_offering({"minMemory": "48Gi"}, overlaps="allowed"),
        }
    }
    catalog, problems = load(tmp_path, data)
    assert catalog is not None, problems
    capability = catalog.offerings["nvidia.com/gpu-48gb"]
    assert capability.overlaps_allowed
    assert capability.overlaps_with == ("nvidia.com/a100-80gb",)
    assert catalog.offerings["nvidia.com/a100-80gb"].overlaps_with == ("nvidia.com/gpu-48gb",)
    assert DeviceKind("a100-80gb") in capability.takes


def test_sharing_with_the_generic_legacy_name_needs_no_declaration(tmp_path: Path) -> None:
    generic = {
        "servedBy": "dra-driver-chart",
        "displayName": "Any GPU",
        "quota": {"waldurComponent": "gpu"},
        "lifecycle": "deprecated",
    }
    data = {"offerings": {"nvidia.com/gpu": generic, "nvidia.com/cap": capability_offering({"minMemory": "48Gi"})}}
    catalog, problems = load(tmp_path, data)
    assert catalog is not None, problems
    assert catalog.offerings["nvidia.com/cap"].overlaps_with == ("nvidia.com/gpu",)


def test_disjoint_capabilities_do_not_overlap(tmp_path: Path) -> None:
    data = {
        "offerings": {
            "nvidia.com/big": capability_offering({"minMemory": "48Gi"}),
            "nvidia.com/small": capability_offering(
                {"products": ["a10g", "l4"]},
                deviceClass="small.gpu.themelio.io",
                quota={"waldurComponent": "small"},
            ),
        }
    }
    catalog, problems = load(tmp_path, data)
    assert catalog is not None, problems
    assert catalog.offerings["nvidia.com/big"].overlaps_with == ()


# --- malformed capability entries --------------------------------------------------------------------------------


CAP = 'offerings["nvidia.com/cap"].capability'


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"product": "a10g"},
            f"line 3: {CAP}: set product (one product) or capability (every product meeting it), not both",
        ),
        (
            {"capability": {"type": "gpu"}},
            f"line 3: {CAP}: name at least one of minMemory, architectures, minComputeCapability, minDriverVersion, "
            "products (type alone selects every device of the driver)",
        ),
        (
            {"capability": {"minMemory": "48GB"}},
            f"line 4: {CAP}.minMemory: '48GB' is not a quantity like 48Gi (binary Ki, Mi, Gi, Ti or decimal k, M, G, T)",
        ),
        (
            {"capability": {"architectures": ["hopper"]}},
            f"line 5: {CAP}.architectures[0]: 'hopper' is not an architecture the driver publishes; allowed (as it "
            "spells them): Kepler, Maxwell, Pascal, Volta, Turing, Ampere, Ada Lovelace, Hopper, Blackwell",
        ),
        (
            {"capability": {"products": ["b300"]}},
            f"line 5: {CAP}.products[0]: unknown product 'b300' (did you mean b200?); known: a10g, l4, l40s, a30, a100-40gb, a100-80gb, "
            "h100-80gb, h100-nvl, h200-141gb, b200 (or declare it under products:)",
        ),
        (
            {"capability": {"minComputeCapability": "nine"}},
            f"line 4: {CAP}.minComputeCapability: 'nine' is not a version like 8.0",
        ),
        (
            {"capability": {"minDriverVersion": "r570"}},
            f"line 4: {CAP}.minDriverVersion: 'r570' is not a version like 570.86.15",
        ),
        (
            {"capability": {"minMem": "48Gi"}},
            f"line 4: {CAP}.minMem: unknown key; did you mean minMemory? (keys allowed here: minMemory, architectures, "
            "minComputeCapability, minDriverVersion, products, type)",
        ),
        (
            {"capability": {"minMemory": "8Gi", "type": "vgpu"}},
            f"line 5: {CAP}.type: must be one of gpu, mig, not the text 'vgpu' (did you mean gpu?)",
        ),
        (
            {"capability": {"products": ["a10g"], "type": "mig"}},
            f"line 3: {CAP}: none of the products it names meets it (MIG devices, of a10g): the class would select "
            "nothing",
        ),
        (
            {"capability": {"products": ["a10g", "l4"], "minMemory": "40Gi"}},
            f"line 3: {CAP}: none of the products it names meets it (whole GPUs, of a10g, l4, with >= 40Gi): the "
            "class would select nothing",
        ),
        (
            {"migProfile": "1g.10gb"},
            f"line 3: {CAP}: migProfile belongs to a product offering; a capability selects MIG devices with type: mig",
        ),
        (
            {"constraints": {"minMemory": "40Gi"}},
            f"line 3: {CAP}: a capability offering has no constraints: put minMemory and minDriverVersion in capability",
        ),
    ],
)
def test_malformed_capabilities_are_refused_with_file_line_key_and_what_is_allowed(
    tmp_path: Path, changes: dict[str, Any], expected: str
) -> None:
    item = capability_offering({"minMemory": "48Gi"})
    item.update(copy.deepcopy(changes))
    # Sorted keys, so the lines are known: offerings (1), the name (2), capability (3), its keys (4...).
    text = yaml.safe_dump({"offerings": {"nvidia.com/cap": item}}, sort_keys=True)
    problems = Problems()
    catalog = load_catalog(write_catalog(tmp_path, {}, text), problems, "catalog.yaml")
    assert catalog is None
    # Each problem ends with its key's position: `(line L, column C)`.
    line, message = expected.split(": ", 1)
    assert len(problems) == 1, text
    assert str(problems.items[0]).startswith(f"catalog.yaml: {message} ({line}, column "), text


def test_a_capability_for_hardware_not_in_the_table_is_kept_and_judged_on_pools(tmp_path: Path) -> None:
    # No known product has 1 TiB, but one may come: the catalog keeps it; a cluster serving it needs a pool.
    data = {
        "offerings": {
            "nvidia.com/huge": capability_offering({"minMemory": "1Ti", "architectures": ["Turing", "Blackwell"]})
        }
    }
    catalog, problems = load(tmp_path, data)
    assert catalog is not None, problems
    assert catalog.offerings["nvidia.com/huge"].takes == ()
    pools = [{"name": "b200", "product": "b200", "gpusPerNode": 8, "provisioning": {"provisioned": {}}}]
    problems = problems_of(tmp_path, cluster(offerings=["nvidia.com/huge"], nodePools=pools), catalog=data)
    assert problems == [
        "stacks/test.yaml: offerings[0]: no node pool can provide nvidia.com/huge: "
        "pool b200: it publishes 179.1 GiB, below 1Ti (line 16, column 3)"
    ]


def test_overlaps_is_only_for_capability_offerings(tmp_path: Path) -> None:
    _, problems = load(tmp_path, {"offerings": {"nvidia.com/a100-80gb": {**A100_80, "overlaps": "allowed"}}})
    assert problems == [
        'catalog.yaml: offerings["nvidia.com/a100-80gb"].overlaps: only a capability offering declares overlaps '
        "(a product offering takes one product) (line 8, column 5)"
    ]
