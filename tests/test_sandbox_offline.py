"""The sandbox's pure parts, without tools: the pinned versions, the nodes and GPUs it simulates, the version rules."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, fleet_of, plan_of
from themelio_gpu.dryrun.resourceslices import parse_resourceslices
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox import cluster as sandbox_cluster
from themelio_gpu.sandbox import inventory
from themelio_gpu.sandbox.errors import MissingToolError, SandboxError
from themelio_gpu.sandbox.nodes import CONTROL_PLANE_NODE, PROVISIONED_NODES, SYSTEM_NODE, simulated_nodes
from themelio_gpu.sandbox.tools import TOOLS_FILE, load_tools, toolbox


def test_every_tool_is_pinned_to_an_exact_version_and_names_its_binaries() -> None:
    tools = load_tools()
    assert {"kubernetes-1.36", "kubernetes-1.37", "etcd", "kwok", "helm", "opentofu"} <= set(tools)
    for tool in tools.values():
        assert tool.version.startswith("v") and tool.version.count(".") == 2, tool
        assert tool.binaries or tool.files, f"{tool.name}: binaries to build or files to copy"
        assert bool(tool.module) != bool(tool.archive), f"{tool.name}: a Go module or a source archive, not both"
    for minor in sandbox_cluster.BINARY_MINORS:
        kubernetes = tools[f"kubernetes-1.{minor}"]
        assert kubernetes.version.startswith(f"v1.{minor}.")
        assert kubernetes.staging == "v0." + kubernetes.version.split(".", 1)[1]
        assert "gitVersion={version}" in kubernetes.ldflags  # helm refuses charts on a v0.0.0 server
        assert f"gitMinor={minor} " in kubernetes.ldflags
    assert TOOLS_FILE.read_text().count("version = ") == len(tools)  # one place for every version


def test_a_recipe_changes_with_what_it_is_built_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THEMELIO_TOOLS_CACHE", str(tmp_path))
    etcd = load_tools()["etcd"]
    assert etcd.folder == tmp_path / f"etcd-{etcd.version}"
    assert etcd.recipe("go1.26.8") != etcd.recipe("go1.27.3")
    assert not etcd.ready("go1.26.8")
    etcd.folder.mkdir()
    (etcd.folder / "etcd").write_text("#!/bin/sh\n")
    (etcd.folder / "etcd").chmod(0o755)
    (etcd.folder / ".recipe").write_text(etcd.recipe("go1.26.8") + "\n")
    assert etcd.ready("go1.26.8") and not etcd.ready("go1.27.3")


def test_a_missing_tool_names_the_target_that_builds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THEMELIO_TOOLS_CACHE", str(tmp_path))
    with pytest.raises(
        MissingToolError, match=r"not built: kubernetes-1\.36 v1\.36\.\d+ \(kube-apiserver.*make sandbox-tools"
    ):
        toolbox(("kubernetes-1.36",))


def _pools(*pools: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    offerings = ["nvidia.com/a100-mig-1g.5gb" if "mig" in p else "nvidia.com/a100" for p in pools]
    overrides.setdefault("offerings", sorted(set(offerings)))
    return cluster(nodePools=list(pools), **overrides)


def _plan(tmp_path: Path, definition: dict[str, Any]) -> ClusterPlan:
    return plan_of(fleet_of(tmp_path, definition), definition["name"])


WHOLE = {
    "name": "whole",
    "product": "a100-40gb",
    "gpusPerNode": 8,
    "provisioning": {"static": {"nodes": ["n-1", "n-2"]}},
}
MIG = {
    "name": "sliced",
    "product": "a100-40gb",
    "gpusPerNode": 2,
    "mig": {"profile": "1g.5gb"},
    "provisioning": {"provisioned": {}},
}


def test_static_nodes_are_named_and_carry_nothing_of_the_contract_before_the_stack(tmp_path: Path) -> None:
    nodes = simulated_nodes(_plan(tmp_path, _pools(WHOLE)))
    assert [n.name for n in nodes] == ["n-1", "n-2", SYSTEM_NODE, CONTROL_PLANE_NODE]
    assert (nodes[-2].kind, nodes[-2].slices, nodes[-2].manifest["spec"]) == ("system", (), {})
    assert nodes[-1].manifest["spec"]["taints"] == [
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    ]
    labels = nodes[0].manifest["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "n-1" and labels["kubernetes.io/os"] == "linux"
    assert not any(k.startswith(("nvidia.com/", "themelio.io/", "gpu.themelio.io/")) for k in labels), labels
    assert not any(k.startswith("feature.node.kubernetes.io/") for k in labels)  # NFD's: where its worker runs
    assert "taints" not in nodes[0].manifest["spec"]
    assert "nvidia.com/gpu" not in nodes[0].manifest["status"]["allocatable"]  # a DRA node advertises none


def test_provisioned_nodes_register_with_the_contract_the_stack_outputs(tmp_path: Path) -> None:
    plan = _plan(tmp_path, _pools(MIG))
    nodes = [n for n in simulated_nodes(plan) if n.kind != "system"]
    contract = plan.pools[0]
    assert len(nodes) == PROVISIONED_NODES
    for node in nodes:
        assert contract.labels.items() <= node.manifest["metadata"]["labels"].items()
        assert node.manifest["spec"]["taints"] == [t.as_object() for t in contract.taints]


def test_a_dra_node_publishes_its_gpus_as_the_driver_does_and_the_dry_run_reads_them(tmp_path: Path) -> None:
    plan = _plan(tmp_path, _pools(WHOLE, MIG))
    nodes = simulated_nodes(plan)
    whole, sliced = nodes[0], nodes[-3]
    # A whole-GPU DRA node's GPUs are the DRA driver's to publish (components/dra_kubelet_plugin.py): the sandbox
    # writes none; what the generator shapes for it is the model's view (placement.py) and what slice_compare.py
    # sets beside the driver's.
    assert whole.by_driver and whole.written == () and not sliced.by_driver and sliced.written == sliced.slices
    (generated,) = whole.slices
    devices = parse_resourceslices(json.dumps({"kind": "List", "items": [generated, *sliced.slices]}))
    on_whole = [d for d in devices if d.node == whole.name]
    assert len(on_whole) == 8
    assert {d.attribute("type") for d in on_whole} == {"gpu"}
    on_sliced = [d for d in devices if d.node == sliced.name]
    assert len(on_sliced) == 2 * 7  # A100 40GB: seven 1g.5gb per GPU
    assert {d.attribute("profile") for d in on_sliced} == {"1g.5gb"}
    assert generated["spec"]["pool"] == {"name": whole.name, "generation": 1, "resourceSliceCount": 1}


def test_a_device_plugin_mig_pool_advertises_each_profile_as_the_plugins_mixed_strategy_does(
    tmp_path: Path,
) -> None:
    plugin = {**MIG, "dra": False, "provisioning": {"static": {"nodes": ["m-1"]}}}
    node = simulated_nodes(_plan(tmp_path, _pools(plugin, offerings=["nvidia.com/a100-mig-1g.5gb"])))[0]
    allocatable = node.manifest["status"]["allocatable"]
    assert allocatable["nvidia.com/mig-1g.5gb"] == "14"  # seven a GPU, two GPUs
    assert "nvidia.com/gpu" not in allocatable and node.slices == ()


def test_a_device_plugin_pool_advertises_nvidia_gpu_and_publishes_no_slice(tmp_path: Path) -> None:
    plugin = {**WHOLE, "dra": False}
    (node, _, _, _) = simulated_nodes(_plan(tmp_path, _pools(plugin, offerings=["nvidia.com/gpu"])))
    assert node.manifest["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node.slices == ()


ALL_GATED = {
    "DRAExtendedResource": {
        "components": ["kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubelet"]
    }
}
GATE = "feature-gates=DRAExtendedResource=true"


@pytest.mark.parametrize(
    ("version", "gates", "expected"),
    [
        ("1.36", None, {c: [] for c in sandbox_cluster.CONTROL_PLANE}),
        ("1.35", ALL_GATED, {c: ["emulated-version=1.35", GATE] for c in sandbox_cluster.CONTROL_PLANE}),
        ("1.34.2", ALL_GATED, {c: ["emulated-version=1.34", GATE] for c in sandbox_cluster.CONTROL_PLANE}),
    ],
)
def test_the_control_plane_runs_the_cluster_files_version_rules(
    tmp_path: Path, version: str, gates: dict[str, Any] | None, expected: dict[str, list[str]]
) -> None:
    definition = _plan(
        tmp_path, _pools(WHOLE, kubernetesVersion=version, **({"featureGates": gates} if gates else {}))
    )
    assert sandbox_cluster.feature_gate_args(definition.definition) == expected


def test_each_version_runs_on_the_oldest_binaries_that_reach_it(tmp_path: Path) -> None:
    plugin = {**WHOLE, "dra": False}  # 1.33 has no resource.k8s.io/v1: device plugin pools only
    for version, tool in (("1.33", "kubernetes-1.36"), ("1.36", "kubernetes-1.36"), ("1.37", "kubernetes-1.37")):
        pool = plugin if version == "1.33" else WHOLE
        offerings = {"offerings": ["nvidia.com/gpu"]} if version == "1.33" else {}
        plan = _plan(tmp_path, _pools(pool, kubernetesVersion=version, **offerings))
        assert sandbox_cluster.kubernetes_tool(plan.definition) == tool
    assert sandbox_cluster.feature_gate_args(plan.definition) == {c: [] for c in sandbox_cluster.CONTROL_PLANE}


def test_a_version_no_binaries_reach_is_refused(tmp_path: Path) -> None:
    plan = _plan(tmp_path, _pools(WHOLE, kubernetesVersion="1.36"))
    definition = plan.definition.model_copy(update={"kubernetes_version": "1.32"})
    with pytest.raises(SandboxError, match=r"1\.32: .*run or emulate 1\.33 to 1\.37 only"):
        sandbox_cluster.feature_gate_args(definition)


def test_only_what_the_control_plane_alone_wrote_and_nothing_owns_is_its_own() -> None:
    def item(*managers: str, owned: bool = False) -> dict[str, object]:
        metadata: dict[str, object] = {"managedFields": [{"manager": m} for m in managers]}
        if owned:
            metadata["ownerReferences"] = [{"kind": "DaemonSet", "name": "driver"}]
        return {"metadata": metadata}

    assert inventory.made_by_control_plane(item("kube-controller-manager"))
    assert inventory.made_by_control_plane(item("kube-apiserver", "kube-controller-manager"))
    assert not inventory.made_by_control_plane(item("kube-controller-manager", owned=True))
    assert not inventory.made_by_control_plane(item("kube-controller-manager", "themelio-gpu-stacks"))
    assert not inventory.made_by_control_plane(item("helm"))
    assert not inventory.made_by_control_plane(item())


def test_every_kind_discovery_lists_is_compared_serviceaccounts_and_controllerrevisions_included() -> None:
    discovered = ["serviceaccounts", "controllerrevisions.apps", "events", "leases.coordination.k8s.io",
                  "nodes", "clusterroles.rbac.authorization.k8s.io", "widgets.example.com"]  # fmt: skip
    assert inventory.compared_kinds(discovered) == [
        "serviceaccounts", "controllerrevisions.apps", "clusterroles.rbac.authorization.k8s.io", "widgets.example.com"
    ]  # fmt: skip
    assert all(reason for reason in inventory.NOT_COMPARED.values())

    def item(kind: str, name: str, manager: str | None, owner: bool = False) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name, "namespace": "gpu-operator"}
        if manager:
            metadata["managedFields"] = [{"manager": manager}]
        if owner:
            metadata["ownerReferences"] = [{"kind": "DaemonSet", "name": "nvidia-driver"}]
        return {"kind": kind, "metadata": metadata}

    the_gcs = item("ControllerRevision", "nvidia-driver-5d4f", "kube-controller-manager", owner=True)
    items = [
        item("ServiceAccount", "gpu-operator", "helm"),  # the chart's: the stack's to remove
        item(
            "ServiceAccount", "default", None
        ),  # every namespace's (as the API server shows it: no managedFields)
        the_gcs,  # the garbage collector's to remove with its DaemonSet
        item("ConfigMap", "kube-root-ca.crt", "kube-controller-manager"),
        item("ConfigMap", "gpu-operator", "kube-controller-manager"),  # only the control plane wrote it
        item("ConfigMap", "default", "helm"),  # a chart's, whatever its name
    ]
    assert inventory.objects_of(items, control_plane_own=False) == {
        "ServiceAccount/gpu-operator/gpu-operator": False,
        "ControllerRevision/gpu-operator/nvidia-driver-5d4f": True,
        "ConfigMap/gpu-operator/default": False,
    }
    assert "ConfigMap/gpu-operator/gpu-operator" in inventory.objects_of(items)  # the baseline keeps it


def test_daemonset_pods_count_as_placed_once_the_controller_has_caught_up_and_bound_them() -> None:
    from themelio_gpu.sandbox.daemonsets import bound_nodes, settled

    daemonset = {
        "metadata": {"uid": "u", "generation": 2},
        "status": {"observedGeneration": 2, "desiredNumberScheduled": 2},
    }

    def pod(node: str | None, owner: str = "u") -> dict[str, Any]:
        return {"metadata": {"ownerReferences": [{"uid": owner}]}, "spec": {"nodeName": node} if node else {}}

    assert bound_nodes(daemonset, [pod("b"), pod("a"), pod("c", owner="other")]) == (["a", "b"], 0)
    assert settled([daemonset], [pod("a"), pod("b")])
    assert not settled([daemonset], [pod("a"), pod(None)])  # one not bound yet
    assert not settled([daemonset], [pod("a")])  # the controller has not made the second
    behind = {**daemonset, "status": {"observedGeneration": 1, "desiredNumberScheduled": 2}}
    assert not settled([behind], [pod("a"), pod("b")])  # the controller has not seen the spec yet
    refused = {**pod(None), "status": {"conditions": [_unschedulable]}}
    assert settled([daemonset], [pod("a"), refused], refused=True)  # the scheduler's answer: no node for it
    assert not settled([daemonset], [pod("a"), refused])  # unless the wait asks for every pod bound
    assert not settled([daemonset], [pod("a"), pod(None)], refused=True)  # the scheduler has not tried it yet
    assert not settled([daemonset], [refused], refused=True)  # the controller has not made the second


_unschedulable = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}


def test_every_port_of_the_control_plane_is_one_the_kernel_hands_out_given_to_kwokctl(tmp_path: Path) -> None:
    import socket

    from themelio_gpu.sandbox import control_plane

    ports = control_plane.free_ports(len(control_plane.PORTS))
    assert len(set(ports)) == len(ports) and all(port > 0 for port in ports)
    for port in ports:  # free for the component that binds it next
        with socket.socket() as probe:
            probe.bind(("0.0.0.0", port))
    assert ports[0] not in control_plane.free_ports(50, besides=ports[0])  # never the port --port names
    plan = _plan(tmp_path, _pools(WHOLE, kubernetesVersion="1.35", featureGates=ALL_GATED))
    flags = sandbox_cluster.feature_gate_args(plan.definition)
    config = json.loads(control_plane.configuration(flags, dict(zip(control_plane.PORTS, ports, strict=True))))
    # The option of KwokctlConfiguration v1alpha1 (kwok 0.8.0) for the port of each component of the binary
    # runtime: kube-apiserver, etcd (client and peer), kube-controller-manager, kube-scheduler, kwok-controller.
    assert config["options"] == {
        "kubeApiserverPort": ports[0], "etcdPort": ports[1], "etcdPeerPort": ports[2],
        "kubeControllerManagerPort": ports[3], "kubeSchedulerPort": ports[4], "kwokControllerPort": ports[5],
    }  # fmt: skip
    assert config["componentsPatches"][0] == {"name": "kube-apiserver", "extraArgs": [
        {"key": "emulated-version", "value": "1.35"}, {"key": "feature-gates", "value": "DRAExtendedResource=true"}
    ]}  # fmt: skip


class _Api:
    """As much of rest.Rest as the NFD labeller uses: NFD's worker pods, nodes, and the PATCHes it sends."""

    def __init__(self, pods: dict[str, str | None], nodes: dict[str, dict[str, str]]) -> None:
        self.pods, self.nodes, self.patched = pods, nodes, list[tuple[str, dict[str, str]]]()

    def get(self, where: str) -> dict[str, Any]:
        if where.startswith("/api/v1/pods?labelSelector="):
            assert where.endswith("app.kubernetes.io/name%3Dnode-feature-discovery%2Crole%3Dworker")
            items = [{"metadata": {"name": p}, "spec": {"nodeName": n} if n else {}} for p, n in self.pods.items()]
            return {"items": items}
        name = where.rsplit("/", 1)[1]
        return {"metadata": {"name": name, "labels": self.nodes[name]}}

    def request(self, method: str, where: str, body: Any, content_type: str) -> Any:
        assert (method, content_type) == ("PATCH", "application/merge-patch+json")
        assert where.endswith("?fieldManager=themelio-sandbox-nfd")
        self.patched.append((where.split("?")[0].rsplit("/", 1)[1], body["metadata"]["labels"]))
        return type("Answer", (), {"status": 200, "message": ""})()


