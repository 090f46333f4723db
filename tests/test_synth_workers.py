"""Synthesis in several processes (themelio_gpu/outputs/workers.py): the same bytes as one process.

The end-to-end tests run `main.py` in fresh processes: this test process has started jsii already, and a
process that has must not fork (the workers would share its node process), so here it synthesizes alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, write_fleet
from tests.conftest import EXAMPLE_CATALOG, EXAMPLE_CLUSTERS, EXAMPLE_STACKS, ROOT
from themelio_gpu.outputs.workers import (
    CLUSTERS_PER_WORKER,
    MAX_AUTOMATIC_WORKERS,
    WorkersSettingError,
    can_fork,
    requested_workers,
    stable_stringify,
    worker_count,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="workers fork; Windows synthesizes in one process")


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _main(*args: str, workers: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "main.py", *args, "--workers", workers],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )


def _fleet_args(out: Path) -> tuple[str, ...]:
    return ("--catalog", str(EXAMPLE_CATALOG), "--stacks-dir", str(EXAMPLE_STACKS), "--outdir", str(out))


# --- how many processes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("clusters", "requested", "cpus", "forkable", "expected"),
    [
        (100, None, 2, True, 2),  # automatic: limited by the CPUs
        (100, None, 16, True, MAX_AUTOMATIC_WORKERS),  # ... and by the memory a worker takes
        (2 * CLUSTERS_PER_WORKER - 1, None, 8, True, 1),  # a second worker must have enough clusters to pay
        (2 * CLUSTERS_PER_WORKER, None, 8, True, 2),
        (3, None, 8, True, 1),
        (3, 2, 1, True, 2),  # asked for: as asked, even beyond the CPUs
        (3, 8, 8, True, 3),  # never more workers than clusters
        (1, 4, 8, True, 1),
        (100, 4, 8, False, 1),  # jsii already running here, or no fork
        (100, 1, 8, True, 1),
    ],
)
def test_worker_count(clusters: int, requested: int | None, cpus: int, forkable: bool, expected: int) -> None:
    assert worker_count(clusters, requested, cpus, forkable) == expected


@pytest.mark.parametrize(
    ("text", "expected"), [(None, None), ("", None), ("auto", None), (" AUTO ", None), ("3", 3)]
)
def test_requested_workers(text: str | None, expected: int | None) -> None:
    assert requested_workers(text) == expected


@pytest.mark.parametrize("text", ["0", "-2", "two", "1.5"])
def test_a_setting_that_is_not_a_count_is_refused_naming_what_is_allowed(text: str) -> None:
    with pytest.raises(WorkersSettingError, match=r"allowed: a whole number >= 1 .* or `auto`"):
        requested_workers(text)


def test_this_process_does_not_fork_once_jsii_runs(synthesized: Path) -> None:
    assert "cdktf._jsii" in sys.modules  # the session's synthesis loaded the assembly (and started node)
    assert not can_fork()


def test_a_process_that_only_imported_jsii_can_fork() -> None:
    # jsii's node process starts with the first assembly; the parent imports jsii itself before forking.
    code = "import jsii; from themelio_gpu.outputs.workers import can_fork; print(can_fork())"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "True"


# --- the manifest, written as cdktf writes it -------------------------------------------------------------


def test_stable_stringify_writes_cdktfs_manifest_byte_for_byte(synthesized: Path) -> None:
    text = (synthesized / "manifest.json").read_text(encoding="utf-8")
    assert stable_stringify(json.loads(text)) == text


def test_stable_stringify_sorts_keys_and_opens_a_line_for_empty_lists() -> None:
    value = {"b": [], "a": {"y": ["x", 1, None, True], "x": {}}}
    expected = '{\n  "a": {\n    "x": {\n    },\n    "y": [\n      "x",\n      1,\n      null,\n      true\n    ]\n  },\n  "b": [\n  ]\n}'
    assert stable_stringify(value) == expected


# --- end to end -------------------------------------------------------------------------------------------


def test_workers_write_exactly_what_one_process_writes(tmp_path: Path) -> None:
    one = _main(*_fleet_args(tmp_path / "one"), workers="1")
    assert one.returncode == 0, one.stderr
    assert "processes" not in one.stdout
    for workers in ("2", str(len(EXAMPLE_CLUSTERS))):
        out = tmp_path / f"in-{workers}"
        result = _main(*_fleet_args(out), workers=workers)
        assert result.returncode == 0, result.stderr
        assert f"synthesizing {len(EXAMPLE_CLUSTERS)} stacks in {workers} processes" in result.stdout
        assert _files(out) == _files(tmp_path / "one")
        # Every stack is reported once, whichever worker built it.
        reported = sorted(
            line.split()[1].rstrip(":") for line in result.stdout.splitlines() if line.startswith("[")
        )
        assert reported == sorted(EXAMPLE_CLUSTERS)


def test_workers_leave_terraform_files_in_stack_folders_and_remove_stale_stacks(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _main(*_fleet_args(out), workers="1").returncode == 0
    name = EXAMPLE_CLUSTERS[0]
    state = out / "stacks" / name / "terraform.tfstate"
    state.write_text("{}")
    stale = out / "stacks" / "gone"
    stale.mkdir()
    (stale / "cdk.tf.json").write_text(json.dumps({"//": {"metadata": {"stackName": "gone"}}}))
    result = _main(*_fleet_args(out), workers="2")
    assert result.returncode == 0, result.stderr
    assert state.read_text() == "{}"
    assert not stale.exists()
    assert not [p.name for p in out.iterdir() if p.name.startswith(".synth-")]


_FAILING_WORKER = """
import sys
from themelio_gpu import cli
from themelio_gpu.outputs import workers

