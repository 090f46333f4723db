"""GPU node pools: the label and taint contract, its three ways to the nodes, and bad input."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import EXAMPLE_CATALOG, cluster, fleet_of, problems_of
from themelio_gpu.inputs.clusters.pool_contract import PoolContract

StackJson = Callable[[str], dict[str, Any]]


def pool(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "p",
        "product": "a100-40gb",
        "gpusPerNode": 8,
        "provisioning": {"static": {"nodes": ["n1"]}},
    }
    base.update(overrides)
    return base


def contract(tmp_path: Path, item: dict[str, Any], offerings: list[str], **cluster_overrides: Any) -> PoolContract:
    plan = fleet_of(tmp_path, cluster(offerings=offerings, nodePools=[item], **cluster_overrides)).clusters[0]
    return plan.pools[0]


def test_whole_gpu_pool(tmp_path: Path) -> None:
    c = contract(tmp_path, pool(instanceType="p4d.24xlarge"), ["nvidia.com/a100"])
    assert dict(c.labels) == {
        "accelerator": "nvidia-a100",
        "gpu.themelio.io/pool": "p",
        "mig_enabled": "false",
        "node.kubernetes.io/instance-type": "p4d.24xlarge",
        "nvidia.com/dra-kubelet-plugin": "true",
        "nvidia.com/gpu": "true",
        "nvidia.com/mig.config": "all-disabled",
    }
    assert [str(t) for t in c.taints] == ["nvidia.com/gpu=present:NoSchedule"]
    assert dict(c.devices_per_node()) == {"gpu": 8}


def test_instance_type_label_only_where_the_pool_sets_it(tmp_path: Path) -> None:
    """node.kubernetes.io/instance-type belongs to the kubelet and the cloud controller on cloud nodes."""
    c = contract(tmp_path, pool(), ["nvidia.com/a100"])
    assert "node.kubernetes.io/instance-type" not in c.labels
    assert "node.kubernetes.io/instance-type" not in c.kubelet_node_labels


def test_untainted_pool_has_no_taint_flag_for_the_kubelet(tmp_path: Path) -> None:
    c = contract(tmp_path, pool(taints=[], provisioning={"provisioned": {}}), ["nvidia.com/a100"])
    assert c.kubelet_args == (f"--node-labels={c.kubelet_node_labels}",)
    (tmp_path / "tainted").mkdir()
    tainted = contract(tmp_path / "tainted", pool(provisioning={"provisioned": {}}), ["nvidia.com/a100"])
    assert tainted.kubelet_args[1] == "--register-with-taints=nvidia.com/gpu=present:NoSchedule"


def test_instance_type_on_a_karpenter_pool_is_refused_saying_why(tmp_path: Path) -> None:
    karpenter = {"karpenter": {"nodeClassRef": {"name": "gpu"}, "instanceTypes": ["p4d.24xlarge"]}}
    problems = problems_of(
        tmp_path,
        cluster(
            offerings=["nvidia.com/a100"],
            karpenter=True,
            nodePools=[pool(instanceType="p4d.24xlarge", provisioning=karpenter)],
        ),
    )
    (problem,) = problems
    assert problem.startswith(
        "stacks/test.yaml: nodePools[0].instanceType: pool p: Karpenter writes node.kubernetes.io/instance-type "
        "on every node it launches, from the instance type it chose among provisioning.karpenter.instanceTypes"
    ), problem
    assert "remove instanceType" in problem


def test_single_profile_mig_pool(tmp_path: Path) -> None:
    c = contract(tmp_path, pool(mig={"profile": "1g.5gb"}), ["nvidia.com/a100-mig-1g.5gb"])
    assert c.labels["mig_enabled"] == "true"
    assert c.labels["mig_profile"] == "1g.5gb"
    assert c.labels["nvidia.com/mig.config"] == "all-1g.5gb"
    assert dict(c.devices_per_node()) == {"1g.5gb": 56}


def test_mixed_layout_mig_pool(tmp_path: Path) -> None:
    c = contract(tmp_path, pool(mig={"config": "all-balanced"}), ["nvidia.com/a100-mig-3g.20gb"])
    assert c.labels["mig_profile"] == "all-balanced"
    assert c.labels["nvidia.com/mig.config"] == "all-balanced"
    assert dict(c.mig_devices or {}) == {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}


def test_me_profile_is_spelled_like_the_mig_manager_config(tmp_path: Path) -> None:
    offering = {
        "deviceClass": "me.themelio.io",
        "product": "a100-80gb",
        "migProfile": "1g.10gb+me",
        "displayName": "me",
        "quota": {"waldurComponent": "me"},
    }
    fleet = fleet_of(
        tmp_path,
        cluster(
            offerings=["nvidia.com/a100-80gb-mig-1g.10gb.me"],
            nodePools=[pool(product="a100-80gb", mig={"profile": "1g.10gb+me"})],
        ),
        catalog={"offerings": {"nvidia.com/a100-80gb-mig-1g.10gb.me": offering}},
    )
    labels = fleet.clusters[0].pools[0].labels
    assert labels["nvidia.com/mig.config"] == "all-1g.10gb.me"
    assert labels["mig_profile"] == "1g.10gb.me"


def test_non_dra_pool_has_no_kubelet_plugin_label_and_dra_pools_opt_out_of_the_device_plugin(
    tmp_path: Path,
) -> None:
    pools = [
        pool(name="legacy", product="a10g", dra=False, provisioning={"static": {"nodes": ["old"]}}),
        pool(name="new", mig={"profile": "1g.5gb"}, provisioning={"static": {"nodes": ["new"]}}),
    ]
    plan = fleet_of(
        tmp_path, cluster(offerings=["nvidia.com/gpu", "nvidia.com/a100-mig-1g.5gb"], nodePools=pools)
    ).clusters[0]
    legacy, new = plan.pools
    assert "nvidia.com/dra-kubelet-plugin" not in legacy.labels
    assert "nvidia.com/mig.config" not in legacy.labels  # A10G has no MIG
    assert new.labels["nvidia.com/dra-kubelet-plugin"] == "true"
    # One node must never get the same resource name from a device plugin and from DRA.
    assert new.labels["nvidia.com/gpu.deploy.device-plugin"] == "false"


def test_custom_taints_and_extra_labels(tmp_path: Path) -> None:
    c = contract(
        tmp_path,
        pool(
            taints=[{"key": "dedicated", "value": "ml", "effect": "NoExecute"}],
            labels={"themelio.io/team": "vision"},
        ),
        ["nvidia.com/a100"],
    )
    assert [str(t) for t in c.taints] == ["dedicated=ml:NoExecute"]
    assert c.labels["themelio.io/team"] == "vision"
    assert c.kubelet_register_with_taints == "dedicated=ml:NoExecute"
    assert "themelio.io/team=vision" in c.kubelet_node_labels.split(",")


def test_untainted_static_pool_gets_labels_and_no_taint_resource(tmp_path: Path) -> None:
    from themelio_gpu.outputs.synth import synthesize

    # kubernetes_node_taint needs at least one taint block: terraform validate refuses an empty one.
    synthesize(
        fleet_of(tmp_path, cluster(offerings=["nvidia.com/a100"], nodePools=[pool(taints=[])])),
        tmp_path / "out",
        None,
    )
    resources = json.loads((tmp_path / "out" / "stacks" / "test" / "cdk.tf.json").read_text())["resource"]
    assert "node_labels_p" in resources["kubernetes_labels"]
    assert "kubernetes_node_taint" not in resources
    assert resources["helm_release"]["gpu_operator"]["depends_on"] == ["kubernetes_labels.node_labels_p"]


# --- bad input ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "offerings", "location", "message"),
    [
        (
            pool(mig={"profile": "1g.10gb+gfx"}),
            ["nvidia.com/a100"],
            "nodePools[0].mig.profile",
            "has no MIG profile '1g.10gb+gfx'",
        ),
        (
            pool(product="a10g", mig={"profile": "1g.5gb"}),
            ["nvidia.com/a10g"],
            "nodePools[0].mig",
            "NVIDIA A10G 24GB has no MIG support",
        ),
        (
            pool(mig={"config": "all-7g.80gb"}),
            ["nvidia.com/a100"],
            "nodePools[0].mig.config",
            "is not a default MIG Manager config",
        ),
        (
            pool(labels={"team": "x" * 64}),
            ["nvidia.com/a100"],
            "nodePools[0].labels[team]",
            "longer than 63 characters",
        ),
        (
            pool(labels={"accelerator": "mine"}),
            ["nvidia.com/a100"],
            "nodePools[0].labels[accelerator]",
            "part of the label contract",
        ),
        (
            pool(labels={"bad key!": "x"}),
            ["nvidia.com/a100"],
            "nodePools[0].labels[bad key!]",
            "must be letters, digits",
        ),
        (pool(instanceType="x" * 64), ["nvidia.com/a100"], "nodePools[0].instanceType", "longer than 63"),
        (
            pool(taints=[{"key": "nvidia.com/gpu", "effect": "NoScheduleAtAll"}]),
            ["nvidia.com/a100"],
            "nodePools[0].taints[0].effect",
            "is not a taint effect; use one of NoSchedule, PreferNoSchedule, NoExecute",
        ),
        (pool(product="b300"), ["nvidia.com/a100"], "nodePools[0].product", "unknown product 'b300'"),
        (
            pool(mig={"profile": "1g.5gb", "config": "all-balanced"}),
            ["nvidia.com/a100"],
            "nodePools[0].mig",
            "set exactly one of profile or config",
        ),
        (pool(provisioning={}), ["nvidia.com/a100"], "nodePools[0].provisioning", "set exactly one of static"),
        (
            pool(provisioning={"karpenter": {"nodeClassRef": {"name": "x"}, "instanceTypes": ["p4d.24xlarge"]}}),
            ["nvidia.com/a100"],
            "nodePools[0].provisioning.karpenter",
            "does not declare karpenter: true",
        ),
    ],
)
def test_bad_pools(
    tmp_path: Path, item: dict[str, Any], offerings: list[str], location: str, message: str
) -> None:
    problems = problems_of(tmp_path, cluster(offerings=offerings, nodePools=[item]))
    assert any(f": {location}: " in p and message in p for p in problems), "\n".join(problems)


@pytest.mark.parametrize("provisioning", [{"static": {"nodes": ["n1"]}}, {"provisioned": {}}])
def test_two_taints_with_one_key_are_refused_naming_the_pool_and_both_taints(
    tmp_path: Path, provisioning: dict[str, Any]
) -> None:
    taints = [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NoExecute"},
    ]
    problems = problems_of(
        tmp_path,
        cluster(offerings=["nvidia.com/a100"], nodePools=[pool(taints=taints, provisioning=provisioning)]),
    )
    (problem,) = problems
    assert problem.startswith(
        "stacks/test.yaml: nodePools[0].taints[2]: pool p: taint nvidia.com/gpu=true:NoExecute has the key of "
        "taints[0] nvidia.com/gpu=present:NoSchedule; a node's taint keys must be unique (the kubernetes "
        "provider's kubernetes_node_taint refuses them at plan time): keep one taint per key (line "
    ), problem


def test_one_node_in_two_pools(tmp_path: Path) -> None:
    pools = [pool(name="a"), pool(name="b", mig={"profile": "1g.5gb"})]
    problems = problems_of(tmp_path, cluster(nodePools=pools))
    assert any(
        "nodePools[1].provisioning.static.nodes: node n1 is already in pool a; a node belongs to one pool" in p
        for p in problems
    )


def test_mig_offering_without_a_pool_in_that_layout(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path, cluster(offerings=["nvidia.com/a100-mig-3g.20gb"], nodePools=[pool(mig={"profile": "1g.5gb"})])
    )
    assert any(
        "offerings[0]: no node pool can provide nvidia.com/a100-mig-3g.20gb: pool p has no 3g.20gb devices (1g.5gb)"
        in p
        for p in problems
    ), problems


def test_whole_gpu_offering_only_on_mig_pools(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path, cluster(offerings=["nvidia.com/a100"], nodePools=[pool(mig={"config": "all-balanced"})])
    )
    assert any("pool p runs its GPUs in MIG mode, which publishes no whole GPU" in p for p in problems), problems


def test_product_offering_on_a_device_plugin_pool(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, cluster(offerings=["nvidia.com/a100"], nodePools=[pool(dra=False)]))
    assert any(
        "pool p uses the device plugin, which advertises nvidia.com/gpu, not nvidia.com/a100" in p
        for p in problems
    )


# --- how the contract reaches the nodes -------------------------------------------------------------------------


def test_static_pool_labels_and_taints_each_node_with_a_field_manager_of_each(stack_json: StackJson) -> None:
    # One manager for both would make each apply erase the other's fields (#2247; tests/test_sandbox_live.py
    # shows it on the real API server).
    resources = stack_json("gpu-east")["resource"]
    labels = resources["kubernetes_labels"]["node_labels_a100-mig"]
    assert labels["for_each"] == '${toset(["gpu-east-a100-11", "gpu-east-a100-12", "gpu-east-a100-13"])}'
    assert labels["metadata"] == {"name": "${each.value}"}
    assert labels["field_manager"] == "themelio-gpu-stacks"
    assert labels["force"] is True
    assert labels["labels"]["nvidia.com/mig.config"] == "all-balanced"
    taints = resources["kubernetes_node_taint"]["node_taints_a100-mig"]
    assert taints["taint"] == [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]
    assert taints["field_manager"] == "themelio-gpu-stacks-taints"


def test_provisioned_pool_is_an_output_with_kubelet_flags(stack_json: StackJson) -> None:
    stack = stack_json("gpu-west")
    output = stack["output"]["node_pool_a10g"]["value"]
    assert output["labels"]["accelerator"] == "nvidia-a10g"
    assert output["kubelet_args"][0].startswith("--node-labels=accelerator=nvidia-a10g,")
    assert output["kubelet_args"][1] == "--register-with-taints=nvidia.com/gpu=present:NoSchedule"
    assert output["devices_per_node"] == {"gpu": 4}
    # Nothing touches provisioned nodes directly.
    assert "kubernetes_labels" not in stack["resource"]


def test_karpenter_pool_is_a_node_pool_manifest(stack_json: StackJson) -> None:
    manifest = stack_json("gpu-west")["resource"]["kubernetes_manifest"]["karpenter_node_pool_h100"]["manifest"]
    assert manifest["apiVersion"] == "karpenter.sh/v1"
    assert manifest["kind"] == "NodePool"
    template = manifest["spec"]["template"]
    assert template["metadata"]["labels"]["nvidia.com/dra-kubelet-plugin"] == "true"
    # Karpenter sets the instance type itself; it is a requirement, not a template label.
    assert "node.kubernetes.io/instance-type" not in template["metadata"]["labels"]
    assert {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]} in template[
        "spec"
    ]["requirements"]
    assert {"key": "themelio.io/reserved", "value": "training", "effect": "NoSchedule"} in template["spec"][
        "taints"
    ]
    assert manifest["spec"]["limits"] == {"nvidia.com/gpu": "64"}


def test_karpenter_taint_without_a_value_omits_it(tmp_path: Path) -> None:
    """The NodePool CRD's `value` pattern needs at least one character: `value: ""` is refused by the API server."""
    from themelio_gpu.outputs.synth import synthesize

    karpenter = {"karpenter": {"nodeClassRef": {"name": "gpu"}, "instanceTypes": ["p4d.24xlarge"]}}
    taints = [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
        {"key": "spot", "value": "yes", "effect": "NoExecute"},
    ]
    fleet = fleet_of(
        tmp_path,
        cluster(
            offerings=["nvidia.com/a100"], karpenter=True, nodePools=[pool(taints=taints, provisioning=karpenter)]
        ),
    )
    synthesize(fleet, tmp_path / "out", None)
    resources = json.loads((tmp_path / "out" / "stacks" / "test" / "cdk.tf.json").read_text())["resource"]
    manifest = resources["kubernetes_manifest"]["karpenter_node_pool_p"]["manifest"]
    assert manifest["spec"]["template"]["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
        {"key": "spot", "value": "yes", "effect": "NoExecute"},
    ]


