"""`make snapshots` says what it added, changed and removed (tests/snapshot.py, listed by conftest.py): a new
snapshot does not show in `git diff`, so it would otherwise go unread."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import snapshot


def test_recording_notes_each_file_it_adds_changes_or_removes_and_leaves_the_others_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot, "RECORDED", [])
    same, edited, stale = tmp_path / "same.json", tmp_path / "edited.json", tmp_path / "stale.json"
    for path in (same, edited, stale):
        path.write_text("old\n", encoding="utf-8")
    gone = tmp_path / "clusters" / "gone"
    gone.mkdir(parents=True)
    (gone / "kueue.yaml").write_text("x\n", encoding="utf-8")
    before = same.stat().st_mtime_ns

    snapshot.assert_matches_snapshot(same, "old\n", update=True)
    snapshot.assert_matches_snapshot(edited, "new\n", update=True)
    snapshot.assert_matches_snapshot(tmp_path / "new" / "added.json", "new\n", update=True)
    snapshot.assert_no_stale_snapshots(tmp_path, ".json", ["same", "edited", "added"], update=True)
    snapshot.remove_snapshot_folder(gone)

    assert same.stat().st_mtime_ns == before  # an unchanged snapshot is not rewritten
    assert edited.read_text(encoding="utf-8") == "new\n" and not stale.exists() and not gone.exists()
    assert snapshot.recorded_summary(tmp_path) == [
        "snapshots: 1 added, 1 changed, 2 removed; read each one:",
        "  changed edited.json",
        "  added   new/added.json",
        "  removed stale.json",
        "  removed clusters/gone/kueue.yaml",
        "  (git diff shows added files after `git add --intent-to-add` of them)",
    ]


def test_a_recording_that_changed_nothing_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(snapshot, "RECORDED", [])
    assert snapshot.recorded_summary(tmp_path) == ["snapshots: none added, changed or removed"]
