"""The benchmark's fleet generator (scripts/benchmark.py): what it writes is a valid fleet of the promised shape.

Only the generator is tested here: no synthesis and no timing (those belong to `make bench`).
"""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

from themelio_gpu.inputs.catalog.model import ServedBy
from themelio_gpu.plan.fleet import load_fleet

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "benchmark.py"


@cache
def benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the script's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_generated_catalog_loads_with_at_least_20_offerings(tmp_path: Path) -> None:
    catalog, stacks = benchmark().write_fleet(tmp_path, 1)
    fleet = load_fleet(catalog, stacks)
    offerings = list(fleet.catalog)
    assert len(offerings) >= 20
    whole = {o.product.key for o in offerings if o.product is not None and o.mig_profile is None}
    assert len(whole) >= 4
    mig = {o.product.key for o in offerings if o.mig_profile is not None and o.product is not None}
    assert mig == {"a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb"}


def test_generated_fleet_of_three_clusters_has_the_promised_shape(tmp_path: Path) -> None:
    catalog, stacks = benchmark().write_fleet(tmp_path, 3)
    fleet = load_fleet(catalog, stacks)  # raises InputError listing every problem if the fleet is invalid
    assert [c.name for c in fleet.clusters] == ["bench-0001", "bench-0002", "bench-0003"]
    for plan in fleet.clusters:
        cluster = plan.definition
        assert cluster.kubernetes_version == "1.36"
        assert cluster.backend.type == "local"
        assert cluster.access.kubeconfig is not None
        assert len(plan.offerings) == 20
        assert len(cluster.node_pools) == 4
        for pool in cluster.node_pools:
            assert pool.provisioning.static is not None
            assert len(pool.provisioning.static.nodes) == 8
        # Every offering served by the catalog gets a DeviceClass (aliases add theirs).
        served = [o for o in plan.offerings if o.served_by is ServedBy.catalog]
        assert len(plan.device_classes) >= len(served)
        assert plan.dra_enabled


def test_generation_is_deterministic(tmp_path: Path) -> None:
    benchmark().write_fleet(tmp_path / "a", 3)
    benchmark().write_fleet(tmp_path / "b", 3)

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    first = files(tmp_path / "a")
    assert len(first) == 4  # the catalog and three cluster definitions
    assert first == files(tmp_path / "b")
