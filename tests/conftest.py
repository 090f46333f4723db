"""Shared fixtures.

Two fleets, never mixed up:
- the fixture fleet (tests/fixtures/fleets/example, frozen; see its README): every test of the tool's own
  behaviour uses it. It is loaded and synthesized once per test session (importing the provider bindings
  costs seconds). Those tests also get THEMELIO_CATALOG and THEMELIO_STACKS_DIR pointing at it, so a command
  run without flags reads the fixture, never the files a user edits;
- the user's fleet (catalog/ and stacks/, or wherever THEMELIO_* point when pytest starts): only the tests
  marked `user_fleet` (tests/test_user_fleet.py) read it, found through `user_inputs()`. Any other test that
  opens or lists a file of it (or of its snapshots) fails: a fork replaces that fleet with its own.

And the run leaves the checkout as it found it: a file or folder that appears in it during the run (outside
the tools' caches, and outside tests/snapshots when recording them) fails the session. Tests write into
`tmp_path`.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.checkout import UserFleetGuard, checkout_paths
from tests.skip_summary import write_skip_summary
from themelio_gpu import interrupts
from themelio_gpu.changes.cache import CACHE_ENV as CHANGED_CACHE_ENV
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import Fleet
from themelio_gpu.render.schemas import schema_texts
from themelio_gpu.settings import CATALOG_ENV, CHART_MIRROR_ENV, STACKS_DIR_ENV, InputPaths, input_paths

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
# A fleet's mirror set in the shell would change what every fixture synthesizes (docs/charts.md).
os.environ.pop(CHART_MIRROR_ENV, None)

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


USER_FLEET_GUARD = UserFleetGuard(
    protected=(user_inputs().catalog, user_inputs().stacks_dir, ROOT / "catalog", ROOT / "stacks", USER_SNAPSHOTS),
    allowed=[ROOT / path for path in schema_texts()],  # written by the tool (`make schemas`), not by the user
)
_CHECKOUT_BEFORE = pytest.StashKey[set[str]]()
_CACHE_NUMBERS = itertools.count()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-snapshots",
        action="store_true",
        help="rewrite snapshot files instead of comparing (review the git diff afterwards)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "user_fleet: reads the user's catalog/ and stacks/ (follows their fleet; passes for any fleet)"
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_CHECKOUT_BEFORE] = checkout_paths(ROOT)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    # Setup (session and module fixtures included), call and teardown of the test run under the guard.
    USER_FLEET_GUARD.test = None if item.get_closest_marker("user_fleet") else item.nodeid
    # A test that runs a command in this process gets the command's signal handlers (interrupts.install):
    # given back after it, so that SIGTERM still ends the test run (CI stops `make test` with it).
    handlers = {signum: signal.getsignal(signum) for signum in interrupts.SIGNALS}
    try:
        yield
    finally:
        USER_FLEET_GUARD.test = None
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


def pytest_sessionfinish(session: pytest.Session) -> None:
    failures = list(USER_FLEET_GUARD.reads)
    recording = [SNAPSHOTS] if session.config.getoption("--update-snapshots") else []
    figures = os.environ.get("THEMELIO_DAY_TWO_FIGURES")  # `make day-two` asks for its figures there
    recording += [Path(figures).absolute()] if figures else []
    before = session.config.stash.get(_CHECKOUT_BEFORE, None)
    left = sorted(checkout_paths(ROOT, skip=recording) - before) if before is not None else []
    if left:
        shown = ", ".join(left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "")
        failures.append(f"the tests left {len(left)} new path(s) in the checkout (write into tmp_path): {shown}")
    if failures:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        for line in failures:
            if reporter is not None:
                reporter.write_line(f"FAILED (checkout): {line}", red=True)
            else:
                print(f"FAILED (checkout): {line}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> Iterator[None]:
    """After the inner summaries (`-ra`'s list), just before the final counts: what `--update-snapshots` did to
    each snapshot (tests/snapshot.py), and the skip reasons in one line (tests/skip_summary.py)."""
    yield
    if config.getoption("--update-snapshots"):
        from tests.snapshot import recorded_summary

        for line in recorded_summary(ROOT):
            terminalreporter.write_line(line)
    write_skip_summary(terminalreporter)


@pytest.fixture(scope="session")
def update_snapshots(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-snapshots"))


@pytest.fixture(scope="session")
def _changed_caches(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("changed-caches")


@pytest.fixture(autouse=True)
def _project_root_cwd(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, _changed_caches: Path
) -> None:
    # Messages show paths relative to the working directory, as users see them.
    monkeypatch.chdir(ROOT)
    # `changed` keeps its cache per test, outside the checkout: no test reuses what another synthesized.
    monkeypatch.setenv(CHANGED_CACHE_ENV, str(_changed_caches / str(next(_CACHE_NUMBERS))))
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
