"""The output folder is written whole or not at all, whatever stops the synthesis (outputs/output_folder.py).

The tests run `main.py` as users do, in its own process, then read the output folder: SIGINT or SIGTERM
leaves the old output or the new one (and the one-line message says which), SIGKILL leaves every stack
file whole, no process outlives the synthesis, a failed write names its path and leaves the old output,
and a staging folder left by a killed run is removed by the next one.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest

from tests.builders import cluster, write_fleet
from tests.conftest import ROOT
from themelio_gpu import interrupts
from themelio_gpu.outputs import output_folder
from themelio_gpu.outputs.output_folder import STAGING_PREFIX

CLUSTERS = 24
Fleet = tuple[Path, Path]


def _fleet(tmp_path: Path, version: int, clusters: int = CLUSTERS) -> Fleet:
    """`clusters` clusters whose every stack changes with `version` (the DRA driver release's timeout)."""
    folder = tmp_path / f"fleet-{version}-{clusters}"
    folder.mkdir()
    driver = {"timeoutSeconds": 600 + version}
    return write_fleet(folder, [cluster(name=f"c{i:02d}", draDriver=driver) for i in range(clusters)])


def _files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _main(fleet: Fleet, out: Path, *extra: str, **options: Any) -> subprocess.Popen[str]:
    catalog, stacks = fleet
    command = [
        sys.executable,
        "main.py",
        "--catalog",
        str(catalog),
        "--stacks-dir",
        str(stacks),
        "--outdir",
        str(out),
    ]
    return subprocess.Popen(
        [*command, *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options
    )


def _synthesized(fleet: Fleet, out: Path) -> dict[str, bytes]:
    process = _main(fleet, out, "--quiet")
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return _files(out)


def _descendants(pid: int) -> set[int]:
    found: set[int] = set()
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return found
    for child in map(int, children):
        found |= {child, *_descendants(child)}
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z":  # a zombie has ended (only its parent's wait is missing)
            alive.add(pid)
    return alive


def _gone_within(pids: set[int], seconds: float) -> set[int]:
    deadline = time.monotonic() + seconds
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    return _alive(pids)


def _wait_for_line(stream: IO[str], pattern: str) -> None:
    for line in stream:
        if re.search(pattern, line):
            return
    raise AssertionError(f"no line matching {pattern!r} before the output ended")


@pytest.fixture
def old_and_new(tmp_path: Path) -> tuple[Path, dict[str, bytes], Fleet, dict[str, bytes]]:
    """An output folder holding fleet 1's stacks, and fleet 2, whose synthesis changes every one of them."""
    out = tmp_path / "cdktf.out"
    old = _synthesized(_fleet(tmp_path, 1), out)
    fleet = _fleet(tmp_path, 2)
    new = _synthesized(fleet, tmp_path / "new")
    assert sorted(old) == sorted(new) and all(old[f] != new[f] for f in old if f.endswith("cdk.tf.json"))
    return out, old, fleet, new


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["INT", "TERM"])
@pytest.mark.parametrize("moment", ["building", "writing"])
# Ctrl-C in a terminal (or a CI runner cancelling a job) signals the whole process group, the jsii kernel too.
@pytest.mark.parametrize("to_group", [False, True], ids=["process", "group"])
def test_an_interrupted_synthesis_leaves_the_old_or_the_new_output_and_says_which(
    tmp_path: Path,
    old_and_new: tuple[Path, dict[str, bytes], Fleet, dict[str, bytes]],
    signum: signal.Signals,
    code: int,
    moment: str,
    to_group: bool,
) -> None:
    out, old, fleet, new = old_and_new
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    process = _main(fleet, out, env={**os.environ, "TMPDIR": str(tmpdir)}, start_new_session=True)
    assert process.stdout is not None
    # While the stacks are built, or while cdktf writes them into the staging folder.
    _wait_for_line(process.stdout, r"^\[3/" if moment == "building" else r"^writing ")
    tree = _descendants(process.pid)
    assert tree, "the jsii kernel runs"
    if to_group:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)
    _, err = process.communicate(timeout=120)

    assert process.returncode == code, err
    assert len(err.splitlines()) == 1, err  # one line, no traceback
    unchanged, updated = (f"interrupted ({signum.name}); {out} {state}" for state in ("unchanged", "updated"))
    assert err.strip() in (unchanged, f"{updated} (every stack written)")
    assert _files(out) == (old if err.strip() == unchanged else new)
    if moment == "building":
        assert err.strip() == unchanged
    assert not list(out.glob(f"{STAGING_PREFIX}*"))
    assert _gone_within(tree, 1.0) == set()
    assert list(tmpdir.iterdir()) == []  # jsii stopped its kernel and removed its temporary copies