@pytest.mark.parametrize(("max_gpus", "limit"), [(64, "64"), (1000, "1k"), (1500, "1500"), (2000000, "2M")])
def test_karpenter_gpu_limit_is_written_as_the_api_server_stores_it(
    tmp_path: Path, max_gpus: int, limit: str
) -> None:
    """`1000` would read back as `1k`: Terraform's "inconsistent result after apply" (#2508). The canonical
    form is checked against the real API server in tests/test_sandbox_live.py."""
    from themelio_gpu.outputs.synth import synthesize

    karpenter = {
        "karpenter": {"nodeClassRef": {"name": "gpu"}, "instanceTypes": ["p4d.24xlarge"], "maxGpus": max_gpus}
    }
    fleet = fleet_of(
        tmp_path, cluster(offerings=["nvidia.com/a100"], karpenter=True, nodePools=[pool(provisioning=karpenter)])
    )
    synthesize(fleet, tmp_path / "out", None)
    resources = json.loads((tmp_path / "out" / "stacks" / "test" / "cdk.tf.json").read_text())["resource"]
    manifest = resources["kubernetes_manifest"]["karpenter_node_pool_p"]["manifest"]
    assert manifest["spec"]["limits"] == {"nvidia.com/gpu": limit}


def test_gpu_label_placement_matches_the_pool_that_serves_it(example_fleet: Any) -> None:
    """A workload steered by gpuLabel must land on a pool whose labels satisfy its node selector."""
    for plan in example_fleet.clusters:
        for offering in plan.offerings:
            selector = dict(offering.node_selector)
            matching = [p.name for p in plan.pools if all(p.labels.get(k) == v for k, v in selector.items())]
            assert matching, f"{plan.name}: {offering.name} selects no pool ({json.dumps(selector)})"


