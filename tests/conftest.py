"""Shared fixtures. The example fleet is loaded and synthesized once per test session: importing the
provider bindings costs seconds, so every stack test reads the same synthesized output."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from themelio_gpu.plan.fleet import Fleet, load_fleet

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_CATALOG = ROOT / "catalog" / "gpu-catalog.yaml"
EXAMPLE_STACKS = ROOT / "stacks"
SNAPSHOTS = ROOT / "tests" / "snapshots"
FIXTURES = ROOT / "tests" / "fixtures"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-snapshots",
        action="store_true",
        help="rewrite snapshot files instead of comparing (review the git diff afterwards)",
    )


@pytest.fixture(scope="session")
def update_snapshots(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-snapshots"))


@pytest.fixture(autouse=True)
def _project_root_cwd(monkeypatch: pytest.MonkeyPatch) -> None:
    # Messages show paths relative to the working directory, as users see them.
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope="session")
def example_fleet() -> Fleet:
    cwd = Path.cwd()
    os.chdir(ROOT)
    try:
        return load_fleet(Path("catalog/gpu-catalog.yaml"), Path("stacks"))
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="session")
def synthesized(example_fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example fleet synthesized once, in this process."""
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
