"""Every consumer object of every fixture fleet, judged by the consumer's own definitions and rules.

The CRDs (Kueue v0.19.2, Karpenter v1.14.1, Kubeflow Notebooks v2.0.0-beta.0) are read from
../shared/reference/upstream and applied as the API server applies them (tests/upstream_contracts.py:
schema, defaults, CEL rules, list types); without ../shared those tests skip, with the reason, and fail
under CI=true. The rules that live in the consumers' webhooks and agents (README there) are checked here in
Python, as are the semantics the objects exist for (a reserved pool stays reserved, every notebook choice
lands on its pool); those need no ../shared and always run. The Polyaxon presets are judged by Polyaxon
2.18.0's own code (tests/polyaxon_contracts.py, the `polyaxon` package): always run. docs/consumers.md says
which rule each field follows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import polyaxon_contracts as polyaxon
from tests.conftest import FIXTURES
from tests.upstream_contracts import crd_errors
from themelio_gpu.inputs.clusters.pool_contract import INSTANCE_TYPE, PoolContract
from themelio_gpu.k8s import names as k8s_names
from themelio_gpu.k8s.scheduling import BLOCKING_EFFECTS, TaintSpec, untolerated
from themelio_gpu.outputs.consumer_files import cluster_contract_files, contract_files
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.kueue import pool_capacity
from themelio_gpu.plan.model import ClusterPlan, Fleet
from themelio_gpu.plan.quota import plan_quota
from themelio_gpu.render.contracts import waldur_backend_components
from themelio_gpu.render.polyaxon import PRESETS_FOLDER, QUEUE_NAME_LABEL, Preset, polyaxon_presets

FLEETS = FIXTURES / "fleets"
FLEET_NAMES = tuple(sorted(p.name for p in FLEETS.iterdir() if (p / "stacks").is_dir()))

KUEUE_CRDS = {
    "ResourceFlavor": "kueue_resourceflavors.yaml",
    "ClusterQueue": "kueue_clusterqueues.yaml",
    "LocalQueue": "kueue_localqueues.yaml",
}
NODEPOOL_CRD = "karpenter_nodepools.yaml"
WORKSPACEKIND_CRD = "kubeflow_workspacekinds.yaml"
# waldur-site-agent, plugins/rancher/waldur_site_agent_rancher/backend.py `_filter_quota_components`: the
# component types that get a quota when a project is created.
WALDUR_QUOTA_TYPES = ("cpu", "ram", "storage", "gpu")


@dataclass(frozen=True)
class ClusterObjects:
    """What one cluster hands its consumers: the export files and its synthesized stack."""

    fleet: str
    plan: ClusterPlan
    files: Mapping[str, str]
    stack: Mapping[str, Any]

    @property
    def name(self) -> str:
        return f"{self.fleet}/{self.plan.name}"

    def kueue(self) -> list[dict[str, Any]]:
        return [d for d in yaml.safe_load_all(self.files["kueue.yaml"]) if d]

    def node_pools(self) -> list[dict[str, Any]]:
        manifests = self.stack.get("resource", {}).get("kubernetes_manifest", {})
        return [m["manifest"] for key, m in manifests.items() if key.startswith("karpenter_node_pool_")]

    def pod_configs(self) -> dict[str, Any] | None:
        text = self.files.get("kubeflow-workspacekind-podconfig.yaml")
        return None if text is None else dict(yaml.safe_load(text))

    def spawner(self) -> dict[str, Any]:
        return dict(yaml.safe_load(self.files["kubeflow-spawner-gpus.yaml"])["spawnerFormDefaults"])

    def pool(self, name: str) -> PoolContract:
        return next(p for p in self.plan.pools if p.name == name)

    def polyaxon_presets(self) -> dict[str, str]:
        """Preset path (under the presets folder) -> text."""
        prefix = f"{PRESETS_FOLDER}/"
        return {
            k.removeprefix(prefix): v
            for k, v in self.files.items()
            if k.startswith(prefix) and k.endswith(".yaml")
        }


@cache
def fleet(name: str) -> Fleet:
    folder = FLEETS / name
    return load_fleet(folder / "catalog" / "gpu-catalog.yaml", folder / "stacks")


def cluster_objects(name: str, planned: Fleet, synthesized: Path) -> list[ClusterObjects]:
    """Each cluster of a fleet synthesized into `synthesized`, with its export files."""
    return [
        ClusterObjects(
            name,
            plan,
            cluster_contract_files(plan),
            json.loads((synthesized / "stacks" / plan.name / "cdk.tf.json").read_text(encoding="utf-8")),
        )
        for plan in planned.clusters
    ]


@pytest.fixture(scope="module")
def every_cluster(tmp_path_factory: pytest.TempPathFactory) -> list[ClusterObjects]:
    """Every cluster of every fixture fleet, with its export files and its synthesized stack."""
    from themelio_gpu.outputs.synth import synthesize

    clusters = []
    for name in FLEET_NAMES:
        out = tmp_path_factory.mktemp(name)
        synthesize(fleet(name), out, progress=None)
        clusters += cluster_objects(name, fleet(name), out)
    return clusters


def check_every_contract(clusters: Sequence[ClusterObjects], fleets: Mapping[str, Fleet]) -> None:
    """Every check of this module on a fleet's clusters and fleet-wide files (test_user_fleet.py runs it on yours)."""
    check_kueue_crds(clusters)
    check_node_pool_crds(clusters)
    check_pod_config_crds(pod_config_sets(clusters, fleets))
    check_kueue_webhooks(clusters)
    check_waldur_components(clusters)
    check_reserved_pools_stay_reserved(clusters)
    check_notebook_choices_land(clusters)
    check_instance_type_labels(clusters)
    check_polyaxon_presets(clusters)


