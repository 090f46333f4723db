"""What the catalog feeds to its consumers: Waldur, Kubeflow and the workload service's gpuLabel list.

Each function takes the offerings to publish (a whole catalog, or what one cluster serves) and returns
plain data, rendered as YAML files by the CLI and as Terraform outputs and a ConfigMap by the stacks.
Quota keys come from the cluster's quota plan (plan/quota.py), never from the catalog alone: which keys
close a cluster depends on its classes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from themelio_gpu.inputs.catalog.catalog import ResolvedOffering
from themelio_gpu.inputs.catalog.model import Lifecycle
from themelio_gpu.inputs.catalog.names import Names
from themelio_gpu.inputs.catalog.notebooks import workspacekind_pod_config_id
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.k8s.quota import requests_key
from themelio_gpu.k8s.scheduling import selector_mismatches, untolerated
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.plan.quota import ClusterQuotaPlan

# Waldur's Rancher plugin applies quotas as one ResourceQuota of this name per project namespace.
WALDUR_RESOURCE_QUOTA_NAME = "custom-resource-quota"
# The keys no Waldur component sets, all 0, go in a ResourceQuota of their own (Waldur rewrites its own one):
# `Names.closed_quota_name`, themelio-gpu-closed by default.
# waldur-site-agent's Rancher backend (`_filter_quota_components`) gives a new project a quota only for
# components whose type is cpu, ram, storage or gpu: without it the project's GPUs are unlimited until a
# later limit update. `k8s_resource` still decides the key (`requests.<k8s_resource>`).
WALDUR_GPU_COMPONENT_TYPE = "gpu"


def shared_devices(offerings: Iterable[ResolvedOffering]) -> dict[str, list[str]]:
    """Offering -> the other offerings (of those given) whose classes can take some of the same devices."""
    items = list(offerings)
    return {
        o.name: sorted(x.name for x in items if x.name != o.name and set(o.takes) & set(x.takes)) for o in items
    }


def waldur_quota_mapping(plan: ClusterPlan, quota: ClusterQuotaPlan) -> dict[str, Any]:
    """Per cluster: the key each Waldur component sets, and the keys that are 0 in every namespace.

    `k8s_resource` is what waldur-site-agent's component config takes; it turns it into `requests.<name>`.
    A component must set its key in every namespace (0 when the project has no grant): a key missing
    from a namespace's quotas limits nothing. `sharesDevicesWith` names the offerings whose classes can take
    some of the same devices (a capability offering with `overlaps: allowed`, the generic `nvidia.com/gpu`):
    their grants draw on one pool of devices, so they do not add up (README: Overlapping offerings and quotas).
    """
    sharing = shared_devices(plan.offerings)
    components = []
    for offering in plan.offerings:
        name = quota.grant_names.get(offering.name)
        if name is None:
            continue
        row: dict[str, Any] = {
            "offering": offering.name,
            "component": offering.waldur_component,
            "unit": offering.unit,
            "k8s_resource": name,
            "quotaKey": requests_key(name),
            "lifecycle": offering.lifecycle.value,
        }
        if name != offering.name:
            row["grantSitsOn"] = "migration alias (the old name) until serveMigrationAliases: false"
        if sharing[offering.name]:
            row["sharesDevicesWith"] = sharing[offering.name]
        components.append(row)
    return {
        "cluster": plan.name,
        "resourceQuota": WALDUR_RESOURCE_QUOTA_NAME,
        "components": components,
        "zeroInEveryNamespace": {
            "resourceQuota": plan.names.closed_quota_name,
            "keys": list(quota.zero_keys(quota.grant_names.values())),
        },
    }


def waldur_backend_components(plan: ClusterPlan, quota: ClusterQuotaPlan) -> dict[str, Any]:
    """`backend_components` entries for the cluster's waldur-site-agent offering (component -> settings)."""
    return {
        o.waldur_component: {
            "accounting_type": "limit",
            "k8s_resource": quota.grant_names[o.name],
            "label": o.display_name,
            "measured_unit": o.unit,
            "type": WALDUR_GPU_COMPONENT_TYPE,
            "unit_factor": 1,
        }
        for o in sorted(plan.offerings, key=lambda o: o.waldur_component)
        if o.name in quota.grant_names
    }


def resource_quota(name: str, namespace: str | None, hard: Mapping[str, str], names: Names) -> dict[str, Any]:
    """A ResourceQuota; without a namespace it is applied with `kubectl apply -n <namespace>`."""
    metadata: dict[str, Any] = {"name": name, "labels": names.managed_by}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": metadata, "spec": {"hard": dict(hard)}}


def closed_resource_quota(quota: ClusterQuotaPlan, names: Names) -> dict[str, Any]:
    """For every namespace beside Waldur's quota: the keys no Waldur component sets, at 0."""
    zero = quota.zero_keys(quota.grant_names.values())
    return resource_quota(names.closed_quota_name, None, dict.fromkeys(zero, "0"), names)


def _kubeflow_offerings(offerings: Iterable[ResolvedOffering]) -> list[ResolvedOffering]:
    # Deprecated offerings are left out: new notebooks should not start on them.
    return [o for o in offerings if o.kubeflow_ui_name is not None and o.lifecycle is Lifecycle.active]


