"""Atlantis' repo-level `atlantis.yaml` for the fleet: one project per stack folder, autoplanned when an input
that stack depends on changes: its cluster file, the catalog, the tool's code and the lock files, and the
charts it ships from local chart folders.

The stack folders are synthesized, not committed (docs/pipelines.md), so Atlantis must synthesize before it
looks for projects: a `pre_workflow_hooks` entry of the server-side repo config, which runs after the clone
and before autoplan (Atlantis skips a project whose folder does not exist). `hook_command` is that entry's
command, starting from the synthesis the last run kept on the server (KEEP); docs/pipelines.md has the
whole snippet. Keys as Atlantis v0.47.1 reads them (server/core/config/raw:
repo_cfg.go, project.go, autoplan.go); tests/test_pipelines.py checks them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

import yaml

from themelio_gpu.outputs.stack_folders import STACKS_FOLDER
from themelio_gpu.pipelines.generated_file import TOOL_INPUTS, engine_env, header
from themelio_gpu.settings import DEFAULT_OUTDIR

COMMAND = "atlantis"
DEFAULT_OUTPUT = "atlantis.yaml"


KEEP = '"$HOME/.cache/themelio-gpu/kept/$BASE_REPO_OWNER/$BASE_REPO_NAME"'
"""Where the hook keeps the repository's last synthesis on the Atlantis server, between runs (every run starts
from a fresh clone): `main.py --keep` takes from it only the stacks whose recorded inputs are this clone's
(outputs/kept.py). BASE_REPO_OWNER and BASE_REPO_NAME are set by Atlantis for its hooks."""


def hook_command(inputs: str) -> str:
    engine = engine_env("{name}={value} ").replace('"', "")
    return f"scripts/setup.sh python && {engine}.venv/bin/python main.py {inputs} --quiet --keep {KEEP}"


def atlantis_text(
    stacks: Sequence[tuple[str, str, tuple[str, ...]]], catalog: str, inputs: str, distribution: str
) -> str:
    """`stacks`: (name, cluster file, the chart archives it ships from local chart folders), paths relative
    to the repository root, where atlantis.yaml lives."""
    projects = []
    for name, cluster_file, archives in stacks:
        folder = PurePosixPath(DEFAULT_OUTDIR, STACKS_FOLDER, name)
        up = "/".join([".."] * len(folder.parts))  # when_modified is relative to the project's folder
        project: dict[str, Any] = {
            "name": name,
            "dir": folder.as_posix(),
            "workspace": "default",
            "autoplan": {
                "enabled": True,
                "when_modified": [f"{up}/{path}" for path in (cluster_file, catalog, *archives, *TOOL_INPUTS)],
            },
        }
        if distribution == "tofu":
            project["terraform_distribution"] = "opentofu"
        projects.append(project)
    config = {
        "version": 3,
        "automerge": False,
        "parallel_plan": True,
        "parallel_apply": True,
        "projects": projects,
    }
    intro = header(
        COMMAND,
        "",
        "One project per stack folder. The folders are synthesized, not committed: the server-side repo config",
        f"must synthesize first, with a pre_workflow_hooks entry running `{hook_command(inputs)}`",
        "(docs/pipelines.md). Regenerate this file when a cluster is added or removed.",
    )
    return intro + "\n" + yaml.safe_dump(config, sort_keys=False, default_flow_style=False, width=120)