def fail_on(problems: Mapping[str, Sequence[str]]) -> None:
    found = {where: p for where, p in problems.items() if p}
    assert not found, "\n".join(f"{where}: {line}" for where, lines in found.items() for line in lines)


# --- the CRDs (../shared/reference/upstream) -------------------------------------------------------------------


def check_kueue_crds(clusters: Sequence[ClusterObjects]) -> None:
    fail_on(
        {
            f"{c.name} {o['kind']} {o['metadata']['name']}": crd_errors(KUEUE_CRDS[o["kind"]], o)
            for c in clusters
            for o in c.kueue()
        }
    )


def test_kueue_objects_pass_kueue_0_19_crds(every_cluster: list[ClusterObjects]) -> None:
    check_kueue_crds(every_cluster)


def check_node_pool_crds(clusters: Sequence[ClusterObjects]) -> dict[str, dict[str, Any]]:
    pools = {f"{c.name} NodePool {p['metadata']['name']}": p for c in clusters for p in c.node_pools()}
    fail_on({where: crd_errors(NODEPOOL_CRD, pool) for where, pool in pools.items()})
    return pools


def test_karpenter_node_pools_pass_the_karpenter_1_14_crd(every_cluster: list[ClusterObjects]) -> None:
    pools = check_node_pool_crds(every_cluster)
    assert len(pools) >= 8  # every fleet's Karpenter pools, valueless taints among them
    assert any("value" not in t for p in pools.values() for t in p["spec"]["template"]["spec"]["taints"])


def workspace_kind(pod_configs: Mapping[str, Any]) -> dict[str, Any]:
    """A WorkspaceKind holding the podConfig options, as a platform team merges them (their first option is
    the default). What is not ours is the least the CRD requires."""
    values = list(pod_configs["values"])
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "WorkspaceKind",
        "metadata": {"name": "jupyterlab"},
        "spec": {
            "spawner": {
                "displayName": "JupyterLab Notebook",
                "description": "A Workspace which runs JupyterLab in a Pod",
                "icon": {"url": "https://jupyter.org/assets/favicons/apple-touch-icon-152x152.png"},
                "logo": {
                    "url": "https://jupyter.org/assets/logos/rectanglelogo-greytext-orangebody-greymoons.svg"
                },
            },
            "podTemplate": {
                "volumeMounts": {"home": "/home/jovyan"},
                "ports": [{"id": "jupyterlab", "defaultDisplayName": "JupyterLab", "protocol": "HTTP"}],
                "options": {
                    "imageConfig": {
                        "spawner": {"default": "jupyterlab"},
                        "values": [
                            {
                                "id": "jupyterlab",
                                "spawner": {"displayName": "JupyterLab"},
                                "spec": {
                                    "image": "ghcr.io/kubeflow/notebooks/workspace-jupyterlab:latest",
                                    "ports": [{"id": "jupyterlab", "port": 8888}],
                                },
                            }
                        ],
                    },
                    "podConfig": {"spawner": {"default": values[0]["id"]}, "values": values},
                },
            },
        },
    }


