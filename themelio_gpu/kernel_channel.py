"""jsii's node kernel spoken to directly, without the relay process jsii puts in between.

jsii 1.142 (pinned) starts `node bin/jsii-runtime.js`, a relay: it starts the kernel, `node lib/program.js`,
with the API channel on the kernel's fd 3, copies every request and response between its own stdin/stdout
and that fd, and wraps the kernel's console output in base64 JSON on its stderr. A synthesis makes about 25
requests per cluster, and each one crosses the relay both ways: a third process to wake on every round trip
(about 4 ms of CPU per cluster) and a second node start (about 50 ms) before the kernel's own.

`use_direct_channel` makes jsii start the kernel itself: one end of a socket pair as fd 3, exactly what the
relay gives it, /dev/null as stdin, and its stdout and stderr copied to this process's (as the relay's
copies were). Requests, responses and the kernel are the same, so are the bytes synthesized
(tests/test_kernel_channel.py compares them). It needs `os.posix_spawn` (Linux, macOS); elsewhere, where the
user sets JSII_RUNTIME (their own runtime), or with THEMELIO_JSII_RELAY=1, jsii starts its relay as usual.
A jsii whose runtime is not laid out as 1.142's is a `KernelChannelError`, not a guess.

It also writes each request in one pass of the JSON encoder (`request_json`), the same text jsii's own
`send` writes after copying the request twice: about 0.9 ms of CPU per cluster.
"""

from __future__ import annotations

import atexit
import enum
import functools
import importlib
import json
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

RELAY_ENV = "THEMELIO_JSII_RELAY"
"""`1`: jsii's own transport through its relay process (for comparison, or if the direct one misbehaves)."""
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

_v8_flags: list[str] = []


class KernelChannelError(RuntimeError):
    """The installed jsii runtime is not laid out the way the direct channel relies on."""


def _layout_error(problem: str) -> KernelChannelError:
    return KernelChannelError(
        f"jsii: {problem}. themelio_gpu/kernel_channel.py starts jsii {JSII_VERSION}'s kernel (lib/program.js) "
        "itself, with its API channel on fd 3 as jsii's relay (bin/jsii-runtime.js) does. Set "
        f"{RELAY_ENV}=1 to use jsii's relay, and check tests/test_kernel_channel.py against the installed jsii."
    )


def direct_channel_wanted() -> bool:
    return (
        hasattr(os, "posix_spawn")
        and os.environ.get(RELAY_ENV, "").strip() != "1"
        and "JSII_RUNTIME" not in os.environ
    )


def single_threaded_kernel() -> None:
    """V8 without its helper threads (concurrent compilation and GC), for a kernel that shares the CPUs
    with other synthesis workers: there those threads only compete with the other workers (see workers.py)."""
    if "--single-threaded" not in _v8_flags:
        _v8_flags.append("--single-threaded")


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
        node_process._jsii_send, node_process.send = node_process.send, _send


# --- requests, written in one pass -------------------------------------------------------------------------

# jsii's _NodeProcess registers these request classes with the API name its kernel reads (its __init__).
_API_NAMES = {
    "LoadRequest": "load",
    "GetScriptCommandRequest": "getBinScriptCommand",
    "CreateRequest": "create",
    "DeleteRequest": "del",
    "GetRequest": "get",
    "StaticGetRequest": "sget",
    "SetRequest": "set",
    "StaticSetRequest": "sset",
    "InvokeRequest": "invoke",
    "StaticInvokeRequest": "sinvoke",
    "BeginRequest": "begin",
    "StaticBeginRequest": "sbegin",
    "EndRequest": "end",
    "CallbacksRequest": "callbacks",
    "CompleteRequest": "complete",
    "StatsRequest": "stats",
}


@functools.cache
def _request_encoder() -> json.JSONEncoder:
    import attr
    from jsii._kernel import types

    process: Any = importlib.import_module("jsii._kernel.providers.process")  # untyped: jsii's own helpers
    api_names = {getattr(types, name): api for name, api in _API_NAMES.items()}
    fields: dict[type, tuple[str, ...]] = {}

    def jsonable(value: Any) -> Any:
        # Called by the JSON encoder for what JSON has no type for, as jsii's converter (cattrs) would turn it.
        kind = type(value)
        if isinstance(value, types.ObjRef):
            return process._unstructure_ref(value)
        if attr.has(kind):
            if kind not in fields:
                fields[kind] = tuple(field.name for field in attr.fields(kind))
            plain = {name: getattr(value, name) for name in fields[kind]}
            if kind in api_names:
                plain["api"] = api_names[kind]
            return plain
        if isinstance(value, enum.Enum):
            return process._unstructure_enum(value)
        return process.jdefault(value)

    return json.JSONEncoder(default=jsonable)


def request_json(request: Any) -> str:
    """`request` as jsii's own `send` writes it (cattrs' unstructure, then json.dumps with its jdefault).

    jsii copies every request's arguments twice before the JSON encoder walks them a third time; they are
    plain JSON and jsii references already (its _make_reference_for_native made them so), so here the
    encoder walks them once and converts jsii's own types as it meets them. tests/test_kernel_channel.py
    compares the two on every request class and on every request of a synthesis.
    """
    return _request_encoder().encode(request)


def _send(self: Any, request: Any, response_type: Any) -> Any:
    process: Any = importlib.import_module("jsii._kernel.providers.process")
    errors: Any = importlib.import_module("jsii.errors")
    if process._stack_traces_enabled():
        return self._jsii_send(request, response_type)  # JSII_HOST_STACK_TRACES: jsii adds them itself
    self._process.stdin.write(request_json(request).encode("utf8") + b"\n")
    self._process.stdin.flush()
    # As jsii's send reads the response.
    response = self._serializer.structure(self._next_message(), process._ProcessResponse)
    if isinstance(response, process._OkayResponse):
        return self._serializer.structure(response.ok, response_type)
    if isinstance(response, process._CallbackResponse):
        return response.callback
    if response.name == errors.ErrorType.JSII_FAULT.value:
        raise errors.JSIIError(response.error) from errors.JavaScriptError(response.stack)
    raise RuntimeError(response.error) from errors.JavaScriptError(response.stack)


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
            [node, *_KERNEL_FLAGS, *_v8_flags, str(program)],
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
