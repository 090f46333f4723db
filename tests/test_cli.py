"""The command line as users run it: exit codes, messages without tracebacks, input locations."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.builders import cluster, write_fleet
from tests.conftest import EXAMPLE_CATALOG, ROOT
from themelio_gpu.cli import main


def stack_file(cluster: str) -> str:
    """Where a stack lands inside a synthesized output folder (as `check` names it)."""
    return f"stacks/{cluster}/cdk.tf.json"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, check=False, env=env)


def test_bad_input_lists_every_problem_and_writes_nothing(tmp_path: Path) -> None:
    catalog, stacks = write_fleet(tmp_path, [cluster(name="a", offerings=["nvidia.com/nope"]), cluster(name="a")])
    (stacks / "broken.yaml").write_text("name: [\n", encoding="utf-8")
    (stacks / "typo.yaml").write_text(yaml.safe_dump({**cluster(name="t"), "nodepools": []}), encoding="utf-8")
    out = tmp_path / "out"
    result = run("main.py", "--catalog", str(catalog), "--stacks-dir", str(stacks), "--outdir", str(out))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert any(line.startswith(f"{stacks}/broken.yaml: line 2, column 1: invalid YAML") for line in lines), lines
    assert any(
        line.startswith(
            f"{stacks}/typo.yaml: nodepools: unknown key; did you mean nodePools? (keys allowed here: "
        )
        for line in lines
    ), lines
    assert any(
        line.startswith(f"{stacks}/00-a.yaml: offerings[0]: nvidia.com/nope is not in the catalog")
        for line in lines
    )
    assert any(line.startswith(f"{stacks}/01-a.yaml: name: cluster 'a' is also defined in") for line in lines)
    assert lines[-1].endswith("problems found; nothing was written.")
    assert not out.exists()


def test_wrong_type_and_missing_catalog(tmp_path: Path) -> None:
    _, stacks = write_fleet(
        tmp_path, [cluster(nodePools=[{"name": "p", "product": "a10g", "gpusPerNode": "eight"}])]
    )
    result = run("main.py", "--catalog", str(tmp_path / "missing.yaml"), "--stacks-dir", str(stacks))
    assert result.returncode == 2
    assert f"{tmp_path}/missing.yaml: file not found" in result.stderr
    assert "nodePools[0].gpusPerNode: Input should be a valid integer" in result.stderr
    assert "Traceback" not in result.stderr


def test_environment_variables_choose_the_inputs(tmp_path: Path) -> None:
    catalog, stacks = write_fleet(tmp_path, [cluster(name="from-env")])
    env = {"THEMELIO_CATALOG": str(catalog), "THEMELIO_STACKS_DIR": str(stacks), "PATH": "/usr/bin:/bin"}
    result = run("-m", "themelio_gpu", "validate", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK: 6 offerings, 1 clusters"


def test_catalog_validate_show_export_and_quota(tmp_path: Path) -> None:
    # Without flags the commands read $THEMELIO_CATALOG / $THEMELIO_STACKS_DIR: the fixture fleet here.
    assert run("-m", "themelio_gpu", "catalog", "validate").stdout.startswith(
        f"OK: {EXAMPLE_CATALOG.relative_to(ROOT)}: 6 offerings"
    )
    show = run("-m", "themelio_gpu", "catalog", "show").stdout
    assert "nvidia.com/a100-mig-1g.5gb   a100-40gb-mig-1g.5gb.gpu.themelio.io" in show
    assert "gpu-east, gpu-lab" in show
    assert "1g.10gb x4" in show  # the A100-40GB row of the product table
    out = tmp_path / "generated"
    assert run("-m", "themelio_gpu", "catalog", "export", "--out", str(out)).returncode == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "gpu-labels.yaml",
        "kubeflow-spawner-gpus.yaml",
        "waldur-backend-components.yaml",
        "waldur-quota-mapping.yaml",
    ]
    quota = run("-m", "themelio_gpu", "catalog", "quota", "--namespace", "team-a", "nvidia.com/a100=4")
    assert yaml.safe_load(quota.stdout)["spec"]["hard"] == {"requests.nvidia.com/a100": "4"}
    bad = run("-m", "themelio_gpu", "catalog", "quota", "--namespace", "team-a", "nvidia.com/zz=x")
    assert bad.returncode == 2
    assert "command line: nvidia.com/zz=x: nvidia.com/zz is not in the catalog" in bad.stderr


def test_check_passes_on_an_unchanged_fleet(synthesized: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--against", str(synthesized)]) == 0
    assert "is up to date" in capsys.readouterr().out


def test_check_fails_with_a_diff_on_a_changed_fleet(
    synthesized: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    committed = tmp_path / "committed"
    shutil.copytree(synthesized, committed)
    east = committed / "stacks" / "gpu-east" / "cdk.tf.json"
    east.write_text(east.read_text().replace('"version": "0.4.1"', '"version": "0.4.0"'))
    (committed / "stacks" / "gpu-old").mkdir()
    (committed / "stacks" / "gpu-old" / "cdk.tf.json").write_text("{}")
    assert main(["check", "--against", str(committed)]) == 1
    out = capsys.readouterr().out
    assert f"changed: {stack_file('gpu-east')}" in out
    assert f"stale (no longer synthesized): {stack_file('gpu-old')}" in out
    assert '-        "version": "0.4.0",' in out
    assert '+        "version": "0.4.1",' in out


def test_main_synthesizes_with_progress_and_summary(tmp_path: Path) -> None:
    catalog, stacks = write_fleet(tmp_path, [cluster(name="solo")])
    result = run(
        "main.py", "--catalog", str(catalog), "--stacks-dir", str(stacks), "--outdir", str(tmp_path / "out")
    )
    assert result.returncode == 0, result.stderr
    assert "[1/1] solo: 3 DeviceClasses" in result.stdout
    assert "cluster  k8s   offerings  DeviceClasses  pools  releases" in result.stdout
    assert (tmp_path / "out" / "stacks" / "solo" / "cdk.tf.json").exists()
    assert "Node.js" not in result.stderr  # the jsii end-of-life banner is silenced


def test_unwritable_export_folder_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run("-m", "themelio_gpu", "catalog", "export", "--out", str(blocker / "out"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert str(blocker / "out") in result.stderr


def test_unwritable_outdir_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run("main.py", "--outdir", str(blocker / "out"), "--quiet")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{blocker / 'out'}: Not a directory" in result.stderr
