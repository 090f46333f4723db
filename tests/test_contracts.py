"""What the catalog feeds Waldur, Kubeflow and the workload service: reviewed snapshots and rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURE_SNAPSHOTS
from tests.snapshot import assert_matches_snapshot
from themelio_gpu.cli import contract_files
from themelio_gpu.outputs.contracts import (
    gpu_labels_config,
    kubeflow_spawner_gpus,
    resource_quota,
    waldur_quota_mapping,
)
from themelio_gpu.plan.fleet import Fleet

StackJson = Callable[[str], dict[str, Any]]


@pytest.mark.parametrize(
    "name",
    [
        "waldur-quota-mapping.yaml",
        "waldur-backend-components.yaml",
        "kubeflow-spawner-gpus.yaml",
        "gpu-labels.yaml",
    ],
)
def test_contract_files_match_reviewed_snapshots(example_fleet: Fleet, name: str, update_snapshots: bool) -> None:
    assert_matches_snapshot(
        FIXTURE_SNAPSHOTS / "catalog" / name, contract_files(example_fleet.catalog)[name], update_snapshots
    )


def test_waldur_quota_keys_are_requests_of_the_resource_name(example_fleet: Fleet) -> None:
    rows = {r["offering"]: r for r in waldur_quota_mapping(example_fleet.catalog)}
    assert rows["nvidia.com/a100"]["quotaKey"] == "requests.nvidia.com/a100"
    assert rows["nvidia.com/a100"]["k8s_resource"] == "nvidia.com/a100"
    assert rows["nvidia.com/a100-mig-1g.5gb"]["aliasQuotaKeys"] == ["requests.nvidia.com/mig-1g.5gb"]
    assert rows["nvidia.com/gpu"]["component"] == "gpu"  # Waldur's default GPU component keeps its key


def test_kubeflow_vendors_leave_out_deprecated_offerings(example_fleet: Fleet) -> None:
    vendors = kubeflow_spawner_gpus(example_fleet.catalog)["spawnerFormDefaults"]["gpus"]["value"]["vendors"]
    keys = [v["limitsKey"] for v in vendors]
    assert "nvidia.com/gpu" not in keys
    assert "nvidia.com/h100" in keys
    assert all(set(v) == {"limitsKey", "uiName"} for v in vendors)


def test_gpu_label_allow_list_includes_aliases_resolving_to_their_offering(example_fleet: Fleet) -> None:
    labels = gpu_labels_config(example_fleet.catalog)["gpuLabels"]
    assert labels["nvidia.com/mig-1g.5gb"]["resolvesTo"] == "nvidia.com/a100-mig-1g.5gb"
    assert labels["nvidia.com/mig-1g.5gb"]["deprecated"] is True
    assert labels["nvidia.com/mig-1g.5gb"]["nodeSelector"] == labels["nvidia.com/a100-mig-1g.5gb"]["nodeSelector"]
    assert set(labels) == {
        "nvidia.com/a10g",
        "nvidia.com/a100",
        "nvidia.com/h100",
        "nvidia.com/a100-mig-1g.5gb",
        "nvidia.com/a100-mig-3g.20gb",
        "nvidia.com/gpu",
        "nvidia.com/mig-1g.5gb",
        "nvidia.com/mig-3g.20gb",
    }


def test_each_stack_outputs_only_what_its_cluster_serves(stack_json: StackJson) -> None:
    west = stack_json("gpu-west")["output"]
    assert set(west["gpu_labels"]["value"]["gpuLabels"]) == {"nvidia.com/a10g", "nvidia.com/h100"}
    assert [r["offering"] for r in west["waldur_quota_mapping"]["value"]] == ["nvidia.com/a10g", "nvidia.com/h100"]
    lab = stack_json("gpu-lab")["output"]
    # gpu-lab still migrates: the old MIG name stays allowed there.
    assert "nvidia.com/mig-1g.5gb" in lab["gpu_labels"]["value"]["gpuLabels"]


def test_config_map_publishes_the_same_contracts(stack_json: StackJson) -> None:
    stack = stack_json("gpu-east")
    data = stack["resource"]["kubernetes_config_map_v1"]["catalog_config_map"]["data"]
    assert yaml.safe_load(data["gpu-labels.yaml"]) == stack["output"]["gpu_labels"]["value"]
    assert "&id" not in data["gpu-labels.yaml"]  # no YAML anchors for reviewers to decode
    assert "kubernetes_config_map_v1" not in stack_json("gpu-west")["resource"]


def test_resource_quota_is_named_as_waldur_names_it() -> None:
    quota = resource_quota("tenant-a", {"nvidia.com/a100": 4, "nvidia.com/a100-mig-1g.5gb": 7})
    assert quota["metadata"] == {"name": "custom-resource-quota", "namespace": "tenant-a"}
    assert quota["spec"]["hard"] == {"requests.nvidia.com/a100": "4", "requests.nvidia.com/a100-mig-1g.5gb": "7"}
