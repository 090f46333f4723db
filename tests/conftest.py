"""Shared fixtures.

Two fleets, never mixed up:
- the fixture fleet (tests/fixtures/fleets/example): every test of the tool's own behaviour uses it. It is
  loaded and synthesized once per test session (importing the provider bindings costs seconds). Those tests
  also get THEMELIO_CATALOG and THEMELIO_STACKS_DIR pointing at it, so a command run without flags reads the
  fixture, never the files a user edits;
- the user's fleet (catalog/ and stacks/, or wherever THEMELIO_* point when pytest starts): only the tests
  marked `user_fleet` (tests/test_user_fleet.py) read it, found through `user_inputs()`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from themelio_gpu.plan.fleet import Fleet, load_fleet
from themelio_gpu.settings import CATALOG_ENV, STACKS_DIR_ENV, InputPaths, input_paths

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
FIXTURE_FLEET = FIXTURES / "fleets" / "example"
EXAMPLE_CATALOG = FIXTURE_FLEET / "catalog" / "gpu-catalog.yaml"
EXAMPLE_STACKS = FIXTURE_FLEET / "stacks"
SNAPSHOTS = ROOT / "tests" / "snapshots"
FIXTURE_SNAPSHOTS = SNAPSHOTS / "fixture-fleet"
"""Reviewed output of the fixture fleet: changes only when the tool's behaviour changes."""
USER_SNAPSHOTS = SNAPSHOTS / "user-fleet"
"""Reviewed output of the user's fleet: changes when the user edits catalog/ or stacks/."""


def _cluster_names(stacks_dir: Path) -> tuple[str, ...]:
    names = (yaml.safe_load(p.read_text(encoding="utf-8"))["name"] for p in stacks_dir.glob("*.yaml"))
    return tuple(sorted(names))


EXAMPLE_CLUSTERS = _cluster_names(EXAMPLE_STACKS)
"""The clusters of the fixture fleet, as its files name them."""


def user_inputs() -> InputPaths:
    """The user's catalog and cluster folder, found as the app finds them (flags aside), from the project root."""
    paths = input_paths()
    return InputPaths(catalog=ROOT / paths.catalog, stacks_dir=ROOT / paths.stacks_dir)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-snapshots",
        action="store_true",
        help="rewrite snapshot files instead of comparing (review the git diff afterwards)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "user_fleet: reads the user's catalog/ and stacks/ (follows their fleet)")


@pytest.fixture(scope="session")
def update_snapshots(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-snapshots"))


@pytest.fixture(autouse=True)
def _project_root_cwd(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    # Messages show paths relative to the working directory, as users see them.
    monkeypatch.chdir(ROOT)
    if request.node.get_closest_marker("user_fleet") is None:
        monkeypatch.setenv(CATALOG_ENV, str(EXAMPLE_CATALOG))
        monkeypatch.setenv(STACKS_DIR_ENV, str(EXAMPLE_STACKS))


@pytest.fixture(scope="session")
def example_fleet() -> Fleet:
    """The fixture fleet, loaded with paths relative to the project root as a user would type them."""
    cwd = Path.cwd()
    os.chdir(ROOT)
    try:
        return load_fleet(EXAMPLE_CATALOG.relative_to(ROOT), EXAMPLE_STACKS.relative_to(ROOT))
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="session")
def synthesized(example_fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture fleet synthesized once, in this process."""
    from themelio_gpu.outputs.synth import synthesize

    out = tmp_path_factory.mktemp("cdktf.out")
    synthesize(example_fleet, out, progress=None)
    return out


@pytest.fixture(scope="session")
def stack_json(synthesized: Path) -> Iterator[Any]:
    def load(cluster: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((synthesized / "stacks" / cluster / "cdk.tf.json").read_text())
        return data

    yield load
