"""Signals as one exception (themelio_gpu/interrupts.py): held back where a block must not be cut short, and
every process of an interrupted command ended before the caller cleans up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_output_folder import _gone_within
from themelio_gpu import interrupts
from themelio_gpu.sandbox.supervisor import stat


@pytest.fixture
def installed() -> Iterator[None]:
    previous = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
    interrupts.install()
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def _deferred_delivers(handler: Callable[[int, Any], Any] | int) -> BaseException | None:
    previous = signal.signal(signal.SIGHUP, handler)
    try:
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.01)
        return None
    except BaseException as error:
        return error
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_a_held_signal_goes_to_the_handler_that_was_there_before() -> None:
    calls: list[int] = []
    assert _deferred_delivers(lambda signum, frame: calls.append(signum)) is None
    assert calls == [signal.SIGHUP]
    assert _deferred_delivers(signal.SIG_IGN) is None  # ignored before: ignored after
    error = _deferred_delivers(signal.default_int_handler)
    assert isinstance(error, KeyboardInterrupt)


def test_an_interrupted_command_ends_with_every_process_it_started(installed: None, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # A program whose own child would outlive it if only the program were killed (git's checkout worker).
    script = f"sleep 60 & echo $! $$ > {pids}; trap '' TERM; wait"

    def interrupt_when_started() -> None:
        while not pids.exists() or not pids.read_text().strip():
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=interrupt_when_started, daemon=True).start()
    with pytest.raises(interrupts.Interrupted) as raised:
        interrupts.run(["sh", "-c", script], grace=0.5)
    assert raised.value.exit_code == 143
    grandchild, group = (int(pid) for pid in pids.read_text().split())
    # Ended with its group (SIGTERM, SIGKILL after the grace period); the kernel and init finish it a moment
    # later on a loaded machine, and its pid may be reused by then: only a `sleep 60` under that pid and in the
    # command's process group counts (CI once saw another `sleep 60` there).
    left = _gone_within({grandchild}, 5.0)
    found = stat(grandchild)
    assert not left or _command_line(grandchild) != "sleep 60" or found is None or found[1] != group


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def test_a_command_that_ends_gives_its_output_and_status() -> None:
    done = interrupts.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")


def test_a_signal_while_the_command_exits_changes_nothing() -> None:
    """The exit code is the command's once it leaves: a Ctrl-C that arrives while Python exits (here from an
    atexit handler, as the jsii kernel's stop is one) neither kills it by SIGINT nor prints a traceback."""
    script = (
        "import atexit, os, signal\n"
        "from themelio_gpu import interrupts\n"
        "interrupts.install()\n"
        "atexit.register(lambda: os.kill(os.getpid(), signal.SIGINT))\n"
        "interrupts.leave(130)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (130, "")


def test_a_test_that_runs_a_command_in_process_gives_sigterm_back(tmp_path: Path) -> None:
    """The test run's conftest gives back the signal handlers a test's in-process command installed: otherwise
    SIGTERM raises `Interrupted` in whichever test runs next and the run goes on (CI stops `make test` so)."""
    (tmp_path / "test_signals.py").write_text(
        "import signal\n"
        "from themelio_gpu import interrupts\n"
        "def test_a_command_installs() -> None:\n"
        "    interrupts.install()\n"
        "def test_the_next_has_the_default() -> None:\n"
        "    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL\n",
        encoding="utf-8",
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "--rootdir", str(tmp_path), str(tmp_path / "test_signals.py")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(Path.cwd())},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:]
