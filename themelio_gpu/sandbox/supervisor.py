"""Every process of a sandbox, owned: started and recorded by the supervisor, stopped by the identity it recorded.

API (the components build on it; keep it stable):
- `Supervisor(folder)`: the processes of the sandbox in `folder`; its records are `folder/processes/<name>.json`
  (`Process`: name, pid, process group, start time, command, log).
- `claim()`: makes the records' folder and the sandbox's tag (below), before anything of the sandbox starts.
- `start(name, command, log=...)`: a long-running process in a session of its own (it outlives the command that
  started it, until `down`), recorded before it runs; `run(name, command, log=...)` the same, waited for (its
  record goes when it ends); `adopt_pid_files(folder, prefix)` records what another program started and wrote
  pid files for (kwokctl's control plane).
- `processes(prefix)`, `running(process)`; `stop(processes)`: SIGTERM to each one's process group, `GRACE`
  seconds, SIGKILL; its record goes.
- `command()`: while a `sandbox` command works on the sandbox, it is recorded too, and every child it starts
  carries the tag; `end_commands()` ends the other commands and what they left; `end_all()` ends everything.

Identity, never a name or a path: a record holds the pid and the process's start time (field 22 of
/proc/<pid>/stat, clock ticks since boot), so a pid the kernel has since given to another process is never taken
for it. A process group is signalled only while its leader is the recorded process; once the leader is gone, its
members are signalled one by one, and only those that carry the tag. A recorded process that did not lead its
group when recorded (adopted from a pid file), or whose group is the group of the command stopping it or of one of
its ancestors (a user's shell job, a test run), is signalled alone: never the group it happens to be in.

Started gated: the child waits on a pipe and runs its command only once its record is on disk. If the starting
command dies first (kill -9), the pipe closes and the child exits without running it: no process of the sandbox
runs unrecorded.

The tag: each sandbox has a random one (`processes/tag`). Every process the supervisor starts, and every child of
a command working on the sandbox, carries `THEMELIO_SANDBOX_TAG=<tag>` in its environment, and so does everything
they start in turn (kwokctl's control plane, Terraform's providers). What a kill -9 left behind without a record
(the Terraform of an `apply`, a `probe`'s kubectl, a component kwokctl started but had not written a pid file for)
is found by that exact entry of /proc/<pid>/environ (as Jenkins' ProcessTreeKiller finds a build's processes by
its cookie): the tag of one sandbox is never another's, nor in the environment of anything the user started.
A pid in a pid file someone else wrote is adopted only if that process carries the tag.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path

from themelio_gpu import interrupts

TAG_ENV = "THEMELIO_SANDBOX_TAG"
RECORDS = "processes"
GRACE = 5.0
"""Seconds a process has to end after SIGTERM before SIGKILL."""
COMMAND = "command-"
"""Records of `sandbox` commands working on the sandbox: `command-<pid>`."""
_GATE = 'read -r _ || exit 125; exec "$@" </dev/null'
"""The child's first step (sh): wait for the go on its standard input, a pipe from the starter (a pipe closed
unwritten: the starter died, and the child exits unrun); then run the command, with no input."""
_POLL = 0.05


@dataclass(frozen=True)
class Process:
    """One recorded process: its identity (pid and start time), its process group, what it runs."""

    name: str
    pid: int
    pgid: int
    start: int
    command: tuple[str, ...]
    log: str = ""

    @property
    def is_command(self) -> bool:
        """A `sandbox` command (its own pid only is ended; its group may be the user's shell job)."""
        return self.name.startswith(COMMAND)


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command's name (which may hold spaces and parentheses), from the
    state on; None if there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return None


def stat(pid: int) -> tuple[str, int, int] | None:
    """(state, process group, start time) of a process, from /proc/<pid>/stat; None if there is none."""
    fields = _stat_fields(pid)
    return None if fields is None else (fields[0], int(fields[2]), int(fields[19]))


_KERNEL_THREAD = 0x00200000
"""PF_KTHREAD in /proc/<pid>/stat's flags: a kernel thread, whose environment is always empty."""
_EXEC_WAIT = 0.5
"""How long an empty environment is read again: while a process execs, /proc/<pid>/environ reads empty until
the new program's is set up (seen about once in 150 starts, the gate's exec of the command)."""


def _environment_of(pid: int) -> bytes:
    """/proc/<pid>/environ's bytes, read again while it is empty mid-exec (not for a kernel thread)."""
    deadline = time.monotonic() + _EXEC_WAIT
    while True:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
        if raw or time.monotonic() > deadline:
            return raw
        fields = _stat_fields(pid)
        if fields is None or int(fields[6]) & _KERNEL_THREAD:
            return raw
        time.sleep(0.01)


def carries(pid: int, tag: str) -> bool:
    """The process's environment holds exactly `THEMELIO_SANDBOX_TAG=<tag>`."""
    try:
        entries = _environment_of(pid).split(b"\0")
    except OSError:
        return False
    return f"{TAG_ENV}={tag}".encode() in entries


def _all_pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _leads_a_group_of_its_own(process: Process) -> bool:
    """The recorded process led its process group when recorded, and that group is none of the groups of this
    process and its ancestors. Else its group is someone else's (the `sandbox` command's is its user's shell
    job; a process adopted from a pid file may sit in any group): it is signalled alone."""
    if process.is_command or process.pgid != process.pid:
        return False
    groups = set()
    for pid in _ancestors():
        found = stat(pid)
        if found is not None:
            groups.add(found[1])
    return process.pgid not in groups


def _ancestors() -> set[int]:
    """This process and its ancestors: never signalled."""
    found, pid = set(), os.getpid()
    while pid > 1 and pid not in found:
        found.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return found


class Supervisor:
    """The processes of the sandbox in `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.records = folder / RECORDS

    # -- the tag ---------------------------------------------------------------------------------------------

    def claim(self) -> str:
        """Make the records' folder and the sandbox's tag (kept if there is one); returns the tag."""
        self.records.mkdir(parents=True, exist_ok=True)
        existing = self.tag()
        if existing:
            return existing
        tag = secrets.token_hex(16)
        _write(self.records / "tag", tag + "\n")
        return tag

    def tag(self) -> str | None:
        try:
            return (self.records / "tag").read_text().strip() or None
        except OSError:
            return None

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """`base` (else this process's environment) with the sandbox's tag."""
        tag = self.tag()
        if tag is None:
            raise RuntimeError(f"{self.folder}: the sandbox is not claimed (Supervisor.claim)")
        return {**(os.environ if base is None else base), TAG_ENV: tag}

    # -- starting ---------------------------------------------------------------------------------------------

    def start(
        self,
        name: str,
        command: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Process:
        """Start `command` in a session of its own, its output in `log`; it runs once its record is written."""
        process, _ = self._spawn(name, command, log, env, cwd)
        return process

    def run(
        self,
        name: str,
        command: Sequence[str],
        *,
        log: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        abort: Callable[[], bool] | None = None,
    ) -> int | None:
        """`start`, then wait for it to end (its record goes); returns its exit code. `abort`, if given, is asked
        every 0.2 s meanwhile: once it says so, the process is stopped and None returned. Interrupted, the
        process is stopped first."""
        record, child = self._spawn(name, command, log, env, cwd)
        try:
            while True:
                try:
                    code = child.wait(timeout=0.2)
                    break
                except subprocess.TimeoutExpired:
                    if abort is not None and abort():
                        self.stop([record])
                        child.wait()
                        return None
        except BaseException:
            with interrupts.deferred():
                self.stop([record])
            raise
        self._forget(record)
        return code

    def _spawn(
        self, name: str, command: Sequence[str], log: Path, env: Mapping[str, str] | None, cwd: Path | None
    ) -> tuple[Process, subprocess.Popen[bytes]]:
        environment = self.environment(env)
        read_end, write_end = os.pipe()
        try:
            with log.open("ab") as out:
                child = subprocess.Popen(
                    ["/bin/sh", "-c", _GATE, "themelio-sandbox", *command], stdin=read_end, stdout=out,
                    stderr=subprocess.STDOUT, start_new_session=True, env=environment, cwd=cwd,
                )  # fmt: skip
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        try:
            found = stat(child.pid)
            if found is None:  # cannot be: it waits on the pipe
                raise RuntimeError(f"{name}: the started process {child.pid} is gone")
            record = Process(name, child.pid, found[1], found[2], tuple(command), str(log))
            self._record(record)
            os.write(write_end, b"go\n")
        except BaseException:
            os.close(write_end)  # the gate sees the pipe close: the command never runs
            child.wait()
            self._forget_named(name)
            raise
        os.close(write_end)
        return record, child

    def adopt(self, name: str, pid: int) -> Process | None:
        """Record a process another program started (by its pid) if it is the sandbox's: it carries the tag."""
        found = stat(pid)
        tag = self.tag()
        if found is None or found[0] in "ZX" or tag is None or not carries(pid, tag):
            return None
        try:
            command = tuple(
                part.decode(errors="replace")
                for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if part
            )
        except OSError:
            return None
        record = Process(name, pid, found[1], found[2], command)
        self._record(record)
        return record

    def adopt_pid_files(self, folder: Path, prefix: str) -> list[Process]:
        """Adopt each process of `folder/<name>.pid` (one pid a file) as `<prefix>.<name>`."""
        adopted = []
        for pid_file in sorted(folder.glob("*.pid")) if folder.is_dir() else []:
            with suppress(OSError, ValueError):
                name = f"{prefix}.{pid_file.stem}"
                known = next((p for p in self.processes(name) if p.name == name), None)
                if known is not None and self.running(known):
                    adopted.append(known)
                    continue
                found = self.adopt(name, int(pid_file.read_text().strip()))
                if found is not None:
                    adopted.append(found)
        return adopted

    # -- the records ------------------------------------------------------------------------------------------

    def _record(self, process: Process) -> None:
        _write(self.records / f"{process.name}.json", json.dumps(asdict(process), indent=1) + "\n")

    def _forget(self, process: Process) -> None:
        self._forget_named(process.name)

    def _forget_named(self, name: str) -> None:
        (self.records / f"{name}.json").unlink(missing_ok=True)

    def processes(self, prefix: str = "") -> list[Process]:
        """The recorded processes whose name is `prefix` or starts with `prefix.` (every one for "")."""
        found = []
        for path in sorted(self.records.glob("*.json")) if self.records.is_dir() else []:
            with suppress(OSError, ValueError, TypeError, KeyError):
                data = json.loads(path.read_text())
                record = Process(**{**data, "command": tuple(data["command"])})
                if not prefix or record.name == prefix or record.name.startswith(prefix + "."):
                    found.append(record)
        return found

    @staticmethod
    def running(process: Process) -> bool:
        """The recorded process itself (same pid, same start time) is running."""
        found = stat(process.pid)
        return found is not None and found[2] == process.start and found[0] not in "ZX"

    # -- stopping ---------------------------------------------------------------------------------------------

    def stop(self, processes: Iterable[Process], grace: float = GRACE) -> None:
        """SIGTERM to each process's group (one that leads none of its own: to it alone; never this process or an
        ancestor), SIGKILL to what is left after `grace` seconds; then their records go. Held against a second
        Ctrl-C: it runs whole."""
        targets = list(processes)
        with interrupts.deferred():
            _until_gone(lambda signum: self._send(targets, signum), lambda: self._members(targets), grace)
            for process in targets:
                self._forget(process)

    def _send(self, targets: list[Process], signum: int) -> None:
        for process in targets:
            if _leads_a_group_of_its_own(process) and self.running(process):
                with suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pgid, signum)  # the leader is the recorded one: the group is its
        for pid, start in self._members(targets):  # one alone; the members of a group whose leader is gone
            _signal(pid, start, signum)

    def _members(self, targets: list[Process]) -> list[tuple[int, int]]:
        """(pid, start time) of every live process of the targets: one that is not a group's leader of its own
        (a command, an adopted process) itself; a process's group while its leader is the recorded process, else
        the members of that group that carry the tag. (A pid number is not given to a new process while a process
        group of that number exists.)"""
        tag = self.tag()
        own = _ancestors()
        groups: dict[int, bool] = {}  # pgid: its leader is the recorded process, running
        found: list[tuple[int, int]] = []
        for process in targets:
            if not _leads_a_group_of_its_own(process):
                if self.running(process) and process.pid not in own:
                    found.append((process.pid, process.start))
            elif self._group_is_ours(process):
                groups[process.pgid] = self.running(process)
        if not groups:
            return found
        for pid in _all_pids():
            info = stat(pid)
            if info is None or info[1] not in groups or pid in own:
                continue
            if info[0] not in "ZX" and (groups[info[1]] or (tag is not None and carries(pid, tag))):
                found.append((pid, info[2]))
        return found

    @staticmethod
    def _group_is_ours(process: Process) -> bool:
        """The recorded process leads its group, or has ended (its group's number is not reused while the
        group has members)."""
        leader = stat(process.pid)
        return leader is None or leader[2] == process.start

    # -- commands ---------------------------------------------------------------------------------------------

    @contextmanager
    def command(self) -> Iterator[None]:
        """This `sandbox` command works on the sandbox: recorded while it does, and every child it starts
        (through os.environ) carries the sandbox's tag. Nested uses are one."""
        tag = self.claim()
        if os.environ.get(TAG_ENV) == tag:
            yield
            return
        found = stat(os.getpid())
        assert found is not None
        record = Process(f"{COMMAND}{os.getpid()}", os.getpid(), found[1], found[2], tuple(sys.argv))
        self._record(record)
        previous = os.environ.get(TAG_ENV)
        os.environ[TAG_ENV] = tag
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop(TAG_ENV, None)
            else:
                os.environ[TAG_ENV] = previous
            with suppress(OSError):
                self._forget(record)

    def end_commands(self, grace: float = GRACE) -> None:
        """End every other command working on the sandbox (SIGKILL: `down` removes what it would have made)
        and every process carrying the tag outside the recorded groups (what they started: Terraform, kubectl)."""
        with interrupts.deferred():
            others = [p for p in self.processes() if p.is_command and p.pid != os.getpid()]
            _until_gone(lambda _: self._send(others, signal.SIGKILL), lambda: self._members(others), grace)
            for process in others:
                self._forget(process)
            kept = {p.pgid for p in self.processes() if _leads_a_group_of_its_own(p) and self._group_is_ours(p)}
            self._end_tagged(grace, outside=kept)

    def end_all(self, grace: float = GRACE) -> None:
        """End everything of the sandbox: the other commands, every recorded process, every tagged one."""
        with interrupts.deferred():
            self.end_commands(grace)
            self.stop([p for p in self.processes() if not p.is_command], grace)
            self._end_tagged(grace)

    def _end_tagged(self, grace: float, outside: frozenset[int] | set[int] = frozenset()) -> None:
        def send(signum: int) -> None:
            for pid, start in self.tagged(outside):
                _signal(pid, start, signum)

        _until_gone(send, lambda: self.tagged(outside), grace)

    def tagged(self, outside: frozenset[int] | set[int] = frozenset()) -> list[tuple[int, int]]:
        """(pid, start time) of every live process carrying the sandbox's tag but this one and its ancestors
        (and those in the process groups `outside`)."""
        tag = self.tag()
        if tag is None:
            return []
        own, found = _ancestors(), []
        for pid in _all_pids():
            info = stat(pid)
            if info is None or pid in own or info[1] in outside:
                continue
            if info[0] not in "ZX" and carries(pid, tag):
                found.append((pid, info[2]))
        return found


def _until_gone(send: Callable[[int], None], left: Callable[[], list[tuple[int, int]]], grace: float) -> None:
    """SIGTERM, up to `grace` seconds for `left()` to be empty, then SIGKILL and a wait for it."""
    if not left():
        return
    for signum, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30.0)):
        send(signum)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            time.sleep(_POLL)
            if not left():
                return


def _signal(pid: int, start: int, signum: int) -> None:
    """Signal the process with this pid and start time, through a pidfd: never one that took the pid since."""
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        return
    try:
        found = stat(pid)
        if found is not None and found[2] == start:
            with suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(handle, signum)
    finally:
        os.close(handle)


def _write(path: Path, text: str) -> None:
    """Write whole or not at all (a reader never sees half a record)."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(text)
    partial.replace(path)
