"""`sandbox probe`'s model side, without a cluster: every row's expectation is computed from the models (the
placement model, the CEL evaluator, the quota model), the cluster's words are parsed into outcomes, and the
comparisons fail where they must. The live half is tests/test_sandbox_live.py and tests/test_probe_mutations.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, fleet_of, plan_of
from tests.quota_model import ClusterModel, admits
from themelio_gpu.k8s.dra import implicit_name
from themelio_gpu.k8s.quota import claim_charges, exceeded, parse_exceeded, pod_charges
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.plan.quota import plan_quota, resolve_grants
from themelio_gpu.sandbox import admission, coverage
from themelio_gpu.sandbox.outcomes import Kind, Outcome, landed, no_fit, pod_outcome, refusal
from themelio_gpu.sandbox.placement import CEL, OPERATOR_CLASS, PLACEMENTS, planned_rows

FLEETS = Path(__file__).parent / "fixtures" / "fleets"
# What the API server says when quota admission refuses (apiserver admission/plugin/resourcequota, 1.36).
REFUSED = (
    'pods "q-1" is forbidden: exceeded quota: custom-resource-quota, requested: '
    "requests.nvidia.com/a100=1,requests.nvidia.com/gpu=1, used: requests.nvidia.com/a100=1,"
    "requests.nvidia.com/gpu=0, limited: requests.nvidia.com/a100=1,requests.nvidia.com/gpu=0"
)


def fixture_plans() -> list[tuple[str, ClusterPlan]]:
    found = []
    for folder in sorted(p for p in FLEETS.iterdir() if (p / "stacks").is_dir()):
        fleet = load_fleet(folder / "catalog" / "gpu-catalog.yaml", folder / "stacks")
        found += [(folder.name, plan) for plan in fleet.clusters]
    return found


def example(name: str) -> ClusterPlan:
    fleet = load_fleet(FLEETS / "example" / "catalog" / "gpu-catalog.yaml", FLEETS / "example" / "stacks")
    plan = fleet.cluster(name)
    assert plan is not None
    return plan


def rows_by_key(plan: ClusterPlan) -> dict[str, Any]:
    return {row.key: row for row in planned_rows(plan)}


# --- the keys quota admission charges, and its refusal ----------------------------------------------------


def test_the_charges_of_each_attempt_are_kubernetes_keys() -> None:
    assert pod_charges({"nvidia.com/a100": 1, "cpu": 2}) == {"requests.nvidia.com/a100": 1}
    full = claim_charges("a.example.com", "nvidia.com/a100")
    assert full == {
        "a.example.com.deviceclass.resource.k8s.io/devices": 1,
        f"requests.{implicit_name('a.example.com')}": 1,
        "requests.nvidia.com/a100": 1,
    }
    # The scheduler's claim for a pod that paid requests.nvidia.com/a100 is not charged it again.
    assert "requests.nvidia.com/a100" not in claim_charges(
        "a.example.com", "nvidia.com/a100", 1, "requests.nvidia.com/a100"
    )


def test_exceeded_names_every_listed_key_that_would_go_over_and_no_unlisted_one() -> None:
    hard = {"requests.nvidia.com/a100": "1", "requests.nvidia.com/gpu": "0"}
    charges = {"requests.nvidia.com/a100": 1, "requests.nvidia.com/gpu": 1, "requests.example.com/x": 5}
    assert exceeded(hard, {}, charges) == ("requests.nvidia.com/gpu",)
    assert exceeded(hard, {"requests.nvidia.com/a100": 1}, charges) == (
        "requests.nvidia.com/a100",
        "requests.nvidia.com/gpu",
    )
    assert exceeded({"requests.nvidia.com/a1OO": "1"}, {"requests.nvidia.com/a100": 9}, charges) == ()


def test_the_api_servers_refusal_is_parsed_for_its_keys_wherever_it_is_quoted() -> None:
    assert parse_exceeded(REFUSED) == (
        "custom-resource-quota",
        ("requests.nvidia.com/a100", "requests.nvidia.com/gpu"),
    )
    scheduler = f'running PreBind plugin "DynamicResources": create claim for extended resources q/x: {REFUSED}'
    assert parse_exceeded(scheduler) is not None
    assert parse_exceeded('pods "q-1" is forbidden: unable to validate against any security policy') is None


# --- the cluster's words as outcomes ---------------------------------------------------------------------


def _pod(node: str | None = None, condition: str | None = None) -> dict[str, Any]:
    pod: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"nodeName": node} if node else {}, "status": {}}
    if condition is not None:
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "message": condition}]
    return pod


def test_a_pending_pod_counts_as_refused_by_quota_only_when_the_scheduler_says_quota() -> None:
    pool_of = {"n": "whole"}.__getitem__
    assert pod_outcome(_pod("n"), [], pool_of) == landed(["whole"], "n")
    quota = pod_outcome(_pod(condition=f"running PreBind plugin: {REFUSED}"), [], pool_of)
    assert quota.kind is Kind.QUOTA_PENDING and quota.keys == (
        "requests.nvidia.com/a100",
        "requests.nvidia.com/gpu",
    )
    placement = "0/7 nodes are available: 3 node(s) had untolerated taint {nvidia.com/gpu: }. preemption: ..."
    assert pod_outcome(_pod(condition=placement), [], pool_of).kind is Kind.PLACEMENT_PENDING
    # The event says it when the condition has no message.
    event = {"involvedObject": {"name": "p"}, "reason": "FailedScheduling", "message": placement}
    assert pod_outcome(_pod(condition=""), [event], pool_of).kind is Kind.PLACEMENT_PENDING
    # A filter plugin's error is the filter stage saying no node fits (DRA's limit of 32 devices a claim).
    limit = 'running "DynamicResources" filter plugin: claim p/x: number of requested devices 57 exceeds the claim limit of 32'
    assert pod_outcome(_pod(condition=limit), [], pool_of).kind is Kind.PLACEMENT_PENDING
    assert pod_outcome(_pod(condition="binding rejected: something else"), [], pool_of).kind is Kind.UNPARSED
    assert pod_outcome(_pod(), [], pool_of).kind is Kind.TIMEOUT  # not decided: its own outcome


def test_a_claim_refused_on_the_pods_own_charge_is_not_the_schedulers_answer_yet() -> None:
    """The race seen on the sandbox under load: the claim the scheduler made for `nvidia.com/gpu` refused by
    `requests.nvidia.com/gpu`, which the pod itself already paid (the quota evaluator had not seen the pod yet);
    its next try is admitted. A refusal by a key the pod does not pay for is the answer."""
    from themelio_gpu.sandbox.outcomes import refused_on_its_own_charge

    own = (
        'running PreBind plugin "DynamicResources": resourceclaims "p-extended-resources-x" is forbidden: '
        "exceeded quota: gpu, requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, "
        "limited: requests.nvidia.com/gpu=1"
    )
    pod = _pod(condition=own)
    pod["spec"]["containers"] = [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    assert refused_on_its_own_charge(pod)
    assert not refused_on_its_own_charge({**pod, "spec": {**pod["spec"], "nodeName": "n"}})  # bound
    other = own.replace("requests.nvidia.com/gpu", "gpu.nvidia.com.deviceclass.resource.k8s.io/devices")
    assert not refused_on_its_own_charge({**pod, "status": _pod(condition=other)["status"]})
    placement = "0/7 nodes are available: 3 node(s) had untolerated taint {nvidia.com/gpu: }."
    assert not refused_on_its_own_charge({**pod, "status": _pod(condition=placement)["status"]})
    pod["spec"]["containers"] = [{"name": "c", "resources": {"limits": {"nvidia.com/a100": "1"}}}]
    assert not refused_on_its_own_charge(pod)  # asked by another name: the claim's charge is its own


def test_a_timeout_or_an_unparsed_reason_never_agrees_and_keys_and_pools_must_match() -> None:
    expected_pending = no_fit("no pool")
    assert Outcome(Kind.PLACEMENT_PENDING, reason="0/7 nodes are available").agrees_with(expected_pending)
    assert not Outcome(Kind.TIMEOUT).agrees_with(expected_pending)
    assert not Outcome(Kind.UNPARSED, reason="?").agrees_with(Outcome(Kind.UNPARSED))
    assert landed(["a"]).agrees_with(landed(["a", "b"]))
    assert not landed(["c"]).agrees_with(landed(["a", "b"]))
    assert not landed([]).agrees_with(landed([]))
    refused = refusal(REFUSED)
    assert refused.kind is Kind.REFUSED
    assert refused.agrees_with(Outcome(Kind.REFUSED, keys=("requests.nvidia.com/a100", "requests.nvidia.com/gpu")))
    assert not refused.agrees_with(Outcome(Kind.REFUSED, keys=("requests.nvidia.com/gpu",)))
    assert not refused.agrees_with(Outcome(Kind.QUOTA_PENDING, keys=refused.keys))  # refused where, matters
    assert refusal('pods "x" is invalid: spec.containers: Required value').kind is Kind.REFUSED_OTHER


# --- placement rows: from the models, never constants ----------------------------------------------------


def test_every_offering_alias_and_class_of_a_cluster_gets_its_rows() -> None:
    plan = example("gpu-east")
    rows = rows_by_key(plan)
    for name in plan.advertised_names:
        assert rows[name].model == PLACEMENTS
    classes = {c.name for c in plan.device_classes} | {c.name for c in plan.driver_classes}
    for device_class in classes:
        assert rows[implicit_name(device_class)].model == CEL
        assert rows[f"ResourceClaim of {device_class}"].ask.claim_class == device_class
    assert rows["nvidia.com/a100"].expected == landed(["a100-whole"])
    assert rows["nvidia.com/mig-1g.5gb"].expected == landed(["a100-mig"])  # the alias, where its offering is


def test_one_more_follows_the_largest_node_of_the_model_and_no_pool_fits_it(tmp_path: Path) -> None:
    for per_node in (2, 5):
        definition = cluster(
            nodePools=[{**cluster()["nodePools"][0], "gpusPerNode": per_node}], offerings=["nvidia.com/a100"]
        )
        rows = rows_by_key(plan_of(fleet_of(tmp_path, definition), "test"))
        more = rows[f"nvidia.com/a100 x{per_node + 1}"]
        assert more.expected.kind is Kind.PLACEMENT_PENDING and more.ask.count == per_node + 1


def test_a_pool_the_offerings_tolerations_miss_changes_the_expectation(tmp_path: Path) -> None:
    base = cluster()
    whole = base["nodePools"][0]
    reserved = {**whole, "taints": [{"key": "example.com/team", "value": "ml", "effect": "NoSchedule"}]}
    open_rows = rows_by_key(plan_of(fleet_of(tmp_path, base), "test"))
    closed_rows = rows_by_key(
        plan_of(fleet_of(tmp_path, cluster(nodePools=[reserved, base["nodePools"][1]])), "test")
    )
    assert open_rows["nvidia.com/a100"].expected == landed(["whole"])
    assert closed_rows["nvidia.com/a100"].expected.kind is Kind.PLACEMENT_PENDING
    assert closed_rows[implicit_name("a100-40gb.gpu.themelio.io")].expected.kind is Kind.PLACEMENT_PENDING


def test_a_class_row_follows_the_cel_evaluator_on_the_devices_the_sandbox_publishes(tmp_path: Path) -> None:
    """The chart's vfio class selects whole GPUs by type vfio, which no simulated node publishes; its mig class
    selects the MIG devices, wherever a pool publishes them."""
    rows = rows_by_key(plan_of(fleet_of(tmp_path, cluster()), "test"))
    assert rows["ResourceClaim of vfio.gpu.nvidia.com"].expected.kind is Kind.PLACEMENT_PENDING
    assert rows["ResourceClaim of mig.nvidia.com"].expected == landed(["sliced"])
    assert rows["ResourceClaim of gpu.nvidia.com"].expected == landed(["whole"])
    only_whole = cluster(nodePools=[cluster()["nodePools"][0]], offerings=["nvidia.com/a100"])
    rows = rows_by_key(plan_of(fleet_of(tmp_path, only_whole), "test"))
    assert rows["ResourceClaim of mig.nvidia.com"].expected.kind is Kind.PLACEMENT_PENDING


def test_the_operators_own_classes_are_shown_but_not_compared() -> None:
    fleet = load_fleet(
        FLEETS / "gpu-operator-mode" / "catalog" / "gpu-catalog.yaml", FLEETS / "gpu-operator-mode" / "stacks"
    )
    plan = fleet.cluster("gpu-next")
    assert plan is not None
    rows = rows_by_key(plan)
    assert rows["ResourceClaim of mig.nvidia.com"].uncompared == OPERATOR_CLASS
    assert not rows["nvidia.com/h100"].uncompared


def test_no_row_of_any_fixture_cluster_is_without_a_models_answer() -> None:
    for fleet_name, plan in fixture_plans():
        for row in planned_rows(plan):
            assert row.model, (fleet_name, plan.name, row.key)
            if row.expected.kind is Kind.LANDED:
                assert set(row.expected.pools) <= {p.name for p in plan.pools}, (fleet_name, row.key)
            else:
                assert row.expected.kind is Kind.PLACEMENT_PENDING and row.expected.reason, (fleet_name, row.key)


# --- the quota model's answers ---------------------------------------------------------------------------


def _quota_rows(plan: ClusterPlan, offering: str, hard: dict[str, str] | None = None) -> dict[str, Outcome]:
    quota = plan_quota(plan)
    grants, problems = resolve_grants(quota, plan, [(offering, 1)])
    assert not problems
    found = admission._attempts(plan, next(iter(grants)))
    answers = admission.expectations(plan, hard or quota.hard(grants), found)
    return {a.tried: answer for a, answer in zip(found, answers, strict=True)}


def test_the_grant_lands_one_more_is_refused_by_admission_and_every_other_path_by_its_keys() -> None:
    plan = example("gpu-east")
    answers = _quota_rows(plan, "nvidia.com/a100")
    assert answers["the grant (nvidia.com/a100)"] == landed(["a100-whole"])
    assert answers["one more (nvidia.com/a100)"] == Outcome(Kind.REFUSED, keys=("requests.nvidia.com/a100",))
    assert answers["pod asking for nvidia.com/gpu"] == Outcome(Kind.REFUSED, keys=("requests.nvidia.com/gpu",))
    # An implicit name is no key of the quota: admitted, then the claim the scheduler makes is refused.
    implicit = answers[f"pod asking for {implicit_name('a100-40gb-mig-1g.5gb.gpu.themelio.io')}"]
    assert implicit.kind is Kind.QUOTA_PENDING and implicit.keys == ("requests.nvidia.com/a100-mig-1g.5gb",)
    mig = answers[f"pod asking for {implicit_name('mig.nvidia.com')}"]
    assert mig == Outcome(Kind.QUOTA_PENDING, keys=("mig.nvidia.com.deviceclass.resource.k8s.io/devices",))
    assert answers["ResourceClaim of mig.nvidia.com"] == Outcome(
        Kind.REFUSED, keys=("mig.nvidia.com.deviceclass.resource.k8s.io/devices",)
    )
    # Without a device of its class, an admitted implicit-name pod is Pending for placement: no claim is made.
    assert answers[f"pod asking for {implicit_name('vfio.gpu.nvidia.com')}"].kind is Kind.PLACEMENT_PENDING


def test_a_device_the_grant_holds_is_not_there_for_the_namespaces_next_pod() -> None:
    """notebooks' L4 pool is one node with one GPU: once the grant holds it, a pod on the L4 class's implicit name
    finds no device, so the scheduler says no node fits before it makes any claim that quota could refuse."""
    fleet = load_fleet(FLEETS / "consumers" / "catalog" / "gpu-catalog.yaml", FLEETS / "consumers" / "stacks")
    plan = fleet.cluster("notebooks")
    assert plan is not None
    answers = _quota_rows(plan, "nvidia.com/l4")
    assert answers["the grant (nvidia.com/l4)"] == landed(["l4"])
    implicit = answers[f"pod asking for {implicit_name('l4.gpu.consumers.fixture.themelio.io')}"]
    assert implicit.kind is Kind.PLACEMENT_PENDING and "hold the devices of l4" in implicit.reason
    other = _quota_rows(plan, "nvidia.com/h100")[
        f"pod asking for {implicit_name('l4.gpu.consumers.fixture.themelio.io')}"
    ]
    assert other == Outcome(Kind.QUOTA_PENDING, keys=("requests.nvidia.com/l4",))  # the L4 is free there


def test_where_the_model_lets_the_grant_land_on_several_pools_the_next_answers_follow_where_it_did() -> None:
    """quota-chart-gpu's lab: `nvidia.com/gpu` may land on the A10G, A100 or L4 pool, and the L4 pool has one GPU.
    Once the grant took it, a pod on the L4 class's implicit name finds no device; had it landed elsewhere, the
    scheduler would make the pod's claim and quota would refuse it."""
    fleet = load_fleet(
        FLEETS / "quota-chart-gpu" / "catalog" / "gpu-catalog.yaml", FLEETS / "quota-chart-gpu" / "stacks"
    )
    plan = fleet.cluster("lab")
    assert plan is not None
    quota = plan_quota(plan)
    grants, _ = resolve_grants(quota, plan, [("nvidia.com/gpu", 1)])
    found = admission._attempts(plan, next(iter(grants)))
    implicit = next(a for a in found if a.tried == f"pod asking for {implicit_name('l4.gpu.themelio.io')}")
    answers = {}
    for pool in ("l4", "a100"):
        ledger = admission.Ledger(plan, quota.hard(grants))
        grant = ledger.answer(True, found[0])
        assert grant.kind is Kind.LANDED and {"l4", "a100"} <= set(grant.pools)
        ledger.observe(found[0], grant, landed([pool], "node"))
        answers[pool] = ledger.answer(False, implicit).kind
    assert answers == {"l4": Kind.PLACEMENT_PENDING, "a100": Kind.QUOTA_PENDING}


