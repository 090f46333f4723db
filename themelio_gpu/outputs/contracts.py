"""What the catalog feeds to its consumers: Waldur, Kubeflow and the workload service's gpuLabel list.

Each function takes the offerings to publish (a whole catalog, or what one cluster serves) and returns
plain data, rendered as YAML files by the CLI and as Terraform outputs and a ConfigMap by the stacks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from themelio_gpu.inputs.catalog.catalog import ResolvedOffering
from themelio_gpu.inputs.catalog.model import Lifecycle

# Waldur's Rancher plugin applies quotas as one ResourceQuota of this name per project namespace.
WALDUR_RESOURCE_QUOTA_NAME = "custom-resource-quota"


def shared_devices(offerings: Iterable[ResolvedOffering]) -> dict[str, list[str]]:
    """Offering -> the other offerings (of those given) whose classes can take some of the same devices."""
    items = list(offerings)
    return {
        o.name: sorted(x.name for x in items if x.name != o.name and set(o.takes) & set(x.takes)) for o in items
    }


def waldur_quota_mapping(offerings: Iterable[ResolvedOffering], with_aliases: bool = True) -> list[dict[str, Any]]:
    """One row per offering: the Waldur component and the ResourceQuota key it maps to.

    `k8s_resource` is what waldur-site-agent's component config takes; it turns it into `requests.<name>`.
    `sharesDevicesWith` names the offerings that can take the same devices (a capability offering, the
    generic `nvidia.com/gpu`): their quotas draw on one pool of devices, so they do not add up.
    """
    offerings = list(offerings)
    sharing = shared_devices(offerings)
    rows = []
    for offering in offerings:
        row: dict[str, Any] = {
            "offering": offering.name,
            "component": offering.waldur_component,
            "unit": offering.unit,
            "k8s_resource": offering.name,
            "quotaKey": offering.quota_key,
            "lifecycle": offering.lifecycle.value,
        }
        if with_aliases and offering.aliases:
            # During a migration old workloads still count against the old keys.
            row["aliasQuotaKeys"] = [f"requests.{a.name}" for a in offering.aliases]
        if sharing[offering.name]:
            row["sharesDevicesWith"] = sharing[offering.name]
        rows.append(row)
    return rows


def waldur_backend_components(offerings: Iterable[ResolvedOffering]) -> dict[str, Any]:
    """`backend_components` entries for a waldur-site-agent offering (component -> settings)."""
    return {
        o.waldur_component: {
            "accounting_type": "limit",
            "k8s_resource": o.name,
            "label": o.display_name,
            "measured_unit": o.unit,
            "unit_factor": 1,
        }
        for o in sorted(offerings, key=lambda o: o.waldur_component)
    }


def resource_quota(namespace: str, limits: Mapping[str, int]) -> dict[str, Any]:
    """A ResourceQuota named the way Waldur names it, for tenants managed outside Waldur."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": WALDUR_RESOURCE_QUOTA_NAME, "namespace": namespace},
        "spec": {"hard": {f"requests.{name}": str(count) for name, count in sorted(limits.items())}},
    }


def kubeflow_spawner_gpus(offerings: Iterable[ResolvedOffering]) -> dict[str, Any]:
    """The `spawnerFormDefaults.gpus` block of Kubeflow's spawner_ui_config.yaml.

    Deprecated offerings are left out: new notebooks should not start on them.
    """
    vendors = [
        {"limitsKey": o.name, "uiName": o.kubeflow_ui_name}
        for o in offerings
        if o.kubeflow_ui_name is not None and o.lifecycle is Lifecycle.active
    ]
    return {
        "spawnerFormDefaults": {
            "gpus": {"readOnly": False, "value": {"num": "none", "vendor": "", "vendors": vendors}}
        }
    }


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
