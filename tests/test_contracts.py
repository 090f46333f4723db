"""What the catalog feeds Waldur, Kubeflow and the workload service: reviewed snapshots and rules."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import cluster, fleet_of
from tests.conftest import FIXTURE_SNAPSHOTS, FIXTURES
from tests.snapshot import assert_matches_snapshot
from tests.test_quota import fleet
from themelio_gpu.inputs.catalog.catalog import Catalog
from themelio_gpu.inputs.catalog.loading import load_catalog
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.outputs.consumer_files import cluster_contract_files, contract_files
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import Fleet
from themelio_gpu.plan.quota import plan_quota
from themelio_gpu.render.contracts import (
    WALDUR_RESOURCE_QUOTA_NAME,
    cluster_notebook_choices,
    gpu_labels_config,
    kubeflow_spawner_gpus,
    kubeflow_workspacekind_pod_configs,
    resource_quota,
    waldur_backend_components,
    waldur_quota_mapping,
)
from themelio_gpu.render.polyaxon import PRESETS_FOLDER, polyaxon_presets

StackJson = Callable[[str], dict[str, Any]]


@pytest.mark.parametrize(
    "name", ["kubeflow-spawner-gpus.yaml", "kubeflow-workspacekind-podconfig.yaml", "gpu-labels.yaml"]
)
def test_contract_files_match_reviewed_snapshots(example_fleet: Fleet, name: str, update_snapshots: bool) -> None:
    assert_matches_snapshot(
        FIXTURE_SNAPSHOTS / "catalog" / name, contract_files(example_fleet)[name], update_snapshots
    )


@pytest.mark.parametrize("cluster", ["gpu-east", "west"])
@pytest.mark.parametrize(
    "name",
    [
        "waldur-quota-mapping.yaml",
        "waldur-backend-components.yaml",
        "resource-quota-closed.yaml",
        "kueue.yaml",
        "kubeflow-spawner-gpus.yaml",
        "kubeflow-workspacekind-podconfig.yaml",
    ],
)
def test_cluster_files_match_reviewed_snapshots(cluster: str, name: str, update_snapshots: bool) -> None:
    """Per cluster of the quota fixture fleet: the files `catalog export` writes under clusters/<name>/."""
    plan = fleet("chart-gpu").cluster(cluster)
    assert plan is not None
    assert_matches_snapshot(
        FIXTURE_SNAPSHOTS / "quota-chart-gpu" / "clusters" / cluster / name,
        cluster_contract_files(plan)[name],
        update_snapshots,
    )


@pytest.mark.parametrize("cluster", ["gpu-east", "west"])
def test_polyaxon_presets_match_reviewed_snapshots(cluster: str, update_snapshots: bool) -> None:
    """The presets folder of `catalog export`: one file per preset (gpu-east: migration aliases, a deprecated
    offering; west: a reserved pool's offering with its Kueue queue)."""
    plan = fleet("chart-gpu").cluster(cluster)
    assert plan is not None
    folder = FIXTURE_SNAPSHOTS / "quota-chart-gpu" / "clusters" / cluster
    files = {k: v for k, v in cluster_contract_files(plan).items() if k.startswith(f"{PRESETS_FOLDER}/")}
    assert files
    for name, text in files.items():
        assert_matches_snapshot(folder / name, text, update_snapshots)
    recorded = {p.relative_to(folder).as_posix() for p in (folder / PRESETS_FOLDER).rglob("*") if p.is_file()}
    if update_snapshots:
        for stale in recorded - set(files):
            (folder / stale).unlink()
    else:
        assert recorded == set(files), "presets no longer written: remove their snapshots with `make snapshots`"


def test_polyaxon_presets_follow_the_placement_and_the_grant_name() -> None:
    """The offering's node selector and tolerations, one device of its grant name (the old name while migration
    aliases are served), no queue label where the offering lands by itself, and nothing naming the run."""
    plan = fleet("chart-gpu").cluster("gpu-east")
    assert plan is not None
    presets = {p.offering.name: p for p in polyaxon_presets(plan).presets}
    mig = presets["nvidia.com/a100-mig-1g.5gb"]
    assert mig.path == "nvidia.com/a100-mig-1g.5gb.yaml" and mig.queue is None
    assert mig.document() == {
        "kind": "operation",
        "isPreset": True,
        "runPatch": {
            "container": {"resources": {"limits": {"nvidia.com/mig-1g.5gb": 1}}},
            "environment": {
                "nodeSelector": dict(mig.offering.node_selector),
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
        },
    }
    assert mig.text().startswith("# asks for nvidia.com/mig-1g.5gb: this cluster's quotas grant ")
    assert presets["nvidia.com/gpu"].notes == ("nvidia.com/gpu is deprecated in the catalog",)


def test_a_reserved_pools_offering_gets_its_preset_with_the_queue_granting_the_pool(example_fleet: Fleet) -> None:
    """gpu-west's H100 pool is reserved for training: the preset names the queue training, whose flavor
    pool-h100 adds the reservation's toleration; the reserved cluster's H100 lands on its open pool by itself,
    and its note says how runs of the queue training reach the reserved one."""
    west = example_fleet.cluster("gpu-west")
    assert west is not None
    h100 = next(p for p in polyaxon_presets(west).presets if p.offering.name == "nvidia.com/h100")
    assert h100.queue is not None and h100.queue.name == "training" and h100.pools == ("h100",)
    assert h100.document()["runPatch"]["environment"]["labels"] == {"kueue.x-k8s.io/queue-name": "training"}
    reserved = fleet_named("consumers").cluster("reserved")
    assert reserved is not None
    open_h100 = next(p for p in polyaxon_presets(reserved).presets if p.offering.name == "nvidia.com/h100")
    assert open_h100.queue is None and open_h100.pools == ("h100-open",)
    assert open_h100.notes == (
        "pool h100-train also serves it, reserved for the Kueue queue training (namespaces ml-research, "
        "ml-training): a run from those namespaces reaches it when a later file adds "
        "runPatch.environment.labels kueue.x-k8s.io/queue-name: training",
    )


def test_waldur_components_set_the_grant_name_and_the_rest_is_zero() -> None:
    plan = fleet("chart-gpu").cluster("gpu-east")
    assert plan is not None
    mapping = waldur_quota_mapping(plan, plan_quota(plan))
    rows = {r["offering"]: r for r in mapping["components"]}
    assert rows["nvidia.com/a100"]["quotaKey"] == "requests.nvidia.com/a100"
    assert rows["nvidia.com/a100"]["k8s_resource"] == "nvidia.com/a100"
    # While gpu-east migrates, the MIG grant sits on the old name; the new one is 0 everywhere.
    assert rows["nvidia.com/a100-mig-1g.5gb"]["k8s_resource"] == "nvidia.com/mig-1g.5gb"
    assert "requests.nvidia.com/a100-mig-1g.5gb" in mapping["zeroInEveryNamespace"]["keys"]
    assert rows["nvidia.com/gpu"]["component"] == "gpu"  # Waldur's default GPU component keeps its key
    assert mapping["zeroInEveryNamespace"]["keys"] == [
        "mig.nvidia.com.deviceclass.resource.k8s.io/devices",
        "requests.nvidia.com/a100-mig-1g.5gb",
        "requests.nvidia.com/a100-mig-3g.20gb",
        "vfio.gpu.nvidia.com.deviceclass.resource.k8s.io/devices",
    ]


def test_waldur_backend_components_get_a_quota_at_project_creation() -> None:
    """waldur-site-agent's Rancher backend quotas a new project only for components of type cpu, ram, storage
    or gpu (`_filter_quota_components`): every GPU component says gpu, and k8s_resource keeps its key."""
    plan = fleet("chart-gpu").cluster("gpu-east")
    assert plan is not None
    components = waldur_backend_components(plan, plan_quota(plan))
    assert {c["type"] for c in components.values()} == {"gpu"}
    assert components["gpu_a100"]["k8s_resource"] == "nvidia.com/a100"


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
    components = west["waldur_quota_mapping"]["value"]["components"]
    assert [r["offering"] for r in components] == ["nvidia.com/a10g", "nvidia.com/h100"]
    lab = stack_json("gpu-lab")["output"]
    # gpu-lab still migrates: the old MIG name stays allowed there, and holds the grant.
    assert "nvidia.com/mig-1g.5gb" in lab["gpu_labels"]["value"]["gpuLabels"]
    assert lab["gpu_quota_closed"]["value"]["spec"]["hard"]["requests.nvidia.com/a100-mig-1g.5gb"] == "0"


def test_config_map_publishes_the_same_contracts(stack_json: StackJson) -> None:
    stack = stack_json("gpu-east")
    data = stack["resource"]["kubernetes_config_map_v1"]["catalog_config_map"]["data"]
    assert yaml.safe_load(data["gpu-labels.yaml"]) == stack["output"]["gpu_labels"]["value"]
    assert yaml.safe_load(data["waldur-quota-mapping.yaml"]) == stack["output"]["waldur_quota_mapping"]["value"]
    assert yaml.safe_load(data["resource-quota-closed.yaml"]) == stack["output"]["gpu_quota_closed"]["value"]
    assert "&id" not in data["gpu-labels.yaml"]  # no YAML anchors for reviewers to decode
    assert "kubernetes_config_map_v1" not in stack_json("gpu-west")["resource"]


def test_resource_quota_is_named_as_waldur_names_it() -> None:
    plan = fleet("chart-gpu").cluster("west")
    assert plan is not None
    hard = plan_quota(plan).hard({"nvidia.com/h100": 4})
    quota = resource_quota(WALDUR_RESOURCE_QUOTA_NAME, "tenant-a", hard, plan.names)
    assert quota["metadata"]["name"] == "custom-resource-quota"
    assert quota["metadata"]["namespace"] == "tenant-a"
    assert quota["spec"]["hard"]["requests.nvidia.com/h100"] == "4"


@pytest.mark.parametrize("version", ["1.34.0", "1.37.0"])
def test_emitted_resource_quotas_are_valid_kubernetes_objects(version: str) -> None:
    """Every key must pass ResourceQuota validation: a qualified name, integer quantities."""
    import kubernetes_validate

    name_part = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
    subdomain = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    for plan in (p for name in ("chart-gpu", "catalog-gpu", "chart-alias") for p in fleet(name).clusters):
        quota_plan = plan_quota(plan)
        quota = resource_quota(WALDUR_RESOURCE_QUOTA_NAME, "team-a", quota_plan.hard({}), plan.names)
        kubernetes_validate.validate(quota, version, strict=True)
        for key in quota["spec"]["hard"]:
            prefix, name = key.split("/")
            assert len(prefix) <= 253 and subdomain.match(prefix), key
            assert len(name) <= 63 and name_part.match(name), key


_TRICKY_DOCUMENTS: list[dict[str, Any]] = [
    {},
    {"a": {}, "b": [], "c": None, "d": "", "e": [{}], "f": [[1, 2], []]},
    {"true": "yes", "null": "~", "1": 1.0, "key: with colon": "# not a comment", "ünï": "çödé\n2nd line"},
    {"long": "x" * 300, "k" * 200: "long key", "nested": {"z": {"y": [{"x": True}]}}},
]


@pytest.mark.parametrize("document", _TRICKY_DOCUMENTS, ids=range(len(_TRICKY_DOCUMENTS)))
def test_config_map_yaml_rendered_entry_by_entry_is_the_whole_document(document: dict[str, Any]) -> None:
    from themelio_gpu.constructs.catalog_outputs import _yaml
    from themelio_gpu.render.yaml_output import dump_yaml

    assert _yaml(document) == dump_yaml(document)


def test_every_fixture_clusters_config_map_yaml_is_the_whole_document(example_fleet: Fleet) -> None:
    from themelio_gpu.constructs.catalog_outputs import _yaml
    from themelio_gpu.render.yaml_output import dump_yaml

    for plan in example_fleet.clusters:
        quota = plan_quota(plan)
        for document in (
            waldur_quota_mapping(plan, quota),
            gpu_labels_config(plan.offerings, plan.definition.serve_migration_aliases),
            kubeflow_spawner_gpus(plan.offerings, quota.grant_names),
        ):
            assert _yaml(document) == dump_yaml(document), plan.name


def test_a_notebook_choice_served_only_by_a_reserved_pool_is_left_out_saying_why(example_fleet: Fleet) -> None:
    """gpu-west's only H100 pool carries themelio.io/reserved=training: a notebook there would stay Pending."""
    west = example_fleet.cluster("gpu-west")
    assert west is not None
    choices = cluster_notebook_choices(west)
    assert [o.name for o in choices.offerings] == ["nvidia.com/a10g"]
    assert choices.left_out == (
        "nvidia.com/h100 is left out of this cluster's notebook form: pool h100 carries "
        "themelio.io/reserved=training:NoSchedule, which its tolerations do not tolerate",
    )
    files = cluster_contract_files(west)
    for name in ("kubeflow-spawner-gpus.yaml", "kubeflow-workspacekind-podconfig.yaml"):
        assert files[name].startswith(f"# {choices.left_out[0]}\n"), name


RESERVED_H100 = {
    "name": "h100",
    "product": "h100-80gb",
    "gpusPerNode": 8,
    "taints": [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "team.example/reserved", "value": "training", "effect": "NoSchedule"},
    ],
    "provisioning": {"static": {"nodes": ["h100-1"]}},
}
OPEN_H100 = {
    "name": "h100",
    "product": "h100-80gb",
    "gpusPerNode": 8,
    "provisioning": {"static": {"nodes": ["h100-2"]}},
}


def test_fleet_wide_files_leave_out_an_offering_only_reserved_pools_serve_saying_why(tmp_path: Path) -> None:
    """Offered with only its GPU toleration, an offering no pod can reach but through a reserved pool would
    leave every notebook and gpuLabel workload Pending: the fleet-wide files leave it out, as each cluster's do."""
    reserved = cluster(
        name="train",
        offerings=["nvidia.com/h100"],
        nodePools=[RESERVED_H100],
        kueue={"queues": [{"name": "training", "pools": ["h100"], "namespaces": ["ml"]}]},
    )
    files = contract_files(fleet_of(tmp_path, reserved))
    why = (
        "# nvidia.com/h100 is left out: only reserved pools serve it (cluster train: pool h100 carries "
        "team.example/reserved=training:NoSchedule, which its tolerations do not tolerate; queue training grants "
        "it); only work that Kueue admits through a queue granting such a pool lands there"
    )
    for name in ("kubeflow-spawner-gpus.yaml", "kubeflow-workspacekind-podconfig.yaml", "gpu-labels.yaml"):
        assert files[name].startswith(why), name
        body = yaml.safe_load(files[name])
        assert "nvidia.com/h100" not in json.dumps(body), name
        assert "nvidia.com/a100" in json.dumps(body), name  # served by no cluster here: still offered
    # Served on an open pool somewhere else too: offered again, without a word.
    other = cluster(name="infer", offerings=["nvidia.com/h100"], nodePools=[OPEN_H100])
    files = contract_files(fleet_of(tmp_path, reserved, other))
    assert all("nvidia.com/h100" in text and "left out" not in text for text in files.values())


def test_every_v1_gpu_choice_has_a_toleration_group_with_its_tolerations(tmp_path: Path) -> None:
    """The v1 form's GPU choice sets only the limit (form.py set_notebook_gpus); tolerations come from the
    toleration group (set_notebook_tolerations): one group per distinct set the choices need."""
    catalog = fleet("chart-gpu").catalog
    spawner = kubeflow_spawner_gpus(catalog)["spawnerFormDefaults"]
    groups = spawner["tolerationGroup"]["options"]
    assert spawner["tolerationGroup"]["value"] == ""  # a CPU notebook needs none
    assert groups == [
        {
            "groupKey": "nvidia.com/gpu:NoSchedule",
            "displayName": "GPU nodes: NVIDIA A100 (40 GB), A100 MIG 1g.5gb, A100 MIG 3g.20gb, NVIDIA A10G (24 GB), "
            "NVIDIA H100 (80 GB), H100 MIG 1g.10gb",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        }
    ]
    dedicated = load_catalog_of(tmp_path, "terraform")
    (default, l40s) = kubeflow_spawner_gpus(dedicated)["spawnerFormDefaults"]["tolerationGroup"]["options"]
    assert l40s["groupKey"] == "nvidia.com/gpu:NoSchedule,fixture.example/dedicated=inference:NoSchedule"
    assert l40s["displayName"] == "GPU nodes: L40S"
    assert "L40S" not in default["displayName"]


def test_no_notebook_choice_means_no_podconfig_fragment(tmp_path: Path) -> None:
    """Notebooks 2.0's podConfig.values takes at least one option (CRD minItems: 1): no fragment at all."""
    assert kubeflow_workspacekind_pod_configs([]) is None
    plain = load_catalog_of(tmp_path, "coverage")
    assert "kubeflow-workspacekind-podconfig.yaml" not in contract_files(Fleet(plain, ()))
    assert kubeflow_spawner_gpus(plain)["spawnerFormDefaults"]["gpus"]["value"]["vendors"] == []


def load_catalog_of(tmp_path: Path, fleet_name: str) -> Catalog:
    problems = Problems()
    catalog = load_catalog(FIXTURES / "fleets" / fleet_name / "catalog" / "gpu-catalog.yaml", problems)
    assert catalog is not None, list(problems)
    return catalog


def fleet_named(name: str) -> Fleet:
    folder = FIXTURES / "fleets" / name
    return load_fleet(folder / "catalog" / "gpu-catalog.yaml", folder / "stacks")