def workspacekind_webhook_errors(kind: Mapping[str, Any]) -> list[str]:
    """kubeflow/notebooks v2.0.0-beta.0 `workspacekind_webhook.go` ValidateCreate, the rules about options:
    each default is one of the option ids, each redirect's target exists, image ports are declared once."""
    options = kind["spec"]["podTemplate"]["options"]
    errors = []
    for option in ("imageConfig", "podConfig"):
        ids = {v["id"] for v in options[option]["values"]}
        if options[option]["spawner"]["default"] not in ids:
            errors.append(f"default {option} {options[option]['spawner']['default']!r} not found")
        errors += [
            f"{option} {v['id']}: target {v['redirect']['to']!r} does not exist"
            for v in options[option]["values"]
            if "redirect" in v and v["redirect"]["to"] not in ids
        ]
    ports = {p["id"] for p in kind["spec"]["podTemplate"]["ports"]}
    for value in options["imageConfig"]["values"]:
        errors += [
            f"port id {p['id']} missing from podTemplate.ports"
            for p in value["spec"]["ports"]
            if p["id"] not in ports
        ]
    return errors


def pod_config_sets(clusters: Sequence[ClusterObjects], fleets: Mapping[str, Fleet]) -> dict[str, dict[str, Any]]:
    """Every Notebooks 2.0 fragment: the fleet-wide one of each fleet and each cluster's."""
    sets = {}
    for name, planned in fleets.items():
        text = contract_files(planned).get("kubeflow-workspacekind-podconfig.yaml")
        if text is not None:
            sets[f"{name} (catalog)"] = yaml.safe_load(text)
    for cluster in clusters:
        pod_configs = cluster.pod_configs()
        if pod_configs is not None:
            sets[cluster.name] = pod_configs
    return sets


def check_pod_config_crds(sets: Mapping[str, Mapping[str, Any]]) -> None:
    fail_on(
        {
            where: crd_errors(WORKSPACEKIND_CRD, kind) + workspacekind_webhook_errors(kind)
            for where, kind in ((w, workspace_kind(p)) for w, p in sets.items())
        }
    )


def test_workspacekind_pod_configs_pass_the_notebooks_2_0_crd_and_webhook(
    every_cluster: list[ClusterObjects],
) -> None:
    sets = pod_config_sets(every_cluster, {name: fleet(name) for name in FLEET_NAMES})
    assert len(sets) >= 10
    check_pod_config_crds(sets)


def test_the_validators_are_not_vacuous() -> None:
    """Each CRD check finds what the API server refuses: a value: "" taint, an empty podConfig list, a
    duplicate id, a flavor whose resources miss a covered name, an unknown field."""
    taint = {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}
    pool = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "g", "kind": "k", "name": "n"},
                    "requirements": [],
                    "taints": [taint],
                }
            }
        },
    }
    assert any(
        e.startswith("spec.template.spec.taints[0].value: '' does not match")
        for e in crd_errors(NODEPOOL_CRD, pool)
    )
    option = {"id": "a", "spawner": {"displayName": "A GPU"}, "spec": {}}
    kind = workspace_kind({"values": [option]})
    assert crd_errors(WORKSPACEKIND_CRD, kind) == []
    kind["spec"]["podTemplate"]["options"]["podConfig"]["values"] = []
    assert "spec.podTemplate.options.podConfig.values: [] should be non-empty" in crd_errors(
        WORKSPACEKIND_CRD, kind
    )
    kind["spec"]["podTemplate"]["options"]["podConfig"]["values"] = [option, option]
    assert any("has the key ('a',) twice" in e for e in crd_errors(WORKSPACEKIND_CRD, kind))
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "q"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["a/b", "a/c"],
                    "flavors": [{"name": "f", "resources": [{"name": "a/b", "nominalQuota": "1"}]}],
                }
            ]
        },
    }
    assert any(
        "flavors must have the same number of resources" in e
        for e in crd_errors(KUEUE_CRDS["ClusterQueue"], queue)
    )
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "f"},
        "spec": {"nodeLabel": {}},
    }
    assert any("'nodeLabel' was unexpected" in e for e in crd_errors(KUEUE_CRDS["ResourceFlavor"], flavor))


