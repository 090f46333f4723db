"""The sandbox's supervisor on real processes (no tool needed): a process is recorded before it runs, stopped by
the identity it was recorded with (pid and start time, its process group), never one that took its pid since,
never another sandbox's, whatever killed the command that started it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.requirements import ROOT
from themelio_gpu import interrupts
from themelio_gpu.sandbox import components
from themelio_gpu.sandbox.supervisor import TAG_ENV, Process, Supervisor, carries, stat


def _supervisor(folder: Path) -> Supervisor:
    supervisor = Supervisor(folder)
    supervisor.claim()
    return supervisor


def _alive(pid: int) -> bool:
    found = stat(pid)
    return found is not None and found[0] not in "ZX"


def _wait_for(check: object, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)
    assert check(), "never happened"  # type: ignore[operator]


def _python(program: str) -> subprocess.Popen[str]:
    """A command of its own (as `sandbox up` is), running `program` with the supervisor importable."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(program)], cwd=ROOT, text=True, stdout=subprocess.PIPE
    )


def test_a_started_process_is_recorded_in_a_session_of_its_own_and_carries_the_tag(tmp_path: Path) -> None:
    supervisor = _supervisor(tmp_path / "east")
    process = supervisor.start("server", ["sleep", "60"], log=tmp_path / "server.log")
    try:
        record = json.loads((tmp_path / "east" / "processes" / "server.json").read_text())
        info = stat(process.pid)
        assert info is not None
        assert record == {"name": "server", "pid": process.pid, "pgid": process.pid, "start": info[2],
                          "command": ["sleep", "60"], "log": str(tmp_path / "server.log")}  # fmt: skip
        assert os.getsid(process.pid) == process.pid != os.getsid(0)  # it outlives this command's session
        assert carries(process.pid, supervisor.tag() or "")
        assert supervisor.processes() == [process] and supervisor.running(process)
    finally:
        supervisor.stop([process])
    assert not _alive(process.pid) and supervisor.processes() == []


def test_a_process_outlives_the_command_that_started_it_until_another_stops_it(tmp_path: Path) -> None:
    folder = tmp_path / "east"
    up = _python(f"""
        from pathlib import Path
        from themelio_gpu.sandbox.supervisor import Supervisor
        s = Supervisor(Path({str(folder)!r})); s.claim()
        print(s.start("server", ["sleep", "60"], log=Path({str(tmp_path / "log")!r})).pid)
    """)
    pid = int(up.communicate(timeout=60)[0])
    assert up.returncode == 0 and _alive(pid)
    supervisor = Supervisor(folder)
    supervisor.stop(supervisor.processes())
    assert not _alive(pid)


def test_nothing_runs_unrecorded_when_the_starter_dies_before_the_record(tmp_path: Path) -> None:
    """kill -9 of the starting command between the process's start and its record: the command never runs."""
    folder, marker = tmp_path / "east", tmp_path / "ran"
    up = _python(f"""
        import time
        from pathlib import Path
        from themelio_gpu.sandbox import supervisor
        s = supervisor.Supervisor(Path({str(folder)!r})); s.claim()
        def stuck(record):
            print(record.pid, flush=True)
            time.sleep(60)
        s._record = stuck
        s.start("server", ["sh", "-c", "touch {marker}; sleep 60"], log=Path({str(tmp_path / "log")!r}))
    """)
    assert up.stdout is not None
    gated = int(up.stdout.readline())
    assert _alive(gated)  # started, waiting for its record
    up.kill()
    up.wait()
    _wait_for(lambda: not _alive(gated))
    assert not marker.exists()
    assert Supervisor(folder).processes() == [] and Supervisor(folder).tagged() == []


def test_stop_ends_the_whole_group_and_kills_what_ignores_sigterm(tmp_path: Path) -> None:
    supervisor = _supervisor(tmp_path / "east")
    process = supervisor.start(
        "stubborn", ["sh", "-c", "trap '' TERM; sleep 60 & sleep 60 & wait"], log=tmp_path / "log"
    )
    _wait_for(lambda: len(supervisor.tagged()) == 3)
    members = [pid for pid, _ in supervisor.tagged()]
    started = time.monotonic()
    supervisor.stop([process], grace=1.0)
    assert time.monotonic() - started >= 1.0  # SIGTERM first: SIGKILL only after the grace
    assert not any(_alive(pid) for pid in members)


def test_a_pid_taken_by_another_process_is_never_signalled(tmp_path: Path) -> None:
    supervisor = _supervisor(tmp_path / "east")
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        info = stat(stranger.pid)
        assert info is not None
        reused = Process("server", stranger.pid, stranger.pid, info[2] - 1, ("sleep", "60"))  # started earlier
        (tmp_path / "east" / "processes" / "server.json").write_text(json.dumps(reused.__dict__ | {"command": []}))
        assert not supervisor.running(reused)
        supervisor.stop(supervisor.processes())
        assert _alive(stranger.pid) and stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()


