"""Synthesizing a large fleet in several processes, with the same bytes as one process writes.

jsii runs each cdktf app in one node process that answers one request at a time, so one synthesis keeps
about one CPU busy (Python and node take turns). For a large fleet, `main.py` forks workers before it
reads the fleet (`WorkerPool`): each starts its own jsii node process meanwhile, then gets the checked
fleet and claims clusters one at a time until none is left, synthesizing them into its own staging folder
inside the output folder. When every worker has succeeded, their stack files are moved into place and one
manifest.json listing every stack is written, as cdktf writes it. A failed worker leaves the output folder
as it was; bad input stops the workers before anything is written.

Forking needs a process that has not started jsii yet (a fork would share its node process): where jsii
is already running, as in the tests' own process, or where `fork` does not exist, one process synthesizes.
"""

from __future__ import annotations

import atexit
import copyreg
import gc
import io
import json
import multiprocessing
import os
import pickle
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from types import MappingProxyType
from typing import Any

from themelio_gpu.kernel_channel import single_threaded_kernel
from themelio_gpu.outputs.stack_folders import MANIFEST, STACKS_FOLDER
from themelio_gpu.plan.fleet import ClusterPlan, Fleet

WORKERS_ENV = "THEMELIO_SYNTH_WORKERS"
CLUSTERS_PER_WORKER = 20
"""A worker pays about half a second to start jsii and load the bindings: worth it from about 20 clusters."""
MAX_AUTOMATIC_WORKERS = 4
"""Each worker peaks at about 200 MiB (Python and node); more than four rarely pays on shared runners."""
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


@dataclass
class _Worker:
    process: Any  # multiprocessing's forked Process
    tasks: Connection  # this end sends the worker the fleet and its staging folder (or None: nothing to do)
    messages: Connection
    staging: Path | None = None
    done: bool = False
    failure: str | None = None


