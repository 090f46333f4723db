"""Products in the catalog (issue 15): new GPUs without code, corrections to built-in ones, the same rules for both,
and problems reported with file, line and key."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import cluster, fleet_of, problems_of
from tests.conftest import FIXTURES
from themelio_gpu.inputs.catalog.catalog import Catalog
from themelio_gpu.inputs.catalog.loading import load_catalog
from themelio_gpu.inputs.catalog.products import PRODUCTS, product_problems, table_clashes
from themelio_gpu.inputs.problems import Problems

FLEET_CATALOG = FIXTURES / "fleets" / "capability" / "catalog" / "gpu-catalog.yaml"

RTX_PRO: dict[str, Any] = yaml.safe_load(FLEET_CATALOG.read_text(encoding="utf-8"))["products"]["rtx-pro-6000"]

WHOLE = {
    "deviceClass": "rtx.gpu.themelio.io",
    "product": "rtx-pro-6000",
    "displayName": "RTX PRO 6000",
    "quota": {"waldurComponent": "gpu_rtx"},
}


def load_text(tmp_path: Path, text: str) -> tuple[Catalog | None, list[str]]:
    path = tmp_path / "catalog.yaml"
    path.write_text(text, encoding="utf-8")
    problems = Problems()
    catalog = load_catalog(path, problems, "catalog.yaml")
    return catalog, [str(p) for p in problems]


def catalog_text(
    product: dict[str, Any], key: str = "rtx-pro-6000", offering: dict[str, Any] | None = None
) -> str:
    """A catalog whose product entry starts on line 3 and lists its keys in the order given, one per line."""
    body = yaml.safe_dump({"products": {key: product}}, sort_keys=False, default_flow_style=False)
    offerings = yaml.safe_dump(
        {"offerings": {"nvidia.com/x": offering or {**WHOLE, "product": key}}}, sort_keys=False
    )
    return "# catalog\n" + body + offerings


def test_built_in_products_follow_the_rules_a_catalog_product_must() -> None:
    for product in PRODUCTS.values():
        assert product_problems(product) == [], product.key
    assert table_clashes(PRODUCTS) == []


def test_a_product_declared_only_in_yaml_is_offered_whole_and_as_mig(tmp_path: Path) -> None:
    catalog, problems = load_text(tmp_path, FLEET_CATALOG.read_text(encoding="utf-8"))
    assert catalog is not None, problems
    product = catalog.products["rtx-pro-6000"]
    assert "rtx-pro-6000" not in PRODUCTS
    assert product.product_names == ("NVIDIA RTX PRO 6000 Blackwell Server Edition",)
    assert product.pci_device_ids == ("0x2BB510DE",)  # unquoted in YAML (an integer there): spelled back as hex
    assert product.compute_capability == "12.0"
    assert dict(product.mig_balanced) == {"1g.24gb": 2, "2g.48gb": 1}
    whole = catalog.offerings["nvidia.com/rtx-pro-6000"]
    mig = catalog.offerings["nvidia.com/rtx-pro-6000-mig-2g.48gb"]
    assert "productName == 'NVIDIA RTX PRO 6000 Blackwell Server Edition'" in whole.selector
    assert "type == 'mig'" in mig.selector and "profile == '2g.48gb'" in mig.selector
    assert dict(whole.node_selector)["accelerator"] == "nvidia-rtx-pro-6000"


def test_the_yaml_product_synthesizes_end_to_end(tmp_path: Path) -> None:
    from themelio_gpu.outputs.synth import synthesize
    from themelio_gpu.plan.fleet import load_fleet

    fleet = load_fleet(FLEET_CATALOG, FLEET_CATALOG.parents[1] / "stacks")
    synthesize(fleet, tmp_path, progress=None)
    stack = json.loads((tmp_path / "stacks" / "capability-lab" / "cdk.tf.json").read_text())
    classes = stack["resource"]["kubernetes_manifest"]["device_class"]["for_each"]
    assert set(classes) == {
        "a10g.gpu.themelio.io",
        "gpu-48gb.gpu.themelio.io",
        "gpu-eval.gpu.themelio.io",
        "h100-80gb.gpu.themelio.io",
        "rtx-pro-6000.gpu.themelio.io",
        "rtx-pro-6000-mig-2g.48gb.gpu.themelio.io",
    }
    mig = classes["rtx-pro-6000-mig-2g.48gb.gpu.themelio.io"]
    assert mig["spec"]["extendedResourceName"] == "nvidia.com/rtx-pro-6000-mig-2g.48gb"
    labels = stack["resource"]["kubernetes_labels"]["node_labels_rtx-pro-mig"]
    assert labels["labels"]["nvidia.com/mig.config"] == "all-balanced"
    assert labels["labels"]["accelerator"] == "nvidia-rtx-pro-6000"


def test_pools_resolve_against_the_merged_table(tmp_path: Path) -> None:
    catalog = yaml.safe_load(FLEET_CATALOG.read_text(encoding="utf-8"))
    pools = [
        {"name": "rtx", "product": "rtx-pro-6000", "gpusPerNode": 2, "provisioning": {"provisioned": {}}},
        {"name": "mig", "product": "rtx-pro-6000", "gpusPerNode": 2, "mig": {"profile": "2g.48gb"}},
    ]
    pools[1]["provisioning"] = {"provisioned": {}}
    offerings = ["nvidia.com/rtx-pro-6000", "nvidia.com/rtx-pro-6000-mig-2g.48gb"]
    plan = fleet_of(tmp_path, cluster(offerings=offerings, nodePools=pools), catalog=catalog).clusters[0]
    assert dict(plan.pools[1].devices_per_node()) == {"2g.48gb": 4}
    assert plan.products["rtx-pro-6000"].memory_gib == 95.59  # the plan carries the merged table
    assert plan.pools[1].labels["nvidia.com/mig.config"] == "all-2g.48gb"
    # Without the catalog's product the same pool is unknown, and the message lists the merged table.
    pools[0]["product"] = "rtx-pro-7000"
    problems = problems_of(tmp_path, cluster(offerings=offerings[1:], nodePools=pools), catalog=catalog)
    assert problems == [
        "stacks/test.yaml: nodePools[0].product: unknown product 'rtx-pro-7000' (did you mean rtx-pro-6000?); known: a10g, l4, l40s, a30, "
        "a100-40gb, a100-80gb, h100-80gb, h100-nvl, h200-141gb, b200, rtx-pro-6000 (or declare it under products:) "
        "(line 12, column 3)"
    ]


def test_a_custom_mig_layout_of_a_product_names_a_pool_config(tmp_path: Path) -> None:
    catalog = yaml.safe_load(FLEET_CATALOG.read_text(encoding="utf-8"))
    catalog["products"]["rtx-pro-6000"]["migLayouts"]["two-halves"] = {"2g.48gb": 2}
    pool = {"name": "mig", "product": "rtx-pro-6000", "gpusPerNode": 2, "mig": {"config": "two-halves"}}
    pool["provisioning"] = {"provisioned": {}}
    offerings = ["nvidia.com/rtx-pro-6000-mig-2g.48gb"]
    plan = fleet_of(tmp_path, cluster(offerings=offerings, nodePools=[pool]), catalog=catalog).clusters[0]
    assert dict(plan.pools[0].devices_per_node()) == {"2g.48gb": 4}
    assert plan.pools[0].labels["nvidia.com/mig.config"] == "two-halves"


def test_a_catalog_corrects_a_built_in_product_key_by_key(tmp_path: Path) -> None:
    profiles = {"1g.10gb": 7, "1g.10gb.me": 1, "2g.20gb": 3, "3g.40gb": 2, "7g.80gb": 1}
    names = ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"]
    catalog, problems = load_text(
        tmp_path, catalog_text({"productNames": names, "migProfiles": profiles}, key="h100-80gb")
    )
    assert catalog is not None, problems
    corrected = catalog.products["h100-80gb"]
    assert corrected.product_names == ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe")
    assert "1g.10gb+me" in corrected.mig_profiles  # the .me spelling, written as the driver publishes it
    assert corrected.mig_balanced == PRODUCTS["h100-80gb"].mig_balanced  # its profiles are all still there
    assert corrected.memory_gib == PRODUCTS["h100-80gb"].memory_gib  # what it does not say is kept
    assert (
        "productName in ['NVIDIA H100 80GB HBM3', 'NVIDIA H100 PCIe']"
        in catalog.offerings["nvidia.com/x"].selector
    )
    assert PRODUCTS["h100-80gb"].product_names == ("NVIDIA H100 80GB HBM3",)  # the built-in table is untouched
    # Profiles that drop a built-in layout's profiles drop that layout too (the catalog wins).
    catalog, problems = load_text(tmp_path, catalog_text({"migProfiles": {"7g.80gb": 1}}, key="h100-80gb"))
    assert catalog is not None, problems
    assert dict(catalog.products["h100-80gb"].mig_layouts) == {}


def test_a_memory_correction_moves_capability_placement(tmp_path: Path) -> None:
    capability = {
        "deviceClass": "cap.gpu.themelio.io",
        "capability": {"minMemory": "40Gi"},
        "displayName": "40 GiB or more",
        "quota": {"waldurComponent": "cap"},
    }
    catalog, problems = load_text(
        tmp_path, catalog_text({"memoryGiB": 39.59}, key="a100-40gb", offering=capability)
    )
    assert catalog is not None, problems
    assert "a100-40gb" not in {k.product for k in catalog.offerings["nvidia.com/x"].takes}


# --- malformed products: every problem with file, line, key and what is allowed ------------------------------


def bad(**changes: Any) -> dict[str, Any]:
    product = copy.deepcopy(RTX_PRO)
    for key, value in changes.items():
        if value is None:
            del product[key]
        else:
            product[key] = value
    return product


RTX = "catalog.yaml: line {}: products.rtx-pro-6000"


@pytest.mark.parametrize(
    ("product", "expected"),
    [
        (
            bad(memoryGiB=None, computeCapability=None),
            RTX.format(3) + ": rtx-pro-6000 is not a built-in product (a10g, l4, l40s, a30, a100-40gb, a100-80gb, "
            "h100-80gb, h100-nvl, h200-141gb, b200), so it needs memoryGiB",
        ),
        (
            bad(architecture="blackwell"),
            RTX.format(8)
            + ".architecture: 'blackwell' is not an architecture the driver publishes: Kepler, Maxwell, "
            "Pascal, Volta, Turing, Ampere, Ada Lovelace, Hopper, Blackwell",
        ),
        (
            bad(migProfiles={"1g.24GB": 4}, migLayouts={}),
            RTX.format(13) + ".migProfiles[\"1g.24GB\"]: '1g.24GB' is not a MIG profile; allowed: <compute slices "
            "1-7>g.<memory GB>gb, optionally +me, +gfx, +me.all or -me (e.g. 1g.10gb+me)",
        ),
        (
            bad(migProfiles={"1g.24gb": 8}, migLayouts={}),
            RTX.format(13)
            + '.migProfiles["1g.24gb"]: 8 instances of a 1-slice profile: allowed 1 to 7 (7 compute '
            "slices per GPU)",
        ),
        (
            bad(migProfiles={"1g.24gb": 4, "2g.48gb": 3}, migLayouts={}),
            RTX.format(14)
            + '.migProfiles["2g.48gb"]: 3 instances of 2g.48gb need more than the GPU\'s 8 memory slices',
        ),
        (
            bad(migProfiles={"1g.200gb": 1}, migLayouts={}),
            RTX.format(13) + '.migProfiles["1g.200gb"]: 200 GB is more than this 95.59 GiB GPU has',
        ),
        (
            bad(migLayouts={"all-balanced": {"2g.48gb": 2, "1g.24gb": 1}}),
            RTX.format(24)
            + ".migLayouts.all-balanced: needs 10 of 8 memory slices; the layout does not fit one GPU",
        ),
        (
            bad(migLayouts={"all-balanced": {"4g.96gb": 1, "1g.24gb": 1}}),
            RTX.format(24) + ".migLayouts.all-balanced: needs 5 compute slices; the GPU has 4",
        ),
        (
            bad(migLayouts={"all-balanced": {"3g.72gb": 1}}),
            RTX.format(25)
            + ".migLayouts.all-balanced[\"3g.72gb\"]: no MIG profile '3g.72gb' in migProfiles (1g.24gb, "
            "1g.24gb+gfx, 1g.24gb-me, 1g.24gb+me.all, 2g.48gb, 2g.48gb+gfx, 2g.48gb-me, 2g.48gb+me.all, 4g.96gb, "
            "4g.96gb+gfx)",
        ),
        (
            bad(migLayouts={"all-1g.24gb": {"1g.24gb": 2}}),
            RTX.format(24)
            + '.migLayouts["all-1g.24gb"]: all-1g.24gb is a MIG Manager default config; choose another name',
        ),
        (
            bad(productNames=["NVIDIA H100 80GB HBM3"]),
            RTX.format(5) + ".productNames: 'NVIDIA H100 80GB HBM3' is also in productNames of product h100-80gb",
        ),
        (
            bad(pciDeviceIds=["2BB5"]),
            RTX.format(10) + ".pciDeviceIds: '2BB5' is not a PCI device ID like 0x233010DE (device, then 10DE)",
        ),
        (bad(memoryGiB=-1), RTX.format(7) + ".memoryGiB: must be a positive number of GiB"),
        (
            bad(computeCapability="twelve"),
            RTX.format(9) + ".computeCapability: 'twelve' is not major.minor like 9.0 (quote it in YAML)",
        ),
        (
            bad(memoryGB=96),
            RTX.format(27)
            + ".memoryGB: unknown key; did you mean memoryGiB? (keys allowed here: displayName, productNames, "
            "memoryGiB, architecture, computeCapability, pciDeviceIds, migProfiles, migLayouts)",
        ),
        (
            bad(migProfiles={"2g.48gb": "two"}, migLayouts={}),
            RTX.format(13) + ".migProfiles[\"2g.48gb\"]: must be a whole number, not the text 'two'",
        ),
    ],
)
def test_malformed_products_are_refused_with_file_line_key_and_what_is_allowed(
    tmp_path: Path, product: dict[str, Any], expected: str
) -> None:
    catalog, problems = load_text(tmp_path, catalog_text(product))
    assert catalog is None
    # `file: line L: key: message` is found as `file: key: message (line L, column C)`.
    file, line, message = expected.split(": ", 2)
    assert any(p.startswith(f"{file}: {message} ({line}, column ") for p in problems), problems


def test_a_product_without_architecture_meets_no_capability_that_tests_it(tmp_path: Path) -> None:
    catalog = yaml.safe_load(FLEET_CATALOG.read_text(encoding="utf-8"))
    for key in ("architecture", "computeCapability", "displayName"):
        del catalog["products"]["rtx-pro-6000"][key]
    catalog["offerings"]["nvidia.com/blackwell"] = {
        "deviceClass": "blackwell.gpu.themelio.io",
        "capability": {"architectures": ["Blackwell"]},
        "overlaps": "allowed",
        "displayName": "Any Blackwell",
        "quota": {"waldurComponent": "gpu_blackwell"},
    }
    pools = [{"name": "rtx", "product": "rtx-pro-6000", "gpusPerNode": 2, "provisioning": {"provisioned": {}}}]
    problems = problems_of(tmp_path, cluster(offerings=["nvidia.com/blackwell"], nodePools=pools), catalog=catalog)
    assert problems == [
        "stacks/test.yaml: offerings[0]: no node pool can provide nvidia.com/blackwell: pool rtx: architecture "
        "unknown (products.rtx-pro-6000.architecture) is not Blackwell (line 16, column 3)"
    ]


def test_every_product_problem_is_reported_in_one_run(tmp_path: Path) -> None:
    product = bad(memoryGiB=-1, computeCapability="twelve", pciDeviceIds=["2BB5"])
    _, problems = load_text(tmp_path, catalog_text(product))
    lines = [p.rsplit(" (line ", 1)[1].split(",")[0] for p in problems if ": products.rtx-pro-6000." in p]
    assert lines == ["7", "9", "10"]


def test_the_table_memory_is_what_the_fixture_devices_publish() -> None:
    """One source of facts: every whole GPU in the ResourceSlice fixtures publishes its product's memoryGiB (but the
    captures of NVIDIA's DRA driver on its mock NVML, in driver/: their memory is the mock profile's, and
    sandbox/slice_compare.py lists where that differs)."""
    from themelio_gpu.dryrun.resourceslices import load_resourceslices

    by_name = {name: p for p in PRODUCTS.values() for name in p.product_names}
    checked = set()
    captured = FIXTURES / "resourceslices" / "driver"
    for path in sorted(p for p in (FIXTURES / "resourceslices").rglob("*.yaml") if captured not in p.parents):
        for device in load_resourceslices(path):
            product = by_name.get(device.product_name or "")
            memory = device.capacity_of("memory")
            if device.device_type == "gpu" and product is not None and memory is not None:
                assert memory.value == int(product.memory_gib * 2**30), (path.name, device.name)
                checked.add(product.key)
    assert checked == {"a10g", "a100-40gb", "a100-80gb", "h100-80gb", "l40s", "b200"}


def test_product_text_that_looks_like_a_terraform_template_stays_literal(tmp_path: Path) -> None:
    """Products declared in the catalog are catalog text like any other: literal() in every stack."""
    from themelio_gpu.outputs.synth import synthesize
    from themelio_gpu.plan.fleet import load_fleet

    catalog = yaml.safe_load(FLEET_CATALOG.read_text(encoding="utf-8"))
    product = catalog["products"]["rtx-pro-6000"]
    product["productNames"] = ["NVIDIA RTX ${model} %{ if x }Pro%{ endif }"]
    product["displayName"] = "RTX ${price}"
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    definition = yaml.safe_load((FLEET_CATALOG.parents[1] / "stacks" / "capability-lab.yaml").read_text())
    definition["catalogConfigMap"] = {}
    (stacks / "capability-lab.yaml").write_text(yaml.safe_dump(definition), encoding="utf-8")
    (tmp_path / "catalog.yaml").write_text(yaml.safe_dump(catalog), encoding="utf-8")
    synthesize(load_fleet(tmp_path / "catalog.yaml", stacks), tmp_path / "out", progress=None)
    text = (tmp_path / "out" / "stacks" / "capability-lab" / "cdk.tf.json").read_text()
    stack = json.loads(text)
    classes = stack["resource"]["kubernetes_manifest"]["device_class"]["for_each"]
    selector = classes["rtx-pro-6000.gpu.themelio.io"]["spec"]["selectors"][0]["cel"]["expression"]
    assert "'NVIDIA RTX $${model} %%{ if x }Pro%%{ endif }'" in selector
    for unescaped in ("${model}", "%{ if x }", "${price}"):
        assert text.count(unescaped) == text.count(unescaped[0] + unescaped), unescaped


@pytest.mark.parametrize("key", ["displayName", "productNames"])
def test_a_credential_in_a_catalog_product_is_refused_and_never_repeated(tmp_path: Path, key: str) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
    product = copy.deepcopy(RTX_PRO)
    product[key] = token if key == "displayName" else [token]
    catalog, problems = load_text(tmp_path, catalog_text(product))
    assert catalog is None
    where = f"catalog.yaml: products.rtx-pro-6000.{key}" + ("" if key == "displayName" else "[0]")
    assert any(p.startswith(f"{where}: looks like a GitHub token") for p in problems), problems
    assert not any(token in p for p in problems)
