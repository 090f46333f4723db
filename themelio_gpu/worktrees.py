"""A commit checked out in a temporary git worktree that never outlives its block: what `changed --base-ref`
synthesizes a base from and `sandbox upgrade --from` applies first.

`git worktree add --detach` into a temporary folder; on every way out (success, failure, Ctrl-C, SIGTERM) the
worktree is removed (`--force` twice: also one `git worktree add` still holds locked when it was stopped),
`git worktree prune` cleans up if the folder is already gone, and the folder goes. Git runs through
`interrupts.run`, so an interrupted checkout ends with its worker before the cleanup.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from themelio_gpu import interrupts


class WorktreeError(Exception):
    """`git worktree add` failed: git's own words."""


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return interrupts.run(["git", "-C", str(repo), *args])


@contextmanager
def worktree(repo: Path, commit: str, prefix: str) -> Iterator[Path]:
    """The commit checked out in a temporary worktree of `repo` (a folder named with `prefix`)."""
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    tree = scratch / "worktree"
    try:
        added = git(repo, "worktree", "add", "--detach", "--quiet", str(tree), commit)
        if added.returncode != 0:
            raise WorktreeError(f"git worktree add failed: {added.stderr.strip()}")
        yield tree
    finally:
        with interrupts.deferred():  # the worktree goes whatever arrives meanwhile
            if git(repo, "worktree", "remove", "--force", "--force", str(tree)).returncode != 0:
                git(repo, "worktree", "unlock", str(tree))
                shutil.rmtree(tree, ignore_errors=True)
            git(repo, "worktree", "prune")
            shutil.rmtree(scratch, ignore_errors=True)