def _catalog_serving_nvidia_gpu(served_by: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE_CATALOG.read_text(encoding="utf-8"))
    legacy = data["offerings"]["nvidia.com/gpu"]
    legacy["servedBy"] = served_by
    if served_by == "catalog":
        legacy.update(deviceClass="legacy-a100.gpu.themelio.io", product="a100-40gb")
    return data


def test_a_catalog_class_for_the_name_the_dra_chart_maps_is_refused(tmp_path: Path) -> None:
    # The DRA chart's gpu.nvidia.com always maps nvidia.com/gpu: two classes for one name never deploy.
    problems = problems_of(
        tmp_path,
        cluster(offerings=["nvidia.com/a100", "nvidia.com/gpu"]),
        catalog=_catalog_serving_nvidia_gpu("catalog"),
    )
    (problem,) = problems
    assert problem.startswith(
        "stacks/test.yaml: offerings[1]: nvidia.com/gpu would be advertised by two DeviceClasses: "
        "legacy-a100.gpu.themelio.io of the catalog and gpu.nvidia.com of the DRA driver chart"
    ), problem
    assert "servedBy: dra-driver-chart" in problem and "draDriver.managedBy: gpu-operator" in problem


def test_a_catalog_class_for_nvidia_gpu_is_accepted_where_the_gpu_operator_manages_the_driver(
    tmp_path: Path,
) -> None:
    operator_mode = cluster(
        offerings=["nvidia.com/a100", "nvidia.com/gpu"],
        kubernetesVersion="1.36",
        hostDriver=True,
        gpuOperator={"version": "v26.7.0"},
        draDriver={"managedBy": "gpu-operator", "newCluster": True},
        nodePools=[cluster()["nodePools"][0]],
    )
    fleet = fleet_of(tmp_path, operator_mode, catalog=_catalog_serving_nvidia_gpu("catalog"))
    (plan,) = fleet.clusters
    names = [c.extended_resource_name for c in plan.device_classes] + [
        d.extended_resource_name for d in plan.driver_classes if d.extended_resource_name
    ]
    assert names.count("nvidia.com/gpu") == 1