def offering_tolerations(offering: ResolvedOffering) -> list[dict[str, Any]]:
    return [t.model_dump(exclude_none=True) for t in offering.tolerations]


@dataclass(frozen=True)
class NotebookChoices:
    """The GPU choices of one cluster's notebook form, and why the others are not offered there."""

    offerings: tuple[ResolvedOffering, ...]
    left_out: tuple[str, ...]
    """One sentence per offering of the catalog's notebook form that cannot land on any of its pools here."""


def why_not_on(offering: ResolvedOffering, pool: PoolContract) -> str | None:
    """Why a pod with the offering's node selector and tolerations cannot run on the pool (None: it can)."""
    mismatched = selector_mismatches(offering.node_selector, pool.labels)
    if mismatched:
        return f"pool {pool.name} lacks its node selector's {', '.join(mismatched)}"
    blocking = untolerated(offering_tolerations(offering), pool.taints)
    if blocking:
        return f"pool {pool.name} carries {', '.join(map(str, blocking))}, which its tolerations do not tolerate"
    return None


def cluster_notebook_choices(plan: ClusterPlan) -> NotebookChoices:
    """The offerings a notebook of this cluster can ask for: those that land on some pool serving them.

    A notebook gets the offering's node selector (Notebooks 2.0) and tolerations (2.0, or the v1 form's
    toleration group). A pool tainted beyond what they tolerate is reserved for other work (Kueue admits there
    only through a queue the cluster grants it, docs/consumers.md): an offering served only there would leave
    every notebook Pending, so it is left out, with the reason.
    """
    pools = {p.name: p for p in plan.pools}
    chosen: list[ResolvedOffering] = []
    left_out: list[str] = []
    for offering in _kubeflow_offerings(plan.offerings):
        reasons = [why_not_on(offering, pools[name]) for name in plan.placements[offering.name]]
        if None in reasons:
            chosen.append(offering)
        else:
            left_out.append(
                f"{offering.name} is left out of this cluster's notebook form: {'; '.join(filter(None, reasons))}"
            )
    return NotebookChoices(tuple(chosen), tuple(left_out))


def _unreachable_on(offering: ResolvedOffering, plan: ClusterPlan) -> list[str] | None:
    """Why a pod with only the offering's placement lands on none of the cluster's pools serving it (None: it
    lands on one of them)."""
    pools = {p.name: p for p in plan.pools}
    reasons = [(name, why_not_on(offering, pools[name])) for name in plan.placements.get(offering.name, ())]
    if any(reason is None for _, reason in reasons):
        return None
    granted = {pool: queue.name for queue in plan.definition.kueue.queues for pool in queue.pools}
    return [
        f"{reason}; {f'queue {granted[name]} grants it' if name in granted else 'no kueue.queues entry grants it'}"
        for name, reason in reasons
        if reason
    ]


def unreachable_grants(plan: ClusterPlan, offerings: Iterable[str], namespace: str) -> list[str]:
    """One sentence per granted offering the namespace's pods cannot be placed with: the cluster serves it only
    on reserved pools, and no `kueue.queues` entry granting one of them admits the namespace."""
    pools = {p.name: p for p in plan.pools}
    served = {o.name: o for o in plan.offerings}
    queue_of = {pool: queue for queue in plan.definition.kueue.queues for pool in queue.pools}
    found = []
    for name in sorted(set(offerings)):
        offering = served.get(name)
        if offering is None:
            continue
        reasons = [(pool, why_not_on(offering, pools[pool])) for pool in plan.placements.get(name, ())]
        if not reasons or any(reason is None for _, reason in reasons):
            continue
        queues = {queue_of[pool].name: queue_of[pool] for pool, _ in reasons if pool in queue_of}
        if any(namespace in queue.namespaces for queue in queues.values()):
            continue
        granting = "; ".join(f"queue {q.name} admits {', '.join(q.namespaces)}" for q in queues.values())
        found.append(
            f"{name}: cluster {plan.name} serves it only on reserved pools ({'; '.join(r for _, r in reasons if r)}),"
            f" and no kueue.queues entry granting them admits {namespace} "
            f"({granting or 'none grants them'}): its pods would stay Pending. Add {namespace} to the namespaces "
            "of the queue granting the pool, or grant an offering an open pool serves"
        )
    return found


def fleet_choices(catalog: Iterable[ResolvedOffering], clusters: Iterable[ClusterPlan]) -> NotebookChoices:
    """The catalog's offerings the fleet-wide consumer files offer: all but those that every cluster serving them
    serves only on pools a pod with the offering's own node selector and tolerations cannot land on (reserved
    pools: Kueue admits there only through the queue that grants the pool). Such an offering, offered with only
    its GPU toleration, would leave every pod Pending; each cluster's own files say the same per cluster.
    An offering no cluster serves yet stays: the catalog offers it, and no pool stands against it."""
    plans = list(clusters)
    chosen: list[ResolvedOffering] = []
    left_out: list[str] = []
    for offering in catalog:
        serving = [plan for plan in plans if offering.name in plan.placements]
        unreachable = [(plan, _unreachable_on(offering, plan)) for plan in serving]
        if not serving or any(reasons is None for _, reasons in unreachable):
            chosen.append(offering)
            continue
        why = "; ".join(f"cluster {plan.name}: {'; '.join(reasons or ())}" for plan, reasons in unreachable)
        left_out.append(
            f"{offering.name} is left out: only reserved pools serve it ({why}); only work that Kueue admits "
            "through a queue granting such a pool lands there (each cluster's kueue.yaml)"
        )
    return NotebookChoices(tuple(chosen), tuple(left_out))


