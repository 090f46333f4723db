"""What the catalog feeds to its consumers: Waldur, Kubeflow and the workload service's gpuLabel list.

Each function takes the offerings to publish (a whole catalog, or what one cluster serves) and returns
plain data, rendered as YAML files by the CLI and as Terraform outputs and a ConfigMap by the stacks.
Quota keys come from the cluster's quota plan (plan/quota.py), never from the catalog alone: which keys
close a cluster depends on its classes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from themelio_gpu.constructs.naming import FIELD_MANAGER
from themelio_gpu.inputs.catalog.catalog import ResolvedOffering, workspacekind_pod_config_id
from themelio_gpu.inputs.catalog.model import Lifecycle
from themelio_gpu.plan.fleet import ClusterPlan
from themelio_gpu.plan.quota import ClusterQuotaPlan, requests_key

# Waldur's Rancher plugin applies quotas as one ResourceQuota of this name per project namespace.
WALDUR_RESOURCE_QUOTA_NAME = "custom-resource-quota"
# The keys no Waldur component sets, all 0, in a ResourceQuota of their own: Waldur rewrites its own one.
CLOSED_RESOURCE_QUOTA_NAME = "themelio-gpu-closed"
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
            "resourceQuota": CLOSED_RESOURCE_QUOTA_NAME,
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


def resource_quota(name: str, namespace: str | None, hard: Mapping[str, str]) -> dict[str, Any]:
    """A ResourceQuota; without a namespace it is applied with `kubectl apply -n <namespace>`."""
    metadata: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": metadata, "spec": {"hard": dict(hard)}}


def closed_resource_quota(quota: ClusterQuotaPlan) -> dict[str, Any]:
    """For every namespace beside Waldur's quota: the keys no Waldur component sets, at 0."""
    zero = quota.zero_keys(quota.grant_names.values())
    return resource_quota(CLOSED_RESOURCE_QUOTA_NAME, None, dict.fromkeys(zero, "0"))


def _kubeflow_offerings(offerings: Iterable[ResolvedOffering]) -> list[ResolvedOffering]:
    # Deprecated offerings are left out: new notebooks should not start on them.
    return [o for o in offerings if o.kubeflow_ui_name is not None and o.lifecycle is Lifecycle.active]


def kubeflow_spawner_gpus(
    offerings: Iterable[ResolvedOffering], names: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The `spawnerFormDefaults.gpus` block of Kubeflow's spawner_ui_config.yaml.

    `names` maps an offering to the resource name to request (a cluster's grant names); default its own.
    """
    vendors = [
        {"limitsKey": (names or {}).get(o.name, o.name), "uiName": o.kubeflow_ui_name}
        for o in _kubeflow_offerings(offerings)
    ]
    return {
        "spawnerFormDefaults": {
            "gpus": {"readOnly": False, "value": {"num": "none", "vendor": "", "vendors": vendors}}
        }
    }


def kubeflow_workspacekind_pod_configs(
    offerings: Iterable[ResolvedOffering], names: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Kubeflow Notebooks 2.0: `WorkspaceKind.spec.podTemplate.options.podConfig.values`, one per offering.

    Each option asks for one device by the resource name (a cluster's grant name) with the offering's
    placement; merge them into a WorkspaceKind's podConfig values (add CPU and memory to taste).
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
                    "tolerations": [t.model_dump(exclude_none=True) for t in offering.tolerations],
                    "resources": {"requests": {name: "1"}, "limits": {name: "1"}},
                },
            }
        )
    return {"values": values}


def gpu_labels_config(offerings: Iterable[ResolvedOffering], with_aliases: bool = True) -> dict[str, Any]:
    """The gpuLabel allow-list (THEMELIO_GPU_LABELS_CONFIG): each allowed value with its placement."""
    labels: dict[str, Any] = {}
    for offering in offerings:
        placement = {
            "displayName": offering.display_name,
            "nodeSelector": dict(offering.node_selector),
            "tolerations": [t.model_dump(exclude_none=True) for t in offering.tolerations],
            "deprecated": offering.lifecycle is Lifecycle.deprecated,
        }
        labels[offering.name] = {**placement, "resolvesTo": offering.name}
        if with_aliases:
            for alias in offering.aliases:
                labels[alias.name] = {**placement, "deprecated": True, "resolvesTo": offering.name}
    return {"gpuLabels": dict(sorted(labels.items()))}
