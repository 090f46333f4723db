"""`sandbox check --jobs N`: several clusters' `sandbox run` at once, each a child process of its own.

A child is `python -m themelio_gpu sandbox run CLUSTER ...` with the check's flags: its own sandbox folder,
control plane and components (on ports the kernel hands out, control_plane.py) and Terraform folder. Each
child's output is printed whole when it ends, so two clusters' lines never interleave. An interrupt ends every
child the way Ctrl-C ends `sandbox run`: SIGTERM, which makes it destroy and remove its sandbox, and SIGKILL
only after `TEARDOWN_GRACE` seconds. However a child ended, the check then ends whatever of its sandbox is left
(`cluster.down`). And if the check itself is killed (kill -9), each child gets SIGTERM from the kernel
(PR_SET_PDEATHSIG, `follow_parent`) and tears its sandbox down as for Ctrl-C.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from themelio_gpu import interrupts
from themelio_gpu.sandbox import cluster
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.folder import SANDBOX_DIR_ENV, sandboxes_root

TEARDOWN_GRACE = 180.0
"""Seconds an interrupted child has to destroy its stack and stop its control plane before SIGKILL."""
PARENT_ENV = "THEMELIO_CHECK_PARENT"
"""Set in a child's environment: the pid of the check that started it."""
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def follow_parent() -> None:
    """In a child of `check --jobs`: SIGTERM (an interrupt: the child tears its sandbox down) when the check
    ends however it ends, kill -9 included, by the kernel (prctl PR_SET_PDEATHSIG); at once if it has already."""
    parent = os.environ.pop(PARENT_ENV, None)  # not for what the child starts
    if parent is None:
        return
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != int(parent):
        signal.raise_signal(signal.SIGTERM)


@dataclass(frozen=True)
class Run:
    """One cluster of one fleet to check; `folder`, a folder of its own under the sandboxes' root."""

    cluster: str
    catalog: Path
    stacks_dir: Path
    folder: str | None = None

    @property
    def label(self) -> str:
        return f"{self.stacks_dir.absolute().parent.name}/{self.cluster}" if self.folder else self.cluster

    def command(self, args: argparse.Namespace) -> list[str]:
        """The `sandbox run` that checks this cluster as `sandbox check` would in its own process."""
        command = [sys.executable, "-m", "themelio_gpu", "sandbox", "run", self.cluster, "--catalog",
                   str(self.catalog), "--stacks-dir", str(self.stacks_dir), "--with", args.runner]  # fmt: skip
        if args.charts:
            command += ["--charts", str(args.charts)]
        if args.probe:
            command.append("--probe")
        return command

    @property
    def root(self) -> Path:
        """The sandboxes' folder its sandbox is in."""
        return (sandboxes_root() / self.folder if self.folder else sandboxes_root()).absolute()

    def environment(self) -> dict[str, str]:
        env = dict(os.environ, **{PARENT_ENV: str(os.getpid())})
        if self.folder:
            env[SANDBOX_DIR_ENV] = str(self.root)
        return env


def run_all(runs: Sequence[Run], args: argparse.Namespace, jobs: int) -> list[tuple[str, int, float]]:
    """Every run's (label, exit code, seconds), `jobs` at a time, in the order given."""
    printing = threading.Lock()

    def one(run: Run) -> tuple[str, int, float]:
        with printing:
            print(f"sandbox check: {run.label}: started", flush=True)
        started = time.monotonic()
        try:
            result = interrupts.run(
                run.command(args), env=run.environment(), grace=TEARDOWN_GRACE, stderr=subprocess.STDOUT
            )
        finally:
            left = _end_leftovers(run)
        seconds = time.monotonic() - started
        with printing:
            print(f"----- sandbox run {run.label} (exit {result.returncode}, {seconds:.0f} s) -----", flush=True)
            print(result.stdout.rstrip("\n"), flush=True)
            if left:
                print(f"sandbox check: {run.label}: {left}", flush=True)
        return run.label, result.returncode if not left else result.returncode or 1, seconds

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(one, run) for run in runs]
        with interrupts.ending_workers(TEARDOWN_GRACE):
            return [future.result() for future in futures]


def _end_leftovers(run: Run) -> str:
    """End and remove what is left of a child's sandbox (a child killed before its teardown was done); says
    what it did, or "" when nothing was left."""
    if not (run.root / run.cluster).exists():
        return ""
    try:
        cluster.down(run.cluster, say=lambda _: None, root=run.root)
    except SandboxError as error:
        return f"its sandbox was left behind, and ending it failed: {error}"
    return "its sandbox was left behind: its processes are ended and its folder removed"