def _toleration_text(toleration: Mapping[str, Any]) -> str:
    key = toleration.get("key") or "*"
    value = f"={toleration.get('value', '')}" if toleration.get("operator") == "Equal" else ""
    effect = f":{toleration['effect']}" if toleration.get("effect") else ""
    return f"{key}{value}{effect}"


def kubeflow_toleration_groups(offerings: Iterable[ResolvedOffering]) -> list[dict[str, Any]]:
    """`tolerationGroup.options` of the v1 form: one group per distinct set of tolerations the GPU choices need.

    The v1 form's GPU choice sets only `limits[<limitsKey>]` (form.py `set_notebook_gpus`); tolerations come
    from the toleration group the user picks (`set_notebook_tolerations`). Without one, a notebook asking for a
    GPU stays Pending on a tainted pool: Kubernetes' ExtendedResourceToleration, where enabled, tolerates only
    a taint keyed by the requested name (`nvidia.com/a100`), not the pools' `nvidia.com/gpu`.
    """
    groups: dict[str, tuple[list[dict[str, Any]], list[str]]] = {}
    for offering in _kubeflow_offerings(offerings):
        tolerations = offering_tolerations(offering)
        if tolerations:
            key = ",".join(_toleration_text(t) for t in tolerations)
            groups.setdefault(key, (tolerations, []))[1].append(offering.kubeflow_ui_name or offering.name)
    return [
        {"groupKey": key, "displayName": f"GPU nodes: {', '.join(choices)}", "tolerations": tolerations}
        for key, (tolerations, choices) in groups.items()
    ]


def kubeflow_spawner_gpus(
    offerings: Iterable[ResolvedOffering], names: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The `spawnerFormDefaults.gpus` and `tolerationGroup` blocks of Kubeflow's spawner_ui_config.yaml (v1).

    `names` maps an offering to the resource name to request (a cluster's grant names); default its own. No
    toleration group is the default: a CPU notebook needs none (the user picks the group of the chosen GPU).
    """
    chosen = _kubeflow_offerings(offerings)
    vendors = [{"limitsKey": (names or {}).get(o.name, o.name), "uiName": o.kubeflow_ui_name} for o in chosen]
    return {
        "spawnerFormDefaults": {
            "gpus": {"readOnly": False, "value": {"num": "none", "vendor": "", "vendors": vendors}},
            "tolerationGroup": {"readOnly": False, "value": "", "options": kubeflow_toleration_groups(chosen)},
        }
    }


def kubeflow_workspacekind_pod_configs(
    offerings: Iterable[ResolvedOffering], names: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """Kubeflow Notebooks 2.0: `WorkspaceKind.spec.podTemplate.options.podConfig.values`, one per offering.

    Each option asks for one device by the resource name (a cluster's grant name) with the offering's
    placement; merge them into a WorkspaceKind's podConfig values (add CPU and memory to taste). None when no
    offering is a notebook choice: the CRD wants at least one value, so there is no fragment to merge.
    """
    values = []
    for offering in _kubeflow_offerings(offerings):
        name = (names or {}).get(offering.name, offering.name)
        spawner: dict[str, Any] = {"displayName": offering.kubeflow_ui_name}
        if len(offering.description) >= 2:
            spawner["description"] = offering.description
        values.append(
            {
                "id": workspacekind_pod_config_id(offering.name),
                "spawner": spawner,
                "spec": {
                    "nodeSelector": dict(offering.node_selector),
                    "tolerations": offering_tolerations(offering),
                    "resources": {"requests": {name: "1"}, "limits": {name: "1"}},
                },
            }
        )
    return {"values": values} if values else None


def gpu_labels_config(offerings: Iterable[ResolvedOffering], with_aliases: bool = True) -> dict[str, Any]:
    """The gpuLabel allow-list (THEMELIO_GPU_LABELS_CONFIG): each allowed value with its placement."""
    labels: dict[str, Any] = {}
    for offering in offerings:
        placement = {
            "displayName": offering.display_name,
            "nodeSelector": dict(offering.node_selector),
            "tolerations": offering_tolerations(offering),
            "deprecated": offering.lifecycle is Lifecycle.deprecated,
        }
        labels[offering.name] = {**placement, "resolvesTo": offering.name}
        if with_aliases:
            for alias in offering.aliases:
                labels[alias.name] = {**placement, "deprecated": True, "resolvesTo": offering.name}
    return {"gpuLabels": dict(sorted(labels.items()))}
