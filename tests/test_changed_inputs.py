"""`changed` decides from the inputs first (changes/sides.py, changes/inputs_first.py, changes/cache.py):

- the same answers: after random edit sequences (those of the incremental synthesis's property test), the
  report of `changed --base-ref` is the one comparing every stack synthesized in full gives, but for the note
  saying how; and only the stacks whose inputs differ are synthesized;
- a one-cluster edit and a catalog edit synthesize exactly the stacks they change, on each side; a second run
  on the same base synthesizes nothing and reads no unchanged cluster file again;
- a commit whose tool differs is compared stack by stack, and the report says why; its own synthesis is
  taken from the cache the second time;
- a head folder's and the default output folder's stacks are read, not synthesized, where their records say
  they are the stacks of these inputs;
- the cache stays within its size, and one that cannot be written is a warning, not a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import EXAMPLE_CATALOG, EXAMPLE_STACKS, ROOT
from tests.test_changed import VALIDATOR, git, worktrees
from tests.test_incremental import EDITS, Fleet, _cluster, edit_fleet
from themelio_gpu.changes import inputs_first
from themelio_gpu.changes.cache import CACHE_ENV, MIB, StackCache
from themelio_gpu.changes.compare import compare
from themelio_gpu.changes.report import render
from themelio_gpu.changes.stacks import instance_count, read_output_folder, read_stack
from themelio_gpu.cli import main
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import load_yaml_document
from themelio_gpu.outputs.synth import synthesize, synthesize_files
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.settings import InputPaths

SYNTHESIZING = re.compile(r"^changed: synthesizing (\d+) stacks? of (.*)$", re.MULTILINE)


def without_notes(report: str) -> Any:
    """A report (JSON or text) without the notes saying how the stacks were compared."""
    try:
        data = json.loads(report)
    except ValueError:
        return "".join(line for line in report.splitlines(keepends=True) if not line.startswith("note: "))
    data.pop("notes", None)
    return data


def as_counted(full: str, report: str) -> str:
    """The full comparison's JSON `full` without the address counts `report` leaves out (null): those of
    stacks whose inputs are the same on both sides and of which no synthesized file was at hand."""
    ours, theirs = json.loads(report), json.loads(full)
    uncounted = {s["name"] for s in ours["stacks"] if s["unchanged_resources"] is None}
    assert all(s["status"] == "unchanged" for s in ours["stacks"] if s["name"] in uncounted)
    for stack in theirs["stacks"]:
        if stack["name"] in uncounted:
            stack["unchanged_resources"] = None
    return json.dumps(theirs)


def synthesized(err: str) -> dict[str, int]:
    """How many stacks `changed` synthesized itself, per side's label (its progress lines on stderr)."""
    counts: dict[str, int] = {}
    for number, label in SYNTHESIZING.findall(err):
        if " with its own code" not in label:
            counts[label] = counts.get(label, 0) + int(number)
    return counts


def commit_all(repo: Path, message: str = "fleet") -> str:
    git(repo, "add", "-A")
    git(
        repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", message
    )
    return git(repo, "rev-parse", "HEAD").strip()


def with_this_tool(repo: Path) -> Path:
    """`repo` with this checkout's tool (code, main.py, lock) as it is: the commits there have this tool."""
    shutil.copytree(ROOT / "themelio_gpu", repo / "themelio_gpu", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("main.py", "Pipfile.lock"):
        shutil.copy(ROOT / name, repo / name)
    return repo


@pytest.fixture
def no_output_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default output folder (where `python main.py` writes) is an empty place, not this checkout's."""
    folder = tmp_path / "default-out"
    monkeypatch.setenv("CDKTF_OUTDIR", str(folder))
    return folder


# --- the same answers after any edits -----------------------------------------------------------------------


def full_comparison(paths: InputPaths, base: Path, root: Path, labels: tuple[str, str], form: str) -> str:
    """What comparing every stack gives: the head synthesized in full, compared with `base` (the base
    synthesized in full) address by address."""
    head = root / "full-head"
    shutil.rmtree(head, ignore_errors=True)
    synthesize(load_fleet(paths.catalog, paths.stacks_dir), head, progress=None)
    problems = Problems()
    result = compare(read_output_folder(base, problems), read_output_folder(head, problems), *labels)
    assert not problems
    return render(result, form)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(EDITS, st.integers(0, 9)), min_size=1, max_size=4))
