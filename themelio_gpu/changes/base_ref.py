"""`changed --base-ref REF`: the fleet of a git commit, as that commit's own code synthesizes it.

Why the commit's own code, not this checkout's: what a base branch deployed is what its code synthesized from
its inputs. A pull request that changes the tool (a construct, a chart default, a dependency's lock) changes
stacks without touching a cluster file; synthesizing the base with the new code would hide exactly that.

How: `git worktree add --detach` of the commit in a temporary folder. When the commit's tool is this
checkout's (tool_differences: themelio_gpu/ as stack_inputs.code_digest sees it, main.py, Pipfile.lock), its
own code is this code: its fleet is planned in this process (sides.planned_side). Otherwise that commit's
`main.py` runs with the same relative `--catalog`/`--stacks-dir`, by this Python (the packages installed
here; a warning says so when the commit locks others in Pipfile.lock). The worktree is removed on every way
out: success, failure, Ctrl-C (SIGINT) and SIGTERM (interrupts.py), with every git and synthesis process
ended first; `git worktree prune` cleans up if the folder is already gone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from themelio_gpu import interrupts, worktrees
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.outputs import stack_inputs
from themelio_gpu.settings import CATALOG_ENV, STACKS_DIR_ENV

# This checkout's project folder: where main.py and the package live, and where the lock file says what is
# installed. The same folder, relative to the repository, holds the commit's main.py.
PROJECT = Path(__file__).resolve().parents[2]
LOCK_FILE = "Pipfile.lock"
TOOL_FILES = ("main.py", LOCK_FILE)
"""Beside themelio_gpu/, what of the tool a commit may have of its own."""
_DROPPED_ENV = (CATALOG_ENV, STACKS_DIR_ENV, "CDKTF_OUTDIR")
_OUTPUT_TAIL_LINES = 30


@dataclass(frozen=True)
class Commit:
    """A commit whose fleet `--base-ref` reads, and where its catalog, cluster files and code are in it."""

    ref: str
    repo: Path
    sha: str
    catalog: Path
    """The catalog, relative to the repository (as the given --catalog is to this checkout's)."""
    stacks_dir: Path
    project: Path
    """Where main.py and themelio_gpu/ are, relative to the repository (as this checkout has them)."""

    @property
    def label(self) -> str:
        """As the report names the base: `git REF (commit abcdef123456)`."""
        return f"git {self.ref} (commit {self.sha[:12]})"


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # interrupts.run: an interrupted `git worktree add` ends with its checkout worker before the cleanup.
    return interrupts.run(["git", "-C", str(repo), *args])


def _relative(path: Path, root: Path) -> Path | None:
    try:
        return path.resolve().relative_to(root)
    except ValueError:
        return None


def resolve(ref: str, catalog: Path, stacks_dir: Path) -> Commit:
    """The commit `ref` names in the repository holding the catalog. Raises InputError when it cannot be
    synthesized (no such commit, inputs outside the repository, no main.py or themelio_gpu/ in it)."""
    where = f"--base-ref {ref}"
    repo, commit = _commit(ref, catalog, where)
    problems = Problems()
    catalog_in, stacks_in = _relative(catalog, repo), _relative(stacks_dir, repo)
    for flag, relative in (("--catalog", catalog_in), ("--stacks-dir", stacks_in)):
        if relative is None:
            problems.add(
                "command line", where, f"{flag} must be inside the repository {repo} to be found in {ref}"
            )
    project = _relative(PROJECT, repo) or Path()
    for needed in (project / "main.py", project / "themelio_gpu" / "__init__.py"):
        if _git(repo, "cat-file", "-e", f"{commit}:{needed.as_posix()}").returncode != 0:
            problems.add(
                "command line",
                where,
                f"{ref} has no {needed.as_posix()}: --base-ref synthesizes a commit with its own code; for a "
                "commit without it, synthesize it elsewhere and pass the folder with --base",
            )
    problems.raise_if_any()
    assert catalog_in is not None and stacks_in is not None
    return Commit(ref, repo, commit, catalog_in, stacks_in, project)


def tool_differences(commit: Commit, tree: Path) -> tuple[str, ...]:
    """What of the tool differs between the commit (checked out in `tree`) and this checkout: its code
    (themelio_gpu/, as stack_inputs.code_digest sees it), main.py, the lock. Empty: the commit's code would
    plan and synthesize its fleet exactly as this checkout's does."""
    there = tree / commit.project
    found = []
    if stack_inputs.code_digest_of(there / "themelio_gpu") != stack_inputs.code_digest():
        found.append("themelio_gpu/")
    for name in TOOL_FILES:
        here_file, there_file = PROJECT / name, there / name
        here_bytes = here_file.read_bytes() if here_file.is_file() else None
        there_bytes = there_file.read_bytes() if there_file.is_file() else None
        if here_bytes != there_bytes:
            found.append(name)
    return tuple(found)


def synthesize_commit(commit: Commit, tree: Path, into: Path) -> tuple[str, ...]:
    """Write the stacks of the commit (checked out in `tree`) into `into` with its own main.py; returns the
    warnings to show. Raises InputError when the synthesis fails."""
    project = tree / commit.project
    command = [
        sys.executable,
        "main.py",
        "--catalog",
        str(tree / commit.catalog),
        "--stacks-dir",
        str(tree / commit.stacks_dir),
    ]
    command += ["--outdir", str(into), "--quiet"]
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    result = interrupts.run(command, cwd=project, env=env)
    if result.returncode != 0:
        output = (result.stderr or result.stdout).strip().splitlines()[-_OUTPUT_TAIL_LINES:]
        shown = "\n".join(output).replace(str(tree), f"<{commit.ref}>")
        problems = Problems()
        problems.add(
            "command line",
            f"--base-ref {commit.ref}",
            f"the synthesis of {commit.label} failed (exit {result.returncode}):\n{shown}",
        )
        problems.raise_if_any()
    return lock_warning(commit, tree)


def _commit(ref: str, catalog: Path, where: str) -> tuple[Path, str]:
    """The repository holding the catalog, and the commit `ref` names in it."""
    problems = Problems()
    if shutil.which("git") is None:
        problems.add("command line", where, "git is not on PATH")
    if not catalog.is_file():
        problems.add(
            str(catalog), "", "catalog file not found: --base-ref finds the commit's catalog at the same place"
        )
    problems.raise_if_any()
    found = _git(catalog.resolve().parent, "rev-parse", "--show-toplevel")
    if found.returncode != 0:
        problems.add("command line", where, f"{catalog} is not in a git repository: {found.stderr.strip()}")
        problems.raise_if_any()
    repo = Path(found.stdout.strip()).resolve()
    resolved = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    commit = resolved.stdout.strip()
    if resolved.returncode != 0 or not commit:
        problems.add(
            "command line", where, f"no commit {ref!r} in {repo.name} (fetch it first, e.g. git fetch origin)"
        )
    problems.raise_if_any()
    return repo, commit


def lock_warning(commit: Commit, tree: Path) -> tuple[str, ...]:
    """A warning when the commit (checked out in `tree`) locks other packages than this checkout."""
    here, there = PROJECT / LOCK_FILE, tree / commit.project / LOCK_FILE
    if here.is_file() and there.is_file() and here.read_bytes() != there.read_bytes():
        return (
            f"{commit.ref} locks other packages ({LOCK_FILE} differs): its stacks were synthesized with the "
            "packages installed here, which may write other bytes than its own environment would",
        )
    return ()


@contextmanager
def checked_out(commit: Commit) -> Iterator[Path]:
    """A temporary worktree of the commit, removed on every way out (themelio_gpu/worktrees.py)."""
    try:
        with worktrees.worktree(commit.repo, commit.sha, "themelio-changed-base-") as tree:
            yield tree
    except worktrees.WorktreeError as error:
        problems = Problems()
        problems.add("command line", commit.sha, str(error))
        problems.raise_if_any()
