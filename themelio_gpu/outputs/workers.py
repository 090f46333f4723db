"""Synthesizing a large fleet in several processes, with the same bytes as one process writes.

jsii runs each cdktf app in one node process that answers one request at a time, so one synthesis keeps
about one CPU busy (Python and node take turns). A fleet of many clusters is split into contiguous chunks,
each synthesized by a forked worker (its own jsii node process) into a staging folder inside the output
folder; when every worker has succeeded, their stack files are moved into place and one manifest.json
listing every stack is written, as cdktf writes it. A failed worker leaves the output folder as it was.

Forking needs a process that has not started jsii yet (a fork would share its node process): where jsii
is already running, as in the tests' own process, or where `fork` does not exist, one process synthesizes.
"""

from __future__ import annotations

import atexit
import gc
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from themelio_gpu.kernel_channel import single_threaded_kernel
from themelio_gpu.outputs.stack_folders import MANIFEST, STACKS_FOLDER
from themelio_gpu.plan.fleet import ClusterPlan, Fleet

WORKERS_ENV = "THEMELIO_SYNTH_WORKERS"
CLUSTERS_PER_WORKER = 20
"""A worker pays about half a second to start jsii and load the bindings: worth it from about 20 clusters."""
MAX_AUTOMATIC_WORKERS = 4
"""Each worker peaks at about 250 MiB (Python and node); more than four rarely pays on shared runners."""
_STAGING_PREFIX = ".synth-"


class WorkerFailedError(RuntimeError):
    """A worker failed or died; the output folder was left as it was. The message holds their errors."""


class WorkersSettingError(ValueError):
    """THEMELIO_SYNTH_WORKERS or --workers holds something other than a positive number or `auto`."""


def requested_workers(text: str | None) -> int | None:
    """The number of workers asked for (`--workers`, else $THEMELIO_SYNTH_WORKERS); None: automatic."""
    if text is None or text.strip().lower() in ("", "auto"):
        return None
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise WorkersSettingError(
            f"{WORKERS_ENV} / --workers: {text!r} is not a number of processes; "
            "allowed: a whole number >= 1 (1 synthesizes in this process) or `auto`"
        )
    return count


def usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def can_fork() -> bool:
    # jsii starts its node process when the first assembly loads, which each package's `_jsii` module does:
    # once one has, a fork would share that node process.
    loaded = any(name.endswith("._jsii") for name in sys.modules)
    return "fork" in multiprocessing.get_all_start_methods() and not loaded