def test_nfd_labels_land_only_where_its_worker_pod_is_placed(tmp_path: Path) -> None:
    """A GPU node gets NFD's PCI, OS and kernel labels once NFD's worker pod is bound to it; a node the worker does
    not reach (a taint it does not tolerate: its pod never comes) gets none; a CPU node its OS and kernel; a node
    Karpenter launched is a GPU node; each node is labelled once."""
    from themelio_gpu.sandbox.components import nfd_worker
    from themelio_gpu.sandbox.nodes import NFD_GPU_NODE, NFD_PCI_LABEL

    (tmp_path / "nfd").mkdir()
    (tmp_path / "nfd" / "gpu-nodes.json").write_text('["gpu-a", "gpu-b"]')
    nodes = {"gpu-a": {}, "gpu-b": {}, "cpu": {}, "launched": {"karpenter.sh/nodepool": "p"}}
    api = _Api({"w-1": "gpu-a", "w-2": "cpu", "w-3": None, "w-4": "launched"}, nodes)
    done: set[str] = set()
    said = nfd_worker.label_once(api, tmp_path, done)  # type: ignore[arg-type]
    assert dict(api.patched) == {
        "gpu-a": NFD_GPU_NODE,
        "cpu": {k: v for k, v in NFD_GPU_NODE.items() if k != NFD_PCI_LABEL},
        "launched": NFD_GPU_NODE,
    }
    assert len(said) == 3 and done == {"gpu-a", "cpu", "launched"}
    api.patched.clear()
    assert nfd_worker.label_once(api, tmp_path, done) == [] and api.patched == []  # type: ignore[arg-type]
    api.pods["w-3"] = "gpu-b"  # bound by the scheduler since
    nfd_worker.label_once(api, tmp_path, done)  # type: ignore[arg-type]
    assert api.patched == [("gpu-b", NFD_GPU_NODE)]


