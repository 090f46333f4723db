"""What a test run may do to the checkout: read the user's fleet only from the tests that follow it, and leave
no file behind. conftest.py applies both to every run."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

TOOL_CACHES = frozenset(
    {
        ".git",
        ".venv",
        "node_modules",
        ".tools",
        "__pycache__",
        ".pytest_cache",
        ".hypothesis",
        ".mypy_cache",
        ".ruff_cache",
    }
)
"""Folders the tools keep for themselves (all gitignored): what appears in them is not left behind by a test."""

_READS = frozenset({"open", "os.listdir", "os.scandir"})
"""The audit events (PEP 578) of opening a file and of listing a folder."""


def checkout_paths(root: Path, skip: Iterable[Path] = ()) -> set[str]:
    """Every file and folder under `root` as a relative POSIX path, without the tools' caches and `skip` (folders
    and files)."""
    skipped = {Path(p).absolute() for p in skip}
    found: set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in TOOL_CACHES and Path(folder, d) not in skipped]
        base = Path(folder).relative_to(root)
        found.update((base / name).as_posix() for name in (*dirs, *files) if Path(folder, name) not in skipped)
    return found


class UserFleetReadError(AssertionError):
    """A test of the tool's own behaviour opened or listed a file of the user's fleet."""


class UserFleetGuard:
    """Refuses, through an audit hook, every read of `protected` paths (but `allowed`) while `test` is set.

    An audit hook cannot be removed, so the guard stays installed and `test` switches it on per test.
    """

    def __init__(self, protected: Iterable[Path], allowed: Iterable[Path]) -> None:
        self.protected = tuple(sorted({str(Path(p).absolute()) for p in protected}))
        self.allowed = frozenset(str(Path(p).absolute()) for p in allowed)
        self.test: str | None = None
        """The id of the running test when it must not read the user's fleet; None: the guard is off."""
        self.reads: list[str] = []
        """Every refused read: a test that swallowed the exception still fails the run."""
        sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple[object, ...]) -> None:
        if self.test is None or event not in _READS or not args or not isinstance(args[0], str | os.PathLike):
            return
        target = os.fspath(args[0])
        # os.open's mode is None here, and a relative path may be relative to a dir_fd the event does not
        # carry (shutil.rmtree walks that way): only paths relative to the working directory are judged.
        if not isinstance(target, str) or (
            event == "open" and args[1:2] == (None,) and not Path(target).is_absolute()
        ):
            return
        # Not Path.resolve(): the hook runs on every open of the process; abspath makes no system call.
        path = os.path.abspath(target)  # noqa: PTH100
        if path in self.allowed or not any(path == p or path.startswith(p + os.sep) for p in self.protected):
            return
        message = (
            f"{self.test} read {path}, which belongs to the user's fleet: tests of the tool's behaviour use the "
            "fixture fleets (tests/fixtures/fleets); only tests marked user_fleet follow the user's files"
        )
        self.reads.append(message)
        raise UserFleetReadError(message)