def test_after_any_edits_the_report_is_the_full_comparisons(
    edits: list[tuple[str, int]],
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    no_output_folder: Path,
) -> None:
    root = tmp_path_factory.mktemp("changed-edits")
    repo = with_this_tool(root / "repo")
    fleet = Fleet(repo / "fleet")
    fleet.clusters = {"alpha": _cluster("alpha", True), "beta": _cluster("beta", False)}
    fleet.write()
    git(repo, "init", "-q", "-b", "main")
    flags = ["--catalog", str(fleet.paths.catalog), "--stacks-dir", str(fleet.paths.stacks_dir)]
    marker = repo / "themelio_gpu" / "__init__.py"
    for step, (edit, n) in enumerate(edits, start=1):
        # The base: what is committed now, synthesized in full (by this tool: the commit's, but for a comment).
        base = root / f"base-{step}"
        synthesize(load_fleet(fleet.paths.catalog, fleet.paths.stacks_dir), base, progress=None)
        if edit == "tool":  # the base commit's own code differs (by a comment): every stack is compared
            original = marker.read_text()
            marker.write_text(original + f"# step {step}\n")
            commit_all(repo)
            marker.write_text(original)
        else:
            commit_all(repo)
        edit_fleet(fleet, edit, n, step)
        fleet.write()
        for form in ("text", "json"):
            assert main(["changed", *flags, "--base-ref", "HEAD", "--format", form]) == 0
            out, err = capsys.readouterr()
            labels = (json.loads(out)["base"], json.loads(out)["head"]) if form == "json" else _labels(out)
            expected = full_comparison(fleet.paths, base, root, labels, form)
            if form == "json":  # but for the counts of stacks it did not synthesize
                expected = as_counted(expected, out)
            assert without_notes(out) == without_notes(expected), (edit, form)
            if form == "json":
                VALIDATOR.validate(json.loads(out))
                continue
            (note,) = [line for line in out.splitlines() if line.startswith("note: ")]
            if edit == "tool":
                assert "the tool differs" in note and "themelio_gpu/" in note, note
                continue
            same, total = (int(x) for x in re.findall(r"(\d+) of (\d+) stacks have the same inputs", note)[0])
            # Only the stacks whose inputs differ are synthesized, on either side.
            assert all(count <= total - same for count in synthesized(err).values()), (edit, err, note)
            if edit in ("nothing", "product"):  # no plan changes (the H100 is served by no cluster here)
                assert same == total and synthesized(err) == {}, (edit, note, err)


def _labels(text: str) -> tuple[str, str]:
    lines = text.splitlines()
    return lines[0].removeprefix("base: "), lines[1].removeprefix("head: ")


# --- --base-ref with this checkout's tool --------------------------------------------------------------------


@pytest.fixture
def fleet_repository(tmp_path: Path) -> Path:
    """A git repository with this checkout's tool and the fixture fleet, one commit."""
    repo = with_this_tool(tmp_path / "repo")
    shutil.copytree(EXAMPLE_STACKS, repo / "stacks")
    (repo / "catalog").mkdir()
    shutil.copy(EXAMPLE_CATALOG, repo / "catalog" / "gpu-catalog.yaml")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo)
    return repo


def flags_of(repo: Path) -> list[str]:
    return ["--catalog", str(repo / "catalog" / "gpu-catalog.yaml"), "--stacks-dir", str(repo / "stacks")]


def add_node(repo: Path, cluster: str = "gpu-east") -> None:
    path = repo / "stacks" / f"{cluster}.yaml"
    path.write_text(path.read_text().replace("gpu-east-a100-02]", "gpu-east-a100-02, gpu-east-a100-03]"))


def run(args: list[str], capsys: pytest.CaptureFixture[str], code: int = 0) -> tuple[str, str]:
    assert main(["changed", *args]) == code
    return capsys.readouterr()


