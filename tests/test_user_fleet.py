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
from tests.snapshot import (
    assert_matches_snapshot,
    assert_no_stale_snapshots,
    remove_snapshot,
    remove_snapshot_folder,
)
from themelio_gpu.inputs.problems import InputError, Problems
from themelio_gpu.outputs.consumer_files import CONTRACT_FILES, cluster_contract_files, contract_files
from themelio_gpu.plan.fleet import cluster_definition_files, load_fleet
from themelio_gpu.plan.model import Fleet
from themelio_gpu.render.schemas import schema_texts

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


@pytest.mark.parametrize(
    "file", CLUSTER_FILES, ids=[p.relative_to(USER.stacks_dir).as_posix() for p in CLUSTER_FILES]
)
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
    actual = contract_files(user_fleet).get(name)
    if actual is None:  # not written (no Notebooks 2.0 option without a notebook choice): no snapshot either
        _no_snapshot(USER_SNAPSHOTS / "catalog" / name, update_snapshots)
    else:
        assert_matches_snapshot(USER_SNAPSHOTS / "catalog" / name, actual, update_snapshots)


def _no_snapshot(path: Path, update: bool) -> None:
    if update:
        remove_snapshot(path)
    elif path.exists():
        pytest.fail(f"{path.name} is no longer written; remove its snapshot with `make snapshots`", pytrace=False)


def test_no_snapshot_of_a_contract_file_that_is_gone(update_snapshots: bool) -> None:
    assert_no_stale_snapshots(
        USER_SNAPSHOTS / "catalog", ".yaml", [n.removesuffix(".yaml") for n in CONTRACT_FILES], update_snapshots
    )


def test_cluster_contract_files_match_their_reviewed_snapshots(user_fleet: Fleet, update_snapshots: bool) -> None:
    """What `catalog export` writes per cluster (Waldur, closed quota, Kueue, Kubeflow), for each of your clusters."""
    folder = USER_SNAPSHOTS / "catalog" / "clusters"
    for plan in user_fleet.clusters:
        files = cluster_contract_files(plan)
        for name, text in files.items():
            assert_matches_snapshot(folder / plan.name / name, text, update_snapshots)
        # The Polyaxon presets are a folder of files: every file below the cluster's folder is one of its files.
        for path in sorted(p for p in (folder / plan.name).rglob("*") if p.is_file()):
            if path.relative_to(folder / plan.name).as_posix() not in files:
                _no_snapshot(path, update_snapshots)
    gone = (
        sorted(p for p in folder.iterdir() if p.name not in {c.name for c in user_fleet.clusters})
        if folder.is_dir()
        else []
    )
    if update_snapshots:
        for path in gone:
            remove_snapshot_folder(path)
    elif gone:
        pytest.fail(
            f"contract snapshots of clusters that no longer exist: {', '.join(p.name for p in gone)}; remove them with `make snapshots`",
            pytrace=False,
        )


def test_committed_json_schemas_are_current() -> None:
    wrong = []
    for path, text in schema_texts().items():
        if not (ROOT / path).is_file():
            wrong.append(f"{path} is missing (deleting every file in {path.parent}/ deletes it too)")
        elif (ROOT / path).read_text(encoding="utf-8") != text:
            wrong.append(f"{path} is stale")
    if wrong:
        pytest.fail(f"{'; '.join(wrong)}: run `make schemas`", pytrace=False)


def test_your_consumer_objects_pass_the_consumers_definitions(user_fleet: Fleet, user_synthesized: Path) -> None:
    """Kueue, Karpenter and Kubeflow objects of your clusters against the consumers' CRDs and rules, as for the
    fixture fleets (tests/test_upstream_contracts.py; skips without ../shared, fails under CI=true)."""
    from tests.test_upstream_contracts import check_every_contract, cluster_objects

    check_every_contract(cluster_objects("your fleet", user_fleet, user_synthesized), {"your fleet": user_fleet})


def test_your_polyaxon_presets_pass_polyaxons_own_checks(user_fleet: Fleet, user_synthesized: Path) -> None:
    """Polyaxon's schema, runPatch validation and merge on your presets: needs only the `polyaxon` development
    package, so it runs in every fork (the contract test above skips as a whole without ../shared)."""
    from tests.test_upstream_contracts import check_polyaxon_presets, cluster_objects

    check_polyaxon_presets(cluster_objects("your fleet", user_fleet, user_synthesized))
