"""`python main.py` removes the stack folders of clusters that are gone, and `check` advice that can be followed."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_CATALOG, EXAMPLE_STACKS, ROOT
from themelio_gpu.cli import main
from themelio_gpu.outputs.stack_folders import remove_stale_stacks, stale_stacks
from themelio_gpu.plan.model import Fleet


def stack_folder(out: Path, name: str, stack_name: str | None = None) -> Path:
    """A folder as cdktf writes it for stack `name` (its cdk.tf.json records the stack name)."""
    folder = out / "stacks" / name
    folder.mkdir(parents=True)
    metadata = {"//": {"metadata": {"stackName": stack_name or name, "version": "0.21.0"}}, "resource": {}}
    (folder / "cdk.tf.json").write_text(json.dumps(metadata))
    return folder


def test_synthesis_removes_the_folder_of_a_cluster_that_is_gone(
    example_fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from themelio_gpu.outputs.synth import synthesize

    out = tmp_path / "out"
    old = stack_folder(out, "retired")
    (old / ".terraform" / "providers").mkdir(parents=True)  # `cdktf diff` ran here once: re-creatable
    (old / ".terraform.lock.hcl").write_text("# lock")
    synthesize(example_fleet, out, progress=sys.stdout)
    assert not old.exists()
    assert sorted(p.name for p in (out / "stacks").iterdir()) == sorted(c.name for c in example_fleet.clusters)
    assert f"removed {out / 'stacks' / 'retired'}: cluster retired is no longer defined" in capsys.readouterr().out


def test_only_recognised_stack_folders_without_state_are_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    stateful = stack_folder(out, "with-state")
    (stateful / "terraform.tfstate").write_text("{}")
    foreign = stack_folder(out, "with-notes")
    (foreign / "notes.md").write_text("ours")
    renamed = stack_folder(out, "renamed", stack_name="something-else")  # not the stack cdktf wrote here
    (out / "stacks" / "plain").mkdir()  # no cdk.tf.json: not a stack folder
    live = stack_folder(out, "live")
    removed, kept = remove_stale_stacks(out, {"live"})
    assert removed == []
    assert [(s.name, s.kept) for s in kept] == [
        ("with-notes", ("notes.md",)),
        ("with-state", ("terraform.tfstate",)),
    ]
    assert all(p.exists() for p in (stateful, foreign, renamed, out / "stacks" / "plain", live))
    assert [s.name for s in stale_stacks(out, {"live", "with-state", "with-notes"})] == []


def test_a_kept_folder_is_a_warning_and_check_says_why(
    synthesized: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    committed = tmp_path / "committed"
    shutil.copytree(synthesized, committed)
    (stack_folder(committed, "retired") / "terraform.tfstate").write_text("{}")
    assert main(["check", "--against", str(committed)]) == 1
    out = capsys.readouterr().out
    assert "stale (no longer synthesized): stacks/retired/cdk.tf.json" in out
    assert (
        f"{committed}/stacks/retired: cluster retired is no longer defined, but its folder holds Terraform state "
        "(terraform.tfstate); it was kept." in out
    )


def test_terraform_working_files_in_a_stack_folder_are_not_drift(synthesized: Path, tmp_path: Path) -> None:
    committed = tmp_path / "committed"
    shutil.copytree(synthesized, committed)
    name = sorted(p.name for p in (committed / "stacks").iterdir())[0]
    folder = committed / "stacks" / name
    (folder / ".terraform" / "providers").mkdir(parents=True)
    (folder / ".terraform" / "providers" / "x").write_text("binary")
    for file in (".terraform.lock.hcl", "plan", "terraform.tfstate", "terraform.tfstate.backup"):
        (folder / file).write_text("x")
    assert main(["check", "--against", str(committed)]) == 0


def test_following_checks_advice_after_deleting_a_cluster_makes_check_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stacks = tmp_path / "stacks"
    shutil.copytree(EXAMPLE_STACKS, stacks)
    committed = tmp_path / "cdktf.out"
    flags = ["--catalog", str(EXAMPLE_CATALOG), "--stacks-dir", str(stacks)]
    assert main(["synth", *flags, "--outdir", str(committed), "--quiet"]) == 0
    gone = sorted(stacks.glob("*.yaml"))[0]
    name = gone.stem
    gone.unlink()
    capsys.readouterr()

    assert main(["check", *flags, "--against", str(committed)]) == 1
    report = capsys.readouterr().out
    assert "commit" not in report  # the synthesized folder is build output (README "GitOps")
    assert f"stale (no longer synthesized): stacks/{name}/cdk.tf.json" in report
    advice = re.search(r"run `([^`]+)`", report)
    assert advice is not None, report
    command = shlex.split(advice.group(1))
    assert command[:2] == [".venv/bin/python", "main.py"]  # as the README runs it
    result = subprocess.run([sys.executable, *command[1:]], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert f"cluster {name} is no longer defined" in result.stdout

    assert main(["check", *flags, "--against", str(committed)]) == 0
    assert "is up to date" in capsys.readouterr().out
    assert not (committed / "stacks" / name).exists()


def test_check_against_a_missing_folder_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--against", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'nope'}: folder not found: synthesize into it first" in err
    assert "Traceback" not in err