def test_a_signal_during_the_commit_is_held_until_every_stack_is_in_place(
    old_and_new: tuple[Path, dict[str, bytes], Fleet, dict[str, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from themelio_gpu.outputs.synth import synthesize
    from themelio_gpu.plan.fleet import load_fleet

    out, _, fleet, new = old_and_new
    moved: list[str] = []
    move = output_folder._move_stack

    def move_and_be_interrupted(staged: Path, destination: Path) -> None:
        if not moved:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives while the first stack moves into place
        move(staged, destination)
        moved.append(destination.name)

    monkeypatch.setattr(output_folder, "_move_stack", move_and_be_interrupted)
    previous = {s: signal.getsignal(s) for s in interrupts.SIGNALS}
    interrupts.install()
    try:
        with pytest.raises(interrupts.Interrupted) as raised:
            synthesize(load_fleet(*fleet), out, progress=None)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert len(moved) == CLUSTERS  # every stack moved before the signal was raised
    assert raised.value.message() == f"interrupted (SIGTERM); {out} updated (every stack written)"
    assert raised.value.exit_code == 143
    assert _files(out) == new


KILL_DURING_COMMIT = """
import os, signal, sys
from pathlib import Path
from themelio_gpu.outputs import output_folder
from themelio_gpu.outputs.synth import synthesize
from themelio_gpu.plan.fleet import load_fleet
move, moved = output_folder._move_stack, []
def move_then_die(staged, destination):
    if len(moved) == int(sys.argv[4]):
        os.kill(os.getpid(), signal.SIGKILL)
    move(staged, destination)
    moved.append(destination)
output_folder._move_stack = move_then_die
synthesize(load_fleet(Path(sys.argv[1]), Path(sys.argv[2])), Path(sys.argv[3]), progress=None)
"""


def test_sigkill_during_the_commit_leaves_every_stack_file_old_or_new_and_the_next_run_finishes(
    old_and_new: tuple[Path, dict[str, bytes], Fleet, dict[str, bytes]],
) -> None:
    out, old, fleet, new = old_and_new
    catalog, stacks = fleet
    tmpdir = out.parent / "tmpdir"
    tmpdir.mkdir()
    killed = subprocess.run(
        [sys.executable, "-c", KILL_DURING_COMMIT, str(catalog), str(stacks), str(out), "5"],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmpdir)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    files = _files(out)
    stack_files = [f for f in old if f.endswith("cdk.tf.json")]
    assert [f for f in stack_files if files[f] == new[f]] == stack_files[:5]  # the five moved before the kill
    assert [f for f in stack_files if files[f] == old[f]] == stack_files[5:]
    for name in stack_files:
        json.loads(files[name])  # whole: each file is the old or the new one
    assert list(out.glob(f"{STAGING_PREFIX}*")), "the killed run's staging folder is still there"

    assert _synthesized(fleet, out) == new  # the next run removes it and writes the whole new output
    assert not list(out.glob(f"{STAGING_PREFIX}*"))


def test_no_process_outlives_a_killed_synthesis(tmp_path: Path) -> None:
    """Nor a temporary folder: jsii's copy of its runtime is removed by its relay (node_preload.js)."""
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    process = _main(_fleet(tmp_path, 1), tmp_path / "out", env={**os.environ, "TMPDIR": str(tmpdir)})
    assert process.stdout is not None
    _wait_for_line(process.stdout, r"^\[2/")
    tree = _descendants(process.pid)
    assert len(tree) == 2  # jsii's relay and the kernel it starts
    process.kill()
    process.communicate(timeout=30)
    assert _gone_within(tree, 1.0) == set()
    assert list(tmpdir.iterdir()) == []


def test_a_rerun_keeps_terraforms_files_in_stack_folders_and_replaces_the_stack(
    old_and_new: tuple[Path, dict[str, bytes], Fleet, dict[str, bytes]],
) -> None:
    out, _, fleet, new = old_and_new
    folder = out / "stacks" / "c00"
    theirs = {
        ".terraform/providers/registry.terraform.io/hashicorp/helm/3.1.1/linux_amd64/terraform-provider-helm": b"x",
        ".terraform.lock.hcl": b"# lock",
        "terraform.tfstate": b"{}",
    }
    for name, content in theirs.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    after = _synthesized(fleet, out)
    assert after == new | {f"stacks/c00/{name}": content for name, content in theirs.items()}


def test_a_staging_folder_left_by_a_killed_run_is_removed_by_the_next(tmp_path: Path) -> None:
    out = tmp_path / "out"
    left = out / f"{STAGING_PREFIX}k1ll3d" / "stacks" / "c00"
    left.mkdir(parents=True)
    (left / "cdk.tf.json").write_text("{")
    _synthesized(_fleet(tmp_path, 1, clusters=1), out)
    assert not list(out.glob(f"{STAGING_PREFIX}*"))


def test_a_second_synthesis_waits_for_the_one_writing_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    holder = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another synthesis holds the folder
    try:
        process = _main(_fleet(tmp_path, 1, clusters=1), out, "--quiet")
        assert process.stderr is not None
        assert process.stderr.readline().strip() == f"waiting: another synthesis is writing {out}"
        assert process.poll() is None
    finally:
        os.close(holder)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert (out / "stacks" / "c00" / "cdk.tf.json").is_file()


def _kernel_of(pid: int) -> int:
    """The jsii kernel under `pid` (`node ... lib/program.js`)."""
    for child in _descendants(pid):
        if b"program.js" in Path(f"/proc/{child}/cmdline").read_bytes():
            return child
    raise AssertionError("no jsii kernel found")


def test_a_write_that_fails_names_the_path_and_leaves_the_old_output(tmp_path: Path) -> None:
    out = tmp_path / "cdktf.out"
    old = _synthesized(_fleet(tmp_path, 1), out)
    process = _main(_fleet(tmp_path, 2), out)
    assert process.stdout is not None
    _wait_for_line(process.stdout, r"^\[1/")
    # The kernel writes the stacks: from now on it may not write a file beyond 16 KiB (a stack is ~25 KiB),
    # as if the disk were full. Node ignores SIGXFSZ, so the write fails with EFBIG.
    resource.prlimit(_kernel_of(process.pid), resource.RLIMIT_FSIZE, (16384, 16384))
    _, err = process.communicate(timeout=120)
    assert process.returncode == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert re.fullmatch(
        rf"cannot write the stacks into {re.escape(str(out))}/\.synth-\w+: file too large \(EFBIG\); "
        rf"{re.escape(str(out))} unchanged\n",
        err,
    ), err
    assert _files(out) == old
    assert not list(out.glob(f"{STAGING_PREFIX}*"))


def test_an_output_folder_that_cannot_be_created_is_one_message(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    process = _main(_fleet(tmp_path, 1, clusters=1), blocker / "out", "--quiet")
    _, err = process.communicate(timeout=300)
    assert process.returncode == 2
    assert err == f"cannot write {blocker / 'out'}: Not a directory; {blocker / 'out'} unchanged\n"


def test_removed_clusters_are_named_also_when_quiet(tmp_path: Path) -> None:
    out = tmp_path / "out"
    fleet = _fleet(tmp_path, 1, clusters=2)
    _synthesized(fleet, out)
    (fleet[1] / "c01.yaml").unlink()
    process = _main(fleet, out, "--quiet")
    stdout, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert stdout == f"removed {out / 'stacks' / 'c01'}: cluster c01 is no longer defined\n"
    assert sorted(p.name for p in (out / "stacks").iterdir()) == ["c00"]


def test_check_works_on_a_fleet_of_any_size(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path, 1, clusters=45)  # above the old worker threshold, where `check` failed
    out = tmp_path / "out"
    _synthesized(fleet, out)
    catalog, stacks = fleet
    command = ["-m", "themelio_gpu", "check", "--catalog", str(catalog), "--stacks-dir", str(stacks)]
    result = subprocess.run(
        [sys.executable, *command, "--against", str(out)], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
