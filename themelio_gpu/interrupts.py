"""Ctrl-C, SIGTERM and SIGHUP as an exception every command turns into one line, never a traceback.

`install()` (the CLI's entry points call it) makes the three signals raise `Interrupted` in the main thread,
so `finally` blocks run: a synthesis removes its staging folder, the jsii kernel is stopped at exit as
usual. `deferred()` holds them back while a block that must not be cut short runs (the output folder's
commit): a signal that arrives meanwhile is raised when the block is done. Exit codes follow the shell's
128 + signal number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any, NoReturn

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):  # like KeyboardInterrupt: not an error, not caught as one
    """A signal asked the command to stop. `outcome`: what it leaves behind, for the one-line message."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.outcome = ""

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def message(self) -> str:
        return f"interrupted ({signal.Signals(self.signum).name}){'; ' + self.outcome if self.outcome else ''}"


_held: list[int] | None = None
"""While `deferred()` runs: the signals that arrived, in order (None: raise at once)."""


def _raise(signum: int, frame: FrameType | None) -> None:
    if _held is not None:
        _held.append(signum)
        return
    raise Interrupted(signum)


def install() -> None:
    """Make SIGINT, SIGTERM and SIGHUP raise `Interrupted` (main thread only, as Python's handlers run)."""
    if threading.current_thread() is threading.main_thread():
        for signum in SIGNALS:
            signal.signal(signum, _raise)


def leave(code: int) -> NoReturn:
    """Exit with `code`, the command's answer: from here a signal changes nothing. Python's exit runs the
    atexit handlers (the jsii kernel's stop, bounded) and then gives each signal its default action back, so
    a second Ctrl-C right after the first's one-line message would kill the process by SIGINT (exit -2, not
    130) or print a traceback from an atexit handler. The three signals are ignored while it exits."""
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    sys.exit(code)


@contextmanager
def outcome(text: str) -> Iterator[None]:
    """An interrupt during the block says `text` in its one-line message (what the command leaves behind)."""
    try:
        yield
    except Interrupted as interrupted:
        interrupted.outcome = text
        raise


@contextmanager
def deferred() -> Iterator[None]:
    """Run the block whole: a signal that arrives during it is raised after it (if it ends without error).

    Where `install()` has not run (a library caller, a test), the block installs the handlers for its own
    duration and then restores the caller's, re-raising a held signal through them.
    """
    global _held
    main = threading.current_thread() is threading.main_thread()
    if _held is not None or not main:  # nested: the outer block holds and re-raises; a worker thread gets no
        yield  # signal (Python runs handlers in the main thread), and must not hold the main thread's
        return
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
    for signum in previous:
        signal.signal(signum, _raise)
    _held = []
    try:
        yield
    finally:
        held, _held = _held, None
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if held:
        first = held[0]
        handler = previous.get(signal.Signals(first), _raise)
        if handler is _raise:
            raise Interrupted(first)
        if callable(handler):
            handler(first, None)
        else:  # the default action (or ignored): deliver it again, now that the block is done
            signal.raise_signal(first)


_running: set[subprocess.Popen[str]] = set()
_running_lock = threading.Lock()
_stopping = threading.Event()


class StoppedError(Exception):
    """A worker thread's command that was not started: the block waiting for the workers was interrupted."""


def run(
    command: Sequence[str],
    *,
    grace: float = 5.0,
    input: str | None = None,
    timeout: float | None = None,
    stop_signal: int = signal.SIGTERM,
    **options: Any,
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(command, capture_output=True, text=True)`, leaving no process behind however it ends.
    `input` is written to its standard input (else it has none of its own: it reads this process's).

    The command runs in a process group of its own; if this process is interrupted (or anything else is
    raised) meanwhile, the whole group gets SIGTERM, then SIGKILL after `grace` seconds: a program's own
    children (git's checkout worker, a synthesis's node kernel) end with it, before the caller cleans up
    what they were writing. After `timeout` seconds the group is ended the same way and
    subprocess.TimeoutExpired is raised. In a worker thread, see `ending_workers()`. `stop_signal`: what the
    group gets first; SIGINT for Terraform, whose providers (go-plugin) ignore it while Terraform stops them
    gracefully and writes its state, as when Ctrl-C in a terminal reaches the whole group.
    """
    worker = threading.current_thread() is not threading.main_thread()
    if worker and _stopping.is_set():
        raise StoppedError(" ".join(command))
    if input is not None:
        options["stdin"] = subprocess.PIPE
    options.setdefault("stderr", subprocess.PIPE)  # stderr=subprocess.STDOUT: one stream, in order
    with subprocess.Popen(
        list(command), stdout=subprocess.PIPE, text=True, start_new_session=True, **options
    ) as process:
        with _running_lock:
            _running.add(process)
            stopped = worker and _stopping.is_set()  # set since the check above: end_running may not see it
        try:
            if stopped:
                raise StoppedError(" ".join(command))
            out, err = process.communicate(input, timeout=timeout)
        except BaseException:
            _end_group(process, grace, stop_signal)
            raise
        finally:
            with _running_lock:
                _running.discard(process)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@contextmanager
def ending_workers(grace: float = 5.0) -> Iterator[None]:
    """The block that waits for worker threads running commands through `run` (inside a thread pool's `with`,
    so that it acts before the pool waits for its threads): if the block is interrupted (or raises), the
    commands the workers run end, and any they would start next raises StoppedError in its thread instead."""
    _stopping.clear()
    try:
        yield
    except BaseException:
        _stopping.set()
        end_running(grace)
        raise


def end_running(grace: float = 5.0) -> None:
    """End every command `run` is still waiting for, in whatever thread (the threads then see it exit)."""
    with _running_lock:
        live = list(_running)
    with deferred():
        for process in live:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in live:
            with suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


def _end_group(process: subprocess.Popen[str], grace: float, stop_signal: int = signal.SIGTERM) -> None:
    """`stop_signal` (SIGTERM) to the command's group, SIGKILL to whatever is left of it after `grace` seconds."""
    with deferred():  # a second Ctrl-C must not cut this short
        with suppress(ProcessLookupError):
            os.killpg(process.pid, stop_signal)
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
