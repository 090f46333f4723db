"""`sandbox upgrade` without a sandbox: the real plan read from Terraform's JSON and held against `changed`'s,
what a workload's outcome is, the control plane's new flags, the stack's forced applies, and the bad input it
refuses in one line before anything starts (tests/test_day_two.py runs it on the real control plane)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import day_two
from tests.requirements import ROOT
from themelio_gpu.sandbox import cluster_changes, real_plan, workloads


def _change(address: str, actions: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "address": address,
        "mode": "managed",
        "change": {"actions": actions, **extra.pop("change", {})},
        **extra,
    }


SHOWN = {
    "format_version": "1.2",
    "resource_changes": [
        _change('kubernetes_manifest.device_class["old"]', ["delete"]),
        _change('kubernetes_manifest.device_class["new"]', ["create"]),
        _change(
            'kubernetes_labels.node_labels_b["n"]', ["update"], previous_address='kubernetes_labels.node_labels_a["n"]'
        ),
        _change(
            'kubernetes_node_taint.node_taints_b["n"]', ["no-op"],
            previous_address='kubernetes_node_taint.node_taints_a["n"]',
        ),
        _change("helm_release.gpu_operator", ["no-op"]),
        _change(
            "kubernetes_manifest.karpenter_node_pool_x", ["delete", "create"],
            change={"replace_paths": [["manifest", "metadata", "name"]]}, action_reason="replace_because_cannot_update",
        ),
        _change("kubernetes_manifest.karpenter_node_pool_y", ["update"]),
    ],
    "resource_drift": [_change("kubernetes_manifest.karpenter_node_pool_y", ["update"])],
}  # fmt: skip
PREDICTED = {
    "stacks": [
        {
            "name": "c",
            "resources": [
                {"address": 'kubernetes_manifest.device_class["old"]', "action": "destroy", "forced_by": []},
                {"address": 'kubernetes_manifest.device_class["new"]', "action": "create", "forced_by": []},
                {"address": 'kubernetes_labels.node_labels_b["n"]', "action": "update",
                 "previous_address": 'kubernetes_labels.node_labels_a["n"]', "forced_by": []},
                {"address": 'kubernetes_node_taint.node_taints_b["n"]', "action": "move",
                 "previous_address": 'kubernetes_node_taint.node_taints_a["n"]', "forced_by": []},
                {"address": "kubernetes_manifest.karpenter_node_pool_x", "action": "replace",
                 "forced_by": [{"attribute": "manifest.metadata.name", "source": "https://example.com"}]},
            ],
        }
    ]
}  # fmt: skip


def test_the_real_plan_and_the_prediction_agree_address_by_address() -> None:
    plan = real_plan.read_plan(SHOWN)
    assert {a: c.action for a, c in plan.changes.items()} == {
        'kubernetes_manifest.device_class["old"]': "destroy",
        'kubernetes_manifest.device_class["new"]': "create",
        'kubernetes_labels.node_labels_b["n"]': "update",
        'kubernetes_node_taint.node_taints_b["n"]': "move",
        "kubernetes_manifest.karpenter_node_pool_x": "replace",
        "kubernetes_manifest.karpenter_node_pool_y": "update",
    }
    rows = real_plan.compare(plan, real_plan.predicted_changes(PREDICTED, "c"))
    assert [r.address for r in rows if not r.agrees] == []
    # The one update changed does not predict is drift it cannot see: shown as such, not a disagreement.
    drifted = next(r for r in rows if r.address.endswith("node_pool_y"))
    assert (drifted.predicted, drifted.drift) == (real_plan.NO_CHANGE, "update")
    replaced = next(r for r in rows if r.real == "replace")
    assert real_plan.describe(replaced) == "replace: manifest.metadata.name; delete, create"


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda r: r[0].update(action="update"), "the real plan says destroy, changed says update"),
        (lambda r: r.pop(1), "the real plan says create, changed says no change"),
        (lambda r: r[2].update(previous_address=None), "moved from kubernetes_labels.node_labels_a"),
        (
            lambda r: r[4].update(forced_by=[{"attribute": "manifest.kind", "source": "x"}]),
            "replaced for manifest.metadata.name in the real plan, for manifest.kind as changed says",
        ),
    ],
)
def test_a_wrong_prediction_is_a_disagreement(edit: Any, problem: str) -> None:
    predicted = json.loads(json.dumps(PREDICTED))
    edit(predicted["stacks"][0]["resources"])
    rows = real_plan.compare(real_plan.read_plan(SHOWN), real_plan.predicted_changes(predicted, "c"))
    assert any(problem in p for r in rows for p in r.problems), [r.problems for r in rows]


def test_a_class_that_loses_its_extended_resource_name_is_a_disagreement() -> None:
    """A Kubernetes upgrade that turned DRAExtendedResource off would leave the classes without their names."""
    report = {"ok": True, "classes_before": {"a.example": "example.com/a"}, "classes_after": {"a.example": ""}}
    assert day_two.disagreements(report, day_two.Expected({})) == [
        "DeviceClass a.example: extendedResourceName 'example.com/a' before, '' after"
    ]
    report["classes_after"] = report["classes_before"]
    assert day_two.disagreements(report, day_two.Expected({})) == []


BOUND = workloads.Seen("p", "uid-1", "node-a", "Running", "", "cls", ("node-a/gpu-0",), "claim-1")


@pytest.mark.parametrize(
    ("after", "published", "reconfigured", "outcome"),
    [
        (BOUND, {"node-a/gpu-0"}, set(), workloads.KEPT),
        (workloads.Seen(), set(), set(), "evicted: no pod left"),
        (
            workloads.Seen("q", "uid-2", "", "Pending", "0/3 nodes"),
            set(),
            set(),
            "evicted, Pending after: 0/3 nodes",
        ),
        (workloads.Seen("q", "uid-2", "node-b", "Running"), set(), set(), "evicted, running again on node-b"),
        (workloads.Seen("p", "uid-1", "node-a", "Running", "", "cls", (), ""), set(), set(), "claim deallocated"),
        (BOUND, set(), set(), "device gone from its node's ResourceSlice: node-a/gpu-0"),
        (BOUND, {"node-a/gpu-0"}, {"node-a"}, "lost its device: the MIG Manager re-created"),
    ],
)
def test_what_an_upgrade_did_to_a_workload(
    after: workloads.Seen, published: set[str], reconfigured: set[str], outcome: str
) -> None:
    assert workloads.outcome(BOUND, after, published, reconfigured).startswith(outcome)


def test_a_workload_that_never_ran_is_not_disturbed() -> None:
    pending = workloads.Seen("p", "uid-1", "", "Pending", "cannot allocate all claims")
    assert workloads.outcome(pending, pending, set()) == "Pending before"
    assert "Pending before" in workloads.UNDISTURBED


def _driver_daemonset(image: str, generation: int = 2, observed: int = 2, updated: int = 3) -> dict[str, Any]:
    return {
        "metadata": {"generation": generation},
        "spec": {"template": {"spec": {"containers": [{"image": image}]}}},
        "status": {"observedGeneration": observed, "updatedNumberScheduled": updated, "desiredNumberScheduled": 3},
    }


@pytest.mark.parametrize(
    ("daemonset", "states", "going"),
    [
        (_driver_daemonset("nvcr.io/nvidia/driver:595.91.07-ubuntu24.04"), {"a": "upgrade-done"}, False),
        (_driver_daemonset("nvcr.io/nvidia/driver:580.126.20-ubuntu24.04"), {"a": "upgrade-done"}, True),
        (_driver_daemonset("nvcr.io/nvidia/driver:595.91.07-ubuntu24.04", observed=1), {}, True),
        (_driver_daemonset("nvcr.io/nvidia/driver:595.91.07-ubuntu24.04", updated=2), {}, True),
        (_driver_daemonset("nvcr.io/nvidia/driver:595.91.07-ubuntu24.04"), {"a": "pod-restart-required"}, True),
        (_driver_daemonset("nvcr.io/nvidia/driver:595.91.07-ubuntu24.04"), {"a": "upgrade-failed"}, False),
        (None, {}, False),
    ],
)  # fmt: skip
def test_nvidias_driver_upgrade_is_over_when_every_driver_pod_and_node_says_so(
    daemonset: dict[str, Any] | None, states: dict[str, str], going: bool
) -> None:
    """Right after the apply the ClusterPolicy asks for the new driver while the DaemonSet still runs the old one
    (the operator has not reconciled yet): that is an upgrade to come, not one done."""
    from themelio_gpu.sandbox.driver_upgrade import _in_progress

    assert _in_progress("595.91.07", daemonset, states) is going


def test_the_control_plane_gets_the_new_version_flags_and_keeps_its_others() -> None:
    saved = [
        {
            "kind": "KwokctlConfiguration",
            "components": [
                {"name": "etcd", "args": ["--data-dir=/x"]},
                {
                    "name": "kube-apiserver",
                    "args": [
                        "--etcd-prefix=/",
                        "--emulated-version=1.34",
                        "--feature-gates=DRAExtendedResource=true",
                    ],
                },
            ],
        },
        {"kind": "Stage"},
    ]
    flags = {"kube-apiserver": ["emulated-version=1.35"], "kube-controller-manager": [], "kube-scheduler": []}
    changed = cluster_changes._with_flags(saved, flags)
    components = {c["name"]: c["args"] for c in changed[0]["components"]}
    assert components == {
        "etcd": ["--data-dir=/x"],
        "kube-apiserver": ["--etcd-prefix=/", "--emulated-version=1.35"],
    }
    assert changed[0]["componentsPatches"] == [
        {"name": "kube-apiserver", "extraArgs": [{"key": "emulated-version", "value": "1.35"}]}
    ]


def test_the_stack_forces_its_device_classes_and_node_pools_back(stack_json: Any) -> None:
    """A hand edit (kubectl replace, edit, patch) takes fields over under another field manager; without a forced
    apply the next apply fails on the conflict (seen on the sandbox, docs/day-two.md)."""
    east = stack_json("gpu-east")["resource"]["kubernetes_manifest"]
    assert east["device_class"]["field_manager"] == {"force_conflicts": True, "name": "themelio-gpu-stacks"}
    west = stack_json("gpu-west")["resource"]["kubernetes_manifest"]
    pools = [m for name, m in west.items() if name.startswith("karpenter_node_pool_")]
    assert pools and all(m["field_manager"]["force_conflicts"] is True for m in pools)


# --- bad input: one line each, before anything starts --------------------------------------------------------


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    day_two.scratch_repository(repo)
    return repo


def _upgrade(repo: Path, ref: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, THEMELIO_SANDBOX_DIR=str(tmp_path / "sandboxes"))
    return subprocess.run(
        [sys.executable, "-m", "themelio_gpu", "sandbox", "upgrade", day_two.CLUSTER, "--from", ref,
         *day_two.fleet_flags(repo), *extra],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def test_a_revision_that_does_not_exist_is_one_line(repository: Path, tmp_path: Path) -> None:
    result = _upgrade(repository, "no-such-revision", tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.strip().splitlines() == [
        f"sandbox: --from no-such-revision: no such revision in {repository.resolve()} (fetch it first, e.g. git "
        "fetch origin)"
    ]
    assert not (tmp_path / "sandboxes").exists()


def test_a_revision_without_the_cluster_is_one_line(repository: Path, tmp_path: Path) -> None:
    first = day_two.git(repository, "rev-parse", "HEAD").strip()
    other = repository / "stacks" / "day3.yaml"
    other.write_text((repository / day_two.STACK_FILE).read_text().replace("name: day2", "name: day3"))
    day_two.git(repository, "add", "-A")
    day_two.git(repository, "commit", "-q", "-m", "a cluster more")
    env = dict(os.environ, THEMELIO_SANDBOX_DIR=str(tmp_path / "sandboxes"))
    result = subprocess.run(
        [sys.executable, "-m", "themelio_gpu", "sandbox", "upgrade", "day3", "--from", first,
         *day_two.fleet_flags(repository)],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"sandbox: --from {first}: {first} has no cluster day3 (its clusters: day2)"
    ]


def test_a_dirty_work_tree_is_one_line(repository: Path, tmp_path: Path) -> None:
    stack = repository / day_two.STACK_FILE
    stack.write_text(stack.read_text().replace("gpusPerNode: 8", "gpusPerNode: 6", 1))
    (repository / "stacks" / "draft.yaml").write_text("name: draft\n")
    result = _upgrade(repository, "HEAD", tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "sandbox: the work tree has uncommitted changes (stacks/day2.yaml, stacks/draft.yaml): commit or stash them; "
        "an upgrade goes from one revision to another, as a pipeline's does"
    ]


def test_cdktf_cannot_apply_a_saved_plan(repository: Path, tmp_path: Path) -> None:
    result = _upgrade(repository, "HEAD", tmp_path, "--with", "cdktf")
    assert result.returncode == 2
    assert "invalid choice: 'cdktf'" in result.stderr


def test_the_gpu_operator_upgrades_its_crds_with_the_chart(stack_json: Any) -> None:
    """Helm never upgrades a chart's crds/: the chart's pre-upgrade hook does (operator.upgradeCRD), and every
    stack says so in the values it installs (the GPU Operator scenario shows the CRDs after an upgrade)."""
    for cluster in ("gpu-east", "gpu-lab", "gpu-west"):
        values = yaml.safe_load(stack_json(cluster)["resource"]["helm_release"]["gpu_operator"]["values"][0])
        assert values["operator"] == {"upgradeCRD": True}, cluster


@pytest.mark.parametrize(
    ("type_", "config", "action", "section"),
    [
        ("kubernetes_manifest", {"manifest": {"kind": "DeviceClass"}}, "destroy", "an-offering-removed"),
        ("kubernetes_manifest", {"manifest": {"kind": "DeviceClass"}}, "replace", "an-offering-renamed"),
        ("helm_release", {"chart": "nvidia-dra-driver-gpu"}, "destroy", "the-dra-driver-chart-renamed"),
        ("helm_release", {"chart": "gpu-operator"}, "replace", "the-gpu-operator-upgraded"),
        ("kubernetes_node_taint", {"metadata": {"name": "n"}}, "destroy", "a-pool-removed"),
        ("kubernetes_manifest", {"manifest": {"kind": "NodePool", "apiVersion": "karpenter.sh/v1"}}, "destroy",
         "a-pool-removed"),
    ],
)  # fmt: skip
def test_a_dangerous_change_points_at_its_day_two_scenario(
    type_: str, config: dict[str, Any], action: str, section: str
) -> None:
    from themelio_gpu.changes.dangerous import danger_of
    from themelio_gpu.changes.stacks import Instance

    danger = danger_of(Instance(f"{type_}.x", f"{type_}.x", type_, None, config), action)
    assert danger is not None and danger.scenario == f"docs/day-two.md#{section}"
    headings = {
        "-".join(line.lstrip("#").strip().lower().replace("`", "").split())
        for line in (ROOT / "docs" / "day-two.md").read_text().splitlines()
        if line.startswith("### ")
    }
    assert section in headings


@pytest.mark.parametrize(
    ("before", "after", "dangerous"),
    [
        ({"version": "v26.3.3"}, {"version": "v26.7.0"}, True),
        ({"version": "v26.7.0", "values": ["driver: {version: 580.126.20}\n"]},
         {"version": "v26.7.0", "values": ["driver: {version: 595.91.07}\n"]}, True),
        ({"version": "v26.7.0", "values": ["driver: {version: 580.126.20}\n"]},
         {"version": "v26.7.0", "values": ["driver: {version: 580.126.20}\ndcgmExporter: {enabled: false}\n"]},
         False),
        # The operands' tolerations changed (a cluster's own values): the driver DaemonSet's template with them.
        ({"version": "v26.7.0", "values": ["daemonsets: {tolerations: [{key: a}, {key: b}]}\n"]},
         {"version": "v26.7.0", "values": ["daemonsets: {tolerations: [{key: a}]}\n"]}, True),
        # NFD's worker tolerations changed (a tainted pool added or removed): the driver's template is not.
        ({"version": "v26.7.0", "values": ["daemonsets: {tolerations: [{operator: Exists}]}\n"
                                           "node-feature-discovery: {worker: {tolerations: [{key: a}]}}\n"]},
         {"version": "v26.7.0", "values": ["daemonsets: {tolerations: [{operator: Exists}]}\n"
                                           "node-feature-discovery: {worker: {tolerations: []}}\n"]}, False),
    ],
)  # fmt: skip
def test_a_gpu_operator_chart_or_driver_update_is_dangerous_and_says_which_pods_nvidia_deletes(
    before: dict[str, Any], after: dict[str, Any], dangerous: bool
) -> None:
    """Seen on the sandbox with NVIDIA's own controller: a new chart brings a new driver, whose rolling upgrade
    deletes the pods NVIDIA's filter calls GPU pods and leaves the others running (docs/day-two.md)."""
    from themelio_gpu.changes.dangerous import danger_of
    from themelio_gpu.changes.stacks import Instance

    def release(config: dict[str, Any]) -> Instance:
        body = {"chart": "gpu-operator", "name": "gpu-operator", "namespace": "gpu-operator", **config}
        return Instance("helm_release.gpu_operator", "helm_release.gpu_operator", "helm_release", None, body)

    danger = danger_of(release(before), "update", release(after))
    assert (danger is not None) is dangerous
    if danger is not None:
        assert danger.scenario == "docs/day-two.md#the-gpu-operator-upgraded"
        assert "nvidia.com/gpu*" in danger.why and "keep running while the" in danger.why
    other = Instance("helm_release.x", "helm_release.x", "helm_release", None, {"chart": "kueue", "version": "1"})
    assert danger_of(other, "update", Instance("helm_release.x", "helm_release.x", "helm_release", None,
                                               {"chart": "kueue", "version": "2"})) is None  # fmt: skip