real_run_worker = workers._run_worker

def run_worker(fleet, staging, messages, next_index):
    # In whichever forked worker claims {name!r}: its synthesis breaks there.
    from themelio_gpu.outputs import app

    real_build_app = app.build_app

    def build_app(plans, *args, **kwargs):
        def breaking():
            for plan in plans:
                if plan.name == {name!r}:
                    {failure}
                yield plan

        return real_build_app(breaking(), *args, **kwargs)

    app.build_app = build_app
    real_run_worker(fleet, staging, messages, next_index)

workers._run_worker = run_worker
sys.exit(cli.synth_main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    ("failure", "message"),
    [
        ("raise RuntimeError('the bindings broke')", "RuntimeError: the bindings broke"),
        ("import os; os._exit(9)", "worker exited with code 9"),  # killed, as by the OOM killer: no message
    ],
)
def test_a_failed_worker_fails_synthesis_and_leaves_the_output_as_it_was(
    tmp_path: Path, failure: str, message: str
) -> None:
    catalog, stacks = write_fleet(tmp_path, [cluster(name="alpha"), cluster(name="beta")])
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    script = tmp_path / "failing_main.py"
    script.write_text(textwrap.dedent(_FAILING_WORKER).format(name="beta", failure=failure))
    args = ["--catalog", str(catalog), "--stacks-dir", str(stacks), "--outdir", str(out), "--workers", "2"]
    result = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert result.returncode == 1
    assert "synthesis failed in 1 of 2 worker processes; the output folder is as it was" in result.stderr
    # The workers' errors are the message, not a traceback of the process that waited for them.
    assert "synthesize_in_workers" not in result.stderr
    assert message in result.stderr
    # alpha's worker succeeded, but nothing is moved into place unless every worker did.
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


# --- workers started before the fleet is loaded -------------------------------------------------------------


def _marked_processes(mark: str) -> list[str]:
    """Live processes (workers, their node kernels) whose environment holds THEMELIO_TEST_MARK=`mark`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if f"THEMELIO_TEST_MARK={mark}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue  # not a process, gone, or not ours to read
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").is_file(), reason="reads the process table in /proc")
def test_bad_input_stops_the_workers_started_for_it_and_writes_nothing(tmp_path: Path) -> None:
    # Two cluster files and --workers 2: main.py forks both workers before it reads the files.
    catalog, stacks = write_fleet(tmp_path, [cluster(name="alpha"), cluster(name="alpha")])
    out = tmp_path / "out"
    mark = tmp_path.name
    result = _main(
        "--catalog", str(catalog), "--stacks-dir", str(stacks), "--outdir", str(out),
        workers="2", env={"THEMELIO_TEST_MARK": mark},
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "cluster 'alpha' is also defined in" in result.stderr
    assert "nothing was written" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()
    assert _marked_processes(mark) == []  # neither a worker nor a node kernel outlived main.py


_POOL_LARGER_THAN_THE_FLEET = """
import sys
from pathlib import Path
from typing import Any
from themelio_gpu.outputs.workers import WorkerPool
from themelio_gpu.plan.fleet import load_fleet
pool = WorkerPool(3)  # forked before the fleet is loaded, as main.py does
with pool:
    fleet = load_fleet(Path(sys.argv[1]), Path(sys.argv[2]))
    pool.synthesize(fleet, Path(sys.argv[3]))
