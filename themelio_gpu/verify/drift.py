"""Comparing two synthesized output folders: what the `check` command reports to a pipeline."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FolderDiff:
    missing: tuple[str, ...]
    """In the synthesized output, not in the committed folder."""
    extra: tuple[str, ...]
    """In the committed folder, no longer synthesized."""
    changed: tuple[tuple[str, str], ...]
    """(relative path, unified diff)."""

    @property
    def identical(self) -> bool:
        return not (self.missing or self.extra or self.changed)


def _files(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        return {}
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def compare_folders(committed: Path, synthesized: Path) -> FolderDiff:
    old, new = _files(committed), _files(synthesized)
    changed = []
    for rel in sorted(old.keys() & new.keys()):
        before = old[rel].read_text(encoding="utf-8")
        after = new[rel].read_text(encoding="utf-8")
        if before != after:
            diff = difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                fromfile=f"committed/{rel}",
                tofile=f"synthesized/{rel}",
            )
            changed.append((rel, "".join(diff)))
    return FolderDiff(
        missing=tuple(sorted(new.keys() - old.keys())),
        extra=tuple(sorted(old.keys() - new.keys())),
        changed=tuple(changed),
    )


def render_diff(diff: FolderDiff, committed: str) -> str:
    if diff.identical:
        return f"{committed} is up to date with the catalog and cluster definitions."
    lines = [f"{committed} differs from what the catalog and cluster definitions synthesize:"]
    lines += [f"  missing (new): {rel}" for rel in diff.missing]
    lines += [f"  stale (no longer synthesized): {rel}" for rel in diff.extra]
    lines += [f"  changed: {rel}" for rel, _ in diff.changed]
    for _, text in diff.changed:
        lines.append("")
        lines.append(text.rstrip("\n"))
    lines.append("")
    lines.append("Run `pipenv run python main.py` and commit cdktf.out, or revert the input change.")
    return "\n".join(lines)
