"""`sandbox check --jobs N` and `--fleet`: clusters checked at once, each output whole, each child's sandbox
ended however the child ends. No tool is needed: the children here are small Python programs standing in for
`sandbox run`."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from themelio_gpu.sandbox import cluster, parallel, workflow
from themelio_gpu.sandbox.errors import SandboxUsageError
from themelio_gpu.settings import DEFAULT_CATALOG, DEFAULT_STACKS_DIR

ROOT = Path(__file__).resolve().parent.parent
FLEETS = ROOT / "tests" / "fixtures" / "fleets"


def _args(**overrides: object) -> argparse.Namespace:
    values: dict[str, object] = {
        "catalog": None, "stacks_dir": None, "fleets": [], "clusters": [], "every": False, "runner": "terraform",
        "probe": False, "charts": None, "jobs": 1,
    }  # fmt: skip
    values.update(overrides)
    return argparse.Namespace(**values)


def _child(monkeypatch: pytest.MonkeyPatch, program: str) -> None:
    """Every Run runs `program` (Python, with the run's cluster as argv[1]) instead of `sandbox run`."""

    def command(self: parallel.Run, args: argparse.Namespace) -> list[str]:
        return [sys.executable, "-c", program, self.cluster]

    monkeypatch.setattr(parallel.Run, "command", command)


def test_a_child_checks_one_cluster_with_the_checks_own_flags(tmp_path: Path) -> None:
    run = parallel.Run("gpu-a", tmp_path / "catalog.yaml", tmp_path / "stacks")
    args = _args(runner="tofu", probe=True, charts="cache")
    assert run.command(args)[1:] == [
        "-m", "themelio_gpu", "sandbox", "run", "gpu-a", "--catalog", str(tmp_path / "catalog.yaml"),
        "--stacks-dir", str(tmp_path / "stacks"), "--with", "tofu", "--charts", "cache", "--probe",
    ]  # fmt: skip
    assert run.label == "gpu-a"
    # One fleet: the sandbox folder as for `sandbox run`; the check's pid, so that the child ends with it.
    assert run.environment() == dict(os.environ, THEMELIO_CHECK_PARENT=str(os.getpid()))


def test_fleets_sharing_a_cluster_name_get_sandbox_folders_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cluster.SANDBOX_DIR_ENV, str(tmp_path / "sandboxes"))
    one = parallel.Run("gpu-a", tmp_path / "one" / "catalog" / "c.yaml", tmp_path / "one" / "stacks", "fleet-1")
    two = parallel.Run("gpu-a", tmp_path / "two" / "catalog" / "c.yaml", tmp_path / "two" / "stacks", "fleet-2")
    assert one.environment()[cluster.SANDBOX_DIR_ENV] == str(tmp_path / "sandboxes" / "fleet-1")
    assert two.environment()[cluster.SANDBOX_DIR_ENV] == str(tmp_path / "sandboxes" / "fleet-2")
    assert (one.label, two.label) == ("one/gpu-a", "two/gpu-a")


def test_runs_go_on_at_once_and_each_output_is_printed_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each child waits (up to 60 s) for the other's mark: both finish only if they ran at the same time.
    program = f"""
import pathlib, sys, time
me = sys.argv[1]; other = {{"a": "b", "b": "a"}}[me]
folder = pathlib.Path({str(tmp_path)!r})
(folder / me).write_text("here")
print(me, "line 1", flush=True)
deadline = time.monotonic() + 60
while not (folder / other).exists() and time.monotonic() < deadline:
    time.sleep(0.05)
print(me, "line 2", file=sys.stderr, flush=True)
sys.exit(0 if (folder / other).exists() and me == "a" else 1)
"""
    _child(monkeypatch, program)
    runs = [parallel.Run(name, tmp_path / "c.yaml", tmp_path / "stacks") for name in ("a", "b")]
    results = parallel.run_all(runs, _args(), jobs=2)
    assert [(label, code) for label, code, _ in results] == [("a", 0), ("b", 1)]
    out = capsys.readouterr().out.splitlines()
    for name in ("a", "b"):
        block = out.index(next(line for line in out if line.startswith(f"----- sandbox run {name} ")))
        assert out[block + 1 : block + 3] == [f"{name} line 1", f"{name} line 2"]  # stdout and stderr, in order


def test_one_job_at_a_time_keeps_the_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _child(monkeypatch, "import sys; print(sys.argv[1])")
    runs = [parallel.Run(name, tmp_path / "c.yaml", tmp_path / "s") for name in ("x", "y", "z")]
    assert [label for label, _, _ in parallel.run_all(runs, _args(), jobs=1)] == ["x", "y", "z"]
    started = [line for line in capsys.readouterr().out.splitlines() if line.endswith(": started")]
    assert started == ["sandbox check: x: started", "sandbox check: y: started", "sandbox check: z: started"]


