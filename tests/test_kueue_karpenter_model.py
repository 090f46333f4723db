"""Kueue's and Karpenter's part of the sandbox, without a cluster: the Jobs the probe submits through Kueue and
the model's answer for each, Kueue's install from its chart and its configuration, Karpenter's instance types,
node class and the node it made read against the contract, the slice writer's slices, and validate's warning.
The live half is tests/test_sandbox_controllers.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.builders import cluster, fleet_of, plan_of
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.components import karpenter, karpenter_slices, kueue
from themelio_gpu.sandbox.karpenter_probe import expects_launch, karpenter_said, node_problems, pool_offering
from themelio_gpu.sandbox.kueue_model import PROBE_NAMESPACE, Admission, planned_jobs
from themelio_gpu.sandbox.kueue_probe import KueueRow, job_object
from themelio_gpu.sandbox.nodes import model_nodes, simulated_nodes

FLEETS = Path(__file__).parent / "fixtures" / "fleets"


def fixture(fleet_name: str, cluster_name: str) -> ClusterPlan:
    fleet = load_fleet(FLEETS / fleet_name / "catalog" / "gpu-catalog.yaml", FLEETS / fleet_name / "stacks")
    plan = fleet.cluster(cluster_name)
    assert plan is not None
    return plan


# --- Kueue: the Jobs and the model's answers --------------------------------------------------------------


def test_each_queue_gets_a_job_within_its_quota_and_one_beyond_and_each_reserved_pool_two() -> None:
    jobs = {j.key: j for j in planned_jobs(fixture("consumers", "reserved"))}
    assert set(jobs) == {
        "nvidia.com/h100 x1 through gpus (fits its quota; reserved pool h100-train, a queue that does not grant it)",
        "nvidia.com/h100 x9 through gpus (exceeds its quota)",
        "nvidia.com/h100 x1 through training (fits its quota; reserved pool h100-train, the queue that grants it)",
        "nvidia.com/h100 x17 through training (exceeds its quota)",
    }  # one Job may stand for two of them
    granted = jobs[
        "nvidia.com/h100 x1 through training (fits its quota; reserved pool h100-train, the queue that grants it)"
    ]
    assert granted.expected == Admission(True, "pool-h100-train", ("h100-train",))
    assert granted.ask.namespace == "ml-research"  # the queue's first namespace
    assert granted.ask.tolerations == ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)
    # Through the queue that does not grant the reserved pool: the open pool of the product, never the reserved one.
    other = jobs[
        "nvidia.com/h100 x1 through gpus (fits its quota; reserved pool h100-train, a queue that does not grant it)"
    ]
    assert other.expected == Admission(True, "nvidia-h100-80gb", ("h100-open",))
    assert other.ask.namespace == PROBE_NAMESPACE
    beyond = jobs["nvidia.com/h100 x17 through training (exceeds its quota)"].expected
    assert not beyond.admitted and "quota 16 of nvidia.com/h100, 17 asked" in beyond.reason


def test_a_flavor_whose_quota_is_zero_or_whose_labels_contradict_the_pod_admits_nothing() -> None:
    jobs = {j.key: j.expected for j in planned_jobs(fixture("consumers", "notebooks"))}
    unsized = jobs["nvidia.com/l40s x1 through inference (reserved pool l40s-inference, the queue that grants it)"]
    assert not unsized.admitted and "quota 0 of nvidia.com/l40s" in unsized.reason  # a pool of unknown size
    elsewhere = jobs[
        "nvidia.com/l40s x1 through gpus (reserved pool l40s-inference, a queue that does not grant it)"
    ]
    assert not elsewhere.admitted and "node selector contradicts" in elsewhere.reason


def test_a_job_is_submitted_as_users_submit_it_and_its_row_compares_admission_flavor_and_pool() -> None:
    job = next(j for j in planned_jobs(fixture("example", "gpu-west")) if "grants it" in j.key)
    made = job_object("kueue-probe-0", job)
    assert made["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "training"}
    assert "suspend" not in made["spec"]  # Kueue's webhook suspends it
    spec = made["spec"]["template"]["spec"]
    assert spec["containers"][0]["resources"] == {"limits": {"nvidia.com/h100": "1"}}
    assert not any(t["key"] == "themelio.io/reserved" for t in spec["tolerations"])  # Kueue's flavor adds it
    row = KueueRow(job.key, "ml-training", job.expected)
    assert not row.agrees  # not tried
    row.real = Admission(True, "pool-h100", ("h100",))
    assert row.agrees
    row.real = Admission(True, "nvidia-h100-80gb", ("h100",))
    assert not row.agrees  # another flavor
    row.real = Admission(True, "pool-h100", reason="Pending: no node fits")
    assert not row.agrees  # admitted, but its pod did not land where the model says
    row.real = Admission(False, reason="couldn't assign flavors")
    assert not row.agrees


# --- Kueue: its install, from its chart -------------------------------------------------------------------


def _rendered() -> list[dict[str, Any]]:
    webhook = {"name": "vresourceflavor.kb.io", "clientConfig": {"service": {
        "name": "kueue-webhook-service", "namespace": "kueue-system", "path": "/validate"}}}  # fmt: skip
    conversion = {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {
        "name": "kueue-webhook-service", "namespace": "kueue-system", "path": "/convert"}}}}  # fmt: skip
    config = {"health": {"healthProbeBindAddress": ":8081"}, "metrics": {"bindAddress": ":8443"},
              "webhook": {"port": 9443}, "leaderElection": {"leaderElect": True}, "namespace": "kueue-system"}  # fmt: skip
    return [
        {"kind": "CustomResourceDefinition", "metadata": {"name": "workloads.kueue.x-k8s.io"},
         "spec": {"conversion": conversion}},
        {"kind": "ValidatingWebhookConfiguration", "metadata": {"name": "v"}, "webhooks": [webhook]},
        {"kind": "Service", "metadata": {"name": "kueue-webhook-service", "namespace": "kueue-system"},
         "spec": {"type": "ClusterIP", "ports": [{"port": 443, "targetPort": 9443}]}},
        {"kind": "Service", "metadata": {"name": "kueue-visibility-server", "namespace": "kueue-system"}},
        {"kind": "APIService", "metadata": {"name": "v1beta1.visibility.kueue.x-k8s.io"}},
        {"kind": "ClusterRole", "metadata": {"name": "kueue-manager-role"}},
        {"kind": "ConfigMap", "metadata": {"name": "kueue-manager-config"},
         "data": {"controller_manager_config.yaml": json.dumps(config)}},
        {"kind": "Deployment", "metadata": {"name": "kueue-controller-manager"}, "spec": {"template": {"spec": {
            "containers": [{"args": ["--config=/controller_manager_config.yaml", "--zap-log-level=2"]}]}}}},
    ]  # fmt: skip


def test_kueue_is_installed_from_its_chart_with_its_webhooks_on_a_loopback_port(tmp_path: Path) -> None:
    made = kueue.install_objects(_rendered(), 40123)
    assert [o["kind"] for o in made] == [
        "Namespace",
        "CustomResourceDefinition",
        "ValidatingWebhookConfiguration",
        "Service",
    ]  # no RBAC, visibility API, ConfigMap or Deployment: the manager runs as a process
    crd, webhooks, service = made[1], made[2], made[3]
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"] == 40123
    assert webhooks["webhooks"][0]["clientConfig"]["service"] == {
        "name": "kueue-webhook-service", "namespace": "kueue-system", "path": "/validate", "port": 40123
    }  # fmt: skip
    assert service["spec"] == {
        "type": "ExternalName", "externalName": "127.0.0.1", "ports": [{"name": "webhook", "port": 40123, "protocol": "TCP"}]
    }  # fmt: skip
    assert _rendered()[1]["webhooks"][0]["clientConfig"]["service"].get("port") is None  # the rendering untouched
    config = kueue.configuration(_rendered(), tmp_path, 40123, 40124)
    assert config["webhook"] == {"host": "127.0.0.1", "port": 40123, "certDir": str(tmp_path / "certs")}
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:40124"
    assert (config["metrics"]["bindAddress"], config["leaderElection"]["leaderElect"]) == ("0", False)
    assert kueue.manager_args(_rendered(), tmp_path / "c.yaml") == [
        f"--config={tmp_path / 'c.yaml'}", "--zap-log-level=2", "--feature-gates=VisibilityOnDemand=false"
    ]  # fmt: skip


def test_kueues_certificate_secret_is_written_to_its_folder_as_a_kubelet_mounts_it(tmp_path: Path) -> None:
    import base64

    from themelio_gpu.sandbox.rest import Answer

    class Api:
        def __init__(self, data: dict[str, str]) -> None:
            self.data = data

        def request(self, method: str, where: str) -> Answer:
            assert where == "/api/v1/namespaces/kueue-system/secrets/kueue-webhook-server-cert"
            return Answer(200, {"data": self.data})

    full = {key: base64.b64encode(f"<{key}>".encode()).decode() for key in ("tls.crt", "tls.key", "ca.crt")}
    unfilled = {k: v for k, v in full.items() if k != "tls.key"}  # Kueue has not filled it yet
    assert not kueue.mount_certificates(Api(unfilled), tmp_path / "certs")  # type: ignore[arg-type]
    assert not (tmp_path / "certs").exists()
    assert kueue.mount_certificates(Api(full), tmp_path / "certs")  # type: ignore[arg-type]
    assert (tmp_path / "certs" / "tls.key").read_text() == "<tls.key>"
    assert sorted(p.name for p in (tmp_path / "certs").iterdir()) == ["ca.crt", "tls.crt", "tls.key"]


def test_kueue_runs_for_a_cluster_whose_kueue_yaml_admits_something(tmp_path: Path) -> None:
    assert kueue.Kueue().wanted(fixture("example", "gpu-east"))
    reserved = {"name": "whole", "product": "a100-40gb", "gpusPerNode": 8,
                "taints": ["nvidia.com/gpu=present:NoSchedule", "team.example/reserved=x:NoSchedule"],
                "provisioning": {"static": {"nodes": ["node-a"]}}}  # fmt: skip
    only_reserved = cluster(offerings=["nvidia.com/a100"], nodePools=[reserved])
    assert not kueue.admits_anything(plan_of(fleet_of(tmp_path, only_reserved), "test"))  # no queue grants it


# --- Karpenter ---------------------------------------------------------------------------------------------


def test_a_karpenter_pools_nodes_are_not_registered_by_the_sandbox_but_modelled_one_a_pool() -> None:
    plan = fixture("coverage", "fx-karpenter-taints")
    assert not [n for n in simulated_nodes(plan) if n.kind == "karpenter"]
    modelled = [n for n in model_nodes(plan) if n.kind == "karpenter"]
    assert [n.pool for n in modelled] == ["h100-train", "l4-infer"]


def test_karpenters_instance_types_list_gpus_only_where_the_device_plugin_advertises_them(tmp_path: Path) -> None:
    plan = fixture("coverage", "fx-karpenter-taints")
    types = {t["name"]: t for t in karpenter.instance_types(plan)}
    assert set(types) == {"p5.48xlarge", "p5e.48xlarge", "g6.12xlarge"}
    assert not any(k.startswith("nvidia.com/") for k in types["p5.48xlarge"]["resources"])  # a DRA pool
    capacity = [o["Requirements"][0]["values"][0] for o in types["p5.48xlarge"]["offerings"]]
    assert capacity == ["on-demand", "spot"]  # reserved needs a cloud's capacity reservation
    plugin = cluster(
        karpenter=True,
        offerings=["nvidia.com/gpu"],
        nodePools=[{"name": "p", "product": "a100-40gb", "gpusPerNode": 8, "dra": False,
                    "provisioning": {"karpenter": {"nodeClassRef": {"name": "gpu"}, "instanceTypes": ["p4d.24xlarge"]}}}],
    )  # fmt: skip
    plugin_plan = plan_of(fleet_of(tmp_path, plugin), "test")
    (plugin_type,) = karpenter.instance_types(plugin_plan)
    assert plugin_type["resources"]["nvidia.com/gpu"] == "8"
    assert expects_launch(plugin_plan.pools[0], "nvidia.com/gpu")
    assert not expects_launch(plan.pools[0], "nvidia.com/h100")


def test_the_stacks_nodepool_is_applied_with_the_kwok_providers_node_class_and_nothing_else_changed() -> None:
    manifest: dict[str, Any] = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "h100"},
                "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                                "name": "gpu"}, "taints": []}}}}  # fmt: skip
    stack = {
        "resource": {
            "kubernetes_manifest": {
                "np": {"manifest": manifest},
                "other": {"manifest": {"kind": "X"}},
                "taints": {"for_each": '${toset(["gpu-a"])}', "manifest": "${each.value}"},  # as a static pool's
            }
        }
    }
    overrides = karpenter.node_pool_overrides(stack)
    assert list(overrides) == ["np"]
    reference = overrides["np"]["manifest"]["spec"]["template"]["spec"]["nodeClassRef"]
    assert reference == {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "gpu"}
    assert manifest["spec"]["template"]["spec"]["nodeClassRef"]["kind"] == "EC2NodeClass"  # the stack untouched


def _launched(plan: ClusterPlan, pool: str, **changes: Any) -> dict[str, Any]:
    contract = next(c for c in plan.pools if c.name == pool)
    labels = {**contract.labels, "karpenter.sh/nodepool": pool, "node.kubernetes.io/instance-type": "p5.48xlarge",
              "karpenter.sh/capacity-type": "spot", **changes.get("labels", {})}  # fmt: skip
    taints = [t.as_object() for t in contract.taints] + changes.get("taints", [])
    return {"metadata": {"name": "kwok-1", "labels": labels, "uid": "u-1"}, "spec": {"taints": taints}}


def test_the_node_karpenter_made_is_read_against_the_pools_contract() -> None:
    plan = fixture("coverage", "fx-karpenter-taints")
    contract = plan.pools[0]
    allowed = {"node.kubernetes.io/instance-type": ("p5.48xlarge",), "karpenter.sh/capacity-type": ("spot",)}
    transient = [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]
    assert node_problems(contract, allowed, _launched(plan, "h100-train", taints=transient)) == []
    wrong = _launched(
        plan, "h100-train", labels={plan.names.pool_label: "other"}, taints=[{"key": "x", "effect": "NoSchedule"}]
    )
    problems = node_problems(contract, {**allowed, "karpenter.sh/capacity-type": ("on-demand",)}, wrong)
    assert any(p.startswith(f"label {plan.names.pool_label}=other") for p in problems)
    assert "karpenter.sh/capacity-type=spot (the pool allows on-demand)" in problems
    assert "taint x=:NoSchedule not the pool's" in problems
    offering = pool_offering(plan, contract)
    assert offering is not None and offering.name == "nvidia.com/h100"  # the cluster file's first it serves


def test_karpenters_own_words_are_read_from_its_log(tmp_path: Path) -> None:
    log = tmp_path / "karpenter.log"
    entry = {"level": "ERROR", "message": "could not schedule pod", "Pod": {"name": "gpu-h100", "namespace": "n"},
             "error": 'incompatible with nodepool "h100", no instance type has enough resources'}  # fmt: skip
    log.write_text("not json\n" + json.dumps(entry) + "\n")
    said = karpenter_said(log, "gpu-h100")
    assert (
        said == 'could not schedule pod: incompatible with nodepool "h100", no instance type has enough resources'
    )
    assert karpenter_said(log, "gpu-l4") == ""


def test_the_slice_writer_publishes_a_launched_nodes_gpus_owned_by_the_node() -> None:
    plan = fixture("coverage", "fx-karpenter-taints")
    pool = karpenter.pools_file(plan)["h100-train"]
    node = {"metadata": {"name": "kwok-h100-1", "uid": "u-1"}}
    made = karpenter_slices.owned_slice(json.loads(json.dumps(node)), json.loads(json.dumps(pool)))
    assert made["spec"]["nodeName"] == "kwok-h100-1" and len(made["spec"]["devices"]) == 8
    assert made["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "kwok-h100-1", "uid": "u-1"}
    ]
    attributes = made["spec"]["devices"][0]["attributes"]
    assert attributes["productName"] == {"string": "NVIDIA H100 80GB HBM3"}


def test_validate_warns_on_a_karpenter_pool_serving_its_gpus_only_through_dra(tmp_path: Path) -> None:
    from themelio_gpu.plan.pools import karpenter_dra_pools

    plan = fixture("coverage", "fx-karpenter-taints")
    warned = karpenter_dra_pools(plan.definition)
    assert [w[0] for w in warned] == [
        ("nodePools", 0, "provisioning", "karpenter"),
        ("nodePools", 1, "provisioning", "karpenter"),
    ]
    assert "Keep warm nodes in it, or serve it through the device plugin (dra: false)" in warned[0][1]
    assert karpenter_dra_pools(fixture("example", "gpu-east").definition) == []  # no Karpenter pool


def test_kueue_starts_only_where_the_probe_will_run() -> None:
    """Nothing a stack applies needs Kueue: `sandbox run` and `check` without --probe leave it out (and its tool);
    `sandbox up` starts it for a `sandbox probe` to come."""
    from themelio_gpu.sandbox import components

    plan = fixture("example", "gpu-east")
    assert "Kueue" in [type(c).__name__ for c in components.wanted(plan)]
    assert "Kueue" not in [type(c).__name__ for c in components.wanted(plan, probe_components=False)]
    assert "kueue" in components.tools(plan) and "kueue" not in components.tools(plan, probe_components=False)
    assert [c for c in components.COMPONENTS if c.probe_only] == [
        c for c in components.COMPONENTS if c.name == "kueue"
    ]