def test_the_quota_models_answers_follow_the_quota_not_a_constant() -> None:
    """The same attempts against a quota whose a100 key is misspelt: one more is admitted and lands, the class's
    own ResourceClaim too; nothing else changes."""
    plan = example("gpu-east")
    quota = plan_quota(plan)
    grants, _ = resolve_grants(quota, plan, [("nvidia.com/a100", 1)])
    hard = quota.hard(grants)
    misspelt = {("requests.nvidia.com/a1OO" if k == "requests.nvidia.com/a100" else k): v for k, v in hard.items()}
    right, wrong = _quota_rows(plan, "nvidia.com/a100"), _quota_rows(plan, "nvidia.com/a100", misspelt)
    changed = sorted(k for k in right if right[k] != wrong[k])
    assert wrong["one more (nvidia.com/a100)"] == landed(["a100-whole"])
    assert changed == [
        "ResourceClaim of a100-40gb.gpu.themelio.io",
        "one more (nvidia.com/a100)",
        f"pod asking for {implicit_name('a100-40gb.gpu.themelio.io')}",
    ]


QUOTA_CLUSTERS = [
    (fleet_name, plan) for fleet_name, plan in fixture_plans() if fleet_name.startswith(("quota-", "example"))
]


@pytest.mark.parametrize(("fleet_name", "plan"), QUOTA_CLUSTERS, ids=[f"{f}/{p.name}" for f, p in QUOTA_CLUSTERS])
def test_the_probes_quota_answers_agree_with_the_independent_model_of_kubernetes_quota(
    fleet_name: str, plan: ClusterPlan
) -> None:
    """tests/quota_model.py is written from Kubernetes' evaluators without the planner: every path the probe's
    model lets reach a device in a granted namespace with nothing used yet (or admits, a claim), it admits, and
    every one the probe's model refuses, it refuses."""
    model = ClusterModel.of(plan)
    routes = model.routes()
    quota = plan_quota(plan)
    for offering in plan.offerings:
        grants, _ = resolve_grants(quota, plan, [(offering.name, 1)])
        hard = quota.hard(grants)
        found = admission._attempts(plan, next(iter(grants)))
        for attempt in found[2:]:  # each path alone in a namespace with nothing used yet, as the model judges
            (answer,) = admission.expectations(plan, hard, [attempt])
            if answer.kind is Kind.PLACEMENT_PENDING:
                continue
            if attempt.claim_class is not None:
                labels = [f"ResourceClaim {attempt.claim_class}"]
            else:
                ((name, _),) = attempt.control.ask.limits.items()
                classes = [c for c in model.classes if implicit_name(c.name) == name]
                labels = [f"pod implicit {c.name}" for c in classes] or [
                    r.label for r in routes if r.label.startswith(f"pod {name} -> ")
                ]
            mine = [r for r in routes if r.label in labels]
            assert mine, (plan.name, attempt.tried)
            independent = any(admits(r, 1, hard) for r in mine)
            probe_admits = answer.kind in (Kind.LANDED, Kind.ADMITTED)
            assert probe_admits == independent, (plan.name, offering.name, attempt.tried, answer)