def test_a_pid_file_kwokctl_is_still_writing_is_no_component_that_ended(tmp_path: Path) -> None:
    """kwokctl creates a component's pid file and then writes the number: read in between, the file is empty. The
    start that polls for ended components must not take it for one (it stopped a good start: "kwokctl exit
    None"); a pid that is gone, or a zombie's, is one."""
    import os
    import subprocess
    import sys

    from themelio_gpu.sandbox import control_plane
    from themelio_gpu.sandbox.folder import Sandbox

    sandbox = Sandbox("pids", root=tmp_path)
    pids = control_plane._workdir(sandbox) / "pids"
    pids.mkdir(parents=True)
    (pids / "etcd.pid").write_text("")
    (pids / "kube-apiserver.pid").write_text(f"{os.getpid()}\n")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (pids / "kube-scheduler.pid").write_text(gone.stdout)
    assert control_plane._ended(sandbox) == ["kube-scheduler"]


def test_the_daemonsets_are_read_once_no_node_has_changed_for_a_while() -> None:
    """A node Karpenter just launched gets NFD's labels, then NVIDIA's controller's, and only then the DaemonSet
    controller counts it: its last write (creation, labels, taints; not the kubelet's status heartbeats) is when
    the wait for quiet nodes starts (seen in CI: DaemonSets read before the new node was counted)."""
    from themelio_gpu.sandbox.daemonsets import NODES_QUIET_SECONDS, _last_node_change

    def node(created: str, *fields: tuple[str, str | None]) -> dict[str, Any]:
        managed = [
            {"manager": m, "time": t, **({"subresource": "status"} if m == "kwok" else {})} for m, t in fields
        ]
        return {"metadata": {"creationTimestamp": created, "managedFields": managed}}

    old = node("2026-12-07T00:00:00Z", ("kube-controller-manager", "2026-12-07T00:00:05Z"))
    launched = node("2026-12-07T00:10:00Z", ("nfd-worker", "2026-12-07T00:10:02Z"), ("gpu-operator", "2026-12-07T00:10:09Z"),
                    ("kwok", "2026-12-07T00:10:30Z"))  # fmt: skip
    assert _last_node_change([old]) == datetime(2026, 12, 7, 0, 0, 5, tzinfo=UTC).timestamp()
    assert _last_node_change([old, launched]) == datetime(2026, 12, 7, 0, 10, 9, tzinfo=UTC).timestamp()
    assert _last_node_change([]) == 0.0 and NODES_QUIET_SECONDS >= 5


