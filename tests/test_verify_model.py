"""The runtime model of `verify` without helm: the labels NFD, the GPU Operator and GFD add, the operand
DaemonSets a ClusterPolicy or a GPUCluster yields, the node models of each provisioning kind, and the
settling loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, fleet_of
from themelio_gpu.inputs.catalog.products import PRODUCTS
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.k8s.nvidia import DEPLOY_CLIENT, DEPLOY_MIG_MANAGER, DRIVER_OWNER, GPU_PRESENT, GPU_TOLERATION
from themelio_gpu.k8s.scheduling import Node, PodScheduling, TaintSpec
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.verify.clusterpolicy_mode import ClusterPolicyMode
from themelio_gpu.verify.gpucluster_mode import DRA_PLUGIN, GPU_CLUSTER_STATE_LABELS, GPUClusterMode
from themelio_gpu.verify.operator_modes import UNMODELLED, operator_mode
from themelio_gpu.verify.proof import Expect, blockers, expectation, place, pool_nodes, settle
from themelio_gpu.verify.workloads import NFD_OS_LABELS, Role, Workload, nfd_labels, nfd_os_labels

PCI = "feature.node.kubernetes.io/pci-10de.present"
DEVICE_PLUGIN = "nvidia.com/gpu.deploy.device-plugin"
TAINT = TaintSpec("nvidia.com/gpu", "present", "NoSchedule")


def policy(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": spec,
    }


def gpu_cluster(**spec: Any) -> dict[str, Any]:
    """A GPUCluster as gpu-operator v26.7.0 renders it, with the chart's defaults (spec overrides replace)."""
    defaults: dict[str, Any] = {
        "draDriver": {"computeDomains": {"enabled": False}},
        "dcgm": {"enabled": False},
        "dcgmExporter": {"enabled": True},
        "daemonsets": {"tolerations": [GPU_TOLERATION]},
    }
    return {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": "GPUCluster",
        "metadata": {"name": "gpu-cluster"},
        "spec": {**defaults, **spec},
    }


