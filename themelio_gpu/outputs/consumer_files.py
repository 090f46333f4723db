"""The consumer files `catalog export` writes: the fleet-wide Kubeflow and gpuLabel files, and per cluster the
Waldur, quota, Kueue, Notebooks 2.0 and Polyaxon files (docs/consumers.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from themelio_gpu.inputs.catalog.catalog import ResolvedOffering
from themelio_gpu.plan.model import ClusterPlan, Fleet
from themelio_gpu.plan.quota import plan_quota
from themelio_gpu.render.contracts import (
    closed_resource_quota,
    cluster_notebook_choices,
    fleet_choices,
    gpu_labels_config,
    kubeflow_spawner_gpus,
    kubeflow_workspacekind_pod_configs,
    waldur_backend_components,
    waldur_quota_mapping,
)
from themelio_gpu.render.kueue import kueue_objects
from themelio_gpu.render.polyaxon import preset_files as polyaxon_preset_files
from themelio_gpu.render.yaml_output import dump_yaml

CONTRACT_FILES: dict[str, Callable[[Sequence[ResolvedOffering]], Any]] = {
    "kubeflow-spawner-gpus.yaml": kubeflow_spawner_gpus,
    "kubeflow-workspacekind-podconfig.yaml": kubeflow_workspacekind_pod_configs,
    "gpu-labels.yaml": gpu_labels_config,
}


def contract_files(fleet: Fleet) -> dict[str, str]:
    """The fleet-wide files: what does not depend on a cluster's classes (a file with nothing in it is left out).
    An offering only reserved pools serve is left out, each file saying why (render/contracts.py)."""
    choices = fleet_choices(fleet.catalog, fleet.clusters)
    note = "".join(f"# {line}\n" for line in choices.left_out)
    made = {name: make(choices.offerings) for name, make in CONTRACT_FILES.items()}
    return {name: note + dump_yaml(data) for name, data in made.items() if data is not None}


def _documents(objects: Sequence[Any]) -> str:
    return "".join(f"---\n{dump_yaml(o)}" for o in objects)


def cluster_contract_files(plan: ClusterPlan) -> dict[str, str]:
    """The files of one cluster: quotas and the consumers that follow its grant names."""
    quota = plan_quota(plan)
    kueue = kueue_objects(plan, quota)
    note = "".join(f"# {line}\n" for line in kueue.notes)
    names = quota.grant_names
    notebooks = cluster_notebook_choices(plan)
    notebook_note = "".join(f"# {line}\n" for line in notebooks.left_out)
    files = {
        "waldur-quota-mapping.yaml": dump_yaml(waldur_quota_mapping(plan, quota)),
        "waldur-backend-components.yaml": dump_yaml(waldur_backend_components(plan, quota)),
        "resource-quota-closed.yaml": dump_yaml(closed_resource_quota(quota, plan.names)),
        "kueue.yaml": note + _documents(kueue.objects),
        "kubeflow-spawner-gpus.yaml": notebook_note + dump_yaml(kubeflow_spawner_gpus(notebooks.offerings, names)),
    }
    # Notebooks 2.0 wants at least one podConfig option: a cluster without a notebook choice has no fragment.
    pod_configs = kubeflow_workspacekind_pod_configs(notebooks.offerings, names)
    if pod_configs is not None:
        files["kubeflow-workspacekind-podconfig.yaml"] = notebook_note + dump_yaml(pod_configs)
    # Polyaxon: one preset per offering, each a file of its own (one operation per Polyaxonfile).
    files.update(polyaxon_preset_files(plan, quota))
    return files


def export_files(fleet: Fleet) -> dict[str, str]:
    """Relative path -> content of everything `catalog export` writes."""
    files = contract_files(fleet)
    for plan in fleet.clusters:
        for name, text in cluster_contract_files(plan).items():
            files[f"clusters/{plan.name}/{name}"] = text
    return files