def test_a_node_the_sandbox_joins_after_up_is_in_the_baseline_as_created(tmp_path: Path) -> None:
    """A pool an upgrade adds gets nodes the sandbox joins (the cloud's, as at `up`): `down` must compare what the
    stack did to them with how they were created, not with nothing (seen: a renamed provisioned pool's new nodes
    listed as labels and taints the stack left)."""
    from themelio_gpu.sandbox.folder import Sandbox

    sandbox = Sandbox("joined", root=tmp_path)
    sandbox.folder.mkdir(parents=True)
    baseline = {"objects": ["Namespace//default"], "nodes": {"old": {"labels": {"a": "1"}, "taints": []}}}
    (sandbox.folder / "baseline.json").write_text(json.dumps(baseline))
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    joined = {"metadata": {"name": "new", "labels": {"gpu.themelio.io/pool": "edge"}}, "spec": {"taints": [taint]}}
    inventory.record_joined_nodes(sandbox, [joined])
    recorded = json.loads((sandbox.folder / "baseline.json").read_text())
    assert recorded["objects"] == ["Namespace//default"]
    assert recorded["nodes"] == {
        "old": {"labels": {"a": "1"}, "taints": []},
        "new": {"labels": {"gpu.themelio.io/pool": "edge"}, "taints": [json.dumps(taint, sort_keys=True)]},
    }