def nvidia_driver(name: str = "default", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": {"name": name}, "spec": spec}


def plan_of(tmp_path: Path, **overrides: Any) -> ClusterPlan:
    return fleet_of(tmp_path, cluster(**overrides)).clusters[0]


@pytest.fixture
def a100(tmp_path: Path) -> PoolContract:
    return plan_of(tmp_path).pools[0]


def test_the_operator_labels_only_nodes_nfd_labelled(a100: PoolContract) -> None:
    mode = ClusterPolicyMode(policy(), "v26.3.3")
    assert mode.label({"x": "1"}, set(), a100) == {"x": "1"}
    labelled = mode.label({PCI: "true"}, set(), a100)
    assert labelled[GPU_PRESENT] == "true"
    assert labelled["nvidia.com/gpu.deploy.operator-validator"] == "true"
    assert DEPLOY_CLIENT not in labelled  # v26.7.0 and later only
    # A node the operator marked before, whose NFD label is gone: "no longer has GPUs".
    gone = mode.label({GPU_PRESENT: "true", "nvidia.com/gpu.deploy.driver": "true"}, set(), a100)
    assert gone == {GPU_PRESENT: "false"}


def test_state_labels_already_set_are_honoured(a100: PoolContract) -> None:
    old, new = ClusterPolicyMode(policy(), "v26.3.3"), ClusterPolicyMode(policy(), "v26.7.0")
    for mode in (old, new):
        assert mode.label({PCI: "true", DEVICE_PLUGIN: "false"}, set(), a100)[DEVICE_PLUGIN] == "false"
    # v26.7.0 treats an empty value as unset (a driver-manager leftover); v26.3.3 keeps it.
    assert old.label({PCI: "true", DEVICE_PLUGIN: ""}, set(), a100)[DEVICE_PLUGIN] == ""
    assert new.label({PCI: "true", DEVICE_PLUGIN: ""}, set(), a100)[DEVICE_PLUGIN] == "true"
    assert new.label({PCI: "true"}, set(), a100)[DEPLOY_CLIENT] == "true"


def test_operands_false_removes_every_state_label(a100: PoolContract) -> None:
    mode = ClusterPolicyMode(policy(), "v26.7.0")
    labels = mode.label({PCI: "true", "nvidia.com/gpu.deploy.operands": "false"}, {"gpu-feature-discovery"}, a100)
    assert not [
        k for k in labels if k.startswith("nvidia.com/gpu.deploy.") and k != "nvidia.com/gpu.deploy.operands"
    ]


def test_mig_manager_label_needs_gfd_on_a_mig_capable_gpu(tmp_path: Path) -> None:
    pools = plan_of(
        tmp_path,
        offerings=["nvidia.com/a10g"],
        nodePools=[{"name": "a10g", "product": "a10g", "gpusPerNode": 1, "provisioning": {"provisioned": {}}}],
    ).pools
    (tmp_path / "b").mkdir()
    a100 = plan_of(tmp_path / "b").pools[0]
    mode = ClusterPolicyMode(policy(), "v26.3.3")
    assert DEPLOY_MIG_MANAGER not in mode.label({PCI: "true"}, set(), a100)  # GFD has not run
    with_gfd = mode.label({PCI: "true"}, {"gpu-feature-discovery"}, a100)
    assert with_gfd[DEPLOY_MIG_MANAGER] == "true"
    assert with_gfd["nvidia.com/mig.capable"] == "true"
    assert with_gfd["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    a10g = mode.label({PCI: "true"}, {"gpu-feature-discovery"}, pools[0])
    assert a10g["nvidia.com/mig.capable"] == "false" and DEPLOY_MIG_MANAGER not in a10g


def test_operands_take_the_policy_tolerations_or_the_operator_default() -> None:
    given = [{"key": "x", "operator": "Exists"}]
    with_list = ClusterPolicyMode(policy(daemonsets={"tolerations": given}), "v26.3.3").workloads()
    assert all(w.scheduling.tolerations == tuple(given) for w in with_list)
    # An empty list is not rendered into the ClusterPolicy; the operator keeps its assets' toleration.
    empty = ClusterPolicyMode(policy(daemonsets={"tolerations": []}), "v26.3.3").workloads()
    assert all(w.scheduling.tolerations == (GPU_TOLERATION,) for w in empty)


def test_enable_flags_decide_which_operands_exist() -> None:
    spec = {"devicePlugin": {"enabled": False}, "dcgm": {"enabled": True}, "driver": {}}
    created = {w.name: w.created for w in ClusterPolicyMode(policy(**spec), "v26.3.3").workloads()}
    assert created["nvidia-device-plugin-daemonset"] is False
    assert created["nvidia-dcgm"] is True
    assert created["nvidia-driver-daemonset"] is True  # unset means enabled (IsEnabled)
    assert created["nvidia-node-status-exporter"] is False  # unset means disabled
    assert created["nvidia-operator-validator"] is True  # always


def test_unmodelled_settings_and_modes_fail_rather_than_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    mode = ClusterPolicyMode(
        policy(sandboxWorkloads={"enabled": True}, driver={"useNvidiaDriverCRD": True}), "v26.7.0"
    )
    assert len(mode.unmodelled()) == 2
    monkeypatch.setitem(UNMODELLED, "FutureCluster", "the FutureCluster mode is not modelled")
    future = operator_mode([{"kind": "FutureCluster", "metadata": {"name": "x"}}], "v27.0.0")
    assert future.mode is None and future.problems == ("the FutureCluster mode is not modelled",)
    assert operator_mode([], "v26.3.3").problems == (
        "the operator release renders no ClusterPolicy and no GPUCluster: the operator would create no operands",
    )
    both = operator_mode([policy(), gpu_cluster()], "v26.7.0")
    assert both.mode is None
    assert both.problems == (
        "2 operator resources rendered (ClusterPolicy cluster-policy, GPUCluster gpu-cluster)",
    )


@pytest.mark.parametrize(
    ("pci", "label"),
    [
        ({"deviceLabelFields": ["vendor"], "deviceClassWhitelist": ["0302"]}, "pci-10de.present"),
        ({}, "pci-0302_10de.present"),  # NFD's defaults: class and vendor
        ({"deviceLabelFields": ["vendor", "device"]}, "pci-10de_20b0.present"),
        ({"deviceLabelFields": ["vendor"], "deviceClassWhitelist": ["02"]}, None),  # GPUs not listed
        ({"deviceLabelFields": ["subsystem_vendor"]}, None),  # unknown to the catalog
    ],
)
def test_nfd_publishes_the_pci_label_its_config_asks_for(pci: dict[str, Any], label: str | None) -> None:
    labels = nfd_labels({"sources": {"pci": pci}} if pci else {}, PRODUCTS["a100-40gb"])
    assert labels == ({f"feature.node.kubernetes.io/{label}": "true"} if label else {})


def test_node_models_per_provisioning_kind(tmp_path: Path) -> None:
    plan = plan_of(
        tmp_path,
        karpenter=True,
        offerings=["nvidia.com/a100"],
        nodePools=[
            {
                "name": "kp",
                "product": "a100-40gb",
                "gpusPerNode": 8,
                "taints": [{"key": "extra", "effect": "NoExecute"}],
                "provisioning": {
                    "karpenter": {
                        "nodeClassRef": {"name": "gpu"},
                        "instanceTypes": ["p4d.24xlarge", "p4de.24xlarge"],
                        "capacityTypes": ["on-demand", "spot"],
                    }
                },
            },
            {
                "name": "st",
                "product": "a100-40gb",
                "gpusPerNode": 8,
                "provisioning": {"static": {"nodes": ["s1", "s2"]}},
            },
        ],
    )
    how, nodes = pool_nodes(plan.definition.node_pools[0], plan.pools[0])
    assert how == "Karpenter" and len(nodes) == 4
    assert {
        (n.labels["node.kubernetes.io/instance-type"], n.labels["karpenter.sh/capacity-type"]) for n in nodes
    } == {
        ("p4d.24xlarge", "on-demand"),
        ("p4d.24xlarge", "spot"),
        ("p4de.24xlarge", "on-demand"),
        ("p4de.24xlarge", "spot"),
    }
    assert all(n.labels["karpenter.sh/nodepool"] == "kp" and n.taints == plan.pools[0].taints for n in nodes)
    how, nodes = pool_nodes(plan.definition.node_pools[1], plan.pools[1])
    assert how == "static" and [n.name for n in nodes] == ["s1", "s2"]
    assert nodes[0].labels["kubernetes.io/hostname"] == "s1" and nodes[0].labels["nvidia.com/gpu"] == "true"


def test_settling_follows_nfd_then_the_operator_then_gfd(a100: PoolContract) -> None:
    tolerate = (GPU_TOLERATION,)
    nfd = Workload("nfd-worker", Role.NFD_WORKER, "chart", PodScheduling(tolerations=tolerate))
    mode = ClusterPolicyMode(policy(), "v26.3.3")
    workloads = [nfd, *mode.workloads()]
    node = Node("n", {"nvidia.com/gpu": "true"}, a100.taints)
    settled = settle(node, workloads, mode, {"sources": {"pci": {"deviceLabelFields": ["vendor"]}}}, a100)
    assert settled is not None
    assert settled.labels[PCI] == "true" and settled.labels[DEPLOY_MIG_MANAGER] == "true"
    mig_manager = next(w for w in workloads if w.role is Role.MIG_MANAGER)
    assert place(mig_manager, Expect.MUST, [settled]).ok is True
    # Without NFD's worker on the node nothing follows, so the MIG Manager is proven missing.
    blind = Workload("nfd-worker", Role.NFD_WORKER, "chart", PodScheduling())
    unlabelled = settle(node, [blind, *mode.workloads()], mode, {}, a100)
    assert unlabelled is not None and unlabelled.labels == node.labels
    row = place(mig_manager, Expect.MUST, [unlabelled])
    assert row.ok is False and "nvidia.com/gpu.deploy.mig-manager" in row.outcome


def test_labels_that_never_settle_are_reported(a100: PoolContract) -> None:
    # A DaemonSet that may only run where NFD has not labelled the node, and is NFD's worker itself.
    flapping = Workload(
        "nfd-worker",
        Role.NFD_WORKER,
        "chart",
        PodScheduling(
            node_selector_terms=({"matchExpressions": [{"key": PCI, "operator": "DoesNotExist"}]},),
            tolerations=(GPU_TOLERATION,),
        ),
    )
    vendor_only = {"sources": {"pci": {"deviceLabelFields": ["vendor"]}}}
    assert settle(Node("n", {}, a100.taints), [flapping], None, vendor_only, a100) is None


@pytest.mark.parametrize(
    ("role", "dra", "mig", "expected"),
    [
        (Role.NFD_WORKER, False, False, Expect.MUST),
        (Role.OPERAND, True, False, Expect.MUST),
        (Role.DEVICE_PLUGIN, True, False, Expect.MUST_NOT),
        (Role.DEVICE_PLUGIN, False, False, Expect.MUST),
        (Role.DEVICE_PLUGIN_PART, False, False, Expect.MAY),
        (Role.MIG_MANAGER, True, True, Expect.MUST),
        (Role.MIG_MANAGER, True, False, Expect.MAY),
        (Role.DRA_PLUGIN, True, False, Expect.MUST),
        (Role.DRA_PLUGIN, False, False, Expect.MUST_NOT),
        (Role.OTHER, True, True, Expect.MAY),
    ],
)
def test_what_each_role_must_do_on_each_kind_of_pool(
    a100: PoolContract, role: Role, dra: bool, mig: bool, expected: Expect
) -> None:
    mig_devices = {"1g.5gb": 7} if mig else None
    pool = PoolContract(a100.name, a100.product, a100.labels, a100.taints, mig_devices, 8, dra, a100.pool_label)
    assert expectation(role, pool) is expected


def test_a_switched_off_operand_is_a_choice_but_a_missing_device_plugin_is_not() -> None:
    dcgm = Workload(
        "nvidia-dcgm", Role.OPERAND, "cp", PodScheduling(), created=False, not_created="dcgm.enabled=false"
    )
    plugin = Workload("dp", Role.DEVICE_PLUGIN, "cp", PodScheduling(), created=False, not_created="x")
    assert place(dcgm, Expect.MUST, []).ok is None
    assert place(plugin, Expect.MUST, []).ok is False
    assert place(plugin, Expect.MUST_NOT, []).ok is True


def test_partial_placement_names_a_node_it_misses() -> None:
    workload = Workload("w", Role.OPERAND, "chart", PodScheduling(node_selector={"zone": "a"}))
    row = place(workload, Expect.MUST, [Node("n1", {"zone": "a"}), Node("n2", {"zone": "b"})])
    assert row.ok is False
    assert row.outcome == "runs on 1 of 2 nodes; not on n2: nodeSelector zone=a (node has zone=b)"


# --- the GPUCluster mode ---------------------------------------------------------------------------------


def gpu_operator_plan(tmp_path: Path, *, compute_domains: bool = False, mig: bool = False) -> ClusterPlan:
    """A one-pool cluster in the GPUCluster mode (host driver; MIG devices made outside the stack)."""
    pool: dict[str, Any] = {"name": "gpus", "product": "a100-40gb", "gpusPerNode": 8}
    pool["provisioning"] = {"provisioned": {}}
    if mig:
        pool["mig"] = {"profile": "1g.5gb", "createdBy": "external"}
    return plan_of(
        tmp_path,
        gpuOperator={"version": "v26.7.0"},
        draDriver={"managedBy": "gpu-operator", "newCluster": True, "computeDomains": compute_domains},
        hostDriver=True,
        nodePools=[pool],
        offerings=["nvidia.com/a100-mig-1g.5gb" if mig else "nvidia.com/a100"],
    )


def test_gpu_cluster_labels_only_nodes_nfd_labelled(a100: PoolContract) -> None:
    mode = GPUClusterMode(gpu_cluster(), "v26.7.0")
    assert mode.label({"x": "1"}, set(), a100) == {"x": "1"}
    labelled = mode.label({PCI: "true"}, set(), a100)
    assert labelled == {PCI: "true", GPU_PRESENT: "true", **dict.fromkeys(GPU_CLUSTER_STATE_LABELS, "true")}
    gone = mode.label({GPU_PRESENT: "true", "nvidia.com/gpu.deploy.dra-driver": "true"}, set(), a100)
    assert gone == {GPU_PRESENT: "false"}


def test_gpu_cluster_honours_set_state_labels_and_sweeps_the_device_plugin_stacks(a100: PoolContract) -> None:
    mode = GPUClusterMode(gpu_cluster(), "v26.7.0")
    given = {
        PCI: "true",
        "nvidia.com/gpu.deploy.dra-driver": "false",  # opts the node out
        "nvidia.com/gpu.deploy.dra-validator": "",  # a driver-manager leftover counts as unset
        DEVICE_PLUGIN: "false",
        DEPLOY_MIG_MANAGER: "true",
        "nvidia.com/gpu.deploy.operands": "false",  # a ClusterPolicy setting: not read in this mode
    }
    labels = mode.label(given, set(), a100)
    assert labels["nvidia.com/gpu.deploy.dra-driver"] == "false"
    assert labels["nvidia.com/gpu.deploy.dra-validator"] == "true"
    assert DEVICE_PLUGIN not in labels and DEPLOY_MIG_MANAGER not in labels
    assert labels["nvidia.com/gpu.deploy.dcgm-exporter-dra"] == "true"


def test_gpu_cluster_operands_and_their_placement_rules() -> None:
    workloads = {w.name: w for w in GPUClusterMode(gpu_cluster(), "v26.7.0").workloads()}
    assert sorted(workloads) == [
        "nvidia-dcgm-dra",
        "nvidia-dcgm-exporter-dra",
        "nvidia-dra-driver-kubelet-plugin",
        "nvidia-dra-validator",
    ]
    plugin = workloads[DRA_PLUGIN]
    assert plugin.role is Role.DRA_PLUGIN and plugin.created
    assert plugin.scheduling.node_selector == {"nvidia.com/gpu.deploy.dra-driver": "true"}
    terms = plugin.scheduling.node_selector_terms
    assert terms is not None and len(terms) == 3
    assert [w.scheduling.tolerations for w in workloads.values()] == [(GPU_TOLERATION,)] * 4
    assert workloads["nvidia-dcgm-dra"].created is False  # the chart's dcgm.enabled: false
    assert workloads["nvidia-dcgm-exporter-dra"].created is True
    assert {w.needs_devices_from for w in workloads.values() if w is not plugin} == {DRA_PLUGIN}


def test_gpu_cluster_tolerations_are_taken_as_given_even_empty() -> None:
    # Unlike a ClusterPolicy there is no operator default: an empty list leaves the pods without any.
    empty = GPUClusterMode(gpu_cluster(daemonsets={"tolerations": []}), "v26.7.0").workloads()
    assert all(w.scheduling.tolerations == () for w in empty)
    node = Node("n", {"nvidia.com/gpu.deploy.dra-driver": "true", GPU_PRESENT: "true"}, (TAINT,))
    plugin = next(w for w in empty if w.name == DRA_PLUGIN)
    assert (
        place(plugin, Expect.MUST, [node]).outcome
        == "does not run: taint nvidia.com/gpu=present:NoSchedule not tolerated"
    )


def test_gpu_cluster_enable_flags() -> None:
    def created(**spec: Any) -> dict[str, bool]:
        return {w.name: w.created for w in GPUClusterMode(gpu_cluster(**spec), "v26.7.0").workloads()}

    assert created(dcgm={"enabled": True})["nvidia-dcgm-dra"] is True
    assert created(dcgm={})["nvidia-dcgm-dra"] is False  # a nil enabled means off for the hostengine
    assert created(dcgmExporter={})["nvidia-dcgm-exporter-dra"] is True  # and on for the exporter
    assert created(dcgmExporter={"enabled": False})["nvidia-dcgm-exporter-dra"] is False
    no_section = gpu_cluster()
    del no_section["spec"]["dcgmExporter"]
    workloads = GPUClusterMode(no_section, "v26.7.0").workloads()
    exporter = next(w for w in workloads if w.name == "nvidia-dcgm-exporter-dra")
    assert (exporter.created, exporter.not_created) == (False, "no dcgmExporter section")
    dcgm = next(
        w for w in GPUClusterMode(gpu_cluster(dcgm={}), "v26.7.0").workloads() if w.name == "nvidia-dcgm-dra"
    )
    assert dcgm.not_created == "dcgm.enabled unset, off by default"
    with_host_network = GPUClusterMode(gpu_cluster(dcgmExporter={"hostNetwork": True}), "v26.7.0").workloads()
    assert next(w for w in with_host_network if w.name == "nvidia-dcgm-exporter-dra").scheduling.host_network


def test_a_pod_claiming_gpus_runs_only_where_the_kubelet_plugin_does() -> None:
    workloads = GPUClusterMode(gpu_cluster(), "v26.7.0").workloads()
    validator = next(w for w in workloads if w.name == "nvidia-dra-validator")
    labels = {GPU_PRESENT: "true", **dict.fromkeys(GPU_CLUSTER_STATE_LABELS, "true")}
    assert blockers(validator, Node("n", labels, (TAINT,)), workloads) == []
    opted_out = Node("n", {**labels, "nvidia.com/gpu.deploy.dra-driver": "false"}, (TAINT,))
    assert blockers(validator, opted_out, workloads) == [
        "its ResourceClaim needs a device that nvidia-dra-driver-kubelet-plugin publishes, and that does not run here"
    ]


def test_the_nvidia_driver_owns_gpu_nodes_and_places_its_driver(a100: PoolContract) -> None:
    toleration = {"key": "team", "operator": "Exists", "effect": "NoSchedule"}
    objects = [gpu_cluster(), nvidia_driver(default=True, driverType="gpu", tolerations=[toleration])]
    mode = GPUClusterMode(objects[0], "v26.7.0", objects)
    (driver,) = [w for w in mode.workloads() if w.source == "NVIDIADriver default"]
    assert driver.role is Role.OPERAND
    assert driver.scheduling.node_selector == {
        "nvidia.com/gpu.deploy.driver": "true",
        GPU_PRESENT: "true",
        DRIVER_OWNER: "default",
    }
    assert driver.scheduling.tolerations == (GPU_TOLERATION, toleration)
    labelled = mode.label({PCI: "true", **nfd_os_labels({})}, set(), a100)
    assert labelled[DRIVER_OWNER] == "default"
    assert blockers(driver, Node("n", labelled, (TAINT,)), []) == []
    # Without NFD's OS labels there is no OS pool, so no driver DaemonSet for the node.
    assert blockers(driver, Node("n", mode.label({PCI: "true"}, set(), a100), (TAINT,)), [])


def test_a_matching_nvidia_driver_wins_over_the_default_and_two_matches_own_nothing(a100: PoolContract) -> None:
    zone = {"zone": "a"}
    one = [nvidia_driver(default=True), nvidia_driver("zone-a", nodeSelector=zone)]
    assert GPUClusterMode(gpu_cluster(), "v26.7.0", one).label({PCI: "true", **zone}, set(), a100)[
        DRIVER_OWNER
    ] == ("zone-a")
    assert (
        GPUClusterMode(gpu_cluster(), "v26.7.0", one).label({PCI: "true"}, set(), a100)[DRIVER_OWNER] == "default"
    )
    two = [*one, nvidia_driver("any")]  # no nodeSelector: every GPU node
    assert DRIVER_OWNER not in GPUClusterMode(gpu_cluster(), "v26.7.0", two).label(
        {PCI: "true", **zone}, set(), a100
    )
    assert DRIVER_OWNER not in GPUClusterMode(gpu_cluster(), "v26.7.0", []).label({PCI: "true"}, set(), a100)


def test_gpu_cluster_unmodelled_drivers_fail() -> None:
    objects = [nvidia_driver("vgpu", driverType="vgpu-host-manager"), nvidia_driver("pre", usePrecompiled=True)]
    problems = GPUClusterMode(gpu_cluster(), "v26.7.0", objects).unmodelled()
    assert problems == [
        "NVIDIADriver vgpu: driverType vgpu-host-manager is not modelled",
        "NVIDIADriver pre: usePrecompiled (per-kernel DaemonSets) is not modelled",
    ]
    assert GPUClusterMode(gpu_cluster(), "v26.7.0", [nvidia_driver(driverType="gpu")]).unmodelled() == []


@pytest.mark.parametrize("compute_domains", [False, True, None])
def test_gpu_cluster_device_classes_are_the_plans_model_of_the_operators(
    tmp_path: Path, compute_domains: bool | None
) -> None:
    spec = {"computeDomains": {}} if compute_domains is None else {"computeDomains": {"enabled": compute_domains}}
    mode = GPUClusterMode(gpu_cluster(draDriver=spec), "v26.7.0")
    # The CRD defaults computeDomains.enabled to true.
    plan = gpu_operator_plan(tmp_path, compute_domains=compute_domains is not False)
    classes = {(c["metadata"]["name"], c["spec"].get("extendedResourceName")) for c in mode.device_classes()}
    assert classes == {(d.name, d.extended_resource_name) for d in plan.driver_classes}
    assert all(name is None for _, name in classes)  # the operator's gpu.nvidia.com advertises nothing


def test_operator_mode_finds_the_gpu_cluster_and_its_drivers() -> None:
    objects = [gpu_cluster(), nvidia_driver(default=True)]
    found = operator_mode(objects, "v26.7.0")
    assert found.problems == () and isinstance(found.mode, GPUClusterMode)
    assert found.mode.resource == "GPUCluster gpu-cluster"
    assert [w.source for w in found.mode.workloads()][-1] == "NVIDIADriver default"


@pytest.mark.parametrize(
    ("core", "published"),
    [({}, True), ({"labelSources": ["all", "-system"]}, False), ({"labelSources": ["pci"]}, False)],
)
def test_nfd_publishes_the_os_labels_unless_its_system_source_is_off(
    core: dict[str, Any], published: bool
) -> None:
    assert (set(nfd_os_labels({"core": core})) == set(NFD_OS_LABELS)) is published


def test_settling_in_the_gpu_cluster_mode(tmp_path: Path) -> None:
    plan = gpu_operator_plan(tmp_path, mig=True)
    (pool,) = plan.pools
    nfd = Workload("nfd-worker", Role.NFD_WORKER, "chart", PodScheduling(tolerations=(GPU_TOLERATION,)))
    mode = GPUClusterMode(gpu_cluster(), "v26.7.0")
    workloads = [nfd, *mode.workloads()]
    (node,) = pool_nodes(plan.definition.node_pools[0], pool)[1]
    settled = settle(node, workloads, mode, {"sources": {"pci": {"deviceLabelFields": ["vendor"]}}}, pool)
    assert settled is not None
    outcomes = {w.name: place(w, expectation(w.role, pool, w), [settled], workloads, mig=True) for w in workloads}
    assert {name: row.ok for name, row in outcomes.items()} == {
        "nfd-worker": True,
        DRA_PLUGIN: True,
        "nvidia-dra-validator": None,  # a MIG pool: no whole GPU for its claim (may, and does not, run)
        "nvidia-dcgm-dra": None,  # not created: the chart's default
        "nvidia-dcgm-exporter-dra": None,
    }
    assert outcomes["nvidia-dra-validator"].outcome == (
        "does not run: its ResourceClaim asks gpu.nvidia.com for a whole GPU, and a MIG node publishes only its "
        "MIG devices"
    )
    whole = {w.name: place(w, Expect.MUST, [settled], workloads) for w in workloads}  # the node, whole GPUs
    assert whole["nvidia-dra-validator"].ok is True and whole["nvidia-dcgm-exporter-dra"].ok is True
    # Without NFD's worker on the node the operator never sees its GPUs: nothing follows.
    blind = [Workload("nfd-worker", Role.NFD_WORKER, "chart", PodScheduling()), *mode.workloads()]
    unlabelled = settle(node, blind, mode, {}, pool)
    assert unlabelled is not None and unlabelled.labels == node.labels
    assert place(blind[1], Expect.MUST, [unlabelled], blind).ok is False
