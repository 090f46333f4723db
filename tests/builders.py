"""Small builders for cluster definitions and catalogs used across tests (on the fixture fleet's catalog)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import EXAMPLE_CATALOG
from themelio_gpu.inputs.problems import InputError
from themelio_gpu.plan.fleet import Fleet, load_fleet

__all__ = ["EXAMPLE_CATALOG", "cluster", "fleet_of", "problems_of", "write_fleet"]


def cluster(**overrides: Any) -> dict[str, Any]:
    """A valid DRA cluster on 1.36 serving A100 whole GPUs and 1g.5gb slices; overrides replace keys."""
    base: dict[str, Any] = {
        "name": "test",
        "kubernetesVersion": "1.36",
        "access": {"kubeconfig": {"path": "~/.kube/config", "context": "test"}},
        "backend": {"type": "local"},
        "offerings": ["nvidia.com/a100", "nvidia.com/a100-mig-1g.5gb"],
        "nodePools": [
            {
                "name": "whole",
                "product": "a100-40gb",
                "gpusPerNode": 8,
                "provisioning": {"static": {"nodes": ["node-a"]}},
            },
            {
                "name": "sliced",
                "product": "a100-40gb",
                "gpusPerNode": 8,
                "mig": {"profile": "1g.5gb"},
                "provisioning": {"static": {"nodes": ["node-b"]}},
            },
        ],
    }
    base.update(copy.deepcopy(overrides))
    return base


def write_fleet(
    tmp_path: Path, clusters: list[dict[str, Any]], catalog: dict[str, Any] | Path = EXAMPLE_CATALOG
) -> tuple[Path, Path]:
    stacks = tmp_path / "stacks"
    stacks.mkdir(exist_ok=True)
    for index, item in enumerate(clusters):
        (stacks / f"{index:02d}-{item.get('name', 'x')}.yaml").write_text(yaml.safe_dump(item), encoding="utf-8")
    if isinstance(catalog, Path):
        return catalog, stacks
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(catalog), encoding="utf-8")
    return path, stacks


def fleet_of(tmp_path: Path, *clusters: dict[str, Any], catalog: dict[str, Any] | Path = EXAMPLE_CATALOG) -> Fleet:
    return load_fleet(*write_fleet(tmp_path, list(clusters), catalog))


def problems_of(
    tmp_path: Path, *clusters: dict[str, Any], catalog: dict[str, Any] | Path = EXAMPLE_CATALOG
) -> list[str]:
    """Every problem message, as `file: location: message` lines with the tmp folder stripped."""
    try:
        fleet_of(tmp_path, *clusters, catalog=catalog)
    except InputError as error:
        return [str(p).replace(str(tmp_path) + "/", "") for p in error.problems]
    raise AssertionError("expected the fleet to be rejected")
