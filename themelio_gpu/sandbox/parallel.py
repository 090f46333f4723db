"""`sandbox check --jobs N`: several clusters' `sandbox run` at once, each a child process of its own.

A child is `python -m themelio_gpu sandbox run CLUSTER ...` with the check's flags: its own sandbox folder,
control plane, chart repository (a port the kernel picks) and Terraform folder; the control planes' ports
are chosen one `up` at a time (cluster.py's kwokctl lock). Each child's output is printed whole when it ends,
so two clusters' lines never interleave. An interrupt ends every child the way Ctrl-C ends `sandbox run`:
SIGTERM, which makes it destroy and remove its sandbox, and SIGKILL only after `TEARDOWN_GRACE` seconds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from themelio_gpu import interrupts
from themelio_gpu.sandbox.cluster import SANDBOX_DIR_ENV, sandboxes_root

TEARDOWN_GRACE = 180.0
"""Seconds an interrupted child has to destroy its stack and stop its control plane before SIGKILL."""


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

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.folder:
            env[SANDBOX_DIR_ENV] = str((sandboxes_root() / self.folder).absolute())
        return env


def run_all(runs: Sequence[Run], args: argparse.Namespace, jobs: int) -> list[tuple[str, int, float]]:
    """Every run's (label, exit code, seconds), `jobs` at a time, in the order given."""
    printing = threading.Lock()

    def one(run: Run) -> tuple[str, int, float]:
        with printing:
            print(f"sandbox check: {run.label}: started", flush=True)
        started = time.monotonic()
        result = interrupts.run(
            run.command(args), env=run.environment(), grace=TEARDOWN_GRACE, stderr=subprocess.STDOUT
        )
        seconds = time.monotonic() - started
        with printing:
            print(f"----- sandbox run {run.label} (exit {result.returncode}, {seconds:.0f} s) -----", flush=True)
            print(result.stdout.rstrip("\n"), flush=True)
        return run.label, result.returncode, seconds

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(one, run) for run in runs]
        with interrupts.ending_workers(TEARDOWN_GRACE):
            return [future.result() for future in futures]
