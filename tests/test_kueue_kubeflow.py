"""Kueue and Kubeflow files follow the quota rule (one counter per device kind, on the cluster's grant name),
keep reserved pools reserved, and refuse what the consumers' CRDs would refuse. The files are judged by the
consumers' real CRDs in tests/test_upstream_contracts.py."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import cluster, problems_of, write_fleet
from tests.conftest import FIXTURES
from tests.test_quota import fleet
from themelio_gpu.outputs.consumer_files import cluster_contract_files, contract_files
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan, Fleet

CONSUMERS = FIXTURES / "fleets" / "consumers"


@cache
def consumers_fleet() -> Fleet:
    """tests/fixtures/fleets/consumers: mixed taint values, reserved pools, valueless Karpenter taints,
    notebooks on tainted pools."""
    return load_fleet(CONSUMERS / "catalog" / "gpu-catalog.yaml", CONSUMERS / "stacks")


def plan_of(fleet_name: str, cluster_name: str) -> ClusterPlan:
    plan = fleet(fleet_name).cluster(cluster_name)
    assert plan is not None
    return plan


def consumers(cluster_name: str) -> ClusterPlan:
    plan = consumers_fleet().cluster(cluster_name)
    assert plan is not None
    return plan


def kueue_of(plan: ClusterPlan) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(cluster_contract_files(plan)["kueue.yaml"]) if d]


def by_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def quotas(queue: dict[str, Any]) -> dict[str, dict[str, int]]:
    (group,) = queue["spec"]["resourceGroups"]
    return {
        f["name"]: {r["name"]: int(r["nominalQuota"]) for r in f["resources"] if r["nominalQuota"] != "0"}
        for f in group["flavors"]
    }


def test_kueue_gives_each_device_one_counter() -> None:
    """gpu-east: 16 whole A100 on nvidia.com/a100, the all-balanced slices on the old MIG names, the rest 0."""
    plan = plan_of("chart-gpu", "gpu-east")
    objects = kueue_of(plan)
    flavor = by_kind(objects, "ResourceFlavor")["nvidia-a100-40gb"]
    assert flavor["spec"]["nodeLabels"] == {
        "accelerator": "nvidia-a100",
        "nvidia.com/dra-kubelet-plugin": "true",
        "nvidia.com/gpu": "true",
    }
    assert flavor["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    (group,) = by_kind(objects, "ClusterQueue")["gpus"]["spec"]["resourceGroups"]
    # 2 nodes x 8 whole GPUs; 3 nodes x 8 GPUs x (2 1g.5gb + 1 3g.20gb) while the old names hold the grant.
    assert {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]} == {
        "nvidia.com/a100": "16",
        "nvidia.com/a100-mig-1g.5gb": "0",
        "nvidia.com/a100-mig-3g.20gb": "0",
        "nvidia.com/gpu": "0",
        "nvidia.com/mig-1g.5gb": "48",
        "nvidia.com/mig-3g.20gb": "24",
    }


def test_unknown_sizes_count_zero_and_a_karpenter_pool_counts_its_max_gpus() -> None:
    plan = plan_of("chart-gpu", "west")
    assert cluster_contract_files(plan)["kueue.yaml"].startswith(
        "# pool a10g: its size is not known here, so its devices count 0; raise nominalQuota by hand\n"
    )
    queues = by_kind(kueue_of(plan), "ClusterQueue")
    # 16 whole H100 (2 static nodes) in the queue gpus; the reserved Karpenter MIG pool (maxGpus 16 x 7
    # slices of 1g.10gb) only in the queue granting it.
    assert quotas(queues["gpus"]) == {"nvidia-a10g": {}, "nvidia-h100-80gb": {"nvidia.com/h100": 16}}
    assert quotas(queues["sliced"]) == {"pool-h100-mig": {"nvidia.com/h100-mig-1g.10gb": 112}}


def test_mixed_taint_values_on_one_product_share_one_flavor_taint_without_a_value() -> None:
    """Kueue's ResourceFlavor webhook takes each taint key and effect once: nvidia.com/gpu:NoSchedule and
    nvidia.com/gpu=present:NoSchedule are one taint without a value, tolerated with Exists."""
    objects = kueue_of(consumers("mixed-taints"))
    (flavor,) = by_kind(objects, "ResourceFlavor").values()
    assert flavor["spec"]["nodeTaints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    assert flavor["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert quotas(by_kind(objects, "ClusterQueue")["gpus"]) == {
        "nvidia-a100-40gb": {"nvidia.com/a100": 24, "nvidia.com/a100-mig-1g.5gb": 56}
    }


def test_a_reserved_pool_has_a_flavor_of_its_own_only_in_the_queue_granting_it() -> None:
    plan = consumers("reserved")
    text = cluster_contract_files(plan)["kueue.yaml"]
    assert text.startswith(
        "# pool h100-preemptible is reserved (themelio.io/preemptible:NoExecute) and no kueue.queues entry grants "
        "it: Kueue admits nothing there\n"
    )
    objects = [d for d in yaml.safe_load_all(text) if d]
    flavors = by_kind(objects, "ResourceFlavor")
    assert list(flavors) == ["nvidia-h100-80gb", "pool-h100-train"]
    # The open flavor tolerates the GPU taint only: nothing the queue gpus admits gets into a reserved pool.
    assert flavors["nvidia-h100-80gb"]["spec"]["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    train = flavors["pool-h100-train"]["spec"]
    assert train["nodeLabels"]["gpu.themelio.io/pool"] == "h100-train"
    assert {"key": "themelio.io/reserved", "operator": "Exists", "effect": "NoSchedule"} in train["tolerations"]
    queues = by_kind(objects, "ClusterQueue")
    assert queues["gpus"]["spec"]["namespaceSelector"] == {}
    assert quotas(queues["gpus"]) == {"nvidia-h100-80gb": {"nvidia.com/h100": 8}}
    assert queues["training"]["spec"]["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ml-research", "ml-training"]}
        ]
    }
    assert quotas(queues["training"]) == {"pool-h100-train": {"nvidia.com/h100": 16}}
    locals_ = [o for o in objects if o["kind"] == "LocalQueue"]
    assert [(q["metadata"]["namespace"], q["metadata"]["name"], q["spec"]["clusterQueue"]) for q in locals_] == [
        ("ml-research", "training", "training"),
        ("ml-training", "training", "training"),
    ]


RESERVED = {"key": "themelio.io/reserved", "value": "training", "effect": "NoSchedule"}


def _pool(name: str, *taints: dict[str, str], node: str | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "product": "a100-40gb",
        "gpusPerNode": 8,
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}, *taints],
        "provisioning": {"static": {"nodes": [node or f"{name}-node"]}},
    }


@pytest.mark.parametrize(
    ("queues", "location", "message"),
    [
        (
            [{"name": "training", "pools": ["nope"], "namespaces": ["ml"]}],
            "kueue.queues[0].pools[0]",
            "no pool nope in nodePools (pools: open, train)",
        ),
        (
            [{"name": "training", "pools": ["open"], "namespaces": ["ml"]}],
            "kueue.queues[0].pools[0]",
            "pool open carries no NoSchedule or NoExecute taint beyond nvidia.com/gpu:NoSchedule, so the queue gpus",
        ),
        (
            [
                {"name": "training", "pools": ["train"], "namespaces": ["ml"]},
                {"name": "more", "pools": ["train"], "namespaces": ["ml"]},
            ],
            "kueue.queues[1].pools[0]",
            "pool train is already granted by queue training: two queues would admit its devices twice",
        ),
        (
            [{"name": "training", "pools": ["train", "train"], "namespaces": ["ml"]}],
            "kueue.queues[0].pools[1]",
            "pool train is listed twice",
        ),
        (
            [{"name": "gpus", "pools": ["train"], "namespaces": ["ml"]}],
            "kueue.queues[0].name",
            "gpus is the queue",
        ),
        ([{"name": "Training", "pools": ["train"], "namespaces": ["ml"]}], "kueue.queues[0].name", "lower-case"),
        (
            [{"name": "training", "pools": ["train"], "namespaces": ["ml", "ml"]}],
            "kueue.queues[0].namespaces[1]",
            "ml is listed twice",
        ),
        (
            [{"name": "training", "pools": ["train"], "namespaces": ["ML_team"]}],
            "kueue.queues[0].namespaces[0]",
            "lower-case",
        ),
        ([{"name": "training", "pools": [], "namespaces": ["ml"]}], "kueue.queues[0].pools", "at least 1 item"),
    ],
)
def test_a_queue_must_grant_reserved_pools_of_the_cluster(
    tmp_path: Path, queues: list[dict[str, Any]], location: str, message: str
) -> None:
    definition = cluster(
        offerings=["nvidia.com/a100"],
        nodePools=[_pool("open"), _pool("train", RESERVED)],
        kueue={"queues": queues},
    )
    problems = problems_of(tmp_path, definition)
    assert any(f": {location}: " in p and message in p for p in problems), "\n".join(problems)


def test_kueue_crd_limits_are_refused_at_validation(tmp_path: Path) -> None:
    """A ResourceFlavor takes 8 taints; a resource group 64 flavors and 64 covered resources."""
    many_taints = [{"key": f"example.com/t{i}", "effect": "NoSchedule"} for i in range(8)]
    pools = [_pool("open"), _pool("tainted", *many_taints)]
    pools += [_pool(f"r{i}", RESERVED) for i in range(65)]
    queues = [
        {"name": "wide", "pools": [f"r{i}" for i in range(65)], "namespaces": ["ml"]},
        {"name": "tainted", "pools": ["tainted"], "namespaces": ["ml"]},
    ]
    problems = problems_of(
        tmp_path, cluster(offerings=["nvidia.com/a100"], nodePools=pools, kueue={"queues": queues})
    )
    assert any(
        "kueue.queues[0].pools: the Kueue ClusterQueue wide would have 65 flavors (pools); a resource group takes at "
        "most 64" in p
        for p in problems
    ), problems
    assert any(
        "nodePools[1].taints: the pools of the Kueue ResourceFlavor pool-tainted (tainted) carry 9 taints of distinct "
        "key and effect; a ResourceFlavor takes at most 8" in p
        for p in problems
    ), problems


def test_more_covered_resources_than_a_cluster_queue_takes_are_refused(tmp_path: Path) -> None:
    offering = {
        "deviceClass": "a100.gpu.themelio.io",
        "product": "a100-40gb",
        "displayName": "A100",
        "quota": {"waldurComponent": "gpu_a100"},
        "aliases": [
            {"name": f"example.com/old-{i}", "deviceClass": f"old-{i}.gpu.themelio.io"} for i in range(64)
        ],
    }
    problems = problems_of(
        tmp_path,
        cluster(offerings=["nvidia.com/a100"], nodePools=[_pool("open")]),
        catalog={"offerings": {"nvidia.com/a100": offering}},
    )
    assert any(
        "offerings: the cluster's offerings hold grants on 65 resource names, but a Kueue ClusterQueue covers at "
        "most 64 (coveredResources)" in p
        for p in problems
    ), problems


# --- Kubeflow ----------------------------------------------------------------------------------------------


def test_catalog_wide_pod_configs_list_active_kubeflow_offerings() -> None:
    text = contract_files(fleet("chart-gpu"))["kubeflow-workspacekind-podconfig.yaml"]
    options = yaml.safe_load(text)
    # Active offerings with a Kubeflow name only: not the deprecated L4 and nvidia.com/gpu; and not
    # nvidia.com/h100-mig-1g.10gb, which only cluster west's reserved pool h100-mig serves.
    assert [v["id"] for v in options["values"]] == [
        "gpu_nvidia_com_a100",
        "gpu_nvidia_com_a100_mig_1g_5gb",
        "gpu_nvidia_com_a100_mig_3g_20gb",
        "gpu_nvidia_com_a10g",
        "gpu_nvidia_com_h100",
    ]
    assert text.startswith(
        "# nvidia.com/h100-mig-1g.10gb is left out: only reserved pools serve it (cluster west:"
    )


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


def test_a_notebook_choice_on_a_dedicated_pool_its_placement_tolerates_gets_its_own_toleration_group() -> None:
    files = cluster_contract_files(consumers("notebooks"))
    groups = yaml.safe_load(files["kubeflow-spawner-gpus.yaml"])["spawnerFormDefaults"]["tolerationGroup"][
        "options"
    ]
    assert [g["displayName"] for g in groups] == [
        "GPU nodes: A100 MIG 1g.5gb, Any GPU (48 GiB or more), H100 80GB",
        "GPU nodes: L40S (inference)",
    ]
    assert groups[1]["tolerations"][1] == {
        "key": "themelio.io/dedicated",
        "operator": "Equal",
        "value": "inference",
        "effect": "NoSchedule",
    }
    options = {v["id"]: v for v in yaml.safe_load(files["kubeflow-workspacekind-podconfig.yaml"])["values"]}
    assert options["gpu_nvidia_com_l40s"]["spec"]["tolerations"] == groups[1]["tolerations"]
    assert "gpu_nvidia_com_l4" not in options  # not in the catalog's notebook form


def test_validate_warns_of_a_reserved_pool_no_queue_grants_at_its_taints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not an error (a cluster may not use Kueue), but Kueue would admit nothing there: validate says so."""
    from themelio_gpu.cli import main
    from themelio_gpu.inputs.yaml_input import display_path

    pools = [
        {
            "name": "h100",
            "product": "h100-80gb",
            "gpusPerNode": 8,
            "taints": [
                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                {"key": "team.example/reserved", "value": "training", "effect": "NoSchedule"},
            ],
            "provisioning": {"static": {"nodes": ["h100-1"]}},
        }
    ]
    ungranted = cluster(name="train", offerings=["nvidia.com/h100"], nodePools=pools)
    catalog, stacks = write_fleet(tmp_path, [ungranted])
    assert main(["validate", "--catalog", str(catalog), "--stacks-dir", str(stacks)]) == 0
    file = display_path(stacks / "train.yaml")
    line = 1 + (stacks / "train.yaml").read_text(encoding="utf-8").splitlines().index("  taints:")
    assert capsys.readouterr().err.splitlines() == [
        f"warning: {file}: nodePools[0].taints: pool h100 is reserved (team.example/reserved=training:NoSchedule) "
        "and no kueue.queues entry grants it: Kueue admits no work there, and the notebook forms leave out what "
        "only it serves. Grant it to the namespaces that may use it (kueue.queues: docs/cluster-definitions.md), "
        f"unless the cluster does not use Kueue (line {line}, column 3)"
    ]
    granted = {**ungranted, "kueue": {"queues": [{"name": "training", "pools": ["h100"], "namespaces": ["ml"]}]}}
    catalog, stacks = write_fleet(tmp_path, [granted])
    assert main(["validate", "--catalog", str(catalog), "--stacks-dir", str(stacks)]) == 0
    assert capsys.readouterr().err == ""