# --- the consumers' webhooks and agents (../shared/reference/upstream/README.md) -----------------------------


def _label_errors(labels: Mapping[str, str]) -> list[str]:
    return [
        f"label {k}: {m}"
        for k, v in labels.items()
        for m in k8s_names.qualified_name(k) + k8s_names.label_value(v)
    ]


def _toleration_errors(toleration: Mapping[str, Any]) -> list[str]:
    """k8s.io/kubernetes pkg/apis/core/validation ValidateTolerations, which Kueue's webhook applies."""
    errors = k8s_names.qualified_name(toleration["key"]) if toleration.get("key") else []
    if toleration.get("operator") == "Exists" and toleration.get("value"):
        errors.append("value must be empty when operator is Exists")
    if toleration.get("effect") not in (None, "", "NoSchedule", "PreferNoSchedule", "NoExecute"):
        errors.append(f"effect {toleration['effect']} is not supported")
    return errors


def kueue_webhook_errors(objects: Sequence[Mapping[str, Any]]) -> list[str]:
    """Kueue v0.19.2 `pkg/webhooks`: a ResourceFlavor's node labels, taints (unique by key and effect,
    resourceflavor_webhook.go validateNodeTaints) and tolerations; a ClusterQueue's flavors list exactly the
    covered resources in order, and each flavor and resource is in one group (clusterqueue_webhook.go)."""
    errors: list[str] = []
    for flavor in (o for o in objects if o["kind"] == "ResourceFlavor"):
        spec, name = flavor["spec"], flavor["metadata"]["name"]
        errors += [f"{name}: {e}" for e in _label_errors(spec.get("nodeLabels", {}))]
        pairs = [(t["key"], t["effect"]) for t in spec.get("nodeTaints", [])]
        errors += [
            f"{name}: taints must be unique by key and effect: {p}" for p in set(pairs) if pairs.count(p) > 1
        ]
        for taint in spec.get("nodeTaints", []):
            errors += [f"{name}: taint {taint['key']}: {m}" for m in k8s_names.qualified_name(taint["key"])]
            errors += [f"{name}: taint value: {m}" for m in k8s_names.label_value(taint.get("value", ""))]
        errors += [f"{name}: toleration: {e}" for t in spec.get("tolerations", []) for e in _toleration_errors(t)]
    for queue in (o for o in objects if o["kind"] == "ClusterQueue"):
        name, groups = queue["metadata"]["name"], queue["spec"]["resourceGroups"]
        flavors = [f["name"] for g in groups for f in g["flavors"]]
        resources = [r for g in groups for r in g["coveredResources"]]
        errors += [f"{name}: flavor {f} in two resource groups" for f in set(flavors) if flavors.count(f) > 1]
        errors += [
            f"{name}: resource {r} in two resource groups" for r in set(resources) if resources.count(r) > 1
        ]
        for group in groups:
            for item in group["flavors"]:
                if [r["name"] for r in item["resources"]] != group["coveredResources"]:
                    errors.append(f"{name}: flavor {item['name']} must list the covered resources in order")
    return errors


def check_kueue_webhooks(clusters: Sequence[ClusterObjects]) -> None:
    fail_on({c.name: kueue_webhook_errors(c.kueue()) for c in clusters})


def test_kueue_objects_pass_kueue_0_19_webhooks(every_cluster: list[ClusterObjects]) -> None:
    check_kueue_webhooks(every_cluster)


def test_waldur_components_get_a_quota_when_a_project_is_created(every_cluster: list[ClusterObjects]) -> None:
    check_waldur_components(every_cluster)


def check_waldur_components(clusters: Sequence[ClusterObjects]) -> None:
    for cluster in clusters:
        quota = plan_quota(cluster.plan)
        components = waldur_backend_components(cluster.plan, quota)
        assert yaml.safe_load(cluster.files["waldur-backend-components.yaml"]) == components
        for component, settings in components.items():
            assert settings["type"] in WALDUR_QUOTA_TYPES and settings["type"] == "gpu", (cluster.name, component)
            assert settings["k8s_resource"] in quota.grants, (cluster.name, component)