@pytest.fixture
def read_files(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the cluster files read (parsed) meanwhile."""
    names: list[str] = []

    def spy(path: Path, *args: Any, **kwargs: Any) -> Any:
        names.append(path.name)
        return load_yaml_document(path, *args, **kwargs)

    monkeypatch.setattr("themelio_gpu.inputs.clusters.files.load_yaml_document", spy)
    yield names


def test_a_cluster_edit_synthesizes_that_stack_alone_and_a_second_run_nothing(
    fleet_repository: Path, capsys: pytest.CaptureFixture[str], no_output_folder: Path, read_files: list[str]
) -> None:
    add_node(fleet_repository)
    args = [*flags_of(fleet_repository), "--base-ref", "main", "--format", "json"]
    out, err = run(args, capsys)
    base_label, head_label = json.loads(out)["base"], json.loads(out)["head"]
    # Not the other two, not even to count their addresses: nothing synthesized of them is at hand.
    assert synthesized(err) == {base_label: 1, head_label: 1}
    report = json.loads(out)
    assert [(s["name"], s["status"], s["unchanged_resources"] is None) for s in report["stacks"]] == [
        ("gpu-east", "changed", False),
        ("gpu-lab", "unchanged", True),
        ("gpu-west", "unchanged", True),
    ]
    assert report["notes"] == [
        "2 of 3 stacks have the same inputs on both sides (cluster plan, tool, packages, engine): unchanged, not "
        "synthesized; 1 compared address by address"
    ]
    full_out, full_err = run([*args, "--full"], capsys)
    assert without_notes(out) == without_notes(as_counted(full_out, out))
    assert all(s["unchanged_resources"] is not None for s in json.loads(full_out)["stacks"])
    assert json.loads(full_out)["notes"] == ["every stack compared address by address (--full)"]
    assert "synthesizing main with its own code" in full_err
    # Again on the same base: everything it needs is in the cache, and only the base's edited file is read.
    read_files.clear()
    again, err = run(args, capsys)
    assert again == out and synthesized(err) == {}
    assert read_files == ["gpu-east.yaml"]
    assert worktrees(fleet_repository) == [f"worktree {fleet_repository}"]


def test_a_catalog_edit_synthesizes_exactly_the_stacks_serving_the_offering_on_each_side(
    fleet_repository: Path,
    capsys: pytest.CaptureFixture[str],
    no_output_folder: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    offering = "nvidia.com/a100-mig-1g.5gb"
    catalog_file = fleet_repository / "catalog" / "gpu-catalog.yaml"
    serving = load_fleet(catalog_file, fleet_repository / "stacks").clusters_serving(offering)
    assert 0 < len(serving) < 3
    catalog = yaml.safe_load(catalog_file.read_text())
    catalog["offerings"][offering]["description"] = "One seventh of an A100, for notebooks."
    catalog_file.write_text(yaml.safe_dump(catalog))
    # JSON too, which counts the addresses of the unchanged stacks where a file of theirs is at hand.
    for form, cache in (("github-matrix", "first"), ("json", "second")):
        monkeypatch.setenv(CACHE_ENV, str(fleet_repository.parent / f"cache-{cache}"))
        out, err = run([*flags_of(fleet_repository), "--base-ref", "main", "--format", form], capsys)
        assert synthesized(err) == {
            f"git main (commit {git(fleet_repository, 'rev-parse', 'main').strip()[:12]})": len(serving),
            f"the fleet in {fleet_repository / 'stacks'} (synthesized now)": len(serving),
        }, form
        listed = json.loads(out)["include"] if form == "github-matrix" else json.loads(out)["stacks"]
        names = [s["stack"] if form == "github-matrix" else s["name"] for s in listed]
        assert [n for n in names if form == "github-matrix" or n in serving] == sorted(serving)


def test_a_commit_with_another_tool_is_compared_stack_by_stack_and_taken_from_the_cache_again(
    fleet_repository: Path, capsys: pytest.CaptureFixture[str], no_output_folder: Path
) -> None:
    lock = fleet_repository / "Pipfile.lock"
    lock.write_text(lock.read_text() + "\n")
    commit_all(fleet_repository, "another lock")
    lock.write_text((ROOT / "Pipfile.lock").read_text())
    args = [*flags_of(fleet_repository), "--base-ref", "main"]
    out, err = run(args, capsys)
    assert "changed: synthesizing main with its own code" in err
    note = "every stack compared address by address: the tool differs between git main (commit "
    assert f"note: {note}" in out and "this checkout (Pipfile.lock), which can change any stack" in out
    assert "warning: main locks other packages (Pipfile.lock differs)" in err
    again, err = run(args, capsys)
    assert again == out
    assert "changed: main was synthesized before: taken from the cache" in err
    assert "with its own code" not in err and synthesized(err) == {}


# --- reading what is there -----------------------------------------------------------------------------------


@pytest.fixture
def read_stacks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The stacks `changed` read (parsed or counted) meanwhile, by name."""
    names: list[str] = []

    def spy(original: Any) -> Any:
        def read(path: Path, *args: Any, **kwargs: Any) -> Any:
            names.append(path.parent.name)
            return original(path, *args, **kwargs)

        return read

    monkeypatch.setattr(inputs_first, "read_stack", spy(read_stack))
    monkeypatch.setattr(inputs_first, "instance_count", spy(instance_count))
    yield names


def test_a_head_folder_is_read_only_for_the_stacks_whose_inputs_differ(
    fleet_repository: Path,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    no_output_folder: Path,
    read_stacks: list[str],
) -> None:
    add_node(fleet_repository)
    head = tmp_path / "head"
    synthesize_files(
        InputPaths(fleet_repository / "catalog" / "gpu-catalog.yaml", fleet_repository / "stacks"),
        head,
        progress=None,
    )
    out, err = run([*flags_of(fleet_repository), "--base-ref", "main", "--head", str(head)], capsys)
    assert synthesized(err) == {f"git main (commit {git(fleet_repository, 'rev-parse', 'main').strip()[:12]})": 1}
    assert sorted(read_stacks) == ["gpu-east", "gpu-east"]  # the base's, synthesized, and the head folder's
    assert "gpu-east  changed: 2 to create" in out


def test_without_head_the_default_output_folders_stacks_are_read_for_the_same_inputs(
    fleet_repository: Path, capsys: pytest.CaptureFixture[str], no_output_folder: Path
) -> None:
    add_node(fleet_repository)
    paths = InputPaths(fleet_repository / "catalog" / "gpu-catalog.yaml", fleet_repository / "stacks")
    synthesize_files(paths, no_output_folder, progress=None)  # what `python main.py` leaves there
    out, err = run([*flags_of(fleet_repository), "--base-ref", "main", "--format", "json"], capsys)
    assert list(synthesized(err)) == [json.loads(out)["base"]]  # the head's stacks are all there
    full, _ = run([*flags_of(fleet_repository), "--base-ref", "main", "--format", "json", "--full"], capsys)
    assert without_notes(out) == without_notes(full)


def test_base_and_head_folders_with_records_compare_only_what_differs(
    synthesized_example: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, read_stacks: list[str]
) -> None:
    stacks = tmp_path / "stacks"
    shutil.copytree(EXAMPLE_STACKS, stacks)
    add_node(stacks.parent)
    head = tmp_path / "head"
    synthesize_files(InputPaths(EXAMPLE_CATALOG, stacks), head, progress=None)
    args = ["--base", str(synthesized_example), "--head", str(head), "--format", "json"]
    out, err = run(args, capsys)
    assert synthesized(err) == {}
    assert read_stacks.count("gpu-east") == 2 and set(read_stacks) == {"gpu-east", "gpu-lab", "gpu-west"}
    full, _ = run([*args, "--full"], capsys)
    assert without_notes(out) == without_notes(full)


@pytest.fixture
def synthesized_example(tmp_path: Path) -> Path:
    """The fixture fleet as `python main.py` writes it, with its record."""
    out = tmp_path / "base"
    synthesize_files(InputPaths(EXAMPLE_CATALOG, EXAMPLE_STACKS), out, progress=None)
    return out


def test_a_stack_file_changed_since_it_was_recorded_is_compared(
    synthesized_example: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    head = tmp_path / "head"
    shutil.copytree(synthesized_example, head)
    lab = head / "stacks" / "gpu-lab" / "cdk.tf.json"
    lab.write_text(lab.read_text().replace('"gpu-operator"', '"gpu-operator-edited"', 1))
    out, _ = run(["--base", str(synthesized_example), "--head", str(head), "--format", "github-matrix"], capsys)
    assert json.loads(out) == {
        "include": [{"stack": "gpu-lab", "directory": "stacks/gpu-lab", "status": "changed"}]
    }


def test_every_stacks_count_of_addresses_is_that_of_its_configuration(synthesized_example: Path) -> None:
    for path in sorted(synthesized_example.glob("stacks/*/cdk.tf.json")):
        problems = Problems()
        stack = read_stack(path, problems)
        assert stack is not None and instance_count(path, problems) == len(stack.instances), path


# --- the cache -----------------------------------------------------------------------------------------------


def test_the_cache_keeps_the_most_recently_used_files_within_its_size(tmp_path: Path) -> None:
    cache = StackCache(tmp_path / "cache", limit_bytes=3 * MIB)
    source = tmp_path / "stack.json"
    source.write_bytes(b"x" * MIB)
    digests = [f"{i:064x}" for i in range(5)]
    for number, digest in enumerate(digests):
        cache.store(digest, source)
        os.utime(cache.folder / "stacks" / f"{digest}.tf.json", (1000 + number, 1000 + number))
    assert cache.fetch(digests[0], tmp_path / "out" / "0.json")  # used now: the most recent
    cache.trim()
    kept = sorted(p.name.split(".")[0] for p in (cache.folder / "stacks").iterdir())
    assert kept == sorted([digests[0], digests[3], digests[4]])
    assert (tmp_path / "out" / "0.json").read_bytes() == source.read_bytes()
    assert not cache.fetch("../../etc/passwd", tmp_path / "out" / "x.json")


def test_a_cache_that_cannot_be_written_is_a_warning(
    synthesized_example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(CACHE_ENV, str(blocked))
    stacks = tmp_path / "stacks"
    shutil.copytree(EXAMPLE_STACKS, stacks)
    add_node(stacks.parent)
    monkeypatch.setenv("CDKTF_OUTDIR", str(tmp_path / "default-out"))
    args = ["--catalog", str(EXAMPLE_CATALOG), "--stacks-dir", str(stacks), "--base", str(synthesized_example)]
    out, err = run(args, capsys)
    assert "gpu-east  changed: 2 to create" in out
    assert f"warning: changed cannot write its cache ({blocked}" in err


def test_a_cache_size_that_is_no_number_is_bad_input(synthesized_example: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "themelio_gpu",
            "changed",
            "--base",
            str(synthesized_example),
            "--head",
            str(synthesized_example),
        ],
        cwd=ROOT,
        env={**os.environ, "THEMELIO_CHANGED_CACHE_MIB": "lots"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "THEMELIO_CHANGED_CACHE_MIB: 'lots' is not a size in MiB" in result.stderr
    assert "Traceback" not in result.stderr


# --- interrupted ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_synthesis_here_leaves_no_worktree_nor_temporary_file(
    signum: int, code: int, fleet_repository: Path, tmp_path: Path
) -> None:
    add_node(fleet_repository)
    scratch, cache = tmp_path / "scratch", tmp_path / "cache"
    scratch.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "themelio_gpu", "changed", *flags_of(fleet_repository), "--base-ref", "main"],
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(scratch), CACHE_ENV: str(cache), "CDKTF_OUTDIR": str(tmp_path / "out")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def reached() -> bool:  # the base's stack is being synthesized in this process
        return any(scratch.glob("themelio-changed-*/base-synthesized-*"))

    deadline = time.monotonic() + 120  # a bound for a broken run, not a timing assertion
    while not reached() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert reached(), "the run never synthesized the base's stack"
    process.send_signal(signum)
    _, err = process.communicate(timeout=120)
    assert process.returncode == code, err
    assert err.splitlines()[-1].endswith("temporary files removed") and "Traceback" not in err
    assert worktrees(fleet_repository) == [f"worktree {fleet_repository}"]
    assert list(scratch.glob("themelio-changed-*")) == []
    assert [p for p in cache.rglob("*") if p.name.startswith(".tmp-")] == []
