"""The benchmark's pull-request figure (scripts/benchmark.py): the generated GitHub Actions workflow's `changed`
job, its steps run here in order as the runner runs them, in a fresh clone of a git fleet with one edit.

The steps: restore the base commit's synthesis (the cache: a copy of what that commit's own run kept, or
nothing on a miss), `Synthesize` and `Compare with the base` (their shell scripts, taken from the generated
workflow and run by bash with the variables GitHub sets), and the plan matrix's size (read from the step's
output). Actions GitHub runs itself (checkout, setup, the cache's download) are not timed; the rest is.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from bench_measure import Series, stats

from themelio_gpu.pipelines import github_actions

INPUTS = "--catalog catalog/gpu-catalog.yaml --stacks-dir stacks"
"""The fleet as the clone's root sees it (benchmark.changed_repository lays it out so)."""
STEPS = ("Synthesize", "Compare with the base")


def workflow_steps() -> dict[str, str]:
    """The shell scripts of the generated workflow's `changed` job, by step name."""
    workflow = yaml.safe_load(github_actions.workflow_text(INPUTS, "main", "terraform"))
    return {step["name"]: step["run"] for step in workflow["jobs"]["changed"]["steps"] if "run" in step}


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True).stdout.strip()


def fresh_clone(repo: Path, into: Path) -> Path:
    """A clone of `repo`, as a pipeline's checkout is, with the project's Python where setup puts it."""
    shutil.rmtree(into, ignore_errors=True)
    _git("clone", "-q", str(repo), str(into))
    (into / ".venv").symlink_to(Path(sys.executable).parent.parent)
    return into


def kept_synthesis(repo: Path, into: Path, env: Mapping[str, str]) -> Path:
    """What the base commit's own run keeps: its fleet synthesized in a clone, as `main.py` does there."""
    clone = fresh_clone(repo, into.with_name(into.name + "-clone"))
    command = [sys.executable, "main.py", *INPUTS.split(), "--quiet"]
    subprocess.run(command, cwd=clone, env=dict(env), check=True, capture_output=True)
    shutil.rmtree(into, ignore_errors=True)
    shutil.move(clone / "cdktf.out", into)
    shutil.rmtree(clone)
    return into


class WorkflowSeries(Series):
    """The `changed` job's steps in order, in a fresh clone of `repo` with `edit` applied (a path relative to
    the clone, and its new text); `kept`: the base commit's kept synthesis (a cache hit), or None (a miss).
    A run's wall time is the steps' sum, its memory the largest step's (they run one after the other)."""

    def __init__(self, name: str, repo: Path, edit: tuple[str, str], kept: Path | None, work: Path) -> None:
        super().__init__(["<the changed job's steps>"])
        self.name, self.repo, self.edit, self.kept, self.work = name, repo, edit, kept, work
        self.base = _git("-C", str(repo), "rev-parse", "HEAD")
        self.scripts = workflow_steps()
        self.matrix: set[int] = set()
        self.written: set[int] = set()
        self.summaries: set[str] = set()
        self.changed_synthesized: set[int] = set()

    def run(self, env: Mapping[str, str], rep: int) -> dict[str, Any]:
        from bench_measure import measure

        clone = fresh_clone(self.repo, self.work / f"clone-{self.name}-{rep}")
        (clone / self.edit[0]).write_text(self.edit[1], encoding="utf-8")
        runner = self.work / f"runner-{self.name}-{rep}"
        runner.mkdir()
        outputs, summary = runner / "github-output", runner / "summary.md"
        step_env = {
            **env,
            "BASE": self.base,
            "KEPT": "true" if self.kept is not None else "",
            "RUNNER_TEMP": str(runner),
            "GITHUB_OUTPUT": str(outputs),
            "GITHUB_STEP_SUMMARY": str(summary),
        }
        steps = []
        if self.kept is not None:  # actions/cache/restore: the kept folder, as it was saved
            steps.append(measure(["cp", "-R", str(self.kept), str(clone / "cdktf.out")], step_env, cwd=clone))
        before = {p: p.stat().st_ino for p in clone.glob("cdktf.out/stacks/*/cdk.tf.json")}
        errors: list[str] = []
        for name in STEPS:
            steps.append(measure(["bash", "-e", "-c", self.scripts[name]], step_env, errors, cwd=clone))
        after = {p: p.stat().st_ino for p in clone.glob("cdktf.out/stacks/*/cdk.tf.json")}
        self.written.add(sum(1 for p, inode in after.items() if before.get(p) != inode))
        matrix = next(line for line in outputs.read_text().splitlines() if line.startswith("matrix="))
        self.matrix.add(len(json.loads(matrix.removeprefix("matrix="))["include"]))
        self.summaries.update(line for line in summary.read_text().splitlines() if line.startswith("Synthesis: "))
        self.changed_synthesized.add(errors[-1].count("changed: synthesizing"))
        self.runs.append(
            {
                "wall_s": sum(s["wall_s"] for s in steps),
                "cpu_s": sum(s["cpu_s"] for s in steps),
                "peaks_by_name": max((s["peaks_by_name"] for s in steps), key=lambda p: sum(p.values())),
                "steps_wall_s": [round(s["wall_s"], 3) for s in steps],
            }
        )
        shutil.rmtree(clone)
        shutil.rmtree(runner)
        return self.runs[-1]

    def stats(self) -> dict[str, Any]:
        return {
            **stats(self.runs),
            "steps_wall_s": [r["steps_wall_s"] for r in self.runs],
            "cache_hit": self.kept is not None,
            "matrix_size": sorted(self.matrix),
            "stack_files_written": sorted(self.written),
            "summary": sorted(self.summaries),
            "changed_synthesis_lines": sorted(self.changed_synthesized),
        }