def test_members_left_by_a_dead_leader_end_only_if_they_carry_the_tag(tmp_path: Path) -> None:
    supervisor = _supervisor(tmp_path / "east")
    marker = tmp_path / "child"
    process = supervisor.start(
        "leader", ["sh", "-c", f"sleep 60 & echo $! > {marker}; exit 0"], log=tmp_path / "log"
    )
    _wait_for(lambda: marker.is_file() and marker.read_text().strip() != "")
    child = int(marker.read_text())
    _wait_for(lambda: not supervisor.running(process))
    untagged = subprocess.Popen(["sleep", "60"], env={"PATH": os.environ["PATH"]}, start_new_session=True)
    try:
        assert _alive(child) and stat(child) is not None and stat(child)[1] == process.pgid  # type: ignore[index]
        supervisor.stop([process])
        assert not _alive(child)
        assert untagged.poll() is None
    finally:
        untagged.kill()
        untagged.wait()


def test_only_a_process_carrying_the_tag_is_adopted_from_a_pid_file(tmp_path: Path) -> None:
    supervisor = _supervisor(tmp_path / "east")
    pids = tmp_path / "pids"
    pids.mkdir()
    ours = subprocess.Popen(["sleep", "60"], env=supervisor.environment(), start_new_session=True)
    theirs = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        (pids / "etcd.pid").write_text(str(ours.pid))
        (pids / "kube-apiserver.pid").write_text(str(theirs.pid))
        (pids / "gone.pid").write_text("999999999")
        adopted = supervisor.adopt_pid_files(pids, "control-plane")
        assert [p.name for p in adopted] == ["control-plane.etcd"]
        supervisor.stop(supervisor.processes("control-plane"))
        assert ours.wait(timeout=10) is not None and theirs.poll() is None
    finally:
        for process in (ours, theirs):
            process.kill()
            process.wait()


def test_a_process_adopted_in_someone_elses_group_is_stopped_alone(tmp_path: Path) -> None:
    """A pid file may name a process that is not its group's leader: a `sandbox` command run from a shell (or a
    test) and what it starts share the shell's job. Stopping the adopted process must not signal that group."""
    supervisor = _supervisor(tmp_path / "east")
    pids = tmp_path / "pids"
    pids.mkdir()
    job = subprocess.Popen(["sleep", "60"], process_group=0)  # the user's job: its leader
    member = subprocess.Popen(["sleep", "60"], env=supervisor.environment(), process_group=job.pid)
    try:
        (pids / "etcd.pid").write_text(str(member.pid))
        [adopted] = supervisor.adopt_pid_files(pids, "control-plane")
        assert adopted.pgid == job.pid != adopted.pid
        supervisor.stop([adopted], grace=1.0)
        assert member.wait(timeout=10) == -signal.SIGTERM
        assert job.poll() is None, "the group the adopted process was in was signalled"
    finally:
        for process in (job, member):
            process.kill()
            process.wait()


def test_stop_never_signals_the_stopping_command_nor_its_process_group(tmp_path: Path) -> None:
    """A record naming the command that stops it (a pid file's pid taken since by a `down` carrying the tag) or
    leading the command's own group: neither the command nor the rest of its group (its user's job) is
    signalled."""
    folder = tmp_path / "east"
    _supervisor(folder)
    program = f"""
        import json, subprocess, sys
        from pathlib import Path
        from themelio_gpu.sandbox.supervisor import Process, Supervisor, stat
        supervisor = Supervisor(Path({str(folder)!r}))
        neighbour = subprocess.Popen(["sleep", "60"])  # in this command's group
        me = stat(__import__("os").getpid())
        itself = Process("control-plane.etcd", __import__("os").getpid(), me[1], me[2], ("python",))
        supervisor.stop([itself], grace=0.5)
        print(json.dumps({{"neighbour": neighbour.poll()}}), flush=True)
        neighbour.kill()
    """
    command = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(program)], cwd=ROOT, text=True, stdout=subprocess.PIPE,
        start_new_session=True,  # it leads its group, as a shell's job leader does
    )  # fmt: skip
    out, _ = command.communicate(timeout=60)
    assert command.returncode == 0, f"the command signalled itself: exit {command.returncode}"
    assert json.loads(out) == {"neighbour": None}


