"""What `python -m themelio_gpu pipeline github-actions|atlantis` runs: the pipeline file of the fleet, written or
checked (its arguments are in themelio_gpu/commands/pipeline.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from themelio_gpu.inputs.clusters.definition import SHARED_BACKENDS, LocalBackend
from themelio_gpu.inputs.problems import InputError, Problems
from themelio_gpu.inputs.yaml_input import add_positions, load_yaml_document
from themelio_gpu.pipelines import atlantis, github_actions
from themelio_gpu.pipelines.generated_file import NotOursError, is_current, write_generated
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan, Fleet
from themelio_gpu.settings import InputPaths

# What goes into the generated YAML and shell lines unquoted: plain relative paths and branch names.
_PLAIN = re.compile(r"^[A-Za-z0-9._/-]+$")


def _relative_input(path: Path, flag: str, problems: Problems) -> str:
    """The path as the repository root (the working directory) sees it, for the generated commands."""
    try:
        relative = PurePosixPath(path.resolve().relative_to(Path.cwd().resolve()).as_posix())
    except ValueError:
        problems.add("command line", f"{flag} {path}", "must be inside the working directory, the repository root")
        return ""
    if not _PLAIN.match(relative.as_posix()):
        problems.add(
            "command line",
            f"{flag} {path}",
            "use letters, digits and . _ / - only: it goes into the pipeline unquoted",
        )
    return relative.as_posix()


def write_pipeline(
    paths: InputPaths,
    engine: str,
    output: Path,
    *,
    force: bool,
    check: bool,
    terraform: str,
    skip_local_state: bool,
    branch: str = "main",
) -> bool:
    """Write (or with `check`, compare) `engine`'s pipeline file for the fleet of `paths`; False when `check`
    finds it missing or out of date. InputError for bad input or a file this command did not write."""
    problems = Problems()
    catalog = _relative_input(paths.catalog, "--catalog", problems)
    stacks_dir = _relative_input(paths.stacks_dir, "--stacks-dir", problems)
    if not _PLAIN.match(branch):
        problems.add("command line", f"--branch {branch}", "not a branch name this command writes unquoted")
    problems.raise_if_any()
    fleet = load_fleet(paths.catalog, paths.stacks_dir)  # a pipeline for a fleet with problems is no use
    local = _local_state_clusters(fleet)
    if local and not skip_local_state:
        _refuse_local_state(local, engine)
    inputs = f"--catalog {catalog} --stacks-dir {stacks_dir}"
    skipped = [plan.name for plan in local]
    if engine == github_actions.COMMAND:
        text = github_actions.workflow_text(inputs, branch, terraform, skipped)
    else:
        deployed = [plan for plan in fleet.clusters if plan.name not in skipped]
        text = atlantis.atlantis_text(_cluster_files(deployed, problems), catalog, inputs, terraform)
    problems.raise_if_any()
    if skipped:
        print(f"left out of the pipeline (local state; deploy by hand): {', '.join(skipped)}")
    command = f"python -m themelio_gpu pipeline {engine}"
    if check:
        if is_current(output, text):
            print(f"{output} is up to date")
            return True
        what = "is out of date" if output.exists() else "does not exist"
        print(f"{output} {what}: run `{command}` (with the same options) and commit it")
        return False
    try:
        written = write_generated(output, text, force=force)
    except NotOursError as error:
        problems.add("command line", f"--output {output}", str(error))
        raise InputError(problems) from error
    print(f"wrote {output}" if written.changed else f"{output} is up to date")
    if engine == atlantis.COMMAND:
        print(
            f"Atlantis must synthesize before it plans: add a pre_workflow_hooks entry running "
            f"`{atlantis.hook_command(inputs)}` to its server-side repo config (docs/pipelines.md)"
        )
    return True


def _local_state_clusters(fleet: Fleet) -> list[ClusterPlan]:
    return [plan for plan in fleet.clusters if isinstance(plan.definition.backend, LocalBackend)]


def _refuse_local_state(local: Sequence[ClusterPlan], engine: str) -> None:
    """A pipeline job starts from a fresh checkout and throws it away: local state would be lost every time."""
    who = (
        "each job of the workflow"
        if engine == github_actions.COMMAND
        else "Atlantis, with each pull request's clone,"
    )
    shared = f"{', '.join(SHARED_BACKENDS[:-1])} or {SHARED_BACKENDS[-1]}"
    problems = Problems()
    documents = {}
    for plan in local:
        document = load_yaml_document(Path(plan.file), Problems(), plan.file)
        if document is not None:
            documents[plan.file] = document
        problems.add(
            plan.file,
            ("backend", "type"),
            f"cluster {plan.name} keeps its Terraform state in a local file, which {who} throws away: every plan "
            "would start from no state and every apply would create everything again. Give it a shared backend "
            f"({shared}: docs/cluster-definitions.md), or pass --skip-local-state to leave it out of the "
            "pipeline and deploy it by hand",
        )
    add_positions(problems, documents)
    problems.raise_if_any()


def _cluster_files(clusters: Sequence[ClusterPlan], problems: Problems) -> list[tuple[str, str, tuple[str, ...]]]:
    """Each cluster's name, file and the chart archives its stack ships, as the repository root sees them."""
    files = []
    for plan in clusters:
        file = _relative_input(Path(plan.file), f"cluster {plan.name}", problems)
        archives = tuple(
            _relative_input(a.source, f"cluster {plan.name}: chart {a.archive}", problems)
            for a in plan.chart_archives
        )
        files.append((plan.name, file, archives))
    return files