print([w.process.exitcode for w in pool.workers])
"""


def test_a_worker_without_clusters_is_told_so_and_exits(tmp_path: Path) -> None:
    catalog, stacks = write_fleet(tmp_path, [cluster(name="alpha"), cluster(name="beta")])
    (tmp_path / "out").mkdir()
    script = [sys.executable, "-c", _POOL_LARGER_THAN_THE_FLEET, str(catalog), str(stacks), str(tmp_path / "out")]
    result = subprocess.run(script, cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[0, 0, 0]"
    assert sorted(p.name for p in (tmp_path / "out" / "stacks").iterdir()) == ["alpha", "beta"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["manifest.json", "stacks"]


def _claims(ranges: list[tuple[int, int]]) -> Any:
    import multiprocessing

    claims = multiprocessing.get_context("fork").Array("q", 2 * len(ranges))
    for own, (front, back) in enumerate(ranges):
        claims[2 * own], claims[2 * own + 1] = front, back
    return claims


def test_a_worker_claims_its_range_front_to_back_then_the_back_of_the_fullest_other() -> None:
    from themelio_gpu.outputs.workers import _claimed

    plans: list[Any] = list(range(10))
    claims = _claims([(0, 3), (3, 6), (6, 10)])
    first: Any = _claimed(plans, claims, 0)  # indexes stand in for plans
    assert [next(first) for _ in range(3)] == [0, 1, 2]  # its own range
    assert next(first) == 9  # then the back of the range with the most left (6..9)
    second: Any = _claimed(plans, claims, 1)
    assert list(second) == [3, 4, 5, 8, 7, 6]  # its range, then all that is left, from the back
    assert list(first) == []  # nothing is claimed twice


def test_every_cluster_is_claimed_exactly_once_whoever_claims_it() -> None:
    from themelio_gpu.outputs.workers import _claimed

    plans: list[Any] = list(range(23))
    claims = _claims([(0, 7), (7, 15), (15, 23)])
    workers: list[Any] = [_claimed(plans, claims, own) for own in range(3)]
    taken: list[Any] = []
    for step in range(100):  # in turns, as processes would interleave
        item = next(workers[step % 3], None)
        if item is not None:
            taken.append(item)
    assert sorted(taken) == plans


def test_clusters_serving_the_same_offerings_are_claimed_together(tmp_path: Path) -> None:
    from tests.builders import fleet_of
    from themelio_gpu.outputs.workers import sharing_order

    a100, l4 = ["nvidia.com/a100"], ["nvidia.com/gpu"]
    fleet = fleet_of(
        tmp_path,
        *(cluster(name=f"c{i}", offerings=a100 if i % 2 else l4) for i in range(4)),
    )
    ordered = [plan.name for plan in sorted(fleet.clusters, key=sharing_order)]
    assert ordered == ["c1", "c3", "c0", "c2"]


@pytest.mark.parametrize(
    "name", sorted(p.name for p in (ROOT / "tests" / "fixtures" / "fleets").iterdir() if (p / "stacks").is_dir())
)
def test_every_fixture_fleet_reaches_the_workers_as_it_was_loaded(name: str) -> None:
    # Workers get the checked fleet pickled: a plan type pickle cannot rebuild would fail every large synthesis.
    import pickle

    from themelio_gpu.inputs.problems import InputError
    from themelio_gpu.outputs.workers import _pickled
    from themelio_gpu.plan.fleet import load_fleet

    folder = ROOT / "tests" / "fixtures" / "fleets" / name
    try:
        fleet = load_fleet(folder / "catalog" / "gpu-catalog.yaml", folder / "stacks")
    except InputError as error:
        pytest.fail(f"{name}: {error.render()}")
    assert pickle.loads(_pickled(fleet)) == fleet
