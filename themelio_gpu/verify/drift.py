"""Comparing two synthesized output folders: what the `check` command reports.

The checked folder is build output, not committed (docs/pipelines.md): `check` tells whether a folder, e.g.
what the CDKTF CLI wrote, is what the inputs synthesize now, and the command that makes it so.

Only what synthesis owns is compared (manifest.json and the stack folders), less Terraform's working files
(`.terraform/`, lock file, plan, state): a stack planned or deployed from its folder is not drift.
"""

from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from themelio_gpu.outputs.stack_folders import (
    ASSETS_FOLDER,
    STACK_FILE,
    StaleStack,
    is_synthesis_output,
    kept_message,
    stale_stacks,
    synthesized_stacks,
)
from themelio_gpu.settings import SYNTH_COMMAND


@dataclass(frozen=True)
class FolderDiff:
    missing: tuple[str, ...]
    """In the synthesized output, not in the checked folder."""
    extra: tuple[str, ...]
    """In the checked folder, no longer synthesized."""
    changed: tuple[tuple[str, str], ...]
    """(relative path, unified diff)."""
    current: tuple[str, ...] = ()
    """The stacks synthesized now."""
    kept: tuple[StaleStack, ...] = ()
    """Stale stack folders that synthesis will not delete (they hold state or foreign files)."""

    @property
    def identical(self) -> bool:
        return not (self.missing or self.extra or self.changed)


def _files(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        return {}
    files = {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}
    return {rel: path for rel, path in files.items() if is_synthesis_output(rel)}


def compare_folders(committed: Path, synthesized: Path) -> FolderDiff:
    old, new = _files(committed), _files(synthesized)
    changed = []
    for rel in sorted(old.keys() & new.keys()):
        before, after = old[rel].read_bytes(), new[rel].read_bytes()
        if before != after:
            changed.append((rel, _difference(before, after, f"{committed.name}/{rel}", f"synthesized/{rel}")))
    current = set(synthesized_stacks(synthesized))
    kept = tuple(s for s in stale_stacks(committed, current) if not s.removable)
    return FolderDiff(
        missing=tuple(sorted(new.keys() - old.keys())),
        extra=tuple(sorted(old.keys() - new.keys())),
        changed=tuple(changed),
        current=tuple(sorted(current)),
        kept=kept,
    )


def _difference(before: bytes, after: bytes, old_name: str, new_name: str) -> str:
    """A unified diff of two texts; of other files (a chart archive among a stack's assets), their sizes and
    SHA-256s."""
    try:
        old_text, new_text = before.decode("utf-8"), after.decode("utf-8")
    except UnicodeDecodeError:
        return "".join(
            f"{name}: {len(data)} bytes, SHA-256 {hashlib.sha256(data).hexdigest()}\n"
            for name, data in ((old_name, before), (new_name, after))
        )
    lines = difflib.unified_diff(
        old_text.splitlines(keepends=True), new_text.splitlines(keepends=True), fromfile=old_name, tofile=new_name
    )
    return "".join(lines)


def _synthesis_removes(rel: str, diff: FolderDiff) -> bool:
    """Whether synthesizing into the committed folder removes this extra file (or its kept folder is named)."""
    parts = PurePosixPath(rel).parts
    if len(parts) < 3:
        return False
    if parts[1] in diff.current:  # a current stack's old asset: synthesis replaces its assets/ (output_folder.py)
        return parts[2] == ASSETS_FOLDER
    return parts[2:] == (STACK_FILE,) or any(stack.name == parts[1] for stack in diff.kept)


def render_diff(diff: FolderDiff, committed: str, resynthesize: str = SYNTH_COMMAND) -> str:
    """The report, ending in what to do; `resynthesize` is the command that rewrites `committed`."""
    if diff.identical:
        return f"{committed} is up to date with the catalog and cluster definitions."
    lines = [f"{committed} differs from what the catalog and cluster definitions synthesize:"]
    lines += [f"  missing (new): {rel}" for rel in diff.missing]
    lines += [f"  stale (no longer synthesized): {rel}" for rel in diff.extra]
    lines += [f"  changed: {rel}" for rel, _ in diff.changed]
    for _, text in diff.changed:
        lines.append("")
        lines.append(text.rstrip("\n"))
    foreign = [rel for rel in diff.extra if not _synthesis_removes(rel, diff)]
    lines.append("")
    lines.append(
        f"To bring {committed} up to date: run `{resynthesize}` (it rewrites changed stacks and removes the folders "
        "of clusters that no longer exist). Or revert the input change."
    )
    for stack in diff.kept:
        lines.append(kept_message(stack, f"{committed}/stacks/{stack.name}"))
    if foreign:
        lines.append(f"Not written by synthesis, delete them from {committed}: {', '.join(foreign)}")
    return "\n".join(lines)
