"""jsii's node kernel started directly, without the relay process jsii puts in between.

jsii 1.142 (pinned) starts `node bin/jsii-runtime.js`, a relay: it starts the kernel, `node lib/program.js`,
with the API channel on the kernel's fd 3, copies every request and response between its own stdin/stdout
and that fd, and wraps the kernel's console output in base64 JSON on its stderr. A synthesis makes about 27
requests per cluster, and each one crosses the relay both ways: a third process to wake on every round trip
(on two busy CPUs, a wait for a CPU each time) and a second node start before the kernel's own.

`use_direct_channel` makes jsii start the kernel itself: one end of a socket pair as fd 3, exactly what the
relay gives it, /dev/null as stdin, and its stdout and stderr copied to this process's (as the relay's
copies were). Requests, responses and the kernel are the same, so are the bytes synthesized
(tests/test_kernel_channel.py compares them). When this process dies, the socket closes and the kernel
ends (it reads fd 3 until its end). This relies on jsii's private `_NodeProcess` and on the layout of its
runtime, so it checks both: a jsii other than the pinned one is a `KernelChannelError`, not a guess.
It needs `os.posix_spawn` (Linux, macOS); elsewhere, where the user sets JSII_RUNTIME (their own runtime),
or with THEMELIO_SPEEDUPS_OFF=direct-kernel, jsii starts its relay as usual.
"""

from __future__ import annotations

import atexit
import os
import platform
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from themelio_gpu.speedups import Speedup, enabled

JSII_VERSION = "1.142.0"
# The relay's own command line for the kernel: its node options (jsii's --max-old-space-size) and this.
_KERNEL_FLAGS = ("--max-old-space-size=4069", "--preserve-symlinks")
# What the pinned runtime's files say, checked before relying on it: how the relay starts the kernel, and
# that the kernel reads and writes its API channel on fd 3.
_RELAY_SPAWNS_KERNEL = (
    '[...process.execArgv,"--preserve-symlinks",(0,s.resolve)(__dirname,"..","lib","program.js")],'
    '{stdio:["ignore","pipe","pipe","pipe"]}'
)
_KERNEL_USES_FD_3 = "readFD:3,writeFD:3"


class KernelChannelError(RuntimeError):
    """The installed jsii runtime is not laid out the way the direct channel relies on."""


def _layout_error(problem: str) -> KernelChannelError:
    return KernelChannelError(
        f"jsii: {problem}. themelio_gpu/kernel_channel.py starts jsii {JSII_VERSION}'s kernel (lib/program.js) "
        "itself, with its API channel on fd 3 as jsii's relay (bin/jsii-runtime.js) does. Set "
        "THEMELIO_SPEEDUPS_OFF=direct-kernel to use jsii's relay, and check tests/test_kernel_channel.py against "
        "the installed jsii."
    )


def direct_channel_wanted() -> bool:
    return hasattr(os, "posix_spawn") and enabled(Speedup.DIRECT_KERNEL) and "JSII_RUNTIME" not in os.environ


def use_direct_channel() -> None:
    """Make jsii start its kernel without the relay, if it has not started it yet (see the module's doc)."""
    if not direct_channel_wanted():
        return
    import jsii
    from jsii._kernel.providers import process

    if jsii.__version__ != JSII_VERSION:
        raise _layout_error(f"version {jsii.__version__} is installed, the channel is written for {JSII_VERSION}")
    node_process: Any = process._NodeProcess  # patched in place: jsii creates it in ProcessProvider
    for name in ("start", "stop", "handshake", "_jsii_runtime"):
        if not callable(getattr(node_process, name, None)):
            raise _layout_error(f"jsii._kernel.providers.process._NodeProcess has no method {name}")
    if getattr(node_process, "_relay_start", None) is None:
        node_process._relay_start, node_process._relay_stop = node_process.start, node_process.stop
        node_process.start, node_process.stop = _start, _stop


