"""Measuring the benchmark's commands: wall and CPU time, each process's peak memory, the synthesized output."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def _proc(pid: int, name: str) -> str:
    try:
        return Path(f"/proc/{pid}/{name}").read_text()
    except OSError:
        return ""


class TreeSampler(threading.Thread):
    """Reads the kernel's per-process peak RSS (VmHWM) of a process tree every 0.1 s (its members every 0.5 s)."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True, name="tree-sampler")
        self.root, self.pids, self.done = root, {root}, threading.Event()
        self.peaks: dict[int, tuple[str, int]] = {}

    def _descendants(self) -> set[int]:
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and (stat := _proc(int(entry.name), "stat")):
                children.setdefault(int(stat.rpartition(")")[2].split()[1]), []).append(int(entry.name))
        found, todo = {self.root}, [self.root]
        while todo:
            new = [c for c in children.get(todo.pop(), []) if c not in found]
            found.update(new)
            todo += new
        return found

    def run(self) -> None:
        tick = 0
        while not self.done.is_set():
            if tick % 5 == 0:
                self.pids |= self._descendants()
            for pid in list(self.pids):
                status = dict(line.split(":", 1) for line in _proc(pid, "status").splitlines() if ":" in line)
                if "VmHWM" in status:  # not gone, not a zombie
                    name, peak = status.get("Name", "?").strip(), int(status["VmHWM"].split()[0])
                    self.peaks[pid] = (name, max(peak, self.peaks.get(pid, (name, 0))[1]))
            tick += 1
            self.done.wait(0.1)


def measure(
    command: Sequence[str], env: Mapping[str, str], errors: list[str] | None = None, cwd: Path = PROJECT_ROOT
) -> dict[str, Any]:
    """Run `command` in `cwd` and measure it: wall and CPU time, peak memory by process name and summed (KiB).

    Its stderr is appended to `errors` when given."""
    with tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        process = subprocess.Popen(command, cwd=cwd, env=dict(env), stdout=subprocess.DEVNULL, stderr=stderr)
        sampler = TreeSampler(process.pid)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        sampler.done.set()
        sampler.join()
        stderr.seek(0)
        text = stderr.read().decode(errors="replace")
    if (code := os.waitstatus_to_exitcode(status)) != 0:
        raise SystemExit(f"{' '.join(command)} exited with {code}:\n{text[-4000:]}")
    if errors is not None:
        errors.append(text)
    by_name: dict[str, int] = {}
    for name, peak in sampler.peaks.values():
        key = "python" if name.startswith("python") else name
        by_name[key] = by_name.get(key, 0) + peak
    # CPU: user + system time of the child and the descendants it waited for (Python and node).
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peaks_by_name": by_name}


_TOSET = re.compile(r"^\$\{toset\((\[.*\])\)\}$", re.DOTALL)


def inspect_output(outdir: Path) -> dict[str, Any]:
    """Resource blocks of the synthesized stacks (a for_each resource counts once), the instances they expand to
    (1 when the JSON cannot tell), the bytes written and their digest."""
    blocks = instances = size = 0
    digest = hashlib.sha256()
    for path in sorted(p for p in outdir.rglob("*") if p.is_file()):
        data = path.read_bytes()
        size += len(data)
        digest.update(str(path.relative_to(outdir)).encode() + b"\0" + data)
        if path.name != "cdk.tf.json":
            continue
        for body in (b for kind in json.loads(data).get("resource", {}).values() for b in kind.values()):
            blocks += 1
            each, count = body.get("for_each"), body.get("count", 1)
            match = _TOSET.match(each) if isinstance(each, str) else None
            if isinstance(each, dict | list):
                instances += len(each)
            elif match:
                instances += len(set(json.loads(match.group(1))))
            else:
                instances += count if "for_each" not in body and isinstance(count, int) else 1
    return {
        "resource_blocks": blocks,
        "resource_instances": instances,
        "bytes": size,
        "digest": digest.hexdigest(),
    }


def stats(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    walls = [r["wall_s"] for r in runs]
    names = sorted({n for r in runs for n in r["peaks_by_name"]})
    peaks = {n: max(r["peaks_by_name"].get(n, 0) for r in runs) for n in names}
    return {
        "wall_s_median": statistics.median(walls),
        "wall_s_min": min(walls),
        "wall_s_all": [round(w, 3) for w in walls],
        "cpu_s_median": statistics.median(r["cpu_s"] for r in runs),
        "memory_kib": {
            "peaks_by_name": peaks,
            "tree_peak_upper_bound": max(sum(r["peaks_by_name"].values()) for r in runs),
        },
    }


class Series:
    """Repeated runs of one command; with `outdir`, each synthesizes into a folder of its own, inspected."""

    def __init__(
        self, command: Sequence[str], outdir: Path | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        self.command, self.outdir, self.env = list(command), outdir, dict(env or {})
        self.runs: list[dict[str, Any]] = []
        self.outputs: list[dict[str, Any]] = []

    def run(self, env: Mapping[str, str], rep: int) -> dict[str, Any]:
        outdir = None if self.outdir is None else self.outdir.with_name(f"{self.outdir.name}-{rep}")
        self.runs.append(
            measure(
                [*self.command, *(["--outdir", str(outdir), "--quiet"] if outdir else [])], {**env, **self.env}
            )
        )
        if outdir is not None:
            self.outputs.append(inspect_output(outdir))
            shutil.rmtree(outdir)
        return self.runs[-1]

    def stats(self) -> dict[str, Any]:
        result = stats(self.runs)
        if self.outputs:
            result["output"] = self.outputs[0]
            result["output_identical_across_repeats"] = len({o["digest"] for o in self.outputs}) == 1
        return result
