#!/usr/bin/env python3
"""Synthesis benchmark: how long GitOps pipelines wait for `main.py`, what grows with the fleet, and what each
speed-up is worth.

Usage (from the project root; `make bench` runs it with the defaults):
    .venv/bin/python scripts/benchmark.py [--sizes 1,10,100,1000] [--repeat 3] [--out FILE]
    .venv/bin/python scripts/benchmark.py --only pull-request [--repeat 3]   # the pull request's review alone

In one run (ratios only mean something within one run on the same machine), interleaved and repeated:
the floors (`python -c "import cdktf"`, the app's import floor), `python main.py` on the example fleet and
on synthetic fleets (checked with `load_fleet` first), the ablation (the example fleet and 100 clusters with
each speed-up of themelio_gpu/speedups.py switched off alone), synthesis after a one-cluster and a catalog
edit of 1,000 clusters, `changed --base-ref HEAD` in a git repository of that fleet, and the generated GitHub
Actions workflow's `changed` job in a fresh clone of it, with and without a cache hit. docs/performance.md
says what each figure and goal is. Memory is each process's kernel peak (`VmHWM`, read every 0.1 s over the
process tree), summed: an upper bound of the tree's peak.

Results: a table and one line per goal on stdout, and JSON (default bench-results/benchmark.json) with the
machine and the git commit. The exit status is 0 whether goals are met or not.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
PROJECT_ROOT = SCRIPTS.parent
for _folder in (PROJECT_ROOT, SCRIPTS):  # run as `python scripts/benchmark.py`, sys.path[0] is scripts/ alone
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

from bench_figures import (  # noqa: E402
    CHANGED_TOOL_FLEET_SIZE,
    ablation,
    derive,
    engine_import,
    pull_request_goals,
    render_changed,
    render_goal,
    render_table,
)
from bench_fleet import (  # noqa: E402
    EDIT_FLEET_SIZE,
    EDITED_CLUSTER,
    catalog_edit_clusters,
    check_fleet,
    cluster_name,
    edited,
    edited_catalog,
    edited_cluster,
    write_fleet,
)
from bench_measure import Series, measure, stats  # noqa: E402
from bench_workflow import WorkflowSeries, kept_synthesis  # noqa: E402

DEFAULT_SIZES = (1, 10, 100, 1000)
DEFAULT_OUT = PROJECT_ROOT / "bench-results" / "benchmark.json"
DEFAULT_PULL_REQUEST_OUT = PROJECT_ROOT / "bench-results" / "pull-request.json"
FLOOR_IMPORTS = (
    "import themelio_gpu.outputs.app, themelio_gpu.plan.fleet, themelio_gpu.constructs.gpu_cluster_stack"
)
EXAMPLE_CATALOG = PROJECT_ROOT / "catalog" / "gpu-catalog.yaml"
EXAMPLE_STACKS = PROJECT_ROOT / "stacks"
CHILD_ENV = {"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CHECKPOINT_DISABLE": "1"}
ABLATION_SIZE = 100  # the ablation runs on the example fleet and on this many clusters


# --- the runs -----------------------------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    """The environment of the measured processes: the user's, with every speed-up on (the default path)."""
    from themelio_gpu.speedups import ENV

    env = {**os.environ, **CHILD_ENV}
    for name in ("CDKTF_OUTDIR", ENV):
        env.pop(name, None)
    return env


def main_py(catalog: Path, stacks: Path, *more: str) -> list[str]:
    return [sys.executable, "main.py", "--catalog", str(catalog), "--stacks-dir", str(stacks), *more]


def tool(*args: str) -> list[str]:
    return [sys.executable, "-m", "themelio_gpu", *args]


