"""The test run's own rules (conftest.py, tests/checkout.py): a test of the tool's behaviour that reads the user's
fleet fails, and so does a run that leaves a file in the checkout."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.checkout import UserFleetReadError, checkout_paths
from tests.conftest import ROOT, USER_FLEET_GUARD, USER_SNAPSHOTS, user_inputs
from tests.test_fork_howto import copy_project, pytest_in
from themelio_gpu.render.schemas import schema_texts


def test_reading_the_user_fleet_outside_its_tests_fails_even_when_caught() -> None:
    # The user's catalog, its folder, the stacks folder and the user-fleet snapshots, as found when pytest started.
    refused = [Path(p) for p in USER_FLEET_GUARD.protected if Path(p).exists()]
    assert {ROOT / "stacks", USER_SNAPSHOTS} <= set(refused)
    for path in refused:
        with pytest.raises(UserFleetReadError, match="belongs to the user's fleet"):
            path.read_text() if path.is_file() else list(path.iterdir())
    assert len(USER_FLEET_GUARD.reads) == len(refused)
    USER_FLEET_GUARD.reads.clear()  # refused on purpose: not a failure of this run
    for schema, text in schema_texts().items():  # the tool writes these; reading them is no dependence
        assert (ROOT / schema).read_text(encoding="utf-8") == text


@pytest.mark.user_fleet
def test_the_tests_that_follow_the_user_fleet_may_read_it() -> None:
    list(user_inputs().stacks_dir.iterdir())
    list(USER_SNAPSHOTS.iterdir())
    assert USER_FLEET_GUARD.reads == []


def test_checkout_paths_list_files_and_folders_but_not_the_tools_caches(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c.txt").write_text("x")
    (tmp_path / ".venv" / "lib").mkdir(parents=True)
    (tmp_path / "a" / "__pycache__").mkdir()
    assert checkout_paths(tmp_path) == {"a", "a/b", "a/b/c.txt"}
    assert checkout_paths(tmp_path, skip=[tmp_path / "a" / "b"]) == {"a"}


TEST_THAT_BREAKS_THE_RULES = """
from tests.conftest import ROOT


def test_leaves_a_folder() -> None:
    (ROOT / "left-behind" / "stacks").mkdir(parents=True)


def test_swallows_a_refused_read() -> None:
    try:
        (ROOT / "stacks" / "gpu-east.yaml").read_text()
    except AssertionError:
        pass
"""


def test_a_run_that_breaks_the_rules_fails_though_every_test_passed(tmp_path: Path) -> None:
    project = copy_project(tmp_path / "project")
    (project / "tests" / "test_breaks_the_rules.py").write_text(TEST_THAT_BREAKS_THE_RULES, encoding="utf-8")
    result = pytest_in(project, [sys.executable, "-m", "pytest", "-q", "tests/test_breaks_the_rules.py"])
    assert "2 passed" in result.stdout, result.stdout + result.stderr
    assert result.returncode == 1, result.stdout + result.stderr
    assert "test_swallows_a_refused_read read " in result.stdout
    assert (
        "the tests left 2 new path(s) in the checkout (write into tmp_path): left-behind, left-behind/stacks"
        in (result.stdout)
    )
