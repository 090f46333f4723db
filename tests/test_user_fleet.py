"""Your fleet: the tests that follow `catalog/` and `stacks/` as you edit them in your fork.

One reviewed snapshot per cluster file in the stacks folder, the catalog's contract files, and the JSON
Schemas beside them. After an edit, `make snapshots` records the new output and removes the snapshots of
clusters that are gone; read `git diff tests/snapshots/user-fleet` like code before committing. The tests of
the tool's own behaviour live in the other files and use the fixture fleet (tests/fixtures/fleets).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, USER_SNAPSHOTS, user_inputs
from tests.snapshot import assert_matches_snapshot, assert_no_stale_snapshots
from themelio_gpu.cli import CONTRACT_FILES, contract_files
from themelio_gpu.inputs.problems import InputError, Problems
from themelio_gpu.outputs.schemas import schema_texts
from themelio_gpu.plan.fleet import Fleet, cluster_definition_files, load_fleet

pytestmark = pytest.mark.user_fleet

USER = user_inputs()
CLUSTER_FILES = cluster_definition_files(USER.stacks_dir, Problems())  # the files the app reads, as it finds them
STACK_SUFFIX = ".cdk.tf.json"


@pytest.fixture(scope="module")
def user_fleet() -> Fleet:
    try:
        return load_fleet(USER.catalog, USER.stacks_dir)
    except InputError as error:
        pytest.fail(f"your fleet does not load:\n{error.render()}", pytrace=False)


@pytest.fixture(scope="module")
def user_synthesized(user_fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from themelio_gpu.outputs.synth import synthesize

    out = tmp_path_factory.mktemp("user-cdktf.out")
    synthesize(user_fleet, out, progress=None)
    return out


@pytest.mark.parametrize("file", CLUSTER_FILES, ids=[p.name for p in CLUSTER_FILES])
def test_cluster_stack_matches_its_reviewed_snapshot(
    file: Path, user_fleet: Fleet, user_synthesized: Path, update_snapshots: bool
) -> None:
    (plan,) = [c for c in user_fleet.clusters if (ROOT / c.file).resolve() == file.resolve()]
    actual = (user_synthesized / "stacks" / plan.name / "cdk.tf.json").read_text(encoding="utf-8")
    assert_matches_snapshot(USER_SNAPSHOTS / "stacks" / f"{plan.name}{STACK_SUFFIX}", actual, update_snapshots)


def test_no_snapshot_of_a_cluster_that_is_gone(user_fleet: Fleet, update_snapshots: bool) -> None:
    current = [c.name for c in user_fleet.clusters]
    assert_no_stale_snapshots(USER_SNAPSHOTS / "stacks", STACK_SUFFIX, current, update_snapshots)


@pytest.mark.parametrize("name", sorted(CONTRACT_FILES))
def test_catalog_contract_file_matches_its_reviewed_snapshot(
    name: str, user_fleet: Fleet, update_snapshots: bool
) -> None:
    actual = contract_files(user_fleet.catalog)[name]
    assert_matches_snapshot(USER_SNAPSHOTS / "catalog" / name, actual, update_snapshots)


def test_committed_json_schemas_are_current() -> None:
    for path, text in schema_texts().items():
        assert (ROOT / path).read_text(encoding="utf-8") == text, f"{path} is stale: run `make schemas`"
