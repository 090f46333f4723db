"""The Kueue and Kubeflow Notebooks 2.0 files validate against those projects' CRD schemas (tests/fixtures/crds)
and follow the quota rule: one counter per device kind, on the cluster's grant name."""

from __future__ import annotations

from functools import cache
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs in the locked environment
import pytest
import yaml

from tests.conftest import FIXTURES
from tests.test_quota import CLUSTERS, fleet
from themelio_gpu.cli import cluster_contract_files, contract_files
from themelio_gpu.plan.fleet import ClusterPlan

CRDS = FIXTURES / "crds"


def _strict(schema: Any) -> Any:
    """Unknown fields are errors: the API server would prune them silently."""
    if isinstance(schema, dict):
        schema = {k: _strict(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [_strict(v) for v in schema]
    return schema


@cache
def validator(name: str) -> jsonschema.Draft7Validator:
    schema = _strict(yaml.safe_load((CRDS / name).read_text()))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def errors(name: str, instance: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator(name).iter_errors(instance)]


def plan_of(fleet_name: str, cluster: str) -> ClusterPlan:
    plan = fleet(fleet_name).cluster(cluster)
    assert plan is not None
    return plan


def kueue_of(plan: ClusterPlan) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(cluster_contract_files(plan)["kueue.yaml"]) if d]


@pytest.mark.parametrize(("fleet_name", "cluster"), CLUSTERS)
def test_kueue_objects_validate_against_kueue_0_19(fleet_name: str, cluster: str) -> None:
    plan = plan_of(fleet_name, cluster)
    objects = kueue_of(plan)
    flavors = [o for o in objects if o["kind"] == "ResourceFlavor"]
    queues = [o for o in objects if o["kind"] == "ClusterQueue"]
    assert len(queues) == 1 and len(flavors) == len({p.product.key for p in plan.pools})
    for flavor in flavors:
        assert flavor["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        assert errors("kueue.x-k8s.io_resourceflavors.v1beta2.yaml", flavor) == []
        # The CRD's x-kubernetes-validations on tolerations and taints.
        for toleration in flavor["spec"].get("tolerations", []):
            assert toleration["operator"] in ("Equal", "Exists") and "value" not in toleration
            assert toleration["effect"] in ("NoSchedule", "PreferNoSchedule", "NoExecute")
        for taint in flavor["spec"].get("nodeTaints", []):
            assert taint["effect"] in ("NoSchedule", "PreferNoSchedule", "NoExecute")
    queue = queues[0]
    assert errors("kueue.x-k8s.io_clusterqueues.v1beta2.yaml", queue) == []
    names = {f["metadata"]["name"] for f in flavors}
    for group in queue["spec"]["resourceGroups"]:
        for item in group["flavors"]:
            # CRD rule: as many resources as coveredResources; Kueue's webhook: the same names, in order.
            assert [r["name"] for r in item["resources"]] == group["coveredResources"]
            assert item["name"] in names


def test_kueue_gives_each_device_one_counter() -> None:
    """gpu-east: 16 whole A100 on nvidia.com/a100, the all-balanced slices on the old MIG names, the rest 0."""
    plan = plan_of("chart-gpu", "gpu-east")
    objects = kueue_of(plan)
    flavor = next(o for o in objects if o["kind"] == "ResourceFlavor")
    assert flavor["metadata"]["name"] == "nvidia-a100-40gb"
    assert flavor["spec"]["nodeLabels"] == {
        "accelerator": "nvidia-a100",
        "nvidia.com/dra-kubelet-plugin": "true",
        "nvidia.com/gpu": "true",
    }
    assert flavor["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    queue = objects[-1]
    (group,) = queue["spec"]["resourceGroups"]
    quotas = {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]}
    # 2 nodes x 8 whole GPUs; 3 nodes x 8 GPUs x (2 1g.5gb + 1 3g.20gb) while the old names hold the grant.
    assert quotas == {
        "nvidia.com/a100": "16",
        "nvidia.com/a100-mig-1g.5gb": "0",
        "nvidia.com/a100-mig-3g.20gb": "0",
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-1g.5gb": "48",
        "nvidia.com/mig-3g.20gb": "24",
    }


def test_kueue_flavors_carry_the_pools_taints_and_unknown_sizes_count_zero() -> None:
    plan = plan_of("chart-gpu", "west")
    text = cluster_contract_files(plan)["kueue.yaml"]
    assert text.startswith("# pool a10g: its size is not known here, so its devices count 0")
    objects = kueue_of(plan)
    h100 = next(o for o in objects if o["metadata"]["name"] == "nvidia-h100-80gb")
    assert {t["key"] for t in h100["spec"]["nodeTaints"]} == {"nvidia.com/gpu", "themelio.io/sliced"}
    assert {t["key"] for t in h100["spec"]["tolerations"]} == {"nvidia.com/gpu", "themelio.io/sliced"}
    (group,) = objects[-1]["spec"]["resourceGroups"]
    quotas = {
        f["name"]: {r["name"]: int(r["nominalQuota"]) for r in f["resources"] if r["nominalQuota"] != "0"}
        for f in group["flavors"]
    }
    # 16 whole H100 (2 static nodes); Karpenter maxGpus 16 x 7 slices of 1g.10gb; the A10G pool unknown.
    assert quotas == {
        "nvidia-a10g": {},
        "nvidia-h100-80gb": {"nvidia.com/h100": 16, "nvidia.com/h100-mig-1g.10gb": 112},
    }


@pytest.mark.parametrize(("fleet_name", "cluster"), CLUSTERS)
def test_workspacekind_pod_configs_validate_against_notebooks_2_0(fleet_name: str, cluster: str) -> None:
    plan = plan_of(fleet_name, cluster)
    options = yaml.safe_load(cluster_contract_files(plan)["kubeflow-workspacekind-podconfig.yaml"])
    check_pod_configs(options)


def test_catalog_wide_pod_configs_validate() -> None:
    options = yaml.safe_load(contract_files(fleet("chart-gpu").catalog)["kubeflow-workspacekind-podconfig.yaml"])
    ids = check_pod_configs(options)
    # Active offerings with a Kubeflow name only: not the deprecated L4 and nvidia.com/gpu.
    assert ids == [
        "gpu_nvidia_com_a100",
        "gpu_nvidia_com_a100_mig_1g_5gb",
        "gpu_nvidia_com_a100_mig_3g_20gb",
        "gpu_nvidia_com_a10g",
        "gpu_nvidia_com_h100",
        "gpu_nvidia_com_h100_mig_1g_10gb",
    ]


def check_pod_configs(options: dict[str, Any]) -> list[str]:
    values = options["values"]
    assert values, "no option"
    # The whole podConfig as a WorkspaceKind holds it, with a default chosen among these options.
    pod_config = {"spawner": {"default": values[0]["id"]}, "values": values}
    assert errors("kubeflow.org_workspacekinds.v1beta1.podconfig.yaml", pod_config) == []
    ids = [v["id"] for v in values]
    assert len(set(ids)) == len(ids)  # x-kubernetes-list-map-keys: id
    return ids


def test_pod_configs_request_the_clusters_grant_name() -> None:
    plan = plan_of("chart-gpu", "gpu-east")
    files = cluster_contract_files(plan)
    options = {v["id"]: v for v in yaml.safe_load(files["kubeflow-workspacekind-podconfig.yaml"])["values"]}
    mig = options["gpu_nvidia_com_a100_mig_1g_5gb"]
    assert mig["spec"]["resources"] == {
        "limits": {"nvidia.com/mig-1g.5gb": "1"},
        "requests": {"nvidia.com/mig-1g.5gb": "1"},
    }
    assert mig["spec"]["nodeSelector"] == {
        "accelerator": "nvidia-a100",
        "mig_enabled": "true",
        "nvidia.com/gpu": "true",
    }
    assert mig["spawner"]["displayName"] == "A100 MIG 1g.5gb"
    vendors = yaml.safe_load(files["kubeflow-spawner-gpus.yaml"])["spawnerFormDefaults"]["gpus"]["value"][
        "vendors"
    ]
    assert {"limitsKey": "nvidia.com/mig-1g.5gb", "uiName": "A100 MIG 1g.5gb"} in vendors


def test_a_schema_violation_is_caught() -> None:
    """The validators are not vacuous: a misspelt field and a bad quantity fail."""
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "spec": {"nodeLabel": {}}}
    assert errors("kueue.x-k8s.io_resourceflavors.v1beta2.yaml", flavor)
    option = {"id": "x", "spawner": {"displayName": "X GPU"}, "spec": {"resources": {"limits": {"a/b": "one"}}}}
    assert errors(
        "kubeflow.org_workspacekinds.v1beta1.podconfig.yaml", {"spawner": {"default": "x"}, "values": [option]}
    )
