"""Snapshot comparison: a difference fails with a readable unified diff.

Update with `pipenv run pytest --update-snapshots`, then read `git diff tests/snapshots` like code.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest


def assert_matches_snapshot(path: Path, actual: str, update: bool) -> None:
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(
            f"no snapshot {path.name}; create it with `pipenv run pytest --update-snapshots` and review it"
        )
    expected = path.read_text(encoding="utf-8")
    if expected != actual:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                fromfile=f"snapshot/{path.name}",
                tofile="synthesized",
            )
        )
        pytest.fail(f"{path.name} differs from its reviewed snapshot:\n{diff}", pytrace=False)
