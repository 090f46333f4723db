"""The catalog's integration contracts for one cluster, limited to the offerings that cluster serves.

Published as Terraform outputs (for pipelines: `terraform output -json`) and, when the cluster asks
for it, as a ConfigMap the workload service and operators can read in the cluster.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, cast

from themelio_gpu.constructs.literal import literal
from themelio_gpu.constructs.providers import (
    ENGINE,
    ConfigMapV1,
    ConfigMapV1Metadata,
    NamespaceV1,
    NamespaceV1Metadata,
    TerraformStack,
)
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.plan.quota import plan_quota
from themelio_gpu.render.contracts import (
    closed_resource_quota,
    cluster_notebook_choices,
    gpu_labels_config,
    kubeflow_spawner_gpus,
    kubeflow_workspacekind_pod_configs,
    waldur_quota_mapping,
)
from themelio_gpu.render.yaml_output import dump_yaml


@lru_cache(maxsize=1024)
def _yaml_of_json(text: str) -> str:
    # Keyed by content: clusters serving the same offerings render their ConfigMap YAML once.
    return dump_yaml(json.loads(text))


def _yaml(data: Any) -> str:
    if not isinstance(data, dict) or not data:
        return _yaml_of_json(json.dumps(data, sort_keys=True))
    # A block mapping's YAML is its entries' YAML one after the other, in key order (dump_yaml sorts keys
    # and never aliases): each entry is rendered once per content, so a document that differs from another
    # cluster's in one entry (the Waldur mapping names its cluster) renders only that entry again.
    return "".join(_yaml_of_json(json.dumps({key: data[key]}, sort_keys=True)) for key in sorted(data))


class CatalogOutputs:
    def __init__(self, stack: TerraformStack, plan: ClusterPlan) -> None:
        aliases = plan.definition.serve_migration_aliases
        # Quotas and the consumers that request by name follow the cluster's quota plan (its grant names).
        quota = plan_quota(plan)
        notebooks = cluster_notebook_choices(plan).offerings
        self.outputs: dict[str, Any] = {
            "waldur_quota_mapping": waldur_quota_mapping(plan, quota),
            "gpu_quota_closed": closed_resource_quota(quota, plan.names),
            "kubeflow_spawner_gpus": kubeflow_spawner_gpus(notebooks, quota.grant_names),
            "gpu_labels": gpu_labels_config(plan.offerings, aliases),
            "device_classes": {c.name: c.extended_resource_name for c in plan.device_classes},
        }
        # Notebooks 2.0 wants at least one podConfig option: without a notebook choice there is no fragment.
        pod_configs = kubeflow_workspacekind_pod_configs(notebooks, quota.grant_names)
        if pod_configs is not None:
            self.outputs["kubeflow_workspacekind_podconfig"] = pod_configs
        contracts = self.outputs

        config_map = plan.config_map
        if config_map is None:
            return
        data = {
            "gpu-labels.yaml": _yaml(contracts["gpu_labels"]),
            "kubeflow-spawner-gpus.yaml": _yaml(contracts["kubeflow_spawner_gpus"]),
        }
        if pod_configs is not None:
            data["kubeflow-workspacekind-podconfig.yaml"] = _yaml(pod_configs)
        data["resource-quota-closed.yaml"] = _yaml(contracts["gpu_quota_closed"])
        data["waldur-quota-mapping.yaml"] = _yaml(contracts["waldur_quota_mapping"])
        data["device-classes.json"] = json.dumps(contracts["device_classes"], sort_keys=True, indent=2)
        metadata = NamespaceV1Metadata(name=config_map.namespace, labels=plan.names.managed_by)
        # The 3.x provider (CDK Terrain's bindings) takes the block as a list of one.
        namespace = NamespaceV1(
            stack,
            "catalog_namespace",
            metadata=cast(Any, [metadata]) if ENGINE.namespace_metadata_is_a_list else metadata,
        )
        ConfigMapV1(
            stack,
            "catalog_config_map",
            metadata=ConfigMapV1Metadata(
                name=config_map.name,
                namespace=config_map.namespace,
                labels=plan.names.managed_by,
            ),
            # Display names and descriptions are the catalog's text: literal() keeps it from being a template.
            data=literal(data),
            depends_on=[namespace],
        )
