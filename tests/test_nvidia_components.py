"""NVIDIA's code as components of the sandbox, without running it: which clusters run the GPU Operator's controller
and the DRA driver's kubelet plugins, with which builds, how the operator is started as its pod would start it,
and what its uninstall leaves by design. tests/test_sandbox_live.py runs them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.builders import cluster, fleet_of, plan_of
from themelio_gpu.sandbox import components, inventory
from themelio_gpu.sandbox.components import operator_launcher
from themelio_gpu.sandbox.components.dra_kubelet_plugin import DraKubeletPlugin, published_nodes, sockets_folder
from themelio_gpu.sandbox.components.gpu_operator import GpuOperator, manage_crds_tools, operator_tools
from themelio_gpu.sandbox.operator_status import OperatorStatus, ResourceStatus, lines


def test_each_cluster_runs_its_operators_build_and_plugins_on_whole_gpu_dra_nodes(tmp_path: Path) -> None:
    plan = plan_of(fleet_of(tmp_path, cluster()), "test")
    assert operator_tools() == {"v26.7.0": "gpu-operator-26.7", "v26.3.3": "gpu-operator-26.3"}
    assert [type(c).__name__ for c in components.wanted(plan)] == [
        "ChartRepository", "NfdWorker", "Kueue", "DraKubeletPlugin", "GpuOperator"
    ]  # fmt: skip
    version = next(r.version for r in plan.releases if r.chart == "gpu-operator")
    assert manage_crds_tools() == {"v26.7.0": "gpu-operator-crds-26.7", "v26.3.3": "gpu-operator-crds-26.3"}
    assert GpuOperator().tools_for(plan) == (operator_tools()[version], manage_crds_tools()[version])
    assert components.tools(plan) >= {"dra-driver-25.12", "mock-nvml", operator_tools()[version]}
    assert [(n.name, n.pool, n.gpus) for n in published_nodes(plan)] == [("node-a", "whole", 8)]
    mig_only = cluster(nodePools=[cluster()["nodePools"][1]], offerings=["nvidia.com/a100-mig-1g.5gb"])
    no_whole = plan_of(fleet_of(tmp_path, mig_only), "test")
    assert not DraKubeletPlugin().wanted(no_whole)  # MIG only: the sandbox's own slices


def test_the_sockets_folder_is_short_and_the_sandboxs_own(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 120) / "sandboxes" / "gpu-east"
    folder = sockets_folder(deep)
    assert folder == sockets_folder(deep) != sockets_folder(tmp_path / "other")
    assert len(str(folder / "12" / "plugins" / "gpu.nvidia.com" / "dra.sock")) < 108  # sun_path


CONTAINER: dict[str, Any] = {
    "name": "gpu-operator",
    "args": ["--leader-elect", "--zap-time-encoding=epoch", "--zap-log-level=info"],
    "env": [
        {"name": "WATCH_NAMESPACE", "value": ""},
        {"name": "OPERATOR_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "DRIVER_MANAGER_IMAGE", "value": "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.9.0"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
    ],
}


def test_the_operator_gets_its_pods_environment_and_what_running_out_of_a_pod_needs() -> None:
    env, unresolved = operator_launcher.operator_environment(CONTAINER, "gpu-operator")
    assert env == {
        "WATCH_NAMESPACE": "",
        "OPERATOR_NAMESPACE": "gpu-operator",
        "DRIVER_MANAGER_IMAGE": "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.9.0",
    }
    assert unresolved == ["TOKEN (secretKeyRef)"]
    newer = operator_launcher.operator_arguments(
        CONTAINER, "/k", "gpu-operator", "  -leader-elect-namespace string"
    )
    assert newer == [
        "--leader-elect", "--zap-time-encoding=epoch", "--zap-log-level=info", "-kubeconfig=/k",
        "--metrics-bind-address=0", "--health-probe-bind-address=0", "--leader-elect-namespace=gpu-operator",
    ]  # fmt: skip
    # v26.3.3 has no -leader-elect-namespace: out of a pod it could find none, so it runs without election.
    older = operator_launcher.operator_arguments(CONTAINER, "/k", "gpu-operator", "  -leader-elect\n")
    assert "--leader-elect" not in older and not any(a.startswith("--leader-elect-namespace") for a in older)


def test_the_launcher_runs_the_build_of_the_version_the_deployments_image_names() -> None:
    """After a chart upgrade the Deployment's image names the new version: its build runs, never another."""
    version = operator_launcher.image_version
    assert version({"image": "nvcr.io/nvidia/gpu-operator:v26.7.0"}) == "v26.7.0"
    assert version({"image": "registry.local:5000/nvidia/gpu-operator:v26.3.3@sha256:ab"}) == "v26.3.3"
    assert version({"image": "registry.local:5000/nvidia/gpu-operator"}) == ""
    assert version({}) == ""


def _item(kind: str, name: str, uid: str, owner: str = "", keep: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "gpu-operator", "uid": uid}
    if owner:
        metadata["ownerReferences"] = [{"uid": owner}]
    if keep:
        metadata["annotations"] = {"helm.sh/resource-policy": "keep"}
    return {"kind": kind, "metadata": metadata}


def test_what_a_kept_resource_owns_is_left_by_design_however_deep() -> None:
    items = [
        _item("GPUCluster", "gpu-cluster", "1", keep=True),
        _item("DaemonSet", "nvidia-dra-validator", "2", owner="1"),
        _item("Pod", "nvidia-dra-validator-x", "3", owner="2"),
        _item("DaemonSet", "left", "4", owner="9"),  # its owner is gone: the garbage collector's to remove
        _item("ConfigMap", "stray", "5"),
    ]
    kept = inventory.kept_with_what_they_own(items, {"Namespace//gpu-operator"})
    assert kept == {
        "Namespace//gpu-operator",
        "GPUCluster/gpu-operator/gpu-cluster",
        "DaemonSet/gpu-operator/nvidia-dra-validator",
        "Pod/gpu-operator/nvidia-dra-validator-x",
    }


def test_the_operators_status_is_shown_as_it_says_it() -> None:
    running = OperatorStatus(
        "v26.7.0", True, True, "", [ResourceStatus("GPUCluster/gpu-cluster", "notReady", ["Ready=False (Error)"])]
    )
    assert running.ok and lines(running)[1:] == [
        "  GPUCluster/gpu-cluster: state notReady",
        "    Ready=False (Error)",
    ]
    ended = OperatorStatus("v26.7.0", True, False, "it ended")
    assert not ended.ok and "does not run: it ended" in lines(ended)[0]
    cannot = OperatorStatus("v26.7.0", False, False, "no private mount namespace here")
    assert cannot.ok  # said, not failed: the machine's limit (docs/sandbox.md)
