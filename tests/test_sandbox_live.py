"""The sandbox on a real control plane: the built kube-apiserver, controller-manager, scheduler, etcd and kwok.

Needs the tools of `make sandbox-tools` (skipped with the reason without them; in CI nothing skips). Each
test's sandboxes live in its tmp_path, and each test checks that nothing of them is left: no folder, and no
process whose environment names the test's sandboxes' folder (THEMELIO_SANDBOX_DIR, which every command and
every process of its sandboxes inherit; a check of the tests only: the sandbox itself knows its processes by
the identities its supervisor recorded).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.builders import fleet_of, plan_of, write_fleet
from tests.live_sandbox import (
    CONTROL_PLANE_TOOLS,
    DRA_CLUSTER,
    charts,
    control_plane_tools,
    processes_of,
    sandbox_command,
    sandboxes_folder,
)
from tests.requirements import ROOT, unavailable
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox import cluster as sandbox_cluster
from themelio_gpu.sandbox import providers
from themelio_gpu.sandbox.errors import MissingToolError
from themelio_gpu.sandbox.nodes import CONTROL_PLANE_NODE, SYSTEM_NODE
from themelio_gpu.sandbox.tools import Toolbox, toolbox


@pytest.fixture(scope="module")
def tools() -> Toolbox:
    return control_plane_tools()


@pytest.fixture
def sandboxes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from sandboxes_folder(tmp_path, monkeypatch)


def _plan(tmp_path: Path, definition: dict[str, Any]) -> ClusterPlan:
    return plan_of(fleet_of(tmp_path, definition), definition["name"])


def _kubectl(tools: Toolbox, sandbox: sandbox_cluster.Sandbox, *args: str) -> Any:
    result = subprocess.run(
        [str(tools.binary(*sandbox_cluster.KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), *args, "-o", "json"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    return json.loads(result.stdout)


def test_up_registers_every_node_and_gpu_on_the_real_api_server_and_down_leaves_nothing(
    tools: Toolbox, sandboxes: Path, tmp_path: Path
) -> None:
    plan = _plan(tmp_path, DRA_CLUSTER)
    sandbox = sandbox_cluster.up(plan, tools, charts(tmp_path), say=lambda _: None, probe_components=False)
    try:
        version = json.loads(
            subprocess.run(
                [
                    str(tools.binary(*sandbox_cluster.KUBECTL)),
                    "--kubeconfig",
                    str(sandbox.kubeconfig),
                    "get",
                    "--raw",
                    "/version",
                ],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            ).stdout
        )
        assert version["gitVersion"] == tools.tools["kubernetes-1.36"].version  # stamped: helm checks kubeVersion
        nodes = {n["metadata"]["name"]: n for n in _kubectl(tools, sandbox, "get", "nodes")["items"]}
        assert sorted(nodes) == ["control-plane-0", "gpu-a", "live-sliced-0", "live-sliced-1", "system-0"]
        for node in nodes.values():
            assert "nvidia.com/gpu" not in node["status"]["allocatable"]  # DRA pools: no device plugin name
            ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
            assert ready.get("Ready") == "True", node["metadata"]["name"]  # kwok keeps it Ready
        assert nodes["live-sliced-1"]["spec"]["taints"] == [t.as_object() for t in plan.pools[1].taints]
        assert "taints" not in nodes["system-0"]["spec"]
        slices = _kubectl(tools, sandbox, "get", "resourceslices")["items"]
        devices = {s["spec"]["nodeName"]: len(s["spec"]["devices"]) for s in slices}
        assert devices == {"gpu-a": 2, "live-sliced-0": 7, "live-sliced-1": 7}
        with urllib.request.urlopen(f"{sandbox.state()['chartRepository']}/index.yaml", timeout=30) as answer:
            index = answer.read().decode()
        assert "gpu-operator" in index and "dra-driver-nvidia-gpu" in index
        _quantities_read_back_as_canonical_quantity_writes_them(tools, sandbox)
        _one_field_manager_for_labels_and_taints_erases_the_labels(tools, sandbox, plan)
    finally:
        sandbox_cluster.down(plan.name, say=lambda _: None)
    assert not sandbox.folder.exists()
    assert not sandboxes.exists()  # the sandboxes' folder goes with its last sandbox
    assert not processes_of(sandboxes)


def _apply(tools: Toolbox, sandbox: sandbox_cluster.Sandbox, manager: str, document: dict[str, Any]) -> None:
    subprocess.run(
        [str(tools.binary(*sandbox_cluster.KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "apply",
         "--server-side", "--force-conflicts", "--field-manager", manager, "-f", "-"],
        input=json.dumps(document), capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip


def _quantities_read_back_as_canonical_quantity_writes_them(
    tools: Toolbox, sandbox: sandbox_cluster.Sandbox
) -> None:
    from themelio_gpu.k8s.quantity import canonical_quantity

    values = [0, 8, 64, 999, 1000, 1500, 2000, 64000, 1000000, 1234000]
    hard = {f"requests.example.com/q{v}": str(v) for v in values}
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "default"}}
    _apply(tools, sandbox, "probe", {**quota, "spec": {"hard": hard}})
    stored = _kubectl(tools, sandbox, "get", "resourcequota", "q", "-n", "default")["spec"]["hard"]
    assert {key: stored[key] for key in hard} == {
        f"requests.example.com/q{v}": canonical_quantity(v) for v in values
    }


def _one_field_manager_for_labels_and_taints_erases_the_labels(
    tools: Toolbox, sandbox: sandbox_cluster.Sandbox, plan: ClusterPlan
) -> None:
    """What the providers send for kubernetes_labels then kubernetes_node_taint on one node (server-side apply
    of metadata.labels, then of spec.taints, forced): under one manager the second erases the first's labels
    (#2247); under the stack's two managers (names.taint_field_manager) both stay."""
    node = "gpu-a"
    labels: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node, "labels": {"example.com/probe": "x"}},
    }
    taints: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
              "spec": {"taints": [{"key": "example.com/probe", "value": "x", "effect": "NoSchedule"}]}}  # fmt: skip
    _apply(tools, sandbox, "one-manager", labels)
    _apply(tools, sandbox, "one-manager", taints)
    after = _kubectl(tools, sandbox, "get", "node", node)
    assert "example.com/probe" not in after["metadata"]["labels"]  # the defect, as the API server does it
    _apply(tools, sandbox, plan.names.field_manager, labels)
    _apply(tools, sandbox, plan.names.taint_field_manager, taints)
    _apply(tools, sandbox, plan.names.field_manager, labels)
    after = _kubectl(tools, sandbox, "get", "node", node)
    assert after["metadata"]["labels"]["example.com/probe"] == "x"
    assert after["spec"]["taints"] == taints["spec"]["taints"]


