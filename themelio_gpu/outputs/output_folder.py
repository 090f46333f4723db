"""The one writer of the output folder (`cdktf.out`): every stack of a synthesis lands, or none does.

The engine (cdktf) writes a synthesis into a staging folder inside the output folder (`.synth-<random>/`,
the same file system, so moving is a rename). `commit()` then moves each stack's files over the old ones,
one `os.replace` per file, then the manifest and the record of the stacks' inputs (stack_inputs.py); a
stack folder's other files (`.terraform/`, the lock file, local state) stay where they are. While it runs, SIGINT/SIGTERM/SIGHUP are held back
(interrupts.deferred), so an interrupted run leaves the whole old output (before the commit) or the whole
new one (after it). A SIGKILL can stop the commit between two files, but every file is then the old or the
new one, never a truncated one (a rename replaces a file in one step).

One synthesis at a time holds the output folder (`flock` on the folder itself, waiting if another holds
it), so every staging folder found there is left over from a killed run: it is removed first.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.interrupts import Interrupted, deferred
from themelio_gpu.outputs.stack_folders import (
    ASSETS_FOLDER,
    MANIFEST,
    STACKS_FOLDER,
    StaleStack,
    remove_stale_stacks,
    stale_stacks,
)
from themelio_gpu.outputs.stack_inputs import INDEX

STAGING_PREFIX = ".synth-"


class OutputWriteError(Exception):
    """The output folder could not be written: the message names the path and what is left there."""


@dataclass(frozen=True)
class CommitResult:
    removed: list[str]
    """Stale stack folders deleted (clusters no longer defined), or left for the CDKTF CLI to delete."""
    kept: list[StaleStack]
    """Stale stack folders kept because they hold state or files synthesis did not write."""


def write_error(error: OSError, target: Path, left: str = "unchanged") -> OutputWriteError:
    """`error` (raised while writing under `target`) as one message naming the path, and what is left."""
    path = Path(error.filename) if error.filename else target
    reason = error.strerror or str(error)
    return OutputWriteError(f"cannot write {display_path(path)}: {reason}; {display_path(target)} {left}")


class OutputFolder:
    """`with OutputFolder(target) as out:` write into `out.staging`, then `out.commit(...)`."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.staging = target  # set in __enter__
        self._lock: int | None = None
        self.committed = False
        self._created: list[Path] = []
        """The folders __enter__ created (the target and any missing parent): gone again if nothing lands."""

    def __enter__(self) -> OutputFolder:
        try:
            missing = [p for p in (self.target, *self.target.parents) if not p.exists()]
            self.target.mkdir(parents=True, exist_ok=True)
            self._created = missing
            self._lock = os.open(self.target, os.O_RDONLY | os.O_DIRECTORY)
            self._hold_lock(self._lock)
            self._remove_left_over_staging()
            self.staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=self.target))
        except OSError as error:
            self._release()
            raise write_error(error, self.target) from None
        except BaseException:
            self._release()
            raise
        return self

    def _hold_lock(self, fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(
                f"waiting: another synthesis is writing {display_path(self.target)}", file=sys.stderr, flush=True
            )
            fcntl.flock(fd, fcntl.LOCK_EX)

    def _remove_left_over_staging(self) -> None:
        # This process holds the folder: a staging folder here belongs to a run that was killed.
        for entry in sorted(self.target.glob(f"{STAGING_PREFIX}*")):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)

    def stale(self, current: Iterable[str]) -> list[StaleStack]:
        """Stack folders of clusters not in `current` (see stack_folders.stale_stacks)."""
        return stale_stacks(self.target, set(current))

    def commit(self, current: Iterable[str], remove_stale: bool = True) -> CommitResult:
        """Move the staged stacks and manifest into place, then delete the removable stale stack folders
        (`remove_stale=False`: report them only, for a caller that deletes them itself)."""
        try:
            with deferred():
                stacks = self.target / STACKS_FOLDER
                stacks.mkdir(exist_ok=True)
                staged = self.staging / STACKS_FOLDER
                for folder in sorted(staged.iterdir()) if staged.is_dir() else ():
                    _move_stack(folder, stacks / folder.name)
                (self.staging / MANIFEST).replace(self.target / MANIFEST)
                # Last: what was recorded of the stacks (stack_inputs.py); each entry names its stack file's
                # SHA-256, so a record that outlives a kill between two moves only makes a stack be rewritten.
                if (self.staging / INDEX).is_file():
                    (self.staging / INDEX).replace(self.target / INDEX)
                self.committed = True
                return CommitResult(*remove_stale_stacks(self.target, set(current), delete=remove_stale))
        except OSError as error:
            # Renames in one folder rarely fail; when one does, some stacks may be new already.
            left = (
                "holds the new stacks" if self.committed else "may hold some of the new stacks: synthesize again"
            )
            raise write_error(error, self.target, left) from None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if isinstance(error, Interrupted) and not error.outcome:
            state = "updated (every stack written)" if self.committed else "unchanged"
            error.outcome = f"{display_path(self.target)} {state}"
        try:
            if self.staging != self.target:
                shutil.rmtree(self.staging, ignore_errors=True)
            if not self.committed:
                for folder in self._created:  # innermost first: nothing was written, so leave no folder
                    with suppress(OSError):
                        folder.rmdir()
        finally:
            self._release()

    def _release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # closing the descriptor releases the flock
            self._lock = None


def _move_stack(staged: Path, destination: Path) -> None:
    """A new stack folder moves in one rename; an existing one gets each of its files replaced (the assets
    first, then the stack file naming them), then loses the assets the new stack no longer has."""
    if not destination.exists():
        staged.rename(destination)
        return
    files = sorted(f.relative_to(staged) for f in staged.rglob("*") if f.is_file())
    for relative in files:  # "assets/..." before "cdk.tf.json"
        moved = destination / relative
        moved.parent.mkdir(parents=True, exist_ok=True)
        (staged / relative).replace(moved)
    _remove_old_assets(destination / ASSETS_FOLDER, {f for f in files if f.parts[0] == ASSETS_FOLDER}, destination)


def _remove_old_assets(assets: Path, current: set[Path], stack: Path) -> None:
    """Every file and folder under the stack's assets/ that the new stack does not have (an asset's folder is
    named by its bytes' hash, so a changed chart leaves its old copy behind otherwise)."""
    if not assets.is_dir() or assets.is_symlink():
        return
    for path in sorted(assets.rglob("*"), reverse=True):  # files and inner folders before their folders
        if path.relative_to(stack) in current:
            continue
        if path.is_dir() and not path.is_symlink():
            if not any(path.iterdir()):
                path.rmdir()
        else:
            path.unlink()
    if not any(assets.iterdir()):
        assets.rmdir()