# --- coverage by offering --------------------------------------------------------------------------------


def test_the_covering_set_probes_every_offering_and_alias_of_every_fixture_fleet() -> None:
    for folder in sorted(p for p in FLEETS.iterdir() if (p / "stacks").is_dir()):
        fleet = load_fleet(folder / "catalog" / "gpu-catalog.yaml", folder / "stacks")
        chosen = [plan for plan, _ in coverage.covering(fleet.clusters)]
        served = {n for plan in fleet.clusters for n in plan.advertised_names}
        probed = {row.key for plan in chosen for row in planned_rows(plan)}
        assert served <= probed, (folder.name, sorted(served - probed))


def test_a_cluster_is_added_to_the_covering_set_for_an_offering_no_other_serves(tmp_path: Path) -> None:
    one = cluster(name="one")
    other = cluster(name="other", offerings=["nvidia.com/a100"], nodePools=[cluster()["nodePools"][0]])
    fleet = fleet_of(tmp_path, one, other)
    assert [p.name for p, _ in coverage.covering(fleet.clusters)] == ["one"]  # "one" serves all "other" does
    mig_only = cluster(
        name="other", offerings=["nvidia.com/a100-mig-1g.5gb"], nodePools=[cluster()["nodePools"][1]]
    )
    whole_only = cluster(name="one", offerings=["nvidia.com/a100"], nodePools=[cluster()["nodePools"][0]])
    chosen = coverage.covering(fleet_of(tmp_path, whole_only, mig_only).clusters)
    assert sorted(p.name for p, _ in chosen) == ["one", "other"]
    assert "serves nvidia.com/a100-mig-1g.5gb" in {p.name: why for p, why in chosen}["other"]


