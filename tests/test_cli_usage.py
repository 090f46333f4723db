"""The command line describes itself: --help for every command and argument, --version, and commands that
write only where asked."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml

from tests.conftest import ROOT
from themelio_gpu import __version__
from themelio_gpu.cli import build_parser
from themelio_gpu.outputs.consumer_files import CONTRACT_FILES, export_files
from themelio_gpu.plan.model import Fleet
from themelio_gpu.settings import DEFAULT_CATALOG, DEFAULT_STACKS_DIR


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, check=False)


def parsers(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for command, sub in action.choices.items():
                assert helps.get(command), f"`{name} {command}` has no summary in `{name} --help`"
                yield from parsers(sub, f"{name} {command}")


def test_help_describes_every_command_and_argument() -> None:
    for name, parser in parsers(build_parser(), "themelio_gpu"):
        assert parser.description, f"`{name} --help` has no description"
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                assert action.help, f"`{name}`: {action.option_strings or action.dest} has no help"


def test_help_runs_for_every_command() -> None:
    result = run("-m", "themelio_gpu", "preflight", "--help")
    assert result.returncode == 0
    assert "$KUBECONFIG" in result.stdout
    assert "exit codes: 0 every check passed, 1 a check failed" in " ".join(result.stdout.split())
    main_help = run("main.py", "--help")
    assert main_help.returncode == 0 and "--outdir DIR" in main_help.stdout


def test_version_comes_from_one_place() -> None:
    for args in (("-m", "themelio_gpu", "--version"), ("main.py", "--version")):
        result = run(*args)
        assert result.returncode == 0
        assert result.stdout.startswith(
            f"themelio-gpu {__version__}, engine cdktf ($THEMELIO_ENGINE): cdktf 0.21.0, "
        )
        assert len(result.stdout.splitlines()) == 1
    # The npm metadata carries the same version (it cannot be read from the Python package).
    assert json.loads((ROOT / "package.json").read_text())["version"] == __version__


def test_catalog_export_prints_unless_a_folder_is_given(tmp_path: Path, example_fleet: Fleet) -> None:
    # Run from an empty folder: nothing may appear in it (the old default was catalog/generated). That
    # nothing appears in the checkout either, conftest.py checks for every test.
    work = tmp_path / "work"
    work.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "themelio_gpu", "catalog", "export"],
        cwd=work,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    documents = result.stdout.split("--- # ")[1:]
    expected = list(export_files(example_fleet))
    assert [d.split("\n", 1)[0] for d in documents] == expected
    assert set(CONTRACT_FILES) <= set(expected)  # the catalog-wide files, then each cluster's
    assert len(list(yaml.safe_load_all(result.stdout))) >= len(expected)
    assert list(work.iterdir()) == []
    assert run("-m", "themelio_gpu", "catalog", "export", "--outdir", str(tmp_path / "x")).returncode == 0
    written = sorted(p.relative_to(tmp_path / "x").as_posix() for p in (tmp_path / "x").rglob("*") if p.is_file())
    assert written == sorted(expected)


def test_catalog_quota_checks_the_namespace_and_lists_known_names() -> None:
    result = run(
        "-m",
        "themelio_gpu",
        "catalog",
        "quota",
        "--cluster",
        "gpu-east",
        "--namespace",
        "Team_A",
        "nvidia.com/a10=2",
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith(
        "command line: --namespace Team_A: not a valid namespace: 'Team_A' is not a DNS-1123"
    )
    assert lines[1].startswith(
        "command line: nvidia.com/a10=2: cluster gpu-east serves no offering of that name; it serves: "
    )
    assert "nvidia.com/a100" in lines[1] and "nvidia.com/mig-1g.5gb" in lines[1]
    assert lines[-1] == "2 problems found; nothing was written."


EXITS = {
    "synth": {0, 2},
    "validate": {0, 2},
    "catalog validate": {0, 2},
    "catalog show": {0, 2},
    "catalog export": {0, 2},
    "catalog quota": {0, 2},
    "schema": {0, 2},
    "match": {0, 1, 2},
    "trial": {0, 1, 2},
    "check": {0, 1, 2},
    "terraform-check": {0, 1, 2},
    "preflight": {0, 1, 2},
    "verify": {0, 1, 2},
    "charts fetch": {0, 1, 2},
    "charts known-values": {0, 1, 2},
    "changed": {0, 1, 2},
    "compare-engines": {0, 1, 2},
    "pipeline github-actions": {0, 1, 2},
    "pipeline atlantis": {0, 1, 2},
    "sandbox tools": {0, 1, 2},
    "sandbox up": {0, 1, 2},
    "sandbox apply": {0, 1, 2},
    "sandbox plan": {0, 1, 2},
    "sandbox kubeconfig": {0, 2},
    "sandbox down": {0, 1, 2},
    "sandbox probe": {0, 1, 2},
    "sandbox run": {0, 1, 2},
    "sandbox upgrade": {0, 1, 2},
    "sandbox check": {0, 1, 2},
}
"""The exit codes each command can return (the tests of each command check when)."""


def test_each_commands_help_ends_with_its_own_exit_codes() -> None:
    leaves = {
        name.removeprefix("themelio_gpu "): parser
        for name, parser in parsers(build_parser(), "themelio_gpu")
        if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
    }
    assert set(leaves) == set(EXITS)
    for name, parser in leaves.items():
        epilog = parser.epilog or ""
        assert epilog.startswith("exit codes: "), name
        assert {int(code) for code in re.findall(r"(?:^exit codes: |, )(\d) ", epilog)} == EXITS[name], (
            name,
            epilog,
        )
    synth = run("main.py", "--help").stdout
    assert " ".join(synth.split()).endswith(" ".join(str(leaves["synth"].epilog).split()))


def test_run_from_another_folder_it_says_where_to_run(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("THEMELIO_")}
    result = subprocess.run(
        [sys.executable, "-m", "themelio_gpu", "validate"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[0] == (
        f"{DEFAULT_CATALOG}, {DEFAULT_STACKS_DIR}/: neither is in {tmp_path}: run the command from the folder that holds "
        "your catalog/ and stacks/ (the checkout), or name them with --catalog and --stacks-dir (or "
        "$THEMELIO_CATALOG, $THEMELIO_STACKS_DIR)"
    )


def test_the_readme_says_what_a_command_needs_outside_the_checkout() -> None:
    """Run from another folder, a command finds no catalog/ and stacks/ (test above): where the README's Setup
    speaks of other folders, it names the flags (or variables) that say where the fleet is."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme.partition("\n## Setup\n")[2].partition("\n## ")[0]
    paragraphs = [p for p in setup.split("\n\n") if re.search(r"(any|another|other) folder", p)]
    assert paragraphs, "README's Setup no longer says where the commands run"
    for paragraph in paragraphs:
        assert "--catalog" in paragraph and "--stacks-dir" in paragraph, paragraph