def worker_count(clusters: int, requested: int | None, cpus: int, forkable: bool) -> int:
    """How many processes synthesize `clusters` clusters: never more than there are clusters."""
    if not forkable or clusters < 2:
        return 1
    if requested is not None:
        return min(requested, clusters)
    return max(1, min(cpus, clusters // CLUSTERS_PER_WORKER, MAX_AUTOMATIC_WORKERS))


def chunks(plans: Sequence[ClusterPlan], count: int) -> list[tuple[ClusterPlan, ...]]:
    """`count` contiguous chunks of nearly equal size, in the fleet's order."""
    return [tuple(plans[i * len(plans) // count : (i + 1) * len(plans) // count]) for i in range(count)]


@dataclass
class _Worker:
    process: Any  # multiprocessing's forked Process
    messages: Connection
    staging: Path
    done: bool = False
    failure: str | None = None


def _run_worker(fleet: Fleet, staging: Path, messages: Connection) -> None:
    """In the forked process: synthesize this chunk's stacks into `staging`, reporting each one built."""
    try:
        # The workers keep every CPU busy: V8's helper threads would only compete with the other workers.
        single_threaded_kernel()
        from themelio_gpu.outputs.app import build_app

        app = build_app(fleet, staging, lambda plan: messages.send(("built", plan.name)))
        app.synth()
        messages.send(("done", None))
    except BaseException:
        messages.send(("failed", traceback.format_exc()))
        raise SystemExit(1) from None
    finally:
        messages.close()
        # A forked process ends with os._exit, skipping atexit: run jsii's handler, which stops its node
        # process and waits for it (else node outlives the worker, and its CPU time goes unaccounted).
        atexit._run_exitfuncs()


def synthesize_in_workers(
    fleet: Fleet, target: Path, count: int, on_stack: Callable[[ClusterPlan], None] | None = None
) -> None:
    """Synthesize `fleet` into `target` with `count` forked workers; raises if any worker fails."""
    context = multiprocessing.get_context("fork")
    by_name = {plan.name: plan for plan in fleet.clusters}
    workers: list[_Worker] = []
    succeeded = False
    # jsii's Python runtime (about 0.1 s to import, and no node process until an assembly loads) is
    # imported once here rather than in every worker.
    import jsii  # noqa: F401

    # The loaded fleet stays alive in every worker: frozen, their garbage collections never walk it (nor
    # touch its pages, which stay shared with this process). Python's gc docs recommend this before fork().
    gc.freeze()
    try:
        for chunk in chunks(fleet.clusters, count):
            staging = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=target))
            receiver, sender = context.Pipe(duplex=False)
            process = context.Process(target=_run_worker, args=(replace(fleet, clusters=chunk), staging, sender))
            process.start()
            sender.close()  # the worker holds the only sending end: its exit ends the pipe
            workers.append(_Worker(process, receiver, staging))
        _collect(workers, by_name, on_stack)
        failed = [w for w in workers if not w.done]
        for worker in failed:
            worker.process.join()  # for its exit code
        if failed:
            details = "\n".join(w.failure or f"worker exited with code {w.process.exitcode}" for w in failed)
            raise WorkerFailedError(
                f"synthesis failed in {len(failed)} of {count} worker processes; the output folder is as it was "
                f"(--workers 1 synthesizes in one process):\n{details}"
            )
        _move_into_place(target, [w.staging for w in workers], [plan.name for plan in fleet.clusters])
        succeeded = True
    finally:
        gc.unfreeze()
        for worker in workers:
            if not succeeded and worker.process.is_alive():
                worker.process.kill()  # interrupted, or another worker failed: stop it
            worker.process.join()
            worker.messages.close()
            shutil.rmtree(worker.staging, ignore_errors=True)


def _collect(
    workers: list[_Worker], by_name: dict[str, ClusterPlan], on_stack: Callable[[ClusterPlan], None] | None
) -> None:
    """Read every worker's messages until each has said it is done, failed, or exited without a word."""
    open_pipes = {worker.messages: worker for worker in workers}
    while open_pipes:
        for ready in wait(list(open_pipes)):
            assert isinstance(ready, Connection)
            worker = open_pipes[ready]
            try:
                kind, value = ready.recv()
            except EOFError:  # exited, possibly killed, before saying anything more
                del open_pipes[ready]
                continue
            if kind == "built" and on_stack is not None:
                on_stack(by_name[value])
            elif kind == "done":
                worker.done = True
            elif kind == "failed":
                worker.failure = value
    # Not joined here: a worker that said "done" has written everything, and stopping its node process
    # (about 30 ms) overlaps the move into place. The caller joins every worker at the end.


def _move_into_place(target: Path, stagings: Sequence[Path], names: Sequence[str]) -> None:
    """Move each staged stack's files into `target` and write one manifest listing every stack."""
    stacks: dict[str, Any] = {}
    version = None
    for staging in stagings:
        manifest = json.loads((staging / MANIFEST).read_text(encoding="utf-8"))
        version = manifest["version"]
        stacks.update(manifest["stacks"])
    assert sorted(stacks) == sorted(names), "every worker wrote the stacks of its own chunk"
    for staging in stagings:
        for file in sorted((staging / STACKS_FOLDER).rglob("*")):
            if file.is_file():
                destination = target / file.relative_to(staging)
                destination.parent.mkdir(parents=True, exist_ok=True)
                # Files, not folders: a stack folder may hold Terraform's working files and local state.
                file.replace(destination)
    manifest_text = stable_stringify({"stacks": stacks, "version": version})
    staged_manifest = stagings[0] / MANIFEST
    staged_manifest.write_text(manifest_text, encoding="utf-8")
    staged_manifest.replace(target / MANIFEST)


def stable_stringify(value: Any, level: int = 0) -> str:
    """JSON as cdktf writes manifest.json (json-stable-stringify, two spaces): keys sorted, and an empty
    list or object still opens a line. tests/test_synth_workers.py compares it with cdktf's own file."""
    space = "  "
    indent = "\n" + space * level
    if isinstance(value, dict):
        items = [
            f"{indent}{space}{json.dumps(key, ensure_ascii=False)}: {stable_stringify(value[key], level + 1)}"
            for key in sorted(value)
        ]
        return "{" + ",".join(items) + indent + "}"
    if isinstance(value, list):
        return "[" + ",".join(f"{indent}{space}{stable_stringify(v, level + 1)}" for v in value) + indent + "]"
    return json.dumps(value, ensure_ascii=False)
