"""Which mock NVML profile each catalog product runs on, the profile one node's NVML reads, and which nodes' GPUs the
DRA driver publishes instead of the sandbox (no double publishing)."""

from __future__ import annotations

import dataclasses
import lzma
import tarfile
from pathlib import Path
from typing import Any

import yaml

from tests.builders import cluster, fleet_of, plan_of
from tests.requirements import shared_path
from themelio_gpu.inputs.catalog.products import PRODUCTS
from themelio_gpu.sandbox import gpu_profiles
from themelio_gpu.sandbox.gpu_profiles import NVIDIA_PROFILES, driver_publishes, node_profile, profile_for
from themelio_gpu.sandbox.nodes import simulated_nodes

MOCK_ARCHIVE = "k8s-test-infra-3b2b865d-mocknvml.tar.xz"


def test_each_catalog_product_runs_on_nvidias_profile_or_one_derived_from_the_nearest() -> None:
    chosen = {key: profile_for(product) for key, product in PRODUCTS.items()}
    assert {k: (p.base.name, p.derived) for k, p in chosen.items() if p} == {
        "a10g": ("a100", True),  # Ampere, no MIG: the one Ampere profile
        "l4": ("l40s", True),  # Ada Lovelace
        "l40s": ("l40s", False),
        "a30": ("a100", True),
        "a100-40gb": ("a100", False),
        "a100-80gb": ("a100", True),
        "h100-80gb": ("h100", False),
        "h100-nvl": ("h100", True),
        "h200-141gb": ("h100", True),
        "b200": ("b200", False),
    }
    a10g = chosen["a10g"]
    assert a10g is not None and a10g.describe == "this project's profile for a10g, derived from NVIDIA's a100"


def _base(path: Path) -> Path:
    """A profile in the mock's format (written here: its keys, not NVIDIA's file)."""
    document = {
        "version": "1.0",
        "system": {"driver_version": "550.163.01", "cuda_version": "12.4"},
        "device_defaults": {
            "name": "NVIDIA A100-SXM4-40GB",
            "brand": "nvidia",
            "architecture": "ampere",
            "compute_capability": {"major": 8, "minor": 0},
            "memory": {"total_bytes": 42949672960, "reserved_bytes": 611319808},
            "pci": {"device_id": 0x20B010DE},
            "power": {"default_limit_mw": 400000},
        },
        "devices": [
            {"index": i, "uuid": f"GPU-fixed-{i}", "pci": {"bus_id": f"0000:0{i}:00.0"}} for i in range(2)
        ],
    }
    path.mkdir()
    (path / "mock-nvml-config-a100.yaml").write_text(yaml.safe_dump(document))
    return path


def test_a_nodes_profile_has_its_gpu_count_its_own_uuids_the_nodes_driver_and_for_a_derived_one_the_catalogs_facts(
    tmp_path: Path,
) -> None:
    profiles = _base(tmp_path / "profiles")
    a10g = profile_for(PRODUCTS["a10g"])
    assert a10g is not None
    one: dict[str, Any] = node_profile(a10g, profiles, "node-1", 4)
    other: dict[str, Any] = node_profile(a10g, profiles, "node-2", 4)
    defaults = one["device_defaults"]
    assert defaults["name"] == "NVIDIA A10G" and defaults["architecture"] == "ampere"
    assert defaults["compute_capability"] == {"major": 8, "minor": 6}
    assert defaults["memory"]["total_bytes"] == 23028 * 2**20  # the catalog's MiB
    assert defaults["memory"]["free_bytes"] == 23028 * 2**20 - 611319808
    assert defaults["pci"]["device_id"] == 0x223710DE and defaults["power"] == {"default_limit_mw": 400000}
    assert one["system"]["num_devices"] == 4 and one["system"]["driver_version"] == "580.105.08"
    assert one["system"]["cuda_version"] == "13.0"
    uuids = [d["uuid"] for d in one["devices"]]
    assert len(set(uuids)) == 4 and not set(uuids) & {d["uuid"] for d in other["devices"]}
    assert one["devices"][1]["pci"] == {"bus_id": "0000:01:00.0"}  # the profile's own, kept
    assert one == node_profile(a10g, profiles, "node-1", 4)  # stable
    exact = profile_for(PRODUCTS["a100-40gb"])
    assert exact is not None
    as_nvidia_wrote = node_profile(exact, profiles, "node-1", 2)["device_defaults"]
    assert (
        as_nvidia_wrote["memory"]["total_bytes"] == 42949672960
        and as_nvidia_wrote["pci"]["device_id"] == 0x20B010DE
    )


def test_nvidias_profiles_serve_the_names_the_table_says() -> None:
    """The profiles in the mock's archive (../shared/sources) name the products and architectures the table says,
    and a catalog product of that name has that architecture."""
    archive = shared_path("sources", MOCK_ARCHIVE)
    catalog = {p.product_names[0]: p.architecture for p in PRODUCTS.values()}
    with lzma.open(archive) as stream, tarfile.open(fileobj=stream) as tar:
        members = {Path(m.name).name: m for m in tar.getmembers() if "/configs/mock-nvml-config-" in m.name}
        for profile in NVIDIA_PROFILES:
            read = tar.extractfile(members[profile.file])
            assert read is not None
            defaults = yaml.safe_load(read.read())["device_defaults"]
            assert (defaults["name"], defaults["architecture"]) == (profile.product_name, profile.architecture)
            if profile.product_name in catalog:
                assert gpu_profiles.mock_architecture(catalog[profile.product_name]) == profile.architecture


def test_the_driver_publishes_whole_gpu_dra_pools_and_the_sandbox_the_rest_never_both(tmp_path: Path) -> None:
    plan = plan_of(fleet_of(tmp_path, cluster()), "test")
    contracts = {c.name: c for c in plan.pools}
    assert driver_publishes(contracts["whole"]) and not driver_publishes(contracts["sliced"])
    nodes = {n.name: n for n in simulated_nodes(plan)}
    assert nodes["node-a"].by_driver and nodes["node-a"].written == ()  # the driver's plugin publishes them
    assert not nodes["node-b"].by_driver
    (own,) = nodes["node-b"].slices  # MIG: the mock has none, the sandbox publishes them
    assert all(d["attributes"]["type"] == {"string": "mig"} for d in own["spec"]["devices"])
    assert all("index" not in d["attributes"] for d in own["spec"]["devices"])
    assert own["spec"]["devices"][0]["attributes"]["driverVersion"] == {"version": "580.105.8"}
    # A product the catalog gives no architecture has no nearest profile: the sandbox keeps publishing it.
    assert profile_for(dataclasses.replace(PRODUCTS["a10g"], architecture="")) is None
