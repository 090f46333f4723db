"""Snapshot comparison: a difference fails with a readable unified diff.

Update with `make snapshots` (or `pytest --update-snapshots FILE`), then read `git diff tests/snapshots`
like code.
"""

from __future__ import annotations

import difflib
import shutil
from collections.abc import Iterable
from pathlib import Path

import pytest

RECORDED: list[tuple[str, Path]] = []
"""What recording (`--update-snapshots`) did to each snapshot file: (added|changed|removed, path), in order;
conftest.py lists them at the end of the run, so a new file is read, not only what `git diff` shows."""


def remove_snapshot(path: Path) -> None:
    """Remove a snapshot file (recording), noting it."""
    if path.is_file():
        path.unlink()
        RECORDED.append(("removed", path))


def remove_snapshot_folder(folder: Path) -> None:
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        remove_snapshot(path)
    shutil.rmtree(folder, ignore_errors=True)


def assert_matches_snapshot(path: Path, actual: str, update: bool) -> None:
    if update:
        if path.is_file():
            if path.read_text(encoding="utf-8") == actual:
                return  # unchanged: not rewritten
            RECORDED.append(("changed", path))
        else:
            RECORDED.append(("added", path))
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
            remove_snapshot(path)
        return
    if stale:
        names = ", ".join(p.name for p in stale)
        pytest.fail(
            f"snapshots of clusters that no longer exist: {names}; remove them with `make snapshots`",
            pytrace=False,
        )


def recorded_summary(root: Path) -> list[str]:
    """The lines that say what recording did, paths relative to `root`."""
    if not RECORDED:
        return ["snapshots: none added, changed or removed"]
    counts = {what: sum(1 for w, _ in RECORDED if w == what) for what in ("added", "changed", "removed")}
    lines = ["snapshots: " + ", ".join(f"{n} {what}" for what, n in counts.items() if n) + "; read each one:"]
    for what, path in RECORDED:
        shown = path.relative_to(root) if path.is_relative_to(root) else path
        lines.append(f"  {what:<8}{shown.as_posix()}")
    if counts["added"]:
        lines.append("  (git diff shows added files after `git add --intent-to-add` of them)")
    return lines