def _mapping_proxy(items: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    return MappingProxyType(items)


class _FleetPickler(pickle.Pickler):
    # The loaded fleet keeps read-only mappings (MappingProxyType), which pickle cannot rebuild by itself.
    dispatch_table = {**copyreg.dispatch_table, MappingProxyType: lambda m: (_mapping_proxy, (dict(m),))}


def _pickled(fleet: Fleet | None) -> bytes:
    buffer = io.BytesIO()
    _FleetPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(fleet)
    return buffer.getvalue()


def _worker_main(tasks: Connection, messages: Connection, next_index: Any) -> None:
    """In the forked process: start jsii, then synthesize the clusters it claims of the fleet the parent
    sends (None: nothing to do) into the staging folder that follows."""
    try:
        # The workers keep every CPU busy: V8's helper threads would only compete with the other workers.
        single_threaded_kernel()
        # Imported (which starts jsii's node process and loads the bindings) while the parent still reads
        # and checks the fleet: the worker is ready when the fleet arrives.
        import themelio_gpu.outputs.app  # noqa: F401

        fleet = pickle.loads(tasks.recv_bytes())
        if fleet is not None:
            _run_worker(fleet, tasks.recv(), messages, next_index)
        tasks.close()
        messages.send(("done", None))
    except BaseException:
        messages.send(("failed", traceback.format_exc()))
        raise SystemExit(1) from None
    finally:
        messages.close()
        # A forked process ends with os._exit, skipping atexit: run jsii's handler, which stops its node
        # process and waits for it (else node outlives the worker, and its CPU time goes unaccounted).
        atexit._run_exitfuncs()


def _run_worker(fleet: Fleet, staging: Path, messages: Connection, next_index: Any) -> None:
    """Synthesize the stacks of the clusters this worker claims into `staging`, reporting each one built."""
    from themelio_gpu.outputs.app import build_app

    def report(plan: ClusterPlan) -> None:
        messages.send(("built", plan.name))

    build_app(_claimed(fleet.clusters, next_index), staging, report).synth()


def _claimed(plans: Sequence[ClusterPlan], next_index: Any) -> Iterator[ClusterPlan]:
    """The clusters no other worker has claimed yet, one at a time: every worker stays busy until the last
    one is built (with a fixed split, one would idle while a slower one finishes)."""
    while True:
        with next_index.get_lock():
            index = next_index.value
            next_index.value = index + 1
        if index >= len(plans):
            return
        yield plans[index]


class WorkerPool:
    """`count` forked synthesis workers, started before the fleet is loaded (see `synthesize`).

    Each starts jsii, about 0.4 s of its own, while this process reads and checks the fleet; `close`
    (or leaving the `with` block) stops any that never got work, as when the fleet had problems.
    """

    def __init__(self, count: int) -> None:
        context = multiprocessing.get_context("fork")
        self.workers: list[_Worker] = []
        self.next_index = context.Value("q", 0)  # the fleet's next unclaimed cluster, shared by the workers
        # What this process has loaded stays alive in every worker: frozen, their garbage collections never
        # walk it (nor touch its pages, which stay shared). Python's gc docs recommend this before fork().
        gc.freeze()
        try:
            for _ in range(count):
                task_receiver, task_sender = context.Pipe(duplex=False)
                receiver, sender = context.Pipe(duplex=False)
                process = context.Process(target=_worker_main, args=(task_receiver, sender, self.next_index))
                process.start()
                task_receiver.close()
                sender.close()  # the worker holds the only sending end: its exit ends the pipe
                self.workers.append(_Worker(process, task_sender, receiver))
        except BaseException:
            self.close()
            raise
        finally:
            gc.unfreeze()

    @property
    def size(self) -> int:
        return len(self.workers)

    def synthesize(
        self, fleet: Fleet, target: Path, on_stack: Callable[[ClusterPlan], None] | None = None
    ) -> None:
        """Synthesize `fleet` into `target`, each worker claiming clusters until none is left; raises if any
        worker fails."""
        by_name = {plan.name: plan for plan in fleet.clusters}
        busy = self.workers[: len(fleet.clusters)]  # more workers than clusters: the others get nothing
        pickled = _pickled(fleet)
        for worker in self.workers:
            if worker in busy:
                worker.staging = Path(tempfile.mkdtemp(prefix=_STAGING_PREFIX, dir=target))
                worker.tasks.send_bytes(pickled)
                worker.tasks.send(worker.staging)
            else:
                worker.tasks.send_bytes(_pickled(None))
            worker.tasks.close()
        _collect(self.workers, by_name, on_stack)
        failed = [w for w in self.workers if not w.done]
        for worker in failed:
            worker.process.join()  # for its exit code
        if failed:
            details = "\n".join(w.failure or f"worker exited with code {w.process.exitcode}" for w in failed)
            raise WorkerFailedError(
                f"synthesis failed in {len(failed)} of {self.size} worker processes; the output folder is as it "
                f"was (--workers 1 synthesizes in one process):\n{details}"
            )
        stagings = [w.staging for w in busy if w.staging is not None]
        _move_into_place(target, stagings, [plan.name for plan in fleet.clusters])

    def close(self) -> None:
        """Stop the workers that have not finished (idle, or interrupted) and remove their staging folders."""
        for worker in self.workers:
            if not worker.done and worker.process.is_alive():
                worker.process.kill()
            worker.process.join()
            worker.tasks.close()
            worker.messages.close()
            if worker.staging is not None:
                shutil.rmtree(worker.staging, ignore_errors=True)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def synthesize_in_workers(
    fleet: Fleet, target: Path, count: int, on_stack: Callable[[ClusterPlan], None] | None = None
) -> None:
    """Synthesize `fleet` into `target` with `count` forked workers; raises if any worker fails."""
    with WorkerPool(count) as pool:
        pool.synthesize(fleet, target, on_stack)


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
    assert sorted(stacks) == sorted(names), "the workers wrote every stack of the fleet, each once"
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