def test_the_operator_run_is_the_build_of_the_version_the_deployments_image_names_through_a_rollout(
    tools: Toolbox, sandboxes: Path, tmp_path: Path
) -> None:
    """A GPU Operator chart upgrade changes its Deployment's image: the launcher replaces the running controller
    with the build of the new version, as the rollout replaces the pod; a version with no build runs nothing; a
    deleted Deployment stops it. The Deployment is made by hand here (the day-two suite upgrades the chart), with
    the environment the chart's gives the operator (without OPERATOR_NAMESPACE it ends at once and restarts every
    10 s: a version seen between two restarts is no running operator, so each version must stay up)."""
    from themelio_gpu.sandbox.operator_status import running_operator

    plan = _plan(tmp_path, DRA_CLUSTER)
    namespace = plan.operator_release.namespace
    sandbox = sandbox_cluster.up(plan, tools, charts(tmp_path), say=lambda _: None, probe_components=False)
    kubectl = [str(tools.binary(*sandbox_cluster.KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig)]

    def run(*args: str, stdin: str | None = None) -> None:
        subprocess.run([*kubectl, *args], input=stdin, capture_output=True, text=True, check=True, timeout=60)

    def log() -> str:
        return (sandbox.folder / "logs" / "gpu-operator.log").read_text(errors="replace")

    def runs(version: str | None, says: str = "", seconds: float = 90) -> None:
        deadline = time.monotonic() + seconds
        while (
            (found := running_operator(tools, sandbox)) != version or says not in log()
        ) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert found == version and says in log(), log()[-3000:]
        ended = log().count("the operator ended")
        time.sleep(12)  # longer than the launcher's restart delay: a crash loop shows here
        stable = running_operator(tools, sandbox) == version and log().count("the operator ended") == ended
        assert stable, log()[-3000:]

    try:
        run("create", "namespace", namespace)
        run("apply", "--server-side", "-f", str(charts(tmp_path) / "gpu-operator-v26.3.3" / "crds"))
        image = "nvcr.io/nvidia/gpu-operator:{}"
        container = {
            "name": "gpu-operator",
            "image": image.format("v26.3.3"),
            "env": [
                {"name": "OPERATOR_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}
            ],
        }
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "gpu-operator", "namespace": namespace},
            "spec": {
                "selector": {"matchLabels": {"app": "gpu-operator"}},
                "template": {"metadata": {"labels": {"app": "gpu-operator"}}, "spec": {"containers": [container]}},
            },
        }
        run("apply", "-f", "-", stdin=json.dumps(deployment))
        runs("v26.3.3")
        run("set", "image", "deployment/gpu-operator", "-n", namespace, f"gpu-operator={image.format('v26.7.0')}")
        runs("v26.7.0")
        run("set", "image", "deployment/gpu-operator", "-n", namespace, f"gpu-operator={image.format('v9.9.9')}")
        runs(None, says="the GPU Operator v9.9.9: no build of it here")
        run("set", "image", "deployment/gpu-operator", "-n", namespace, f"gpu-operator={image.format('v26.7.0')}")
        runs("v26.7.0")
        run("delete", "deployment", "gpu-operator", "-n", namespace)
        runs(None, says="the Deployment is deleted: the operator is stopped")
    finally:
        sandbox_cluster.down(plan.name, say=lambda _: None)