class EditSeries(Series):
    """Synthesis after an edit of a fleet synthesized before: each run applies the edit and runs `main.py`
    (incremental) into a copy of that output, then asks `changed --format json` (untimed) which stacks
    changed, and counts the stack files written again."""

    def __init__(self, command: Sequence[str], base: Path, edit: tuple[Path, str]) -> None:
        super().__init__(command)
        self.base, self.edit = base, edit
        self.listed: set[tuple[str, ...]] = set()
        self.rewritten: set[int] = set()

    def run(self, env: Mapping[str, str], rep: int) -> dict[str, Any]:
        outdir = self.base.with_name(f"{self.base.name}-edit-{rep}")
        shutil.copytree(self.base, outdir, copy_function=shutil.copy2)
        inodes = {p: p.stat().st_ino for p in outdir.glob("stacks/*/cdk.tf.json")}
        with edited(self.edit):
            self.runs.append(measure([*self.command, "--outdir", str(outdir), "--quiet"], {**env, **self.env}))
        self.rewritten.add(sum(1 for p, inode in inodes.items() if not p.exists() or p.stat().st_ino != inode))
        report = subprocess.run(
            tool("changed", "--base", str(self.base), "--head", str(outdir), "--format", "json"),
            cwd=PROJECT_ROOT,
            env=dict(env),
            capture_output=True,
            text=True,
            check=True,
        )
        stacks = json.loads(report.stdout)["stacks"]
        self.listed.add(tuple(sorted(s["name"] for s in stacks if s["status"] != "unchanged")))
        shutil.rmtree(outdir)
        return self.runs[-1]

    def stats(self) -> dict[str, Any]:
        listed = [list(listed) for listed in sorted(self.listed)]
        return {**stats(self.runs), "listed_by_changed": listed, "stack_files_rewritten": sorted(self.rewritten)}


_SYNTHESIZING = re.compile(r"^changed: synthesizing (\d+) stacks? of (.*)$", re.MULTILINE)


def changed_repository(folder: Path, catalog: Path, stacks: Path, *, other_tool: bool = False) -> Path:
    """A git repository of one commit: this checkout's tool (themelio_gpu/, main.py, Pipfile.lock) and the
    fleet (catalog/gpu-catalog.yaml, stacks/). `other_tool`: the commit's code has a comment more."""
    shutil.copytree(
        PROJECT_ROOT / "themelio_gpu", folder / "themelio_gpu", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("main.py", "Pipfile.lock"):
        shutil.copy(PROJECT_ROOT / name, folder / name)
    if other_tool:
        with (folder / "themelio_gpu" / "__init__.py").open("a", encoding="utf-8") as marker:
            marker.write("# another tool\n")
    (folder / "catalog").mkdir()
    shutil.copy(catalog, folder / "catalog" / "gpu-catalog.yaml")
    shutil.copytree(stacks, folder / "stacks")
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], [*identity, "commit", "-q", "-m", "fleet"]):
        subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)
    return folder


class ChangedSeries(Series):
    """`changed --base-ref HEAD` in a repository of a fleet (changed_repository), its edit applied while it runs,
    with an empty cache (`warm`: the cache of the runs before, filled once before the first) and no default
    output folder. It reads back which stacks the report lists, what it notes, and how many stacks `changed`
    synthesized on each side (its progress lines)."""

    def __init__(
        self,
        name: str,
        repo: Path,
        extra: Sequence[str],
        edit: tuple[Path, str] | None,
        work: Path,
        *,
        warm: bool = False,
    ) -> None:
        inputs = ["--catalog", str(repo / "catalog" / "gpu-catalog.yaml"), "--stacks-dir", str(repo / "stacks")]
        super().__init__(tool("changed", *inputs, "--base-ref", "HEAD", *extra))
        self.name, self.edit, self.work, self.warm, self.warmed = name, edit, work, warm, False
        self.listed: set[tuple[str, ...]] = set()
        self.notes: set[str] = set()
        self.stacks: set[int] = set()
        self.synthesized: list[dict[str, int]] = []  # per run and side (base, head): stacks synthesized here
        self.own_code: list[bool] = []  # per run: the base synthesized whole by its commit's code

    def run(self, env: Mapping[str, str], rep: int) -> dict[str, Any]:
        from themelio_gpu.changes.cache import CACHE_ENV

        if self.warm and not self.warmed:
            self.warmed = True
            self.run(env, 0)  # fills the cache; not counted
            self.runs.pop()
        cache = self.work / f"changed-cache-{self.name}" / ("warm" if self.warm else f"run-{rep}")
        report, matrix = self.work / f"changed-{self.name}-{rep}.txt", self.work / f"matrix-{self.name}-{rep}.json"
        outputs = ["--format", f"text={report}", "--format", f"github-matrix={matrix}"]
        run_env = {**env, CACHE_ENV: str(cache), "CDKTF_OUTDIR": str(self.work / "no-output-folder")}
        errors: list[str] = []
        with edited(self.edit):
            self.runs.append(measure([*self.command, *outputs], run_env, errors))
        if rep > 0:
            self.listed.add(
                tuple(sorted(s["stack"] for s in json.loads(matrix.read_text(encoding="utf-8"))["include"]))
            )
            text = report.read_text(encoding="utf-8").splitlines()
            self.notes.update(line.removeprefix("note: ") for line in text if line.startswith("note: "))
            self.stacks.add(int(text[-1].split(" stack")[0]))
            counts: dict[str, int] = {}
            for number, label in _SYNTHESIZING.findall(errors[0]):
                side = "base" if label.startswith("git ") else "head"
                counts[side] = counts.get(side, 0) + int(number)
            self.synthesized.append(counts)
            self.own_code.append("with its own code" in errors[0])
        if not self.warm:
            shutil.rmtree(cache, ignore_errors=True)
        return self.runs[-1]

    def stats(self) -> dict[str, Any]:
        listed = [list(listed) for listed in sorted(self.listed)]
        return {
            **stats(self.runs),
            "listed": listed,
            "synthesized": self.synthesized,
            "base_by_its_own_code": self.own_code,
            "notes": sorted(self.notes),
            "stacks": sorted(self.stacks),
        }