def test_probe_json_is_alone_on_stdout(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse
    import contextlib

    from themelio_gpu.sandbox import daemonsets, karpenter_probe, kueue_probe, nvidia_report, probe, workflow

    plan = example("gpu-east")
    row = probe.Row("nvidia.com/a100", 1, landed(["a100-whole"]), PLACEMENTS, real=landed(["a100-whole"], "n"))
    monkeypatch.setattr(workflow, "_sandbox_of", lambda name: None)
    monkeypatch.setattr(workflow, "_working_on", lambda sandbox: contextlib.nullcontext())
    monkeypatch.setattr(probe, "probe", lambda *a: [row])
    monkeypatch.setattr(admission, "quota_probe", lambda *a: [])
    monkeypatch.setattr(daemonsets, "compare", lambda *a: [])
    monkeypatch.setattr(kueue_probe, "probe_kueue", lambda *a: [])
    monkeypatch.setattr(karpenter_probe, "probe_karpenter", lambda *a: [])
    monkeypatch.setattr(karpenter_probe, "end", lambda *a: None)
    monkeypatch.setattr(workflow, "_wait_cleared", lambda *a: None)
    monkeypatch.setattr(nvidia_report, "read", lambda *a: nvidia_report.NvidiaReport(None, {}, 0, 0))
    args = argparse.Namespace(json=True, daemonset_model=lambda *a: [])
    assert workflow._probe(args, plan, object()) == 0  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert json.loads(out)["placement"][0]["agrees"] is True and json.loads(out)["nvidia"]["agrees"] is True
    assert err.startswith("sandbox probe: gpu-east: placement: 1 pods, 1 as the model says")


def test_run_with_probe_and_json_leaves_the_json_alone_on_stdout(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sandbox run --probe --json`: what up, apply and down say, and the run's figures, go to stderr."""
    import argparse
    import contextlib

    from themelio_gpu.sandbox import (
        daemonsets,
        karpenter_probe,
        kueue_probe,
        nvidia_report,
        parallel,
        probe,
        workflow,
    )

    def saying(text: str) -> Any:
        def step(*args: object) -> int:
            workflow._say(text)
            return 0

        return step

    plan = example("gpu-east")
    row = probe.Row("nvidia.com/a100", 1, landed(["a100-whole"]), PLACEMENTS, real=landed(["a100-whole"], "n"))
    monkeypatch.setattr(workflow, "_start", saying("sandbox: gpu-east is up"))
    monkeypatch.setattr(workflow, "_apply", saying("sandbox: apply: ok"))
    monkeypatch.setattr(workflow, "_down", saying("sandbox: gpu-east is down"))
    monkeypatch.setattr(workflow, "_sandbox_of", lambda name: None)
    monkeypatch.setattr(workflow, "_working_on", lambda sandbox: contextlib.nullcontext())
    monkeypatch.setattr(probe, "probe", lambda *a: [row])
    monkeypatch.setattr(admission, "quota_probe", lambda *a: [])
    monkeypatch.setattr(daemonsets, "compare", lambda *a: [])
    monkeypatch.setattr(workflow, "_wait_cleared", lambda *a: None)
    monkeypatch.setattr(kueue_probe, "probe_kueue", lambda *a: [])
    monkeypatch.setattr(karpenter_probe, "probe_karpenter", lambda *a: [])
    monkeypatch.setattr(karpenter_probe, "end", lambda *a: None)
    monkeypatch.setattr(nvidia_report, "read", lambda *a: nvidia_report.NvidiaReport(None, {}, 0, 0))
    monkeypatch.setattr(parallel, "follow_parent", lambda: None)
    args = argparse.Namespace(json=True, probe=True, keep=False, runner="terraform", daemonset_model=lambda *a: [])
    assert workflow._run(args, plan, object()) == 0  # type: ignore[arg-type]
    out, err = capsys.readouterr()
    assert json.loads(out)["placement"][0]["tried"] == "nvidia.com/a100"
    assert "gpu-east is up" in err and "apply: ok" in err and "gpu-east is down" in err
    assert "sandbox run: {" in err and "sandbox probe: gpu-east: placement: 1 pods" in err


# --- the devices the scheduler allocated, checked against the offering and the CEL evaluator -------------


def _device(product: str, memory: str, profile: str | None = None) -> Any:
    from themelio_gpu.dryrun.resourceslices import parse_resourceslices

    attributes: dict[str, Any] = {"type": {"string": "mig" if profile else "gpu"}, "productName": {"string": product},
                                  "driverVersion": {"version": "580.105.8"}}  # fmt: skip
    if profile:
        attributes["profile"] = {"string": profile}
    slices = {"apiVersion": "v1", "kind": "List", "items": [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0", "attributes": attributes, "capacity": {"memory": {"value": memory}}}]},
    }]}  # fmt: skip
    (device,) = parse_resourceslices(json.dumps(slices))
    return device


def test_an_allocated_device_below_a_capability_offerings_floor_fails_its_row() -> None:
    from themelio_gpu.sandbox import probe

    fleet = load_fleet(FLEETS / "capability" / "catalog" / "gpu-catalog.yaml", FLEETS / "capability" / "stacks")
    plan = fleet.cluster("capability-lab")
    assert plan is not None
    planned = rows_by_key(plan)[implicit_name("gpu-48gb.gpu.themelio.io")]
    selector = planned.selector[1]
    published = probe.Published({}, {}, {"gpu-48gb.gpu.themelio.io": [selector]}, {})

    def checked(device: Any) -> list[str]:
        row = probe.Row(planned.key, 1, planned.expected, planned.model)
        probe.check_device(plan, row, planned, device, "gpu-48gb.gpu.themelio.io", published)
        assert row.cel_checked == 1
        return row.problems

    assert checked(_device("NVIDIA H100 80GB HBM3", "81559Mi")) == []
    small = checked(_device("NVIDIA A10G", "23028Mi"))  # the 48 GiB floor: the offering, and its class's selector
    assert any("is not a device of nvidia.com/gpu-48gb: memory 22.49Gi < 48Gi" in p for p in small), small
    assert any("the model's selector of gpu-48gb.gpu.themelio.io" in p for p in small), small
    # A class the cluster does not have is a problem of its own.
    row = probe.Row(planned.key, 1, planned.expected, planned.model)
    probe.check_device(
        plan, row, planned, _device("NVIDIA H100 80GB HBM3", "81559Mi"), "other.example.com", published
    )
    assert any("which the cluster does not have" in p for p in row.problems)


def test_the_trial_compares_allocation_and_prediction_both_ways() -> None:
    from themelio_gpu.sandbox.trial import TrialRow

    def row(predicted: list[str], allocated: list[str], outcome: str) -> TrialRow:
        return TrialRow("o", "c", predicted, allocated, outcome=outcome)

    assert row(["n/gpu-0", "n/gpu-1"], ["n/gpu-1"], "landed").agrees
    assert not row(["n/gpu-0"], ["m/gpu-0"], "landed").agrees  # allocated, not predicted
    assert not row(["n/gpu-0"], [], "placement_pending").agrees  # predicted on an idle cluster, not allocated
    assert row([], [], "placement_pending").agrees  # predicted none, and no node fits
    assert not row([], [], "timeout").agrees  # not decided: never agrees
    assert not row([], [], "unparsed").agrees


def test_daemonsets_are_compared_with_verifys_prediction_and_an_unpredicted_one_fails() -> None:
    from themelio_gpu.sandbox.daemonsets import MODEL_ONLY, UNKNOWN, Predicted, rows_of

    def daemonset(name: str) -> dict[str, Any]:
        return {"metadata": {"namespace": "ns", "name": name, "uid": name, "generation": 1}}

    def pod(owner: str, node: str) -> dict[str, Any]:
        return {"metadata": {"ownerReferences": [{"uid": owner}]}, "spec": {"nodeName": node}}

    gpu = {"gpu-a", "gpu-b"}
    plugin = Predicted("ns", "plugin", "chart dra", True, {"gpu-a": "", "gpu-b": ""})
    worker = Predicted("ns", "worker", "chart op", True, {"gpu-a": "", "gpu-b": "nodeSelector x=y: node has x=z"})
    operand = Predicted("ns", "operand", "ClusterPolicy cluster-policy", False, {"gpu-a": "", "gpu-b": ""})
    pods = [pod("plugin", "gpu-a"), pod("worker", "gpu-a"), pod("worker", "gpu-b"), pod("worker", "system-0")]
    rows = {r.name: r for r in rows_of([daemonset("plugin"), daemonset("worker"), daemonset("stray")], pods,
                                       [plugin, worker, operand], gpu)}  # fmt: skip
    assert not rows["plugin"].agrees and rows["plugin"].why_not == "gpu-b: verify says it runs here"
    assert not rows["worker"].agrees and rows["worker"].why_not.startswith("gpu-b: nodeSelector")
    assert rows["worker"].elsewhere == ["system-0"]  # outside verify's model: shown, not compared
    assert not rows["stray"].agrees and rows["stray"].note == UNKNOWN
    assert rows["operand"].real is None and rows["operand"].agrees
    assert rows["operand"].note == MODEL_ONLY.format("not started")
    # Where NVIDIA's controller runs, an operand it did not create is compared, and fails; one it did, agrees.
    (missing,) = rows_of([], [], [operand], gpu, operator_absent="")
    assert missing.real == [] and missing.compared and not missing.agrees
    made = rows_of([daemonset("operand")], [pod("operand", "gpu-a"), pod("operand", "gpu-b")], [operand], gpu, "")
    assert made[0].agrees and made[0].real == ["gpu-a", "gpu-b"]
    pods.append(pod("plugin", "gpu-b"))
    fixed = {r.name: r for r in rows_of([daemonset("plugin")], pods, [plugin], gpu)}
    assert fixed["plugin"].agrees
    # A prediction resting on a label the operator adds at runtime is shown, not compared.
    runtime = Predicted("ns", "plugin", "chart dra", True, plugin.nodes, ("nvidia.com/gpu.deploy.client",))
    (shown,) = rows_of([daemonset("plugin")], [], [runtime], gpu)
    assert (
        shown.real == [] and not shown.compared and shown.agrees and "nvidia.com/gpu.deploy.client" in shown.note
    )


def test_an_operand_named_at_runtime_is_compared_with_verifys_pattern_of_its_name() -> None:
    """The NVIDIADriver's DaemonSet: verify writes `nvidia-gpu-driver-<os>-<hash>`, NVIDIA's controller names it by
    the nodes' OS and a hash of its spec (seen in the sandbox: nvidia-gpu-driver-ubuntu24.04-667fdb5f4b). Another
    name, or another namespace, is not that operand."""
    from themelio_gpu.sandbox.daemonsets import UNKNOWN, Predicted, rows_of

    def daemonset(namespace: str, name: str) -> dict[str, Any]:
        return {"metadata": {"namespace": namespace, "name": name, "uid": name, "generation": 1}}

    pod = {
        "metadata": {"ownerReferences": [{"uid": "nvidia-gpu-driver-ubuntu24.04-667fdb5f4b"}]},
        "spec": {"nodeName": "a"},
    }
    driver = Predicted("ns", "nvidia-gpu-driver-<os>-<hash>", "NVIDIADriver default", False, {"a": ""})
    (row,) = rows_of([daemonset("ns", "nvidia-gpu-driver-ubuntu24.04-667fdb5f4b")], [pod], [driver], {"a"}, "")
    assert row.agrees and row.real == ["a"] and row.source == "NVIDIADriver default"
    for namespace, name in (("ns", "nvidia-vgpu-driver-ubuntu24.04-667fdb5f4b"), ("other", row.name)):
        rows = {r.name: r for r in rows_of([daemonset(namespace, name)], [], [driver], {"a"}, "")}
        assert rows[name].note == UNKNOWN and not rows[driver.name].agrees  # the operand's row: not created


def test_pending_daemonset_pods_agree_only_where_verify_predicts_their_claims_stop_them() -> None:
    """GPUCluster mode on a MIG pool: the DaemonSet controller creates the DRA validator's pod (it checks selectors
    and taints, not claims) and the scheduler never binds it (no whole GPU there). Seen on gpu-next of the example
    fleet with NVIDIA's controller: 2 bound, 2 Pending, which verify predicts; an unpredicted Pending pod fails."""
    from themelio_gpu.sandbox.daemonsets import Predicted, as_table, rows_of

    daemonset = {"metadata": {"namespace": "ns", "name": "validator", "uid": "v", "generation": 1}}

    def pod(node: str | None) -> dict[str, Any]:
        return {"metadata": {"ownerReferences": [{"uid": "v"}]}, "spec": {"nodeName": node} if node else {}}

    gpu = {"h100-0", "h100-1", "mig-0", "mig-1"}
    why = "does not run: its ResourceClaim asks gpu.nvidia.com for a whole GPU, and a MIG node publishes only ..."
    nodes = {"h100-0": "", "h100-1": "", "mig-0": why, "mig-1": why}
    pods = [pod("h100-0"), pod("h100-1"), pod(None), pod(None)]
    predicted = Predicted("ns", "validator", "GPUCluster gpu-cluster", False, nodes, (), ("mig-0", "mig-1"))
    (row,) = rows_of([daemonset], pods, [predicted], gpu, operator_absent="")
    assert row.agrees and (row.pending, row.pending_model) == (2, 2)
    unpredicted = Predicted("ns", "validator", "GPUCluster gpu-cluster", False, nodes)
    (row,) = rows_of([daemonset], pods, [unpredicted], gpu, operator_absent="")
    assert not row.agrees and "NO: 2 Pending where verify predicts 0" in as_table([row])
    (row,) = rows_of([daemonset], pods[:3], [predicted], gpu, operator_absent="")
    assert not row.agrees  # one of the two pods verify says stays Pending is not there


def test_verify_places_a_pod_only_claims_stop_as_pending_and_one_a_taint_stops_nowhere() -> None:
    from themelio_gpu.k8s.scheduling import Node, PodScheduling, TaintSpec
    from themelio_gpu.verify.proof import Expect, place

    class Whole:
        """A DaemonSet whose claim asks for a whole GPU (verify's Workload, as much as place reads)."""

        name, source, created, role, needs_whole_gpu, needs_devices_from = "v", "c", True, None, True, None
        scheduling = PodScheduling()

    tainted = Node("t", {}, (TaintSpec("nvidia.com/gpu", "present", "NoSchedule"),))
    row = place(Whole(), Expect.MAY, [Node("m", {}, ()), tainted], [], mig=True)  # type: ignore[arg-type]
    assert row.runs_on == () and row.pending_on == ("m",)  # the DaemonSet controller makes no pod for "t"


def test_verifys_prediction_for_a_sandbox_is_the_proof_on_the_installed_charts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `sandbox probe` compares the DaemonSet controller with, from a sandbox's record of its nodes and its
    chart repository alone (helm renders; no control plane): the DRA kubelet plugin on every DRA node of
    gpu-east, and, where an override empties its tolerations, on no node of the tainted pools."""
    from tests.requirements import binary, shared_path
    from themelio_gpu.sandbox.cluster import SANDBOX_DIR_ENV, Sandbox
    from themelio_gpu.sandbox.components import chart_repository
    from themelio_gpu.sandbox.nodes import simulated_nodes
    from themelio_gpu.verify.sandbox_prediction import predict

    helm = Path(binary("helm", "HELM"))
    charts = shared_path("reference", "charts")
    monkeypatch.setenv(SANDBOX_DIR_ENV, str(tmp_path))

    class HelmOnly:
        """The one tool the prediction runs."""

        def binary(self, *_: str) -> Path:
            return helm

    def predicted(fleet_name: str, cluster_name: str, operator_runs: bool = False) -> dict[str, Any]:
        fleet = load_fleet(FLEETS / fleet_name / "catalog" / "gpu-catalog.yaml", FLEETS / fleet_name / "stacks")
        plan = fleet.cluster(cluster_name)
        assert plan is not None
        sandbox = Sandbox(plan.name)
        sandbox.folder.mkdir(parents=True, exist_ok=True)
        nodes = {n.name: {"pool": n.pool, "kind": n.kind} for n in simulated_nodes(plan)}
        sandbox.state_file.write_text(json.dumps({"nodes": nodes, "gpuOperator": {"runs": operator_runs}}))
        if not (sandbox.folder / "charts").is_dir():
            chart_repository.package_charts(plan, charts, helm, sandbox.folder / "charts")
        return {p.name: p for p in predict(plan, sandbox, HelmOnly())}  # type: ignore[arg-type]

    east = predicted("example", "gpu-east")
    plugin = east["dra-driver-nvidia-gpu-kubelet-plugin"]
    assert plugin.in_chart and set(plugin.nodes) == {n for n in plugin.nodes if n.startswith("gpu-east-a100-")}
    assert all(why == "" for why in plugin.nodes.values())
    assert not east["nvidia-dcgm-exporter"].in_chart  # an operand: verify's prediction only
    assert plugin.runtime_labels == ()  # it rests on nothing the sandbox does not set: compared
    broken = predicted("breaking-overrides", "bk-dra-plugin-tolerations")
    kubelet = next(p for name, p in broken.items() if name.endswith("kubelet-plugin"))
    assert kubelet.nodes and all("taint" in why for why in kubelet.nodes.values()), kubelet.nodes
    # With the GPU Operator 26.7 the plugin also selects nvidia.com/gpu.deploy.client, which the operator sets at
    # runtime: a sandbox where it does not run cannot show that prediction; where NVIDIA's controller runs and
    # labels the nodes itself, it is compared.
    newer = predicted("coverage", "fx-host-driver-upgrade")
    kubelet = next(p for name, p in newer.items() if name.endswith("kubelet-plugin"))
    assert "nvidia.com/gpu.deploy.client" in kubelet.runtime_labels
    running = predicted("coverage", "fx-host-driver-upgrade", operator_runs=True)
    kubelet = next(p for name, p in running.items() if name.endswith("kubelet-plugin"))
    assert kubelet.runtime_labels == ()
    # The operator adds the MIG Manager's label only where GPU Feature Discovery, which runs nothing here, found a
    # MIG-capable GPU: shown, not compared; an operand on the operator's own labels is compared.
    east = predicted("example", "gpu-east", operator_runs=True)
    assert "nvidia.com/gpu.deploy.mig-manager" in east["nvidia-mig-manager"].runtime_labels
    assert east["nvidia-driver-daemonset"].runtime_labels == () and not east["nvidia-driver-daemonset"].in_chart


def test_every_row_says_whose_slices_it_ran_on(tmp_path: Path) -> None:
    """Its node's (the driver's or the sandbox's), else those of the nodes of the pools that serve it; `none`
    where no slice is published (the device plugin)."""
    from themelio_gpu.sandbox import probe
    from themelio_gpu.sandbox.folder import Sandbox
    from themelio_gpu.sandbox.nodes import simulated_nodes

    plan = example("gpu-east")
    sandbox = Sandbox(plan.name, tmp_path)
    sandbox.folder.mkdir()
    nodes = simulated_nodes(plan)
    sandbox.state_file.write_text(json.dumps({"nodes": {n.name: {"pool": n.pool, "kind": n.kind} for n in nodes}}))
    who = {n.name: "driver" if n.by_driver else "sandbox" for n in nodes if n.slices}
    rows = {r.key: r for r in planned_rows(plan)}
    whole, sliced = rows["nvidia.com/a100"], rows["nvidia.com/a100-mig-1g.5gb"]
    driver_node = next(n.name for n in nodes if n.by_driver)
    assert probe.whose_slices({"spec": {"nodeName": driver_node}}, whole, who, sandbox, plan) == "driver"
    assert probe.whose_slices({}, whole, who, sandbox, plan) == "driver"  # Pending: the pools serving it
    assert probe.whose_slices({}, sliced, who, sandbox, plan) == "sandbox"  # MIG: the mock has none
    assert probe.whose_slices({"spec": {"nodeName": driver_node}}, whole, {}, sandbox, plan) == "none"
