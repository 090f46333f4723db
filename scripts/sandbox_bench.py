#!/usr/bin/env python3
"""Sandbox benchmark (`make bench` runs it after the synthesis benchmark): what a sandbox costs, in one run.

For the largest stack of the fleet in catalog/ and stacks/ (the cluster with the most nodes) among those that run
the most of the sandbox's components (Kueue's and Karpenter's controllers among them: gpu-west of the example
fleet runs both), or `--cluster NAME`, `--repeat` times, interleaved with `python -c "import cdktf"` (the
synthesis benchmark's floor):
- `sandbox up` (control plane, nodes, GPUs, chart repository, NVIDIA's DRA kubelet plugin per whole-GPU node,
  the GPU Operator's launcher; the tools already built: a warm up),
- `sandbox apply` (init, apply, the plan after it), `sandbox probe`, `sandbox down` (destroy, leftovers, stop).
The goal: up / import cdktf <= 25 with NVIDIA's operator and plugins and the other components running (the median of the ratios within each repetition). Without the tools of
`make sandbox-tools` it says so and exits 0. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
if str(PROJECT_ROOT) not in sys.path:
    sys.path.insert(0, str(PROJECT_ROOT))

from themelio_gpu.plan.fleet import load_fleet  # noqa: E402
from themelio_gpu.plan.model import ClusterPlan  # noqa: E402
from themelio_gpu.sandbox.errors import MissingToolError  # noqa: E402
from themelio_gpu.sandbox.tools import toolbox  # noqa: E402
from themelio_gpu.settings import input_paths  # noqa: E402

GOAL_UP = 25.0


def timed(command: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    started = time.monotonic()
    result = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, check=False)
    return time.monotonic() - started, result.returncode, result.stdout + result.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cluster", help="the cluster to measure (default: see above)")
    args = parser.parse_args()
    try:
        toolbox()
    except MissingToolError as error:
        print(f"sandbox bench: skipped: {error}")
        return 0
    paths = input_paths()
    fleet = load_fleet(paths.catalog, paths.stacks_dir)
    from themelio_gpu.sandbox import components

    def size(plan: ClusterPlan) -> tuple[int, int]:
        nodes = sum(
            len(n.provisioning.static.nodes) if n.provisioning.static else 2 for n in plan.definition.node_pools
        )
        return len(components.wanted(plan)), nodes

    named = [p for p in fleet.clusters if p.name == args.cluster]
    if args.cluster and not named:
        print(f"sandbox bench: no cluster {args.cluster} in {paths.stacks_dir}", file=sys.stderr)
        return 2
    largest = named[0] if named else max(fleet.clusters, key=size)
    python = str(PROJECT_ROOT / ".venv" / "bin" / "python")
    sandbox = [python, "-m", "themelio_gpu", "sandbox"]
    figures: dict[str, list[float]] = {"import cdktf": [], "up": [], "apply": [], "probe": [], "down": []}
    with tempfile.TemporaryDirectory(prefix="sandbox-bench-") as folder:
        env = dict(os.environ, THEMELIO_SANDBOX_DIR=folder, JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20")
        for _ in range(args.repeat):
            seconds, code, out = timed([python, "-c", "import cdktf"], env)
            figures["import cdktf"].append(seconds)
            for step in ("up", "apply", "probe", "down"):
                seconds, code, out = timed([*sandbox, step, largest.name], env)
                if code not in (0,):
                    print(out[-3000:])
                    timed([*sandbox, "down", largest.name], env)
                    print(f"sandbox bench: `sandbox {step} {largest.name}` exited {code}")
                    return 1
                figures[step].append(seconds)
    ratios = [up / floor for up, floor in zip(figures["up"], figures["import cdktf"], strict=True)]
    ratio = statistics.median(ratios)
    print(
        f"sandbox bench: {largest.name} ({len(largest.definition.node_pools)} pools), {args.repeat} runs, medians:"
    )
    for name, values in figures.items():
        print(f"  {name:<13} {statistics.median(values):6.1f} s  (runs: {', '.join(f'{v:.1f}' for v in values)})")
    verdict = "met" if ratio <= GOAL_UP else "MISSED"
    print(f"goal warm-up: sandbox up / import cdktf = {ratio:.1f} (<= {GOAL_UP:g}): {verdict}")
    results = PROJECT_ROOT / "bench-results" / "sandbox.json"
    results.parent.mkdir(exist_ok=True)
    results.write_text(
        json.dumps({"cluster": largest.name, "seconds": figures, "up_ratio": ratio}, indent=2) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