# --- what the objects are for ---------------------------------------------------------------------------------


def _matches(selector: Mapping[str, str], pool: PoolContract) -> bool:
    return all(pool.labels.get(k) == v for k, v in selector.items())


def _blocks(tolerations: Sequence[Mapping[str, Any]], pool: PoolContract) -> tuple[TaintSpec, ...]:
    return untolerated(tolerations, pool.taints)


def test_kueue_never_opens_a_reserved_pool_to_a_queue_not_granted_it(every_cluster: list[ClusterObjects]) -> None:
    """Kueue adds a flavor's tolerations and node labels to every pod it admits in it: the pools those pods can
    run on are open pools, or pools the cluster definition grants that queue."""
    assert check_reserved_pools_stay_reserved(every_cluster) >= 4  # admitted through the queues granting them


def check_reserved_pools_stay_reserved(clusters: Sequence[ClusterObjects]) -> int:
    """The reserved pools some queue admits to (each, only from the queue granting it)."""
    reserved_seen = 0
    for cluster in clusters:
        objects = cluster.kueue()
        flavors = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "ResourceFlavor"}
        grants = {q.name: set(q.pools) for q in cluster.plan.definition.kueue.queues}
        for queue in (o for o in objects if o["kind"] == "ClusterQueue"):
            allowed = grants.get(queue["metadata"]["name"], set())
            for item in (f for g in queue["spec"]["resourceGroups"] for f in g["flavors"]):
                spec = flavors[item["name"]]  # a flavor the queue names exists
                reached = [
                    p
                    for p in cluster.plan.pools
                    if _matches(spec["nodeLabels"], p) and not _blocks(spec.get("tolerations", []), p)
                ]
                for pool in reached:
                    reserved_seen += bool(pool.reservations)
                    assert not pool.reservations or pool.name in allowed, (
                        f"{cluster.name}: queue {queue['metadata']['name']} admits to reserved pool {pool.name} "
                        f"through flavor {item['name']}"
                    )
        locals_ = [o for o in objects if o["kind"] == "LocalQueue"]
        queues = {o["metadata"]["name"] for o in objects if o["kind"] == "ClusterQueue"}
        assert all(q["spec"]["clusterQueue"] in queues for q in locals_), cluster.name
    return reserved_seen


def test_every_notebook_choice_lands_on_a_pool_serving_it(every_cluster: list[ClusterObjects]) -> None:
    """Notebooks 2.0: the option's node selector and tolerations reach a pool of its offering. v1: the GPU
    choice sets only the limit, so some toleration group must tolerate a pool of its offering."""
    check_notebook_choices_land(every_cluster)


def check_notebook_choices_land(clusters: Sequence[ClusterObjects]) -> None:
    for cluster in clusters:
        by_name = {o.name: o for o in cluster.plan.offerings}
        grant_of = {v: k for k, v in plan_quota(cluster.plan).grant_names.items()}
        pod_configs = cluster.pod_configs()
        for option in pod_configs["values"] if pod_configs else ():
            (name,) = option["spec"]["resources"]["limits"]
            pools = [cluster.pool(p) for p in cluster.plan.placements[grant_of[name]]]
            assert any(
                _matches(option["spec"]["nodeSelector"], p) and not _blocks(option["spec"]["tolerations"], p)
                for p in pools
            ), (cluster.name, option["id"])
        spawner = cluster.spawner()
        groups = [g["tolerations"] for g in spawner["tolerationGroup"]["options"]] + [[]]
        keys = [g["groupKey"] for g in spawner["tolerationGroup"]["options"]]
        assert len(set(keys)) == len(keys), cluster.name
        for vendor in spawner["gpus"]["value"]["vendors"]:
            offering = by_name[grant_of[vendor["limitsKey"]]]
            pools = [cluster.pool(p) for p in cluster.plan.placements[offering.name]]
            assert any(not _blocks(group, p) for group in groups for p in pools), (cluster.name, vendor)
        # The stack publishes the same choices as catalog export.
        outputs = cluster.stack["output"]
        assert outputs["kubeflow_spawner_gpus"]["value"] == {"spawnerFormDefaults": spawner}
        assert outputs.get("kubeflow_workspacekind_podconfig", {}).get("value") == pod_configs


