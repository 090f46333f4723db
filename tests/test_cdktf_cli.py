"""The app under the real CDKTF CLI (`npx cdktf synth`, what `make synth` and GitOps pipelines run).

The CLI lists the stack folders before it runs the app and deletes, after it, every one the app did not
write: the app must leave those folders to it (a cluster removed from the fleet is then exit 0, with the
folder named), and must refuse, before writing anything, when such a folder holds Terraform state.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.builders import cluster, write_fleet
from tests.conftest import ROOT
from tests.requirements import unavailable
from themelio_gpu.settings import CATALOG_ENV, STACKS_DIR_ENV


def _cdktf_synth(catalog: Path, stacks: Path, out: Path) -> subprocess.CompletedProcess[str]:
    cli = ROOT / "node_modules" / ".bin" / "cdktf"
    if not cli.exists():
        unavailable(f"{cli} is missing: run `make setup` (npm ci installs the CDKTF CLI)")
    env = {**os.environ, CATALOG_ENV: str(catalog), STACKS_DIR_ENV: str(stacks), "CHECKPOINT_DISABLE": "1"}
    return subprocess.run(
        [str(cli), "synth", "--output", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )


@pytest.fixture
def fleet_and_output(tmp_path: Path) -> tuple[Path, Path, Path]:
    catalog, stacks = write_fleet(tmp_path, [cluster(name=n) for n in ("east", "lab", "west")])
    out = tmp_path / "cdktf.out"
    first = _cdktf_synth(catalog, stacks, out)
    assert first.returncode == 0, first.stdout + first.stderr
    assert sorted(p.name for p in (out / "stacks").iterdir()) == ["east", "lab", "west"]
    return catalog, stacks, out


def test_removing_a_cluster_is_exit_0_and_names_the_folder_the_cli_deletes(
    fleet_and_output: tuple[Path, Path, Path],
) -> None:
    catalog, stacks, out = fleet_and_output
    (stacks / "lab.yaml").unlink()
    result = _cdktf_synth(catalog, stacks, out)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"cdktf synth removes {out / 'stacks' / 'lab'}: cluster lab is no longer defined" in result.stdout
    assert sorted(p.name for p in (out / "stacks").iterdir()) == ["east", "west"]
    assert sorted(json.loads((out / "manifest.json").read_text())["stacks"]) == ["east", "west"]


def test_a_removed_cluster_whose_folder_holds_state_stops_the_cli_before_anything_is_written(
    fleet_and_output: tuple[Path, Path, Path],
) -> None:
    catalog, stacks, out = fleet_and_output
    state = out / "stacks" / "lab" / "terraform.tfstate"
    state.write_text("{}")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    (stacks / "lab.yaml").unlink()
    result = _cdktf_synth(catalog, stacks, out)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert (
        f"{out / 'stacks' / 'lab'}: cluster lab is no longer defined, but its folder holds Terraform state"
        in output
    )
    assert "cdktf synth deletes every stack folder its app did not write, so nothing was written" in output
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_make_synth_into_a_log_file_writes_plain_lines(tmp_path: Path) -> None:
    """`make synth > synth.log` (no terminal): the CLI's spinner and colours would fill the log with escape
    codes; the target's own recipe, run on a copy of the app, writes plain lines."""
    cli = ROOT / "node_modules" / ".bin" / "cdktf"
    if not cli.exists():
        unavailable(f"{cli} is missing: run `make setup` (npm ci installs the CDKTF CLI)")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^synth:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe is not None, "no synth target in the Makefile"
    script = "".join(line.removeprefix("\t").removeprefix("@") for line in recipe.group(1).splitlines(True))
    project = tmp_path / "project"
    shutil.copytree(ROOT / "themelio_gpu", project / "themelio_gpu", ignore=shutil.ignore_patterns("__pycache__"))
    for file in ("main.py", "cdktf.json"):
        shutil.copy(ROOT / file, project / file)
    for tool in ("node_modules", ".venv"):
        (project / tool).symlink_to((ROOT / tool).resolve(), target_is_directory=True)
    catalog, stacks = write_fleet(tmp_path, [cluster(name="east")])
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "FORCE_COLOR", "NO_COLOR")}
    # A CLI configuration that does not exist, as on a machine with a stale TF_CLI_CONFIG_FILE: the CLI logs
    # Terraform's warning as an error line, in colour on a terminal.
    env.update({CATALOG_ENV: str(catalog), STACKS_DIR_ENV: str(stacks), "CHECKPOINT_DISABLE": "1"})
    env["TF_CLI_CONFIG_FILE"] = str(tmp_path / "missing.tfrc")
    log = tmp_path / "synth.log"
    with log.open("w", encoding="utf-8") as out:
        result = subprocess.run(
            ["bash", "-c", script.replace("$$", "$")], cwd=project, env=env, stdout=out, stderr=subprocess.STDOUT
        )
    text = log.read_text(encoding="utf-8")
    assert result.returncode == 0, text
    assert "\x1b" not in text, text[:2000]
    assert re.search(r"^east +1\.36 ", text, re.MULTILINE), text  # the summary table
    assert (project / "cdktf.out" / "stacks" / "east" / "cdk.tf.json").is_file()