def changed_series(
    work: Path, env: Mapping[str, str], fleet: tuple[Path, Path], base: Path, tool_fleet: tuple[Path, Path]
) -> dict[str, Series]:
    """The `changed --base-ref` scenarios, and what they need, made untimed: a repository of the 1,000-cluster
    `fleet`; the head the generated pipeline synthesizes before it runs `changed` (`main.py` with the one-cluster
    edit, from `base`, that fleet synthesized); a repository of `tool_fleet` whose commit has another tool, and
    its head."""
    repo = changed_repository(work / "changed-fleet", *fleet)
    catalog, stacks = repo / "catalog" / "gpu-catalog.yaml", repo / "stacks"
    one, head = edited_cluster(stacks), work / "changed-head"
    shutil.copytree(base, head, copy_function=shutil.copy2)
    with edited(one):
        measure(main_py(catalog, stacks, "--outdir", str(head), "--quiet"), env)
    tool_repo, tool_head = (
        changed_repository(work / "changed-tool", *tool_fleet, other_tool=True),
        work / "changed-tool-head",
    )
    measure(
        main_py(
            tool_repo / "catalog" / "gpu-catalog.yaml", tool_repo / "stacks", "--outdir", str(tool_head), "--quiet"
        ),
        env,
    )
    # The generated workflow's job in a fresh clone: with the base commit's kept synthesis (a cache hit), and
    # without (a miss).
    kept = kept_synthesis(repo, work / "kept-base", env)
    clone_edit = (one[0].relative_to(repo).as_posix(), one[1])
    return {
        "workflow:hit": WorkflowSeries("hit", repo, clone_edit, kept, work),
        "workflow:miss": WorkflowSeries("miss", repo, clone_edit, None, work),
        "changed:one-cluster": ChangedSeries("one-cluster", repo, ["--head", str(head)], one, work),
        "changed:one-cluster:no-head": ChangedSeries("no-head", repo, [], one, work),
        "changed:one-cluster:no-head-warm": ChangedSeries("no-head-warm", repo, [], one, work, warm=True),
        "changed:catalog": ChangedSeries("catalog", repo, [], edited_catalog(catalog), work),
        "changed:tool": ChangedSeries("tool", tool_repo, ["--head", str(tool_head)], None, work),
    }


def ablated_speedups(engine: str = "cdktf") -> tuple[list[str], list[str]]:
    """The speed-ups the ablation switches off (those of `engine`), and a note for each one it does not."""
    from themelio_gpu.speedups import ONLY_UNDER, Speedup

    used = [s.value for s in Speedup if ONLY_UNDER.get(s, engine) == engine]
    notes = [
        f"{s.value} is not used under {engine} (only under {ONLY_UNDER[s]}): not measured"
        for s in Speedup
        if ONLY_UNDER.get(s, engine) != engine
    ]
    return used, notes


