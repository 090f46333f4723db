"""The Kubeflow Notebooks 2.0 option an offering of the notebook form makes, and the limits its CRD sets.

Apart because the option's id is derived from the offering's name and must never change for it, and the
WorkspaceKind CRD bounds the id and the texts: render/contracts.py writes the option, this checks it.
"""

from __future__ import annotations

import re

from themelio_gpu.inputs.catalog.model import Offering
from themelio_gpu.inputs.problems import KeyPath, Problems

# Kubeflow Notebooks 2.0 (v2.0.0-beta.0): WorkspaceKind podConfig.values[].id, maxLength 256; the list is keyed
# on id (x-kubernetes-list-map-keys), so two options with one id are refused by the API server.
POD_CONFIG_ID_MAX_LENGTH = 256
# Its podConfig.values[].spawner: displayName (our kubeflow.uiName) 2 to 128 characters, description (ours, when
# it has 2 or more) at most 1024.
POD_CONFIG_DISPLAY_NAME_LENGTH = (2, 128)
POD_CONFIG_DESCRIPTION_MAX_LENGTH = 1024


def workspacekind_pod_config_id(name: str) -> str:
    """An offering's Kubeflow Notebooks 2.0 podConfig option id: `gpu_`, then the name in lower case with every
    run of characters other than a-z and 0-9 as one `_`. Workspaces refer to their option by id: it must not
    change for an offering, so names that would share one are refused instead (`check_notebook_option`)."""
    return "gpu_" + re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def check_notebook_option(
    name: str, offering: Offering, taken: dict[str, str], file: str, where: KeyPath, problems: Problems
) -> None:
    """An offering of the notebook form makes a Notebooks 2.0 podConfig option: one id per offering, and the
    lengths the WorkspaceKind CRD takes."""
    assert offering.kubeflow is not None
    low, high = POD_CONFIG_DISPLAY_NAME_LENGTH
    if not low <= len(offering.kubeflow.ui_name) <= high:
        problems.add(
            file,
            (*where, "kubeflow", "uiName"),
            f"is the Notebooks 2.0 option's spawner.displayName, which the WorkspaceKind CRD takes with {low} to "
            f"{high} characters (it has {len(offering.kubeflow.ui_name)})",
        )
    if len(offering.description) > POD_CONFIG_DESCRIPTION_MAX_LENGTH:
        problems.add(
            file,
            (*where, "description"),
            "is the Notebooks 2.0 option's spawner.description, which the WorkspaceKind CRD takes with at most "
            f"{POD_CONFIG_DESCRIPTION_MAX_LENGTH} characters (it has {len(offering.description)})",
        )
    where = (*where, "kubeflow")
    pod_config_id = workspacekind_pod_config_id(name)
    other = taken.setdefault(pod_config_id, name)
    if other != name:
        problems.add(
            file,
            where,
            f"{other} and {name} would both be the Kubeflow Notebooks 2.0 podConfig option {pod_config_id!r} "
            "(gpu_ and the name, each run of characters other than a-z and 0-9 written _): a WorkspaceKind keys "
            "its podConfig options on id, so the API server refuses two. Rename one, or leave one out of the "
            "notebook form (remove its kubeflow key)",
        )
    if len(pod_config_id) > POD_CONFIG_ID_MAX_LENGTH:
        problems.add(
            file,
            where,
            f"its Kubeflow Notebooks 2.0 podConfig id {pod_config_id!r} is {len(pod_config_id)} characters; the "
            f"WorkspaceKind CRD takes at most {POD_CONFIG_ID_MAX_LENGTH}: shorten the name, or remove its kubeflow key",
        )