def test_the_docs_figures_table_is_made_from_the_reports(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("day_two_table", ROOT / "scripts" / "day_two_table.py")
    assert spec is not None and spec.loader is not None
    day_two_table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(day_two_table)
    report = {
        "plan": [{"real": "update", "drift": ""}, {"real": "create", "drift": "delete"}],
        "disagreements": 0, "disturbed": 3, "workloads": [{}] * 10, "class_gaps": {"name nvidia.com/x": 1.2},
        "class_polls": 7, "second_plan": "no changes", "suite_seconds": 61.4, "seconds": {"apply": 5.2},
    }  # fmt: skip
    figures = tmp_path / "day-two.json"
    figures.write_text(json.dumps({"mig-layout": report, "interrupted": {"line": "..."}}))
    assert day_two_table.main(figures).splitlines()[2] == (
        "| mig-layout | 1 create, 1 update (1 drifted) | 0 of 2 addresses | 3 of 10 | name nvidia.com/x 1.2 s "
        "(7 polls) | no changes | 61 (5) |"
    )


def test_the_class_watch_measures_each_gap_and_each_name_two_classes_serve() -> None:
    """While the stack is applied: how long a class or a name was missing (its longest gap, to the end if it
    never came back), and in how many polls a name had two classes at once (the later one is picked)."""
    from themelio_gpu.sandbox.read_back import ClassWatch

    watch = ClassWatch(longest={"class a": 0.0, "name n": 0.0})
    watch.observe({"class a", "name n"}, 0.0)
    watch.observe({"class a"}, 1.0)  # n gone
    watch.observe({"class a", "class b", "name n"}, 3.0, {"n"})  # n back after 2 s, served by a and b
    watch.observe({"class b", "name n"}, 4.0, set())  # a gone, to the end
    watch.close(5.5)
    assert watch.longest == {"class a": 1.5, "name n": 2.0}
    assert watch.shared == {"n": 1}
