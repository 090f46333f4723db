"""Small builders for cluster definitions and catalogs used across tests (on the fixture fleet's catalog)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import EXAMPLE_CATALOG
from themelio_gpu.inputs.problems import InputError
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan, Fleet

__all__ = ["EXAMPLE_CATALOG", "PYDANTIC_WORDS", "cluster", "fleet_of", "plan_of", "problems_of", "write_fleet"]

PYDANTIC_WORDS = ("Input should", "valid dictionary", "instance of", "after validation", "Value error", "Tuple ")
"""pydantic's own wording: a message holding any was not written for the user."""


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
    """Each cluster in `stacks/<name>.yaml`, replacing what an earlier call wrote there; a name given again goes
    into a folder of its own, `stacks/again-<n>/` (as two environments' folders can hold one name)."""
    stacks = tmp_path / "stacks"
    if stacks.is_dir():
        for old in [*stacks.glob("*.yaml"), *stacks.glob("again-*/*.yaml")]:
            old.unlink()
    stacks.mkdir(exist_ok=True)
    written: set[str] = set()
    for index, item in enumerate(clusters):
        name = str(item.get("name", "x"))
        file = stacks / f"{name}.yaml"
        if name in written:
            file = stacks / f"again-{index}" / f"{name}.yaml"
            file.parent.mkdir(exist_ok=True)
        written.add(name)
        file.write_text(yaml.safe_dump(item), encoding="utf-8")
    if isinstance(catalog, Path):
        return catalog, stacks
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(catalog), encoding="utf-8")
    return path, stacks


def plan_of(fleet: Fleet, name: str) -> ClusterPlan:
    """The plan of the fleet's cluster of that name, which must exist."""
    plan = fleet.cluster(name)
    assert plan is not None, f"no cluster {name} in the fleet"
    return plan


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