def test_the_instance_type_label_is_written_only_where_a_pool_sets_it(every_cluster: list[ClusterObjects]) -> None:
    """node.kubernetes.io/instance-type belongs to the kubelet and cloud controller on cloud nodes (and to
    Karpenter on its nodes); no object of ours writes it unless the pool's instanceType says so."""
    assert check_instance_type_labels(every_cluster) == {True, False}  # pools with and without instanceType


def check_instance_type_labels(clusters: Sequence[ClusterObjects]) -> set[bool]:
    """Whether the pools seen set instanceType (True) or not (False)."""
    seen: set[bool] = set()
    for cluster in clusters:
        definitions = {p.name: p for p in cluster.plan.definition.node_pools}
        for pool in cluster.plan.pools:
            wanted = definitions[pool.name].instance_type
            assert pool.labels.get(INSTANCE_TYPE) == wanted, (cluster.name, pool.name)
            seen.add(wanted is not None)
            output = cluster.stack["output"][f"node_pool_{pool.name.replace('-', '_')}"]["value"]
            assert output["labels"].get(INSTANCE_TYPE) == wanted
            assert all(a != "--register-with-taints=" for a in output["kubelet_args"]), (cluster.name, pool.name)
            assert any(a.startswith("--register-with-taints=") for a in output["kubelet_args"]) == bool(
                pool.taints
            )
        labels = cluster.stack.get("resource", {}).get("kubernetes_labels", {})
        for resource_id, resource in labels.items():
            pool_name = resource["labels"][cluster.plan.names.pool_label]
            assert resource["labels"].get(INSTANCE_TYPE) == definitions[pool_name].instance_type, resource_id
        for node_pool in cluster.node_pools():
            assert INSTANCE_TYPE not in node_pool["spec"]["template"]["metadata"]["labels"]
        for flavor in (o for o in cluster.kueue() if o["kind"] == "ResourceFlavor"):
            value = flavor["spec"]["nodeLabels"].get(INSTANCE_TYPE)
            assert value is None or any(d.instance_type == value for d in definitions.values()), cluster.name
    return seen


def test_consumers_fixture_fleet_covers_each_case() -> None:
    """The fleet tests/fixtures/fleets/consumers holds each case the consumers' rules are about."""
    plans = {p.name: p for p in fleet("consumers").clusters}
    a100 = [p for p in plans["mixed-taints"].pools if p.product.key == "a100-40gb"]
    assert {t.value for p in a100 for t in p.taints if t.key == "nvidia.com/gpu"} == {"", "present"}
    assert any(not p.taints for p in a100)
    reserved = plans["reserved"]
    assert [p.name for p in reserved.pools if p.reservations] == ["h100-train", "h100-preemptible"]
    karpenter = [p for p in plans["karpenter-valueless"].definition.node_pools if p.provisioning.karpenter]
    assert len(karpenter) == 2 and all(any(not t.value for t in p.taints or ()) for p in karpenter)
    notebooks = plans["notebooks"]
    assert any(p.reservations and p.product.key == "l40s" for p in notebooks.pools)
    assert all(t.effect in BLOCKING_EFFECTS for p in notebooks.pools for t in p.taints)


# --- Polyaxon 2.18.0: the presets, by the polyaxon package's own schema, merge and converter ---------------


def test_polyaxon_is_the_version_the_presets_are_checked_against() -> None:
    """docs/consumers.md names the version; the Pipfile pins it (a development dependency)."""
    assert polyaxon.installed_version() == polyaxon.POLYAXON_VERSION


def _plan(fleet_name: str, cluster: str) -> ClusterPlan:
    plan = fleet(fleet_name).cluster(cluster)
    assert plan is not None
    return plan


def _lands(spec: Mapping[str, Any], pool: PoolContract) -> bool:
    return _matches(spec.get("nodeSelector") or {}, pool) and not _blocks(spec.get("tolerations") or [], pool)


