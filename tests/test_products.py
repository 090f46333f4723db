"""The product table's MIG facts, checked against the GPU Operator's real default MIG configuration."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURES
from tests.requirements import shared_path
from themelio_gpu.inputs.catalog.loading import load_catalog
from themelio_gpu.inputs.catalog.products import PRODUCTS, GpuProduct, default_mig_config_names, named_mig_layout
from themelio_gpu.inputs.problems import Problems


@pytest.fixture(scope="module")
def mig_configs() -> dict[str, Any]:
    path = shared_path("reference", "nvidia", "gpu-operator_v26.7.0_default-mig-parted-config.yaml")
    configs: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))["mig-configs"]
    return configs


def _entry_for(configs: dict[str, Any], name: str, product: GpuProduct) -> dict[str, int] | None:
    """The mig-devices mig-parted applies to this product under config `name` (device filters honoured)."""
    for entry in configs.get(name, []):
        device_filter = entry.get("device-filter")
        if isinstance(device_filter, str):  # mig-parted takes one ID or a list
            device_filter = [device_filter]
        if device_filter is None or set(product.pci_device_ids) & {
            f.upper().replace("X", "x") for f in device_filter
        }:
            devices: dict[str, int] = entry.get("mig-devices") or {}
            return devices
    return None


def _catalog_products() -> list[GpuProduct]:
    """Products the fixture fleet declares in YAML (the README's example of adding one): held to the same facts."""
    problems = Problems()
    catalog = load_catalog(FIXTURES / "fleets" / "capability" / "catalog" / "gpu-catalog.yaml", problems)
    assert catalog is not None, list(problems)
    return [p for key, p in catalog.products.items() if key not in PRODUCTS]


MIG_PRODUCTS = [p for p in [*PRODUCTS.values(), *_catalog_products()] if p.supports_mig]


@pytest.mark.parametrize("product", MIG_PRODUCTS, ids=lambda p: p.key)
def test_every_profile_count_matches_its_all_profile_config(
    product: GpuProduct, mig_configs: dict[str, Any]
) -> None:
    for profile, count in product.mig_profiles.items():
        name = "all-" + profile.replace("+", ".")
        assert name in mig_configs, f"{product.key}: no default config {name}"
        entry = _entry_for(mig_configs, name, product)
        assert entry == {profile: count}, f"{product.key}: {name} is {entry}"


@pytest.mark.parametrize("product", MIG_PRODUCTS, ids=lambda p: p.key)
def test_all_balanced_matches_the_device_filtered_entry(product: GpuProduct, mig_configs: dict[str, Any]) -> None:
    entry = _entry_for(mig_configs, "all-balanced", product)
    assert entry == dict(product.mig_balanced)
    assert named_mig_layout(product, "all-balanced") == product.mig_balanced


@pytest.mark.parametrize("product", MIG_PRODUCTS, ids=lambda p: p.key)
def test_config_names_we_offer_exist_in_the_default_config(
    product: GpuProduct, mig_configs: dict[str, Any]
) -> None:
    for name in default_mig_config_names(product):
        assert name in mig_configs, name


def test_products_without_mig_have_no_configs() -> None:
    for key in ("a10g", "l4", "l40s"):
        assert default_mig_config_names(PRODUCTS[key]) == ()
