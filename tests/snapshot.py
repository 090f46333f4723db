"""Snapshot comparison: a difference fails with a readable unified diff.

Update with `make snapshots` (or `pytest --update-snapshots FILE`), then read `git diff tests/snapshots`
like code.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path

import pytest


def assert_matches_snapshot(path: Path, actual: str, update: bool) -> None:
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        pytest.fail(f"no snapshot {path.name}; record it with `make snapshots` and review it", pytrace=False)
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
        pytest.fail(
            f"{path.name} differs from its reviewed snapshot (accept with `make snapshots`):\n{diff}",
            pytrace=False,
        )


def assert_no_stale_snapshots(folder: Path, suffix: str, current: Iterable[str], update: bool) -> None:
    """Every `<name><suffix>` in `folder` belongs to a name in `current`; updating removes the others."""
    wanted = {f"{name}{suffix}" for name in current}
    stale = sorted(p for p in folder.glob(f"*{suffix}") if p.name not in wanted) if folder.is_dir() else []
    if update:
        for path in stale:
            path.unlink()
        return
    if stale:
        names = ", ".join(p.name for p in stale)
        pytest.fail(
            f"snapshots of clusters that no longer exist: {names}; remove them with `make snapshots`",
            pytrace=False,
        )