def run_benchmark(sizes: Sequence[int], repeat: int, work: Path, engine: str) -> dict[str, Any]:
    from themelio_gpu.speedups import ENV

    env = child_env()
    fleets = {
        n: write_fleet(work / f"fleet-{n}", n) for n in sorted({*sizes, ABLATION_SIZE, CHANGED_TOOL_FLEET_SIZE})
    }
    for n, fleet in fleets.items():
        check_fleet(*fleet, n)
    _progress(f"generated fleets of {', '.join(map(str, fleets))} clusters in {work}")

    def synth(fleet: tuple[Path, Path], name: str, speedup_off: str | None = None) -> Series:
        return Series(main_py(*fleet), work / name, {ENV: speedup_off} if speedup_off else None)

    example_fleet = (EXAMPLE_CATALOG, EXAMPLE_STACKS)
    ablation_fleets = {"example": example_fleet, str(ABLATION_SIZE): fleets[ABLATION_SIZE]}
    speedups, notes = ablated_speedups(engine)
    # Each goal's two commands run one after the other (either order), so a busy spell slows both.
    series: dict[str, Series] = {
        "cdktf": Series([sys.executable, "-c", engine_import()]),
        "example": synth(example_fleet, "out-example"),
        **{str(n): synth(fleets[n], f"out-{n}") for n in (*sizes, ABLATION_SIZE)},
        "app": Series([sys.executable, "-c", FLOOR_IMPORTS]),
    }
    for speedup in speedups:
        for name, fleet in ablation_fleets.items():
            series[f"off:{speedup}:{name}"] = synth(fleet, f"out-off-{speedup}-{name}", speedup)
    # The edit goals: a fleet synthesized once (untimed), then edited; the one-cluster edit runs right after the
    # one-cluster fleet it is compared with.
    edit_fleet, base = write_fleet(work / "fleet-edits", EDIT_FLEET_SIZE), work / "out-edits-base"
    measure(main_py(*edit_fleet, "--outdir", str(base), "--quiet"), env)
    one_cluster = series.pop("1", None) or synth(write_fleet(work / "fleet-1-edits", 1), "out-1-edits")
    changed = changed_series(work, env, edit_fleet, base, fleets[CHANGED_TOOL_FLEET_SIZE])
    series = {
        "1": one_cluster,
        "changed:one-cluster": changed.pop("changed:one-cluster"),
        "workflow:hit": changed.pop("workflow:hit"),
        "changed:one-cluster:no-head": changed.pop("changed:one-cluster:no-head"),
        "edit:one-cluster": EditSeries(main_py(*edit_fleet), base, edited_cluster(edit_fleet[1])),
        **series,
        "edit:catalog": EditSeries(main_py(*edit_fleet), base, edited_catalog(edit_fleet[0])),
        **changed,
    }
    measure(series["app"].command, env)  # warm-up: page cache, jsii's assembly cache
    for rep in range(1, repeat + 1):
        # Interleaved, alternating the order, so that a busy spell of the machine spreads over all figures.
        for name, item in series.items() if rep % 2 else reversed(series.items()):
            _progress(f"[{rep}/{repeat}] {name}: {item.run(env, rep)['wall_s']:.2f} s")

    floors = {name: series[name].stats() for name in ("cdktf", "app")}
    example = series["example"].stats()
    size_results = [{"clusters": n, **series[str(n)].stats(), "derived": {}} for n in sizes]
    default = {"example": example, str(ABLATION_SIZE): series[str(ABLATION_SIZE)].stats()}
    off = {s: {f: series[f"off:{s}:{f}"].stats() for f in ablation_fleets} for s in speedups}
    one = [cluster_name(EDITED_CLUSTER - 1)]
    edits = {
        "one_cluster": {**series["edit:one-cluster"].stats(), "expected": one},
        "catalog": {**series["edit:catalog"].stats(), "expected": catalog_edit_clusters()},
        "one_cluster_fleet": series["1"].stats(),
    }
    changed_figures = _changed_figures(series)
    return {
        "floors": floors,
        "example": example,
        "sizes": size_results,
        "ablation_notes": notes,
        "edits": edits,
        "changed": changed_figures,
        "derived": derive(floors, example, size_results, ablation(default, off), edits, changed_figures),
    }


def _changed_figures(series: Mapping[str, Series]) -> dict[str, Any]:
    """The figures of the pull request's review (`changed` and the generated workflow's job) from their Series."""
    one = [cluster_name(EDITED_CLUSTER - 1)]
    return {
        "one_cluster_fleet": series["1"].stats(),
        "one_cluster": {**series["changed:one-cluster"].stats(), "expected": one},
        "one_cluster_no_head": series["changed:one-cluster:no-head"].stats(),
        "one_cluster_no_head_warm": series["changed:one-cluster:no-head-warm"].stats(),
        "catalog": {**series["changed:catalog"].stats(), "expected": catalog_edit_clusters()},
        "tool": {**series["changed:tool"].stats(), "expected_stacks": CHANGED_TOOL_FLEET_SIZE},
        "workflow_hit": {**series["workflow:hit"].stats(), "expected": one},
        "workflow_miss": {**series["workflow:miss"].stats(), "expected": one},
    }