def _kernel_program(runtime: str) -> Path:
    """lib/program.js beside the relay jsii just wrote out, after checking both are what 1.142 ships."""
    relay = Path(runtime)
    program = relay.parent.parent / "lib" / "program.js"
    if relay.name != "jsii-runtime.js" or not program.is_file():
        raise _layout_error(f"its runtime {relay.name} has no lib/program.js beside it")
    if _RELAY_SPAWNS_KERNEL not in relay.read_text(encoding="utf-8"):
        raise _layout_error("its relay (bin/jsii-runtime.js) does not start lib/program.js as 1.142's does")
    if _KERNEL_USES_FD_3 not in program.read_text(encoding="utf-8"):
        raise _layout_error("its kernel (lib/program.js) does not use fd 3 for its API channel")
    return program


class _Kernel:
    """The kernel's process, with what jsii's `_NodeProcess` uses of a `subprocess.Popen`: stdin/stdout."""

    def __init__(self, pid: int, channel: socket.socket, output: list[threading.Thread]) -> None:
        self.pid, self.channel, self.output = pid, channel, output
        self.stdin = channel.makefile("wb")
        self.stdout = channel.makefile("rb")
        self.returncode: int | None = None

    def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"node (pid {self.pid})", timeout)
            else:
                time.sleep(0.002)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
            self.returncode = -9


def _start(self: Any) -> None:
    # jsii's own start, except the command and the channel (and no stderr sink: the kernel's output is ours).
    environ = os.environ.copy()
    environ["JSII_AGENT"] = f"Python/{platform.python_version()}"
    node_name = environ.get("JSII_NODE", "node")
    node = shutil.which(node_name)
    if node is None:
        raise FileNotFoundError(f"jsii needs node: {node_name!r} was not found on PATH")
    program = _kernel_program(self._jsii_runtime())
    ours, theirs = socket.socketpair()
    # The kernel's stdout and stderr come back through pipes copied to ours, as the relay's copies did: if
    # this process dies first, the kernel's complaint about its broken channel goes nowhere.
    (out_read, out_write), (err_read, err_write) = os.pipe(), os.pipe()
    try:
        pid = os.posix_spawn(
            node,
            [node, *_KERNEL_FLAGS, str(program)],
            environ,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, out_write, 1),
                (os.POSIX_SPAWN_DUP2, err_write, 2),
                (os.POSIX_SPAWN_DUP2, theirs.fileno(), 3),
            ],
        )
    except BaseException:
        ours.close()
        os.close(out_read)
        os.close(err_read)
        raise
    finally:
        theirs.close()
        os.close(out_write)
        os.close(err_write)
    self._process = _Kernel(pid, ours, [_copy(out_read, sys.stdout), _copy(err_read, sys.stderr)])
    atexit.register(self.stop)
    self.handshake()


def _copy(fd: int, stream: TextIO) -> threading.Thread:
    """A daemon thread copying what the kernel writes on `fd` to `stream`, until the kernel closes it."""

    def copy() -> None:
        with os.fdopen(fd, "rb", buffering=0) as source:
            while chunk := source.read(65536):
                binary = getattr(stream, "buffer", None)
                if binary is not None:
                    binary.write(chunk)
                else:
                    stream.write(chunk.decode(errors="replace"))
                stream.flush()

    thread = threading.Thread(target=copy, name=f"kernel output {fd}", daemon=True)
    thread.start()
    return thread


def _stop(self: Any) -> None:
    kernel = getattr(self, "_process", None)
    if not isinstance(kernel, _Kernel):
        self._relay_stop()  # a kernel started through the relay before the channel was installed
        return
    atexit.unregister(self.stop)
    if not kernel.stdin.closed:
        try:
            kernel.stdin.write(b'{"exit":0}\n')
            kernel.stdin.close()
            # And the end of the channel, as the relay's exit gives it: a kernel interrupted while it waited
            # for a callback (Ctrl-C during synthesis) takes the exit request as the callback's failure, and
            # then ends (removing its temporary folder) when it reads the channel's end.
            kernel.channel.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the kernel is gone already
    try:
        kernel.wait(timeout=5)
    except subprocess.TimeoutExpired:
        kernel.kill()
    for thread in kernel.output:
        thread.join(timeout=5)  # the kernel's last words, if any
    kernel.stdout.close()
    kernel.channel.close()
    self._ctx_stack.close()