def _kueue_admitted(cluster: ClusterObjects, preset: Preset, spec: Mapping[str, Any]) -> set[str]:
    """The pools the run lands on once Kueue admits it through the preset's queue: for each flavor of the queue
    that can admit its name (a nominalQuota, or a pool of unknown size whose quota is raised by hand) and whose
    nodeLabels agree with the pod's node selector, Kueue adds the flavor's nodeLabels and tolerations."""
    assert preset.queue is not None
    objects = cluster.kueue()
    flavors = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "ResourceFlavor"}
    (queue,) = [o for o in objects if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == preset.queue.name]
    selector = spec.get("nodeSelector") or {}
    reached: set[str] = set()
    for item in (f for g in queue["spec"]["resourceGroups"] for f in g["flavors"]):
        flavor = flavors[item["name"]]
        labels = flavor["nodeLabels"]
        if any(selector.get(k, v) != v for k, v in labels.items()):
            continue  # Kueue skips a flavor its node labels would contradict
        quota = {r["name"]: r["nominalQuota"] for r in item["resources"]}
        pools = [p for p in cluster.plan.pools if _matches(labels, p)]
        if quota.get(preset.resource_name, "0") == "0" and all(
            pool_capacity(cluster.plan, p) is not None for p in pools
        ):
            continue
        admitted = {
            "nodeSelector": {**selector, **labels},
            "tolerations": [*(spec.get("tolerations") or []), *flavor.get("tolerations", [])],
        }
        reached |= {p.name for p in pools if _lands(admitted, p)}
    return reached


def check_polyaxon_presets(clusters: Sequence[ClusterObjects]) -> int:
    """Every preset passes Polyaxon's schema and runPatch validation; `polyaxon run -f <recipe> -f <preset>` on a
    minimal job gives a pod asking for one device of the offering's grant name that lands, by the pools' labels
    and taints, on pools serving the offering: by itself, or (a reserved pool's offering) only once Kueue admits
    it through the queue its label names. Returns how many presets were checked."""
    checked = 0
    for cluster in clusters:
        planned = {p.path: p for p in polyaxon_presets(cluster.plan).presets}
        files = cluster.polyaxon_presets()
        assert set(files) == set(planned), cluster.name
        for path, text in sorted(files.items()):
            where = f"{cluster.name} {path}"
            fail_on({where: polyaxon.preset_errors(text)})
            preset = planned[path]
            job = polyaxon.run_job(text)
            spec = polyaxon.pod_spec(job)
            assert polyaxon.main_container(job)["resources"] == {"limits": {preset.resource_name: "1"}}, where
            assert "affinity" not in spec, where
            serving = set(cluster.plan.placements[preset.offering.name])
            landed = {p.name for p in cluster.plan.pools if _lands(spec, p)}
            labels = job["metadata"]["labels"], job["batchJobSpec"]["template"]["metadata"]["labels"]
            if preset.queue is None:
                assert landed & serving and set(preset.pools) == landed & serving, (where, landed)
                assert all(QUEUE_NAME_LABEL not in x for x in labels), where
            else:
                # Without Kueue the reservation holds; admitted through the queue, the run reaches its pools.
                assert not landed & serving, (where, landed)
                assert all(x[QUEUE_NAME_LABEL] == preset.queue.name for x in labels), where
                admitted = _kueue_admitted(cluster, preset, spec)
                assert admitted and admitted <= serving and admitted == set(preset.pools), (where, admitted)
            checked += 1
    return checked


def test_polyaxon_presets_pass_polyaxons_schema_and_land_on_the_offerings_pools(
    every_cluster: list[ClusterObjects],
) -> None:
    checked = check_polyaxon_presets(every_cluster)
    assert checked >= 100
    queued = [
        p for c in every_cluster for p in polyaxon_presets(c.plan).presets if p.queue is not None
    ]  # example's gpu-west H100, the consumers' karpenter-valueless and notebooks, own-names' acme-east
    assert len(queued) >= 3