def run_pull_request(repeat: int, work: Path) -> dict[str, Any]:
    """The pull request's review alone (`--only pull-request`): the one-cluster fleet's synthesis, then every
    `changed --base-ref` scenario and the generated workflow's job, interleaved, with their goals."""
    env = child_env()
    edit_fleet, base = write_fleet(work / "fleet-edits", EDIT_FLEET_SIZE), work / "out-edits-base"
    tool_fleet = write_fleet(work / f"fleet-{CHANGED_TOOL_FLEET_SIZE}", CHANGED_TOOL_FLEET_SIZE)
    measure(main_py(*edit_fleet, "--outdir", str(base), "--quiet"), env)
    series: dict[str, Series] = {
        "1": Series(main_py(*write_fleet(work / "fleet-1", 1)), work / "out-1"),
        **changed_series(work, env, edit_fleet, base, tool_fleet),
    }
    measure(tool("--help"), env)  # warm-up: page cache
    for rep in range(1, repeat + 1):
        for name, item in series.items() if rep % 2 else reversed(series.items()):
            _progress(f"[{rep}/{repeat}] {name}: {item.run(env, rep)['wall_s']:.2f} s")
    changed = _changed_figures(series)
    goals = pull_request_goals(changed)
    return {"changed": changed, "derived": {"goals": goals, "all_goals_met": all(g["ok"] for g in goals)}}


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _git(*args: str) -> str | None:
    done = subprocess.run(["git", "--no-optional-locks", *args], cwd=PROJECT_ROOT, capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def source_digest() -> str:
    """SHA-256 of the app's code (main.py, themelio_gpu/): tells whether it changed while the benchmark ran."""
    digest = hashlib.sha256()
    for path in [PROJECT_ROOT / "main.py", *sorted((PROJECT_ROOT / "themelio_gpu").rglob("*.py"))]:
        digest.update(str(path.relative_to(PROJECT_ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"--sizes takes numbers like 1,10,50,100: {error}") from error
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("--sizes needs at least one count of clusters, each >= 1")
    return sizes


def main(argv: Sequence[str] | None = None) -> int:
    from themelio_gpu.engine import selected

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=DEFAULT_SIZES,
        help="fleet sizes, comma-separated (default 1,10,100,1000)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; medians are reported")
    parser.add_argument(
        "--out", type=Path, default=None, help="JSON results (default bench-results/benchmark.json)"
    )
    parser.add_argument(
        "--only",
        choices=("pull-request",),
        help="only the pull request's review: every `changed --base-ref` scenario and the generated workflow's "
        "job, with their goals (default out bench-results/pull-request.json)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        raise SystemExit("--repeat must be at least 1")
    node = shutil.which("node")
    status = _git("status", "--porcelain", "--untracked-files=no")
    machine = {  # before the runs: the commit and code measured
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "node": node and subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip(),
        # Other work on the machine slows every figure; the ratios are what compare across runs.
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": None if status is None else bool(status),
        "source_digest": source_digest(),
    }
    engine = selected()
    with tempfile.TemporaryDirectory(prefix="themelio-bench-") as work:
        if args.only:
            measured = run_pull_request(args.repeat, Path(work))
        else:
            measured = run_benchmark(args.sizes, args.repeat, Path(work), engine.name)
    result = {
        "schema": 5,
        "machine": machine,
        "source_changed_during_run": source_digest() != machine["source_digest"],
        "settings": {
            "sizes": list(args.sizes),
            "repeat": args.repeat,
            "engine": engine.describe(),
            "ablation_fleets": ["example", str(ABLATION_SIZE)],
        },
        **measured,
    }
    if args.only:
        print("\n".join([*render_changed(result["changed"]), "", *map(render_goal, result["derived"]["goals"])]))
    else:
        print(render_table(result))
    out = args.out or (DEFAULT_PULL_REQUEST_OUT if args.only else DEFAULT_OUT)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
