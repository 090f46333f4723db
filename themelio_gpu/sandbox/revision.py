"""The two revisions of `sandbox upgrade` and what the sandbox holds: the commit `--from` names (and that the
work tree is clean), and the record of the stack the command applied last, by which tool, so that a chain of
upgrades applies each commit's stack once."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themelio_gpu import interrupts
from themelio_gpu.engine import ENV as ENGINE_ENV
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.outputs import stack_inputs
from themelio_gpu.sandbox.cluster import Sandbox
from themelio_gpu.sandbox.errors import SandboxUsageError
from themelio_gpu.sandbox.tools import PROJECT_ROOT

APPLIED_RECORD = "upgrade-applied.json"
"""In the sandbox's folder: the commit whose stack `upgrade` applied last, the tool, the stack's SHA-256 and
the state's serial after it."""


def git(repo: Path, *args: str) -> str:
    result = interrupts.run(["git", "-C", str(repo), *args])
    if result.returncode != 0:
        raise SandboxUsageError(f"git {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


@dataclass(frozen=True)
class Revision:
    """The commit `--from` names, and where the fleet's files and the tool are in it (relative to the repository,
    as the given paths are to the work tree)."""

    ref: str
    repo: Path
    sha: str
    catalog: Path
    stacks_dir: Path
    project: Path

    @property
    def label(self) -> str:
        return f"git {self.ref} (commit {self.sha[:12]})"


def _relative(path: Path, root: Path) -> Path | None:
    try:
        return path.resolve().relative_to(root)
    except ValueError:
        return None


def resolve(ref: str, catalog: Path, stacks_dir: Path) -> Revision:
    """The commit REF names in the repository holding the fleet; one clear line when there is none."""
    if not catalog.is_file():
        problems = Problems()
        problems.add(str(catalog), "", "catalog file not found")
        problems.raise_if_any()
    found = interrupts.run(["git", "-C", str(catalog.resolve().parent), "rev-parse", "--show-toplevel"])
    if found.returncode != 0:
        raise SandboxUsageError(f"--from {ref}: {catalog} is not in a git repository: {found.stderr.strip()}")
    repo = Path(found.stdout.strip()).resolve()
    resolved = interrupts.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"])
    if resolved.returncode != 0 or not resolved.stdout.strip():
        raise SandboxUsageError(
            f"--from {ref}: no such revision in {repo} (fetch it first, e.g. git fetch origin)"
        )
    catalog_in, stacks_in = _relative(catalog, repo), _relative(stacks_dir, repo)
    if catalog_in is None or stacks_in is None:
        raise SandboxUsageError(f"--from {ref}: the fleet's files must be inside the repository {repo}")
    project = _relative(PROJECT_ROOT, repo) or Path()
    return Revision(ref, repo, resolved.stdout.strip(), catalog_in, stacks_in, project)


def dirty_files(commit: Revision) -> list[str]:
    """The fleet's files (and the tool's, when it lives in the same repository) that differ from HEAD."""
    paths = [commit.catalog.as_posix(), commit.stacks_dir.as_posix()]
    if (commit.repo / commit.project / "main.py").resolve() == (PROJECT_ROOT / "main.py").resolve():
        paths += [(commit.project / p).as_posix() for p in ("themelio_gpu", "main.py", "Pipfile.lock")]
    shown = git(commit.repo, "status", "--porcelain", "--untracked-files=all", "--", *paths)
    return sorted({line[3:] for line in shown.splitlines() if line.strip()})


def head_label(commit: Revision) -> str:
    return f"the work tree (commit {git(commit.repo, 'rev-parse', 'HEAD').strip()[:12]})"


def _digest(stack_dir: Path) -> str:
    return hashlib.sha256((stack_dir / "cdk.tf.json").read_bytes()).hexdigest()


def tool_id(project: Path) -> str:
    """What of the tool decides the stacks a project's main.py writes: its code (as incremental synthesis
    counts it), main.py, the lock file, and the engine."""
    digest = hashlib.sha256(stack_inputs.code_digest_of(project / "themelio_gpu").encode())
    for name in ("main.py", "Pipfile.lock"):
        path = project / name
        digest.update(b"\0" + (path.read_bytes() if path.is_file() else b""))
    digest.update(b"\0" + os.environ.get(ENGINE_ENV, "").encode())
    return digest.hexdigest()


def _state_serial(sandbox: Sandbox) -> int | None:
    state = sandbox.folder / "terraform.tfstate"
    try:
        return int(json.loads(state.read_text())["serial"])
    except (OSError, ValueError, KeyError):
        return None


def _applied(sandbox: Sandbox) -> dict[str, Any]:
    try:
        record: dict[str, Any] = json.loads((sandbox.folder / APPLIED_RECORD).read_text())
        return record
    except (OSError, ValueError):
        return {}


def record_applied(sandbox: Sandbox, stack_dir: Path, commit: str, tool: str) -> None:
    """The revision whose stack was just applied, by which tool: a commit's stack, synthesized by the same tool,
    is the same bytes (synthesis is deterministic), so the next upgrade from that commit need not apply it."""
    record = {"commit": commit, "tool": tool, "sha256": _digest(stack_dir), "serial": _state_serial(sandbox)}
    (sandbox.folder / APPLIED_RECORD).write_text(json.dumps(record, indent=2) + "\n")


def holds(sandbox: Sandbox, commit: str, tool: str) -> bool:
    """The sandbox holds the stack of `commit` by `tool`, applied last by `upgrade`, the state untouched since."""
    record = _applied(sandbox)
    return (record.get("commit"), record.get("tool"), record.get("serial")) == (
        commit,
        tool,
        _state_serial(sandbox),
    )
