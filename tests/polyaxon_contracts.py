"""Polyaxon 2.18.0 judging the presets of `catalog export`, with its own code (the `polyaxon` package, a
development dependency pinned in the Pipfile):

- `preset_errors`: the Polyaxonfile schema as `polyaxon run -f` reads a preset (`read_polyaxonfile(...,
  is_preset=True)`) and as the API applies a saved one (`OperationSpecification.read(..., is_preset=True)`),
  then `validate_run_patch` of its runPatch for a job and a service run;
- `run_job`: `polyaxon run -f <recipe> -f <preset> [-f <overlay> ...]` up to what the agent submits: the CLI's
  `check_polyaxonfile` (which merges the files in order, each preset with its own patchStrategy),
  `compile_operation`, and the Kubernetes converter of an agent (`BaseExecutor.convert`), which returns the
  `polyaxon.com/v1` Job custom resource whose `batchJobSpec.template.spec` is the pod spec the operator runs.

polyaxon is imported inside the functions: it takes seconds to load, and only these checks need it.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

POLYAXON_VERSION = "2.18.0"
# The least a recipe is: a job component with one container and no scheduling of its own.
RECIPE: Mapping[str, Any] = {
    "kind": "component",
    "name": "train",
    "run": {
        "kind": "job",
        "container": {"name": "trainer", "image": "busybox:1.36", "command": ["sh", "-c", "echo train"]},
    },
}
# An agent as the converter needs one: a namespace, a service account for runs, an artifacts store (the init
# and sidecar containers mount it).
AGENT: Mapping[str, Any] = {
    "namespace": "polyaxon-runs",
    "runsSa": "polyaxon-runs",
    "artifactsStore": {
        "name": "artifacts",
        "kind": "volume_claim",
        "schema": {"mountPath": "/plx-artifacts", "volumeClaim": "polyaxon-artifacts"},
    },
}
RUN_UUID = "0123456789abcdef0123456789abcdef"
FORBIDDEN_KEYS = ("name", "description", "tags")
"""A preset names no run: Polyaxon's apply_preset would give every run using it this name, description, tags."""


def installed_version() -> str:
    from polyaxon import pkg

    return str(pkg.VERSION)


def preset_errors(text: str) -> list[str]:
    """What Polyaxon refuses in a preset file, and what a preset of ours must not carry."""
    from polyaxon._flow.run.enums import V1RunKind
    from polyaxon._flow.run.patch import validate_run_patch
    from polyaxon._polyaxonfile.specs import OperationSpecification, read_polyaxonfile

    document = yaml.safe_load(text)
    if not isinstance(document, dict):
        return [f"not a mapping: {document!r}"]
    errors = [f"sets {key}" for key in FORBIDDEN_KEYS if key in document]
    if document.get("isPreset") is not True or document.get("kind") != "operation":
        errors.append("not an operation with isPreset: true")
    try:
        read = read_polyaxonfile(dict(document), is_preset=True)
        OperationSpecification.read(dict(document), is_preset=True)
        for kind in (V1RunKind.JOB, V1RunKind.SERVICE):
            validate_run_patch(read.run_patch, kind)
    except Exception as error:  # Polyaxon raises pydantic, Polyaxon and plain errors alike
        errors.append(f"{type(error).__name__}: {error}")
    return errors


@contextlib.contextmanager
def _agent() -> Iterator[Any]:
    """The agent configuration the converter reads from Polyaxon's settings, restored afterwards."""
    from polyaxon import settings
    from polyaxon._schemas.agent import AgentConfig

    agent = AgentConfig.from_dict(dict(AGENT))
    saved = settings.AGENT_CONFIG
    settings.AGENT_CONFIG = agent
    try:
        yield agent
    finally:
        settings.AGENT_CONFIG = saved


def run_job(*files: str, recipe: Mapping[str, Any] = RECIPE) -> dict[str, Any]:
    """The `polyaxon.com/v1` Job an agent submits for `polyaxon run -f <recipe> -f <file> ...` (files in order)."""
    from polyaxon._k8s.executor.base import BaseExecutor
    from polyaxon._polyaxonfile import check_polyaxonfile
    from polyaxon._polyaxonfile.specs import OperationSpecification

    with tempfile.TemporaryDirectory() as folder:
        paths = [Path(folder) / "recipe.yaml"]
        paths[0].write_text(yaml.safe_dump(dict(recipe)), encoding="utf-8")
        for index, text in enumerate(files):
            paths.append(Path(folder) / f"file-{index}.yaml")
            paths[-1].write_text(text, encoding="utf-8")
        operation = check_polyaxonfile(
            polyaxonfile=[str(p) for p in paths], is_cli=False, verbose=False, to_op=True
        )
    compiled = OperationSpecification.compile_operation(operation)
    with _agent() as agent:
        resource = BaseExecutor.convert(
            owner_name="team",
            project_name="recipes",
            run_name="train",
            run_uuid=RUN_UUID,
            content=compiled.to_json(),
            default_auth=False,
            agent_content=agent.to_json(),
        )
    return dict(resource)


def pod_spec(job: Mapping[str, Any]) -> dict[str, Any]:
    """The pod spec of the run: what the operator puts in the batch/v1 Job it creates."""
    return dict(job["batchJobSpec"]["template"]["spec"])


def main_container(job: Mapping[str, Any]) -> dict[str, Any]:
    (main,) = [c for c in pod_spec(job)["containers"] if c["name"] == "polyaxon-main"]
    return dict(main)


def count_overlay(name: str, count: int) -> str:
    """The later file that changes a preset's count: `runPatch.container.resources.limits` (docs/consumers.md)."""
    return yaml.safe_dump({"runPatch": {"container": {"resources": {"limits": {name: count}}}}})