def test_after_the_control_plane_restarts_kwok_manages_every_node_at_once(
    tools: Toolbox, sandboxes: Path, tmp_path: Path
) -> None:
    """A Kubernetes upgrade restarts the control plane, kwok (every node's stand-in kubelet) with it; the new kwok
    takes every node's lease at once (the old one's are deleted), so a pod is started and removed as before. Seen
    in the day-two slice: without it, the leases stayed the old kwok's for 200 s, pods were neither started nor
    removed meanwhile, and the destroy after the upgrade waited 150 s for the GPU Operator's pods."""
    from themelio_gpu.sandbox import control_plane

    plan = _plan(tmp_path, DRA_CLUSTER)
    sandbox = sandbox_cluster.up(plan, tools, charts(tmp_path), say=lambda _: None, probe_components=False)
    try:

        def holders() -> set[str]:
            leases = _kubectl(tools, sandbox, "get", "leases", "--namespace", "kube-node-lease")["items"]
            return {str(lease["spec"].get("holderIdentity")) for lease in leases}

        before = holders()
        assert len(before) == 1
        control_plane.restart(tools, sandbox, lambda _: None)
        deadline = time.monotonic() + 60  # a third of the lease's 200 s: an old kwok's lease cannot have lapsed
        while (not (now := holders()) or now == before) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(now) == 1 and now != before, (before, now)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "after", "namespace": "default"},
               "spec": {"nodeName": SYSTEM_NODE, "containers": [{"name": "c", "image": "none"}]}}  # fmt: skip
        subprocess.run(
            [str(tools.binary(*sandbox_cluster.KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "create", "-f", "-"],
            input=json.dumps(pod), capture_output=True, text=True, check=True, timeout=60,
        )  # fmt: skip
        while time.monotonic() < deadline:
            phase = _kubectl(tools, sandbox, "get", "pod", "after", "--namespace", "default")["status"].get(
                "phase"
            )
            if phase == "Running":
                break
            time.sleep(0.5)
        assert phase == "Running"
    finally:
        sandbox_cluster.down(plan.name, say=lambda _: None)


def test_an_old_kubernetes_without_the_gate_drops_extended_resource_name_as_validate_says(
    tools: Toolbox, sandboxes: Path, tmp_path: Path
) -> None:
    """The rule `validate` enforces for 1.34/1.35 (the gate on every component), shown on the real API server:
    emulating 1.35 with DRAExtendedResource off, a DeviceClass's extendedResourceName is silently dropped;
    with the gate on (as the cluster file declares), it is kept."""
    gated = {
        "DRAExtendedResource": {
            "components": ["kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubelet"]
        }
    }
    plan = _plan(tmp_path, {**DRA_CLUSTER, "kubernetesVersion": "1.35", "featureGates": gated})
    ungated = plan.definition.model_copy(update={"feature_gates": type(plan.definition.feature_gates)()})
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "probe"},
        "spec": {"extendedResourceName": "nvidia.com/probe", "selectors": [{"cel": {"expression": "true"}}]},
    }
    kept = {}
    for label, definition in (("ungated", ungated), ("gated", plan.definition)):
        import dataclasses

        variant = dataclasses.replace(plan, definition=definition)
        sandbox = sandbox_cluster.up(variant, tools, charts(tmp_path), say=lambda _: None, probe_components=False)
        try:
            subprocess.run(
                [str(tools.binary(*sandbox_cluster.KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "create",
                 "-f", "-"], input=json.dumps(device_class), capture_output=True, text=True, check=True, timeout=60,
            )  # fmt: skip
            stored = _kubectl(tools, sandbox, "get", "deviceclass", "probe")
            kept[label] = stored["spec"].get("extendedResourceName")
        finally:
            sandbox_cluster.down(plan.name, say=lambda _: None)
    assert kept == {"ungated": None, "gated": "nvidia.com/probe"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_port_in_use_is_one_message_and_nothing_starts(tools: Toolbox, sandboxes: Path, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = sandbox_command(tmp_path, sandboxes, "up", "live", "--port", str(port))
        _out, err = process.communicate(timeout=120)
    assert process.returncode == 2, err
    assert (
        err.strip() == f"sandbox: port {port} on 127.0.0.1 is in use: choose another with --port, or leave it out"
    )
    assert not (sandboxes / "live").exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_up_leaves_no_process_port_or_folder(
    tools: Toolbox, sandboxes: Path, tmp_path: Path, signum: signal.Signals
) -> None:
    port = _free_port()
    process = sandbox_command(tmp_path, sandboxes, "up", "live", "--port", str(port))
    deadline = time.monotonic() + 120
    pids = sandboxes / "live" / "kwok" / "clusters" / "themelio-live" / "pids"
    while time.monotonic() < deadline and not list(pids.glob("*.pid")):
        time.sleep(0.1)  # the control plane's processes are starting
    assert list(pids.glob("*.pid")), "the control plane never started"
    process.send_signal(signum)
    _out, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signum, err
    assert err.strip().splitlines()[-1] == f"interrupted ({signal.Signals(signum).name})"
    assert not (sandboxes / "live").exists()
    assert not processes_of(sandboxes)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))  # the API server's port is free again


def test_apply_then_an_edit_plans_exit_2_and_applies_and_down_leaves_nothing_of_the_stack(
    tools: Toolbox, sandboxes: Path, tmp_path: Path
) -> None:
    """The user's loop on a sandbox, through the CLI: up, apply (the plan after it empty), an edit to the
    cluster file makes `plan` exit 2 with the change shown, apply again, down with nothing of the stack left."""
    try:
        toolbox((*CONTROL_PLANE_TOOLS, *providers.provider_tools()))
    except MissingToolError as error:
        unavailable(str(error))

    definition = DRA_CLUSTER

    def sandbox(*args: str) -> subprocess.CompletedProcess[str]:
        process = sandbox_command(tmp_path, sandboxes, *args, definitions=[definition])
        out, err = process.communicate(timeout=600)
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)

    assert sandbox("up", "live").returncode == 0
    try:
        applied = sandbox("apply", "live")
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert "sandbox: plan: ok" in applied.stdout and "No changes." in applied.stdout
        definition = {**DRA_CLUSTER, "nodePools": [{**DRA_CLUSTER["nodePools"][0], "labels": {"example.com/team": "a"}},
                                               DRA_CLUSTER["nodePools"][1]]}  # fmt: skip
        planned = sandbox("plan", "live")
        assert planned.returncode == 2, planned.stdout + planned.stderr
        assert "Plan: 0 to add, 1 to change, 0 to destroy." in planned.stdout
        assert re.search(r'\+ "example.com/team" += "a"', planned.stdout), planned.stdout
        assert sandbox("apply", "live").returncode == 0
    finally:
        down = sandbox("down", "live")
    assert down.returncode == 0, down.stdout + down.stderr
    assert "0 object(s) the stack created are left after destroy" in down.stdout
    assert not (sandboxes / "live").exists()


def test_the_real_scheduler_places_every_offering_where_the_model_says(
    tools: Toolbox, sandboxes: Path, tmp_path: Path
) -> None:
    """ADR-0023's promise on the real scheduler: `nvidia.com/<offering>: 1` gets a device of its product and
    MIG profile through DRA, on a pool that serves it, one the offline CEL evaluator agrees matches its class;
    more devices than a node has stays Pending, for the scheduler's own reason. Quota admission answers each
    path as the quota model says, the grant ending with a device. The charts' DaemonSets, and the operands
    NVIDIA's GPU Operator controller creates, run where verify predicts from the installed charts; the whole GPUs
    are NVIDIA's DRA driver's (on the mock NVML), the MIG devices the sandbox's, and every row says whose. The
    platform trial's claims get devices the offline trial predicts. `--json` is the JSON alone on stdout."""
    from themelio_gpu.sandbox import admission, daemonsets, deploy, nvidia_report, probe
    from themelio_gpu.sandbox import trial as sandbox_trial
    from themelio_gpu.sandbox.outcomes import Kind
    from themelio_gpu.verify.sandbox_prediction import predict

    try:
        toolbox((*CONTROL_PLANE_TOOLS, *providers.provider_tools()))
    except MissingToolError as error:
        unavailable(str(error))
    catalog, stacks = write_fleet(tmp_path, [DRA_CLUSTER])
    plan = plan_of(fleet_of(tmp_path, DRA_CLUSTER), "live")
    sandbox = sandbox_cluster.up(plan, tools, charts(tmp_path), say=lambda _: None, probe_components=False)
    try:
        steps = deploy.execute("apply", "terraform", plan, sandbox, tools, catalog, stacks)
        assert [s.code for s in steps] == [0, 0, 0], steps[-1].output[-3000:]
        rows = probe.probe(plan, sandbox, tools)
        quota = admission.quota_probe(plan, sandbox, tools)
        nvidia = nvidia_report.read(plan, sandbox, tools)
        daemons = daemonsets.compare(tools, sandbox, predict(plan, sandbox, tools), operator_absent="")
        fleet = fleet_of(tmp_path, DRA_CLUSTER)
        offerings = [o for o in plan.offerings if o.name in ("nvidia.com/a100", "nvidia.com/a100-mig-1g.5gb")]
        report, trial = sandbox_trial.run(fleet.catalog, plan, offerings, sandbox, tools)
        env = dict(os.environ, THEMELIO_SANDBOX_DIR=str(sandboxes), THEMELIO_CHART_CACHE=str(charts(tmp_path)))
        command = [sys.executable, "-m", "themelio_gpu", "sandbox", "probe", "live", "--json", "--catalog",
                   str(catalog), "--stacks-dir", str(stacks)]  # fmt: skip
        as_json = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    finally:
        deploy.execute("destroy", "terraform", plan, sandbox, tools, catalog, stacks)
        sandbox_cluster.down(plan.name, say=lambda _: None)
    assert all(row.agrees for row in rows), probe.as_table(rows)
    assert all(q.agrees for q in quota), admission.quota_table(quota)
    assert sum(row.cel_checked for row in rows) >= 2  # the whole GPU and the MIG slice, asked of the evaluator
    assert daemons and all(d.agrees for d in daemons), daemonsets.as_table(daemons)
    # NVIDIA's code: the operator's controller ran and made its operands (compared above with the rest, none
    # verify's prediction only); the whole GPUs are the DRA driver's, the MIG devices the sandbox's, no node has
    # both, and every difference between the two is explained.
    assert all(d.compared or d.note.startswith("not compared") for d in daemons), daemonsets.as_table(daemons)
    assert nvidia.ok, nvidia_report.as_text(nvidia)
    assert nvidia.operator is not None and nvidia.operator.running and nvidia.operator.resources
    assert all(r.state for r in nvidia.operator.resources), nvidia_report.as_text(nvidia)
    validators = [d for d in daemons if d.name in ("nvidia-operator-validator", "nvidia-dra-validator")]
    assert validators and all(d.real for d in validators), daemonsets.as_table(daemons)  # made by the operator
    assert nvidia.publishers == {"gpu-a": "driver", "live-sliced-0": "sandbox", "live-sliced-1": "sandbox"}
    assert (nvidia.by_driver, nvidia.whole_gpus) == (2, 2)
    plugin = next(d for d in daemons if d.name.endswith("kubelet-plugin"))
    assert plugin.real and "gpu-a" in plugin.real and not {SYSTEM_NODE, CONTROL_PLANE_NODE} & set(plugin.elsewhere)
    assert len(trial) == 2 and all(r.agrees and r.allocated and r.claims for r in trial), sandbox_trial.as_text(
        report, trial
    )
    placed = {row.key: row for row in rows}
    whole = placed["nvidia.com/a100"]
    assert (whole.real and whole.real.pools, whole.devices, whole.slices) == (
        ("whole",),
        ["NVIDIA A100-SXM4-40GB whole GPU 40Gi"],
        "driver",
    )
    sliced = placed["nvidia.com/a100-mig-1g.5gb"]
    assert (
        sliced.real and sliced.real.pools == ("sliced",) and sliced.devices == ["NVIDIA A100-SXM4-40GB 1g.5gb 5Gi"]
    )
    assert sliced.slices == "sandbox"
    more = placed["nvidia.com/a100 x3"].real  # two GPUs a node: three stay Pending, as the scheduler says
    assert more and more.kind is Kind.PLACEMENT_PENDING and "nodes are available" in more.reason
    grant = next(q for q in quota if q.tried == "the grant (nvidia.com/a100)")
    assert grant.devices == ["NVIDIA A100-SXM4-40GB whole GPU 40Gi"] and grant.slices == "driver"
    one_more = next(q for q in quota if q.grant == "nvidia.com/a100" and q.tried.startswith("one more"))
    assert (
        one_more.real
        and one_more.real.kind is Kind.REFUSED
        and one_more.real.keys == ("requests.nvidia.com/a100",)
    )
    assert any(q.real and q.real.kind is Kind.QUOTA_PENDING for q in quota)  # the scheduler said quota, parsed
    assert as_json.returncode == 0, as_json.stderr
    report_json = json.loads(as_json.stdout)  # the JSON alone on stdout
    assert len(report_json["placement"]) == len(rows) and as_json.stderr.startswith("sandbox probe: live:")