def test_an_interrupt_gives_every_child_its_teardown(tmp_path: Path) -> None:
    # The check in a process of its own, SIGTERMed while its children run: each child gets SIGTERM (and
    # writes that it tore down), none is left, and the check exits as an interrupted command does.
    script = f"""
import argparse, sys
from pathlib import Path
from themelio_gpu import interrupts
from themelio_gpu.sandbox import parallel
folder = Path({str(tmp_path)!r})
child = '''
import pathlib, signal, sys, time
folder = pathlib.Path({str(tmp_path)!r})
def down(signum, frame):
    (folder / (sys.argv[1] + ".down")).write_text("torn down")
    sys.exit(143)
signal.signal(signal.SIGTERM, down)
(folder / (sys.argv[1] + ".up")).write_text("up")
time.sleep(120)
'''
parallel.Run.command = lambda self, args: [sys.executable, "-c", child, self.cluster]
interrupts.install()
args = argparse.Namespace(runner="terraform", charts=None, probe=False)
try:
    parallel.run_all([parallel.Run(n, folder, folder) for n in ("a", "b", "c")], args, jobs=2)
except interrupts.Interrupted as stop:
    sys.exit(stop.exit_code)
"""
    check = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    deadline = time.monotonic() + 60
    while not ((tmp_path / "a.up").exists() and (tmp_path / "b.up").exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    check.terminate()
    assert check.wait(timeout=60) == 143
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.down", "a.up", "b.down", "b.up"]  # c never started


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"fleets": ["a"], "catalog": "c.yaml"}, "leave out --catalog and --stacks-dir"),
        ({"fleets": ["a", "b"], "clusters": ["gpu-east"]}, "with one --fleet only"),
        ({"fleets": ["nowhere"]}, f"--fleet: nowhere has no {DEFAULT_CATALOG} and no {DEFAULT_STACKS_DIR}/ (a"),
    ],
)
def test_fleets_given_wrongly_are_one_clear_message(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(SandboxUsageError, match=message.replace("(", r"\(")):
        workflow._fleets(_args(**overrides))


def test_each_fleet_is_its_catalog_and_stacks_folder() -> None:
    fleets = workflow._fleets(_args(fleets=[str(FLEETS / "example"), str(FLEETS / "own-names")]))
    assert [(p.catalog, p.stacks_dir) for p in fleets] == [
        (FLEETS / name / DEFAULT_CATALOG, FLEETS / name / DEFAULT_STACKS_DIR) for name in ("example", "own-names")
    ]


def test_a_child_killed_before_its_teardown_has_its_sandbox_ended_by_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Each child starts a process of its sandbox through the supervisor, then dies by SIGKILL (as a child the
    # check kills after TEARDOWN_GRACE): the check ends that process and removes the folder.
    root = tmp_path / "sandboxes"
    monkeypatch.setenv(cluster.SANDBOX_DIR_ENV, str(root))
    program = f"""
import os, signal, sys
from pathlib import Path
from themelio_gpu.sandbox.supervisor import Supervisor
folder = Path({str(root)!r}) / sys.argv[1]
supervisor = Supervisor(folder)
supervisor.claim()
process = supervisor.start("server", ["sleep", "60"], log=folder / "server.log")
print(process.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""
    _child(monkeypatch, program)
    runs = [parallel.Run(name, tmp_path / "c.yaml", tmp_path / "stacks") for name in ("gpu-east", "gpu-east-2")]
    results = parallel.run_all(runs, _args(), jobs=2)
    assert [(label, code) for label, code, _ in results] == [("gpu-east", -9), ("gpu-east-2", -9)]
    out = capsys.readouterr().out.splitlines()
    servers = [int(out[out.index(line) + 1]) for line in out if line.startswith("----- sandbox run ")]
    assert len(servers) == 2 and not any(Path(f"/proc/{pid}").exists() and _running(pid) for pid in servers)
    assert (
        "sandbox check: gpu-east: its sandbox was left behind: its processes are ended and its folder removed"
        in out
    )
    assert not root.exists()


def _running(pid: int) -> bool:
    from themelio_gpu.sandbox.supervisor import stat

    found = stat(pid)
    return found is not None and found[0] not in "ZX"


def test_a_kill_9_of_the_check_still_gives_every_child_its_teardown(tmp_path: Path) -> None:
    # As test_an_interrupt_gives_every_child_its_teardown, but the check gets SIGKILL: it can end nothing,
    # and the kernel gives each child SIGTERM (parallel.follow_parent).
    script = f"""
import argparse, sys
from pathlib import Path
from themelio_gpu.sandbox import parallel
folder = Path({str(tmp_path)!r})
child = '''
import pathlib, signal, sys, time
from themelio_gpu.sandbox import parallel
folder = pathlib.Path({str(tmp_path)!r})
def down(signum, frame):
    (folder / (sys.argv[1] + ".down")).write_text("torn down")
    sys.exit(143)
signal.signal(signal.SIGTERM, down)
parallel.follow_parent()
(folder / (sys.argv[1] + ".up")).write_text("up")
time.sleep(120)
'''
parallel.Run.command = lambda self, args: [sys.executable, "-c", child, self.cluster]
args = argparse.Namespace(runner="terraform", charts=None, probe=False)
parallel.run_all([parallel.Run(n, folder, folder) for n in ("a", "b")], args, jobs=2)
"""
    check = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    deadline = time.monotonic() + 60
    while not ((tmp_path / "a.up").exists() and (tmp_path / "b.up").exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    check.kill()
    check.wait(timeout=60)
    deadline = time.monotonic() + 30
    while not ((tmp_path / "a.down").exists() and (tmp_path / "b.down").exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.down", "a.up", "b.down", "b.up"]
