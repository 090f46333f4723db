"""The sandbox's own slices beside NVIDIA's DRA driver's, whose slices each node has, and the catalog's DeviceClass
selectors on the driver's devices. The driver's side is what the real driver published in the sandbox
(tests/fixtures/resourceslices/driver/, captured); the hand-written fixtures beside it are compared with it too."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import plan_of
from tests.conftest import FIXTURES
from themelio_gpu.inputs.catalog.products import PRODUCTS
from themelio_gpu.plan.manifests import device_class_manifest
from themelio_gpu.plan.model import ClusterPlan, Fleet
from themelio_gpu.sandbox import nodes, slice_compare
from themelio_gpu.sandbox.gpu_profiles import profile_for
from themelio_gpu.sandbox.nodes import simulated_nodes

SLICES = FIXTURES / "resourceslices"
CAPTURED = {"h100-80gb": SLICES / "driver" / "h100-node.yaml", "a10g": SLICES / "driver" / "a10g-node.yaml"}
MANAGED_BY_DRIVER = [{"manager": "gpu-kubelet-plugin", "operation": "Update"}]


def _captured(product: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(CAPTURED[product].read_text())
    return document


def _published(product: str) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in _captured(product)["spec"]["devices"]}


@pytest.mark.parametrize(
    ("product", "explained"),
    [
        ("h100-80gb", ["attribute resource.kubernetes.io/pcieRoot", "capacity memory"]),  # NVIDIA's profile
        ("a10g", ["attribute resource.kubernetes.io/pcieRoot"]),  # this project's, from the catalog
    ],
)
def test_the_generator_publishes_what_the_driver_does_but_what_is_listed_with_its_reason(
    product: str, explained: list[str]
) -> None:
    published = _published(product)
    profile = profile_for(PRODUCTS[product])
    assert profile is not None
    found = slice_compare.node_differences("n", PRODUCTS[product], len(published), published, profile)
    assert [d.key for d in found] == explained
    assert all(d.reason for d in found), found


def test_a_generator_that_publishes_what_the_driver_does_not_is_a_defect(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `index` attribute the generator published before the driver's own slices were seen (the driver has
    none: a selector on it passed in the sandbox and matched nothing on a real node)."""
    real = nodes.gpu_devices

    def with_index(node: str, *args: Any) -> list[dict[str, Any]]:
        devices = real(node, *args)
        for number, device in enumerate(devices):
            device["attributes"]["index"] = {"int": number}
        return devices

    monkeypatch.setattr(slice_compare, "gpu_devices", with_index)
    published = _published("a10g")
    profile = profile_for(PRODUCTS["a10g"])
    assert profile is not None
    found = {d.key: d for d in slice_compare.node_differences("n", PRODUCTS["a10g"], 4, published, profile)}
    assert found["attribute index"].reason == "" and found["attribute index"].driver == "(none)"
    pool = slice_compare.PoolComparison("a10g", profile.describe, ["n"], 4, list(found.values()))
    assert not pool.agrees
    assert "NOT EXPLAINED" in slice_compare.comparison_table([pool])


def test_a_wrong_product_fact_is_not_explained_by_a_profile() -> None:
    """A derived profile carries the catalog's facts: any difference there is the generator's defect."""
    published = copy.deepcopy(_published("a10g"))
    for device in published.values():
        device["capacity"]["memory"]["value"] = "24Gi"
    profile = profile_for(PRODUCTS["a10g"])
    assert profile is not None
    found = {d.key: d for d in slice_compare.node_differences("n", PRODUCTS["a10g"], 4, published, profile)}
    assert found["capacity memory"].reason == ""


def test_whose_slices_and_double_publishing() -> None:
    driver = {**_captured("a10g"), "metadata": {"name": "x", "managedFields": MANAGED_BY_DRIVER}}
    own = {**_captured("a10g"), "metadata": {"name": "y", "managedFields": [{"manager": "kubectl-create"}]}}
    assert slice_compare.publisher(driver) == "driver" and slice_compare.publisher(own) == "sandbox"
    node = driver["spec"]["nodeName"]
    assert slice_compare.publishers([driver]) == {node: "driver"}
    assert slice_compare.publishers([driver, own]) == {node: "driver+sandbox"}


def _driver_slices(plan: ClusterPlan) -> list[dict[str, Any]]:
    """The captured slices as the driver would publish them on each whole-GPU node of the plan's pools."""
    contracts = {c.name: c for c in plan.pools}
    slices = []
    for node in simulated_nodes(plan):
        contract = contracts.get(node.pool)
        if contract is None or not contract.dra or contract.product.key not in CAPTURED:
            continue
        item = copy.deepcopy(_captured(contract.product.key))
        item["metadata"] = {"name": f"{node.name}-gpu.nvidia.com-x", "managedFields": MANAGED_BY_DRIVER}
        item["spec"]["nodeName"] = node.name
        item["spec"]["pool"]["name"] = node.name
        item["spec"]["devices"] = item["spec"]["devices"][: contract.gpus_per_node]
        slices.append(item)
    return slices


