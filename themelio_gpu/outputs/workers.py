"""Synthesizing a large fleet in several processes, with the same bytes as one process writes.

jsii runs each cdktf app in one node process that answers one request at a time, so one synthesis keeps
about one CPU busy (Python and node take turns). For a large fleet, `main.py` forks workers before it
reads the fleet (`WorkerPool`): each starts its own jsii node process meanwhile, then gets the checked
fleet, sorted so that clusters serving the same offerings are neighbours, and synthesizes its own range of
it, then takes clusters from the ranges with the most left until none is, into its own staging folder
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
from dataclasses import dataclass, replace
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


def _worker_main(tasks: Connection, messages: Connection, claims: Any, own: int) -> None:
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
            _run_worker(fleet, tasks.recv(), messages, _claimed(fleet.clusters, claims, own))
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


def _run_worker(fleet: Fleet, staging: Path, messages: Connection, plans: Iterator[ClusterPlan]) -> None:
    """Synthesize the stacks of `plans` (those this worker claims) into `staging`, reporting each one built."""
    from themelio_gpu.outputs.app import build_app

    def report(plan: ClusterPlan) -> None:
        messages.send(("built", plan.name))

    build_app(plans, staging, report).synth()


def _claimed(plans: Sequence[ClusterPlan], claims: Any, own: int) -> Iterator[ClusterPlan]:
    """The clusters of this worker's range, front to back; then, one at a time, the last unclaimed cluster of
    the range with the most left. `claims` holds each range's next and end index (see WorkerPool.synthesize).

    Ranges keep clusters that share outputs together (a worker renders and sends each shared value once),
    and claiming keeps every worker busy until the last cluster is built."""
    ranges = len(claims) // 2
    while True:
        with claims.get_lock():
            if claims[2 * own] < claims[2 * own + 1]:
                index = claims[2 * own]
                claims[2 * own] = index + 1
            else:
                fullest = max(range(ranges), key=lambda r: claims[2 * r + 1] - claims[2 * r])
                if claims[2 * fullest] >= claims[2 * fullest + 1]:
                    return
                index = claims[2 * fullest + 1] - 1
                claims[2 * fullest + 1] = index
        yield plans[index]


def sharing_order(plan: ClusterPlan) -> tuple[Any, ...]:
    """Clusters serving the same offerings (so the same catalog outputs and DeviceClasses) sort together."""
    return (tuple(o.name for o in plan.offerings), plan.definition.serve_migration_aliases, plan.name)


class WorkerPool:
    """`count` forked synthesis workers, started before the fleet is loaded (see `synthesize`).

    Each starts jsii, about 0.4 s of its own, while this process reads and checks the fleet; `close`
    (or leaving the `with` block) stops any that never got work, as when the fleet had problems.
    """

    def __init__(self, count: int) -> None:
        context = multiprocessing.get_context("fork")
        self.workers: list[_Worker] = []
        # Per worker, the next and the end index of its range of the fleet (set in synthesize), shared.
        self.claims = context.Array("q", 2 * count)
        # What this process has loaded stays alive in every worker: frozen, their garbage collections never
        # walk it (nor touch its pages, which stay shared). Python's gc docs recommend this before fork().
        gc.freeze()
        try:
            for own in range(count):
                task_receiver, task_sender = context.Pipe(duplex=False)
                receiver, sender = context.Pipe(duplex=False)
                process = context.Process(target=_worker_main, args=(task_receiver, sender, self.claims, own))
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
        plans = tuple(sorted(fleet.clusters, key=sharing_order))
        for own in range(self.size):  # contiguous ranges of nearly equal size
            self.claims[2 * own] = own * len(plans) // self.size
            self.claims[2 * own + 1] = (own + 1) * len(plans) // self.size
        pickled = _pickled(replace(fleet, clusters=plans))
        for own, worker in enumerate(self.workers):
            if own < len(plans):  # more workers than clusters: the others get nothing
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
        stagings = [w.staging for w in self.workers if w.staging is not None]
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
    (target / STACKS_FOLDER).mkdir(exist_ok=True)
    for staging in stagings:
        for folder in sorted((staging / STACKS_FOLDER).iterdir()):
            destination = target / STACKS_FOLDER / folder.name
            if not destination.exists():
                folder.rename(destination)  # a new stack: its folder, in one step
                continue
            # An existing stack: its files, not the folder, which may hold Terraform's files and local state.
            for file in sorted(folder.rglob("*")):
                if file.is_file():
                    moved = destination / file.relative_to(folder)
                    moved.parent.mkdir(parents=True, exist_ok=True)
                    file.replace(moved)
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
