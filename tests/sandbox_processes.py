"""The tests' own count of what a sandbox left running: every live process whose environment names the tests'
sandboxes' folder (THEMELIO_SANDBOX_DIR=<root>, or a folder under it), which every sandbox command the tests
start, and every process of those sandboxes, inherit. Zombies are not counted: they run nothing and hold no
port (on a machine whose init does not reap orphans, they stay)."""

from __future__ import annotations

import os
from pathlib import Path

from themelio_gpu.sandbox.folder import SANDBOX_DIR_ENV
from themelio_gpu.sandbox.supervisor import stat


def processes_of(root: Path) -> list[int]:
    """Live processes but this one whose $THEMELIO_SANDBOX_DIR is `root` or under it."""
    prefix = f"{SANDBOX_DIR_ENV}={root.absolute()}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environment = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        info = stat(int(entry.name))
        if info is None or info[0] in "ZX":
            continue
        if any(item == prefix or item.startswith(prefix + b"/") for item in environment):
            found.append(int(entry.name))
    return sorted(found)