def test_a_reserved_pools_offering_without_a_queue_is_left_out_saying_why(
    every_cluster: list[ClusterObjects],
) -> None:
    """As the Kubeflow files leave out what no notebook could land with: the reason, at the top of left-out.txt."""
    (cluster,) = [c for c in every_cluster if c.name == "terraform/tf-local"]
    assert "nvidia.com/a100-mig-1g.5gb.yaml" not in cluster.polyaxon_presets()
    assert cluster.files[f"{PRESETS_FOLDER}/left-out.txt"] == (
        "# nvidia.com/a100-mig-1g.5gb gets no Polyaxon preset: pool sliced carries "
        "fixture.example/preemptible:NoExecute, which its tolerations do not tolerate; no kueue.queues entry "
        "grants pool sliced\n"
    )
    (west,) = [c for c in every_cluster if c.name == "example/gpu-west"]
    assert f"{PRESETS_FOLDER}/left-out.txt" not in west.files  # its H100 pool is granted: a queue preset


def test_polyaxon_count_is_one_device_and_a_later_file_changes_it() -> None:
    """Polyaxon merges each file's runPatch in order and applies the result to the recipe's run with the
    operation's strategy (post_merge): the preset's count replaces the recipe's, and a later file's
    runPatch.container.resources.limits replaces the preset's. A later file's root `resources` shortcut (and so
    `--gpu`) is applied before the presets' runPatch: it leaves the preset's limit and adds a request, which
    the API server refuses for an extended resource (limit 1, request 4), or asks for nvidia.com/gpu beside it."""
    presets = polyaxon_presets(_plan("example", "gpu-east")).presets
    (preset,) = [p for p in presets if p.offering.name == "nvidia.com/a100"]
    text = preset.text()
    assert polyaxon.main_container(polyaxon.run_job(text))["resources"] == {"limits": {"nvidia.com/a100": "1"}}
    later = polyaxon.run_job(text, polyaxon.count_overlay("nvidia.com/a100", 4))
    assert polyaxon.main_container(later)["resources"] == {"limits": {"nvidia.com/a100": "4"}}
    recipe = json.loads(json.dumps(polyaxon.RECIPE))
    recipe["run"]["container"]["resources"] = {"limits": {"nvidia.com/a100": 2, "cpu": 2}}
    replaced = polyaxon.main_container(polyaxon.run_job(text, recipe=recipe))["resources"]
    assert replaced == {"limits": {"nvidia.com/a100": "1", "cpu": "2"}}
    shortcut = polyaxon.run_job(text, yaml.safe_dump({"resources": {"nvidia.com/a100": 4}}))
    assert polyaxon.main_container(shortcut)["resources"] == {
        "limits": {"nvidia.com/a100": "1"},
        "requests": {"nvidia.com/a100": "4"},
    }
    gpu = polyaxon.run_job(text, yaml.safe_dump({"resources": {"gpu": 2}}))
    assert polyaxon.main_container(gpu)["resources"]["limits"] == {"nvidia.com/a100": "1", "nvidia.com/gpu": "2"}


def test_the_polyaxon_checks_are_not_vacuous() -> None:
    """Polyaxon refuses tolerations given as a mapping and an unknown environment field; a preset naming its
    run is refused by our own rule; the placement check sees a pod that lands nowhere."""
    base = {"kind": "operation", "isPreset": True}
    bad_tolerations = {**base, "runPatch": {"environment": {"tolerations": {"key": "nvidia.com/gpu"}}}}
    assert any("tolerations" in e for e in polyaxon.preset_errors(yaml.safe_dump(bad_tolerations)))
    unknown = {**base, "runPatch": {"environment": {"nodeSelectors": {"a": "b"}}}}
    assert any("nodeSelectors" in e for e in polyaxon.preset_errors(yaml.safe_dump(unknown)))
    one = {**base, "runPatch": {"container": {"resources": {"limits": {"nvidia.com/a100": 1}}}}}
    assert polyaxon.preset_errors(yaml.safe_dump(one)) == []
    assert polyaxon.preset_errors(yaml.safe_dump({**one, "name": "a100"})) == ["sets name"]
    not_preset = {k: v for k, v in one.items() if k != "isPreset"}
    assert polyaxon.preset_errors(yaml.safe_dump(not_preset)) == ["not an operation with isPreset: true"]
    pool = next(p for p in _plan("example", "gpu-west").pools if p.name == "h100")
    assert not _lands({"nodeSelector": {"accelerator": "nvidia-h100-80gb"}}, pool)  # reserved: not tolerated