def test_down_of_one_sandbox_leaves_a_sandbox_whose_name_starts_the_same(tmp_path: Path) -> None:
    east, east2 = _supervisor(tmp_path / "gpu-east"), _supervisor(tmp_path / "gpu-east-2")
    mine = east.start("server", ["sleep", "60"], log=tmp_path / "east.log")
    theirs = east2.start("server", ["sleep", "60"], log=tmp_path / "east2.log")
    # A user's command naming the other sandbox's folder: not the sandbox's, whatever its command line says.
    user = subprocess.Popen(["sh", "-c", f"sleep 60 # {tmp_path / 'gpu-east'}"], start_new_session=True)
    try:
        east.end_all()
        assert not _alive(mine.pid)
        assert east2.running(theirs) and user.poll() is None
    finally:
        east2.end_all()
        user.kill()
        user.wait()


def test_a_command_is_recorded_and_its_children_carry_the_tag(tmp_path: Path) -> None:
    supervisor = _supervisor(tmp_path / "east")
    with supervisor.command():
        assert [p.name for p in supervisor.processes()] == [f"command-{os.getpid()}"]
        assert os.environ[TAG_ENV] == supervisor.tag()
        child = subprocess.Popen(["sleep", "60"], start_new_session=True)
        with supervisor.command():  # nested: one record
            assert len(supervisor.processes()) == 1
    assert TAG_ENV not in os.environ and supervisor.processes() == []
    try:
        assert [pid for pid, _ in supervisor.tagged()] == [child.pid]
        supervisor.end_all()  # never this command itself
        assert child.wait(timeout=10) is not None
    finally:
        child.kill()
        child.wait()


def test_end_commands_ends_a_command_still_on_the_sandbox_and_what_it_started(tmp_path: Path) -> None:
    """As `down` does after a kill -9 of `apply` (its Terraform left running), or with a `probe` still running."""
    folder = tmp_path / "east"
    supervisor = _supervisor(folder)
    server = supervisor.start("server", ["sleep", "60"], log=tmp_path / "log")
    probe = _python(f"""
        import subprocess, time
        from pathlib import Path
        from themelio_gpu.sandbox.supervisor import Supervisor
        with Supervisor(Path({str(folder)!r})).command():
            kubectl = subprocess.Popen(["sleep", "60"], start_new_session=True)
            print(kubectl.pid, flush=True)
            time.sleep(60)
    """)
    assert probe.stdout is not None
    kubectl = int(probe.stdout.readline())
    supervisor.end_commands()
    assert probe.wait(timeout=10) == -signal.SIGKILL
    assert not _alive(kubectl)
    assert supervisor.running(server)  # the sandbox's own processes wait for `down`'s stop
    supervisor.end_all()
    assert not _alive(server.pid)


def test_a_worker_thread_never_holds_the_main_threads_signals() -> None:
    entered, release = threading.Event(), threading.Event()

    def worker() -> None:
        with interrupts.deferred():
            entered.set()
            release.wait(10)

    previous = signal.signal(signal.SIGTERM, signal.getsignal(signal.SIGTERM))
    interrupts.install()  # as the command line does
    thread = threading.Thread(target=worker)
    thread.start()
    entered.wait(10)
    try:
        with pytest.raises(interrupts.Interrupted):  # at once, though the worker is inside a deferred block
            signal.raise_signal(signal.SIGTERM)
        # The main thread's own block holds it, then raises it.
        with pytest.raises(interrupts.Interrupted), interrupts.deferred():
            signal.raise_signal(signal.SIGTERM)
    finally:
        release.set()
        thread.join()
        for signum in interrupts.SIGNALS:
            signal.signal(signum, previous if signum == signal.SIGTERM else signal.default_int_handler)


def test_every_component_names_its_tools_and_the_chart_repository_is_one() -> None:
    names = [component.name for component in components.COMPONENTS]
    assert names[0] == "chart-repository" and len(set(names)) == len(names)
    for component in components.COMPONENTS:
        assert component.name == component.name.lower() and " " not in component.name and "." not in component.name
        assert all(isinstance(tool, str) for tool in component.tools)


def test_a_process_read_mid_exec_is_known_by_its_tag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While a process execs, /proc/<pid>/environ reads empty for a moment (seen once in about 150 starts: the
    gate's exec of the command): `carries` reads it again, so a `down` in that moment still finds the process."""
    supervisor = _supervisor(tmp_path / "east")
    process = supervisor.start("server", ["sleep", "60"], log=tmp_path / "server.log")
    reads = []
    real = Path.read_bytes

    def empty_first(path: Path) -> bytes:
        if path.name == "environ":
            reads.append(path)
            if len(reads) == 1:
                return b""  # what the kernel gives mid-exec
        return real(path)

    try:
        monkeypatch.setattr(Path, "read_bytes", empty_first)
        assert carries(process.pid, supervisor.tag() or "") and len(reads) == 2
    finally:
        monkeypatch.undo()
        supervisor.stop([process])