def test_the_stacks_device_classes_select_every_driver_device_of_their_pools_and_no_other(
    example_fleet: Fleet,
) -> None:
    plan = plan_of(example_fleet, "gpu-west")
    slices = _driver_slices(plan)
    assert slices, "gpu-west has H100 and A10G pools"
    classes = [device_class_manifest(c, plan.names) for c in plan.device_classes]
    rows = slice_compare.class_selections(plan, slices, classes)
    assert rows and all(r.agrees for r in rows), rows
    assert sum(r.selected for r in rows) >= len({d["name"] for s in slices for d in s["spec"]["devices"]})

    # A selector naming the product as the catalog spells it, not as the driver publishes it, selects nothing.
    wrong = copy.deepcopy(classes)
    for device_class in wrong:
        for selector in device_class["spec"].get("selectors") or []:
            selector["cel"]["expression"] = selector["cel"]["expression"].replace(
                "NVIDIA A10G", "NVIDIA A10G 24GB"
            )
    broken = [r for r in slice_compare.class_selections(plan, slices, wrong) if not r.agrees]
    assert broken and all(r.missed for r in broken)
    assert "NO: misses" in slice_compare.selection_table(broken)


def _devices(path: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for document in yaml.safe_load_all(path.read_text()):
        for item in document.get("items", [document]) if document else []:
            found += item["spec"].get("devices") or []
    return found


def _shape(device: dict[str, Any]) -> dict[str, str]:
    """Each attribute's and capacity's name and kind."""
    shape = {name: next(iter(value)) for name, value in device.get("attributes", {}).items()}
    shape.update({f"capacity {name}": "quantity" for name in device.get("capacity", {})})
    return shape


HAND_WRITTEN_EXTRAS = {
    "resource.kubernetes.io/pcieRoot": slice_compare.KNOWN[f"attribute {slice_compare.PCIE_ROOT}"],
    "addressingMode": "published where NVML reports an addressing mode (nvlib.go); the mock's profiles report none",
}
"""What the hand-written fixtures' whole GPUs have and the captured driver's do not, with why."""


@pytest.mark.parametrize(
    "fixture", ["a100-40gb-node.yaml", "a100-80gb-node.yaml", "a10g-node.yaml", "h100-node.yaml"]
)
def test_the_hand_written_whole_gpu_fixtures_are_shaped_as_the_driver_publishes(fixture: str) -> None:
    """tests/fixtures/resourceslices/*.yaml are written by hand (their headers say "Synthetic"); their whole GPUs
    carry every attribute and capacity the captured driver publishes, of the same kind, and nothing else but
    HAND_WRITTEN_EXTRAS. Their MIG devices have no driver capture to compare with (the mock has no MIG)."""
    assert (SLICES / fixture).read_text().startswith("# Synthetic")
    driver = _shape(_captured("a10g")["spec"]["devices"][0])
    assert _shape(_captured("h100-80gb")["spec"]["devices"][0]) == driver  # one shape, whatever the profile
    for device in _devices(SLICES / fixture):
        shape = _shape(device)
        missing = {k: v for k, v in driver.items() if shape.get(k) != v}
        extra = sorted(set(shape) - set(driver) - set(HAND_WRITTEN_EXTRAS))
        assert not missing and not extra, (device["name"], missing, extra)


def test_a_class_that_selects_otherwise_only_by_the_mocks_profile_is_shown_not_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """consumers/notebooks: NVIDIA's L40S profile gives 48 GiB where a real L40S has 46068 MiB, so the capability
    class "48 GiB or more" selects the mock's L40S devices, which a real L40S would not meet (seen live). Asked with
    the hardware's memory, it agrees and says why the mock's differ; without the profile's reason it fails."""
    from themelio_gpu.plan.fleet import load_fleet

    folder = FIXTURES / "fleets" / "consumers"
    plan = load_fleet(folder / "catalog" / "gpu-catalog.yaml", folder / "stacks").cluster("notebooks")
    assert plan is not None
    contracts = {c.name: c for c in plan.pools}
    slices = []
    for node in simulated_nodes(plan):
        contract = contracts.get(node.pool)
        if contract is None or contract.product.key != "l40s":
            continue
        devices = nodes.gpu_devices(node.name, contract.product, contract.gpus_per_node, None)
        for device in devices:
            device["capacity"]["memory"]["value"] = "48Gi"  # NVIDIA's L40S profile: 51539607552 bytes
            device["attributes"].pop(slice_compare.PCIE_ROOT)
        spec = {"driver": "gpu.nvidia.com", "nodeName": node.name, "pool": {"name": node.name}, "devices": devices}
        metadata = {"name": node.name, "managedFields": MANAGED_BY_DRIVER}
        slices.append(
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": metadata, "spec": spec}
        )
    assert slices
    classes = [device_class_manifest(c, plan.names) for c in plan.device_classes]
    rows = {r.offering: r for r in slice_compare.class_selections(plan, slices, classes)}
    capability = rows["nvidia.com/gpu-48gb"]
    assert capability.agrees and capability.as_published and not capability.extra
    assert capability.as_published[0].startswith("would also select 8: notebooks-l40s-inference-0/gpu-0")
    assert "capacity memory" in capability.differing
    assert "only by what the profile differs in" in slice_compare.selection_table([capability])
    assert rows["nvidia.com/l40s"].agrees and not rows["nvidia.com/l40s"].as_published

    monkeypatch.setattr(slice_compare, "KNOWN_FOR_PROFILE", {})
    unexplained = {r.offering: r for r in slice_compare.class_selections(plan, slices, classes)}
    assert unexplained["nvidia.com/gpu-48gb"].extra and not unexplained["nvidia.com/gpu-48gb"].agrees
