#!/usr/bin/env python3
"""Synthesis benchmark: how long GitOps pipelines wait for `main.py`, what grows with the fleet, and what each
speed-up is worth.

Usage (from the project root; `make bench` runs it with the defaults):
    .venv/bin/python scripts/benchmark.py [--sizes 1,10,100,1000] [--repeat 3] [--out FILE] [--keep]
    .venv/bin/python scripts/benchmark.py --only changed [--repeat 3]   # the `changed` goals alone (7. below)

What it measures, in one run (ratios only mean something within one run on the same machine):
1. Synthetic fleets of N clusters, generated into a temporary folder from a synthetic catalog derived
   from the product table (>= 20 offerings: whole GPUs of every product, MIG slices of A100-40GB,
   A100-80GB, H100-80GB and H200). Every cluster is the same shape: Kubernetes 1.36, local backend,
   kubeconfig access, a catalog ConfigMap, and 20 offerings on 4 static pools of 8 nodes (one whole-GPU
   pool, rotating through the products, and three MIG pools with a custom mixed MIG Manager config).
   Each fleet is checked with `load_fleet` before anything is timed.
2. Floors: `python -c "import cdktf"` (cdktf and jsii's node process, nothing of ours), and the app's
   import floor (a process importing the app's modules, provider bindings included, building nothing).
3. The example fleet (catalog/gpu-catalog.yaml and stacks/) synthesized by `python main.py`.
4. Per fleet size: whole-process wall time of `python main.py ... --quiet`, CPU time, peak memory of the
   process tree, the synthesized resource blocks (a for_each resource counts once) and the instances they
   expand to, and the size of the output folder.
5. The ablation: the example fleet and 100 clusters again with each speed-up of themelio_gpu/speedups.py
   switched off alone (THEMELIO_SPEEDUPS_OFF=<name>). Per speed-up: wall and CPU time, the share of CPU it
   saves, and for those that rely on a dependency's internals whether they pay (>= 10 % of CPU on one of
   the two fleets); every variant must synthesize the same bytes as the default.
6. The goals (README "Performance"), each reported as met or MISSED; a ratio is the median over the
   repetitions of the ratio within each (its two commands run one after the other), with the ratios of
   medians, of the fastest runs and of CPU times beside it:
   - example: t(`python main.py`, example fleet) / t(`python -c "import cdktf"`) <= 2.5;
   - scaling: t(100 clusters) / t(1 cluster) <= 4.5;
   - linear: t(1000 clusters) / t(100 clusters) <= 10;
   - memory: peak memory of the 1,000-cluster synthesis (every process) <= 1 GiB.
7. `changed --base-ref HEAD` in a git repository of the 1,000-cluster fleet with this checkout's tool, each
   run with an empty cache of its own and no default output folder:
   - changed: after a one-cluster edit, as the generated pipeline runs it (`--head` the folder `main.py` wrote
     for the edit, untimed) / t(synth of a one-cluster fleet) <= 3, and its peak memory <= 300 MiB; it lists
     that stack alone and synthesizes the base's alone;
   - without --head (the head's 1,000 cluster files are read and checked), once with an empty cache and once
     with the cache of the runs before: figures, no goal;
   - a catalog edit served by 100 clusters, without --head: exactly those 100 synthesized on each side and
     listed;
   - a commit whose code differs (a comment), 100 clusters: every stack compared, the base synthesized by its
     own code, and the report's note says why.

Runs are interleaved (all commands once per repetition, alternating the order) so that the noise of a
shared machine spreads over all figures instead of biasing one; the load average at the start is printed
with the figures. One untimed warm-up run fills the page cache first.

Memory: `main.py` runs Python plus the jsii kernel (`node`: jsii's relay and the kernel it starts).
Reported:
- `max_single_process`: `ru_maxrss` from `os.wait4` on the child: the kernel's exact peak of the largest
  single process among the child and the descendants it waited for. It is a max over processes, not a sum;
- per process name, the kernel's peak (`VmHWM` in /proc/<pid>/status), read every 0.1 s while the tree
  runs (a process's growth in its last 0.1 s can be missed);
- `tree_peak_upper_bound`: the sum of those per-process peaks (they need not coincide, so it bounds the
  tree's real peak from above; the memory goal is checked against it);
- `tree_rss_sampled`: the largest sum of current RSS over the tree seen by the sampler (a lower bound).

Results: a table and one line per goal on stdout, and JSON (default bench-results/benchmark.json) with
machine info and the git commit, so runs can be compared. The exit status is 0 whether goals are met or not.
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
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[1]
if str(PROJECT_ROOT) not in sys.path:  # run as `python scripts/benchmark.py`: sys.path[0] is scripts/
    sys.path.insert(0, str(PROJECT_ROOT))

DEFAULT_SIZES = (1, 10, 100, 1000)
DEFAULT_OUT = PROJECT_ROOT / "bench-results" / "benchmark.json"
FLOOR_IMPORTS = (
    "import themelio_gpu.outputs.app, themelio_gpu.plan.fleet, themelio_gpu.constructs.gpu_cluster_stack"
)


def engine_import() -> str:
    """`import cdktf`, or the engine THEMELIO_ENGINE selects (`import cdktn`): the floor of the example goal."""
    from themelio_gpu.engine import selected

    return f"import {selected().core}"


EXAMPLE_CATALOG = PROJECT_ROOT / "catalog" / "gpu-catalog.yaml"
EXAMPLE_STACKS = PROJECT_ROOT / "stacks"
CHILD_ENV = {"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CHECKPOINT_DISABLE": "1"}
GOAL_EXAMPLE_RATIO = 2.5
"""t(python main.py, example fleet) / t(python -c "import cdktf")."""
GOAL_SCALING_RATIO = 4.5
GOAL_SCALING_SIZES = (1, 100)
"""t(100 clusters) / t(1 cluster)."""
GOAL_LINEAR_RATIO = 10.0
GOAL_LINEAR_SIZES = (100, 1000)
"""t(1000 clusters) / t(100 clusters): synthesis time grows no faster than the fleet."""
GOAL_MEMORY_KIB = 1024 * 1024
GOAL_MEMORY_SIZE = 1000
"""The memory goal is the peak of every process of the 1,000-cluster synthesis."""
ABLATION_SIZE = 100
"""The ablation runs on the example fleet and on this many clusters."""
EDIT_FLEET_SIZE = 1000
"""The incremental goals edit a fleet of this many clusters, synthesized once before."""
GOAL_EDIT_RATIO = 3.0
"""t(synth after a one-cluster edit of the 1,000-cluster fleet) / t(synth of a one-cluster fleet)."""
GOAL_CHANGED_RATIO = 3.0
"""t(`changed --base-ref` after a one-cluster edit of the 1,000-cluster fleet, as the generated pipeline runs it) /
t(synth of a one-cluster fleet)."""
GOAL_CHANGED_MEMORY_KIB = 300 * 1024
"""Peak memory of that `changed` (every process's peak, summed)."""
CHANGED_TOOL_FLEET_SIZE = 100
"""The tool-change goal compares a fleet of this many clusters (every stack is synthesized by the base's code)."""
EDITED_CLUSTER = 7
"""The cluster the one-cluster edit changes (its kubeconfig context)."""
EDITED_OFFERING_PRODUCT = "a10g"
"""The catalog edit changes this product's whole-GPU offering, which every tenth cluster serves."""
PAYS_SHARE = 0.10
"""A speed-up relying on a dependency's internals must save this share of CPU on one of the two."""
MIB = 1024 * 1024

# --- the synthetic fleet ------------------------------------------------------------------------------------

OFFERINGS_PER_CLUSTER = 20
POOLS_PER_CLUSTER = 4
NODES_PER_POOL = 8
GPUS_PER_NODE = 8
KUBERNETES_VERSION = "1.36"

# Short names in extended resource names, as the example catalog spells them (nvidia.com/a100, .../h100).
SHORT_NAMES: Mapping[str, str] = {
    "a10g": "a10g",
    "l4": "l4",
    "l40s": "l40s",
    "a30": "a30",
    "a100-40gb": "a100",
    "a100-80gb": "a100-80gb",
    "h100-80gb": "h100",
    "h100-nvl": "h100-nvl",
    "h200-141gb": "h200",
    "b200": "b200",
}
MIG_OFFERING_PRODUCTS = ("a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb")
# The MIG pools of every cluster; A100-80GB slices are in the catalog but served by no benchmark cluster.
MIG_POOL_PRODUCTS = ("a100-40gb", "h100-80gb", "h200-141gb")
# Migration aliases (legacy device-plugin names), as the example catalog has them for A100-40GB slices.
ALIASED_PRODUCT = "a100-40gb"
MIG_CONFIG_NAME = "themelio-mixed"


def _spelling(profile: str) -> str:
    return profile.replace("+", ".")


def _component(text: str) -> str:
    return "gpu_" + re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def whole_offering_name(product: str) -> str:
    return f"nvidia.com/{SHORT_NAMES[product]}"


def mig_offering_name(product: str, profile: str) -> str:
    return f"nvidia.com/{SHORT_NAMES[product]}-mig-{_spelling(profile)}"


def pool_mig_profiles(product: str) -> tuple[str, ...]:
    """The six MIG profiles a benchmark MIG pool provides: every profile of the product but `+me` ones."""
    from themelio_gpu.inputs.catalog.products import PRODUCTS

    profiles = tuple(p for p in PRODUCTS[product].mig_profiles if "+" not in p)
    assert len(profiles) == 6, (product, profiles)
    return profiles


def synthetic_catalog() -> dict[str, Any]:
    """A catalog in the example's shape with every offering derived from the product table (39 entries)."""
    from themelio_gpu.inputs.catalog.products import PRODUCTS

    offerings: dict[str, Any] = {}
    for key, product in PRODUCTS.items():
        entry: dict[str, Any] = {
            "deviceClass": f"{key}.gpu.themelio.io",
            "product": key,
            "displayName": product.display_name,
            "description": f"One whole {product.display_name}.",
            "quota": {"waldurComponent": _component(SHORT_NAMES[key])},
            "kubeflow": {"uiName": product.display_name},
        }
        if product.memory_gib >= 79:  # what GPUs of 80 GB and more publish
            entry["constraints"] = {"minMemory": f"{int(product.memory_gib)}Gi", "minDriverVersion": "570.0.0"}
        offerings[whole_offering_name(key)] = entry
    for key in MIG_OFFERING_PRODUCTS:
        product = PRODUCTS[key]
        for profile in product.mig_profiles:
            name = mig_offering_name(key, profile)
            entry = {
                "deviceClass": f"{key}-mig-{_spelling(profile)}.gpu.themelio.io",
                "product": key,
                "migProfile": profile,
                "displayName": f"{product.display_name} MIG {profile}",
                "description": f"A {profile} MIG slice of an {product.display_name}.",
                "quota": {"waldurComponent": _component(f"{SHORT_NAMES[key]}_mig_{profile}"), "unit": "slice"},
                "kubeflow": {"uiName": f"{product.display_name} MIG {profile}"},
            }
            if key == ALIASED_PRODUCT:
                entry["aliases"] = [
                    {
                        "name": f"nvidia.com/mig-{_spelling(profile)}",
                        "deviceClass": f"legacy-mig-{_spelling(profile)}.gpu.themelio.io",
                    }
                ]
            offerings[name] = entry
    offerings["nvidia.com/gpu"] = {
        "servedBy": "dra-driver-chart",
        "displayName": "Any NVIDIA GPU (legacy)",
        "description": "Any whole GPU, served by the DRA driver chart's own class.",
        "quota": {"waldurComponent": "gpu"},
        "lifecycle": "deprecated",
    }
    return {"offerings": offerings}


def cluster_name(index: int) -> str:
    return f"bench-{index + 1:04d}"


def synthetic_cluster(index: int) -> dict[str, Any]:
    """Cluster `index` (0-based): 20 offerings on 4 static pools of 8 nodes, Kubernetes 1.36, local backend.

    Pools: one whole-GPU pool (its product rotates through the product table, so the counts stay the same)
    serving its product and the chart-served nvidia.com/gpu, and three MIG pools (A100-40GB, H100-80GB,
    H200) whose custom MIG Manager config lays out different profiles on the node's GPUs, six per pool.
    """

    name = cluster_name(index)
    whole = whole_product(index)

    def nodes(pool: str) -> list[str]:
        return [f"{name}-{pool}-{n:02d}" for n in range(1, NODES_PER_POOL + 1)]

    pools: list[dict[str, Any]] = [
        {
            "name": f"whole-{whole}",
            "product": whole,
            "gpusPerNode": GPUS_PER_NODE,
            "provisioning": {"static": {"nodes": nodes(f"whole-{whole}")}},
        }
    ]
    offerings = [whole_offering_name(whole), "nvidia.com/gpu"]
    for product in MIG_POOL_PRODUCTS:
        profiles = pool_mig_profiles(product)
        pool = f"mig-{product}"
        pools.append(
            {
                "name": pool,
                "product": product,
                "gpusPerNode": GPUS_PER_NODE,
                # One custom config, different layouts on different GPUs of the node (mig-parted allows it).
                "mig": {
                    "config": MIG_CONFIG_NAME,
                    "provides": {p: 2 if p == profiles[0] else 1 for p in profiles},
                },
                "provisioning": {"static": {"nodes": nodes(pool)}},
            }
        )
        offerings.extend(mig_offering_name(product, p) for p in profiles)
    return {
        "name": name,
        "kubernetesVersion": KUBERNETES_VERSION,
        "access": {"kubeconfig": {"path": "~/.kube/config", "context": name}},
        "backend": {"type": "local"},
        "offerings": sorted(offerings),
        "nodePools": pools,
        "catalogConfigMap": {"namespace": "themelio-system"},
    }


def write_fleet(folder: Path, clusters: int) -> tuple[Path, Path]:
    """Write the synthetic catalog and `clusters` cluster definitions; returns (catalog, stacks dir)."""
    folder.mkdir(parents=True, exist_ok=True)
    catalog = folder / "gpu-catalog.yaml"
    catalog.write_text(yaml.safe_dump(synthetic_catalog(), sort_keys=False), encoding="utf-8")
    stacks = folder / "stacks"
    stacks.mkdir(exist_ok=True)
    for index in range(clusters):
        definition = synthetic_cluster(index)
        text = yaml.safe_dump(definition, sort_keys=False)
        (stacks / f"{definition['name']}.yaml").write_text(text, encoding="utf-8")
    return catalog, stacks


def edited_cluster(stacks: Path) -> tuple[Path, str]:
    """The one-cluster edit: cluster EDITED_CLUSTER's file with another kubeconfig context."""
    path = stacks / f"{cluster_name(EDITED_CLUSTER - 1)}.yaml"
    definition = yaml.safe_load(path.read_text(encoding="utf-8"))
    definition["access"]["kubeconfig"]["context"] += "-edited"
    return path, yaml.safe_dump(definition, sort_keys=False)


def edited_catalog(catalog: Path) -> tuple[Path, str]:
    """The catalog edit: the notebook form's name of one whole-GPU offering (every tenth cluster serves it)."""
    data = yaml.safe_load(catalog.read_text(encoding="utf-8"))
    data["offerings"][whole_offering_name(EDITED_OFFERING_PRODUCT)]["kubeflow"]["uiName"] += " (edited)"
    return catalog, yaml.safe_dump(data, sort_keys=False)


def whole_product(index: int) -> str:
    """The product of cluster `index`'s whole-GPU pool (rotating through the product table)."""
    from themelio_gpu.inputs.catalog.products import PRODUCTS

    return list(PRODUCTS)[index % len(PRODUCTS)]


def check_fleet(catalog: Path, stacks: Path, clusters: int) -> None:
    """Load the fleet as main.py does and check its shape; raises with every problem if it is invalid."""
    from themelio_gpu.inputs.problems import InputError
    from themelio_gpu.plan.fleet import load_fleet

    try:
        fleet = load_fleet(catalog, stacks)
    except InputError as error:
        raise SystemExit(f"the generated fleet is invalid:\n{error.render()}") from error
    if len(fleet.clusters) != clusters:
        raise SystemExit(f"expected {clusters} clusters, loaded {len(fleet.clusters)}")
    for plan in fleet.clusters:
        shape = (
            len(plan.offerings),
            len(plan.pools),
            [len(p.provisioning.static.nodes) for p in plan.definition.node_pools if p.provisioning.static],
        )
        if shape != (OFFERINGS_PER_CLUSTER, POOLS_PER_CLUSTER, [NODES_PER_POOL] * POOLS_PER_CLUSTER):
            raise SystemExit(f"{plan.name}: unexpected shape (offerings, pools, nodes per pool) {shape}")


# --- measuring one process tree -----------------------------------------------------------------------------


def _ppid_of(pid: int) -> int | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text.rpartition(")")[2].split()[1])


def _status(pid: int) -> dict[str, str]:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split(":", 1) for line in lines if ":" in line)


def _kib(value: str | None) -> int:
    return int(value.split()[0]) if value else 0


class TreeSampler(threading.Thread):
    """Reads the kernel's per-process peak RSS (VmHWM) of a process tree every `interval` seconds."""

    def __init__(self, root: int, interval: float = 0.1, rescan_every: int = 5) -> None:
        super().__init__(daemon=True, name="tree-sampler")
        self.root = root
        self.interval = interval
        self.rescan_every = rescan_every
        self.peaks: dict[int, tuple[str, int]] = {}
        self.rss_sum_max = 0
        self._pids: set[int] = {root}
        self._done = threading.Event()

    def _descendants(self) -> set[int]:
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                ppid = _ppid_of(int(entry.name))
                if ppid is not None:
                    children.setdefault(ppid, []).append(int(entry.name))
        found, todo = {self.root}, [self.root]
        while todo:
            for child in children.get(todo.pop(), []):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        return found

    def run(self) -> None:
        tick = 0
        while not self._done.is_set():
            if tick % self.rescan_every == 0:
                self._pids |= self._descendants()
            tick += 1
            rss_sum = 0
            for pid in list(self._pids):
                status = _status(pid)
                if "VmHWM" not in status:  # gone, or a zombie
                    continue
                name = status.get("Name", "?").strip()
                self.peaks[pid] = (name, max(_kib(status["VmHWM"]), self.peaks.get(pid, (name, 0))[1]))
                rss_sum += _kib(status.get("VmRSS"))
            self.rss_sum_max = max(self.rss_sum_max, rss_sum)
            self._done.wait(self.interval)

    def stop(self) -> None:
        self._done.set()
        self.join()


@dataclass
class Run:
    wall_s: float
    cpu_s: float
    """User + system time of the child and the descendants it waited for (Python and node)."""
    max_single_process_kib: int
    peaks_by_name_kib: dict[str, int]
    tree_peak_upper_bound_kib: int
    tree_rss_sampled_kib: int


def measure(command: Sequence[str], env: Mapping[str, str], errors: list[str] | None = None) -> Run:
    """Run `command` and measure it; its stderr is appended to `errors` when given."""
    with tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        process = subprocess.Popen(
            list(command), cwd=PROJECT_ROOT, env=dict(env), stdout=subprocess.DEVNULL, stderr=stderr
        )
        sampler = TreeSampler(process.pid)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        sampler.stop()
        if process.returncode != 0:
            stderr.seek(0)
            message = stderr.read().decode(errors="replace")[-4000:]
            raise SystemExit(f"{' '.join(command)} exited with {process.returncode}:\n{message}")
        if errors is not None:
            stderr.seek(0)
            errors.append(stderr.read().decode(errors="replace"))
    by_name: dict[str, int] = {}
    for name, peak in sampler.peaks.values():
        key = "python" if name.startswith("python") else name
        by_name[key] = by_name.get(key, 0) + peak
    return Run(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        max_single_process_kib=usage.ru_maxrss,  # KiB on Linux
        peaks_by_name_kib=dict(sorted(by_name.items())),
        tree_peak_upper_bound_kib=sum(peak for _, peak in sampler.peaks.values()),
        tree_rss_sampled_kib=sampler.rss_sum_max,
    )


# --- synthesized output -------------------------------------------------------------------------------------

_TOSET = re.compile(r"^\$\{toset\((\[.*\])\)\}$", re.DOTALL)


def for_each_instances(body: Mapping[str, Any]) -> int | None:
    """How many instances a resource block expands to; None when it cannot be told from the JSON."""
    if "for_each" in body:
        value = body["for_each"]
        if isinstance(value, dict | list):
            return len(value)
        match = _TOSET.match(value) if isinstance(value, str) else None
        if match is None:
            return None
        return len(set(json.loads(match.group(1))))
    count = body.get("count", 1)
    return count if isinstance(count, int) else None


@dataclass
class Output:
    stacks: int = 0
    resource_blocks: int = 0
    resource_instances: int = 0
    unknown_instance_counts: int = 0
    blocks_by_type: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    digest: str = ""


def inspect_output(outdir: Path) -> Output:
    result = Output()
    digest = hashlib.sha256()
    for path in sorted(p for p in outdir.rglob("*") if p.is_file()):
        data = path.read_bytes()
        result.bytes += len(data)
        digest.update(str(path.relative_to(outdir)).encode() + b"\0" + data)
        if path.name != "cdk.tf.json":
            continue
        result.stacks += 1
        for kind, blocks in json.loads(data).get("resource", {}).items():
            result.blocks_by_type[kind] = result.blocks_by_type.get(kind, 0) + len(blocks)
            for body in blocks.values():
                result.resource_blocks += 1
                instances = for_each_instances(body)
                if instances is None:
                    result.unknown_instance_counts += 1
                    instances = 1
                result.resource_instances += instances
    result.blocks_by_type = dict(sorted(result.blocks_by_type.items()))
    result.digest = digest.hexdigest()
    return result


# --- the benchmark ------------------------------------------------------------------------------------------


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "--no-optional-locks", *args],  # read-only: no index refresh
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()


def machine_info() -> dict[str, Any]:
    node = shutil.which("node")
    node_version = None
    if node:
        node_version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "python": platform.python_version(),
        "node": node_version,
        "platform": platform.platform(),
        "machine": platform.machine(),
        # Other work on the machine slows every figure; the ratios are what compare across runs.
        "load_average": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": None if status is None else bool(status),
        "source_digest": source_digest(),
    }


def source_digest() -> str:
    """SHA-256 of the app's code (main.py, themelio_gpu/): tells whether it changed while the benchmark ran."""
    digest = hashlib.sha256()
    for path in [PROJECT_ROOT / "main.py", *sorted((PROJECT_ROOT / "themelio_gpu").rglob("*.py"))]:
        digest.update(str(path.relative_to(PROJECT_ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _stats(runs: Sequence[Run]) -> dict[str, Any]:
    walls = [r.wall_s for r in runs]
    return {
        "wall_s_median": statistics.median(walls),
        "wall_s_min": min(walls),
        "wall_s_all": [round(w, 3) for w in walls],
        "cpu_s_median": statistics.median(r.cpu_s for r in runs),
        "memory_kib": {
            "max_single_process": max(r.max_single_process_kib for r in runs),
            "peaks_by_name": {
                name: max(r.peaks_by_name_kib.get(name, 0) for r in runs)
                for name in sorted({n for r in runs for n in r.peaks_by_name_kib})
            },
            "tree_peak_upper_bound": max(r.tree_peak_upper_bound_kib for r in runs),
            "tree_rss_sampled": max(r.tree_rss_sampled_kib for r in runs),
        },
    }


def _slope(points: Sequence[tuple[int, float]]) -> tuple[float, float] | None:
    """Least-squares (slope, intercept) of wall time over cluster count."""
    if len({n for n, _ in points}) < 2:
        return None
    xs, ys = [float(n) for n, _ in points], [t for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return slope, my - slope * mx


def goal(
    name: str,
    measure: str,
    value: float | None,
    limit: float,
    *,
    below: bool = False,
    digits: int = 2,
    details: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """One goal of README "Performance": `value` <= `limit` (< with `below`); ok is None when not measured."""
    ok = None if value is None else (value < limit if below else value <= limit)
    return {
        "name": name,
        "measure": measure,
        "value": value,
        "limit": limit,
        "strict": below,
        "ok": ok,
        "digits": digits,
        "details": dict(details or {}),
    }


def ratio(numerator: Mapping[str, Any], denominator: Mapping[str, Any]) -> dict[str, float]:
    """numerator / denominator of wall time, as the median of the ratios within each repetition.

    The two ran one after the other in every repetition, so a busy spell of the machine slows both; the
    ratios of medians, of the fastest runs and of CPU times are given beside it.
    """
    pairs = [a / b for a, b in zip(numerator["wall_s_all"], denominator["wall_s_all"], strict=True)]
    return {
        "median_of_paired": statistics.median(pairs),
        "of_medians": float(numerator["wall_s_median"]) / float(denominator["wall_s_median"]),
        "of_fastest": float(numerator["wall_s_min"]) / float(denominator["wall_s_min"]),
        "of_cpu": float(numerator["cpu_s_median"]) / float(denominator["cpu_s_median"]),
    }


def _pair_goal(
    name: str, by_size: Mapping[int, Mapping[str, Any]], sizes: tuple[int, int], limit: float
) -> dict[str, Any]:
    small, large = sizes
    measured = small in by_size and large in by_size
    figures = ratio(by_size[large], by_size[small]) if measured else None
    return goal(
        name,
        f"t({large} clusters) / t({small} cluster{'s' if small != 1 else ''})",
        None if figures is None else figures["median_of_paired"],
        limit,
        details=figures,
    )


def ablation(
    default: Mapping[str, Mapping[str, Any]], off: Mapping[str, Mapping[str, Mapping[str, Any]]]
) -> list[dict[str, Any]]:
    """Per speed-up: what switching it off alone costs on each ablation fleet, and whether it pays.

    `default`: fleet -> figures of the default run; `off`: speed-up -> fleet -> figures with it off. The
    saving is the share of CPU the speed-up saves: 1 - on/off, from the medians of the CPU times.
    """
    from themelio_gpu.speedups import INTERNALS, Speedup

    rows = []
    for name, fleets in off.items():
        speedup = Speedup(name)
        per_fleet = {}
        for fleet, figures in fleets.items():
            base = default[fleet]
            per_fleet[fleet] = {
                "wall_s_median": figures["wall_s_median"],
                "cpu_s_median": figures["cpu_s_median"],
                "wall_ratio": ratio(figures, base)["median_of_paired"],
                "cpu_saved_share": 1 - float(base["cpu_s_median"]) / float(figures["cpu_s_median"]),
                "same_output": figures["output"]["digest"] == base["output"]["digest"],
            }
        best = max(f["cpu_saved_share"] for f in per_fleet.values())
        internals = INTERNALS.get(speedup)
        rows.append(
            {
                "speedup": name,
                "relies_on": internals or "public API only",
                "fleets": per_fleet,
                "best_cpu_saved_share": best,
                # Public API may stay for less; internals must pay for the risk they bring.
                "pays": best >= PAYS_SHARE if internals else None,
                "same_output": all(f["same_output"] for f in per_fleet.values()),
            }
        )
    return rows


def _edit_goals(edits: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The incremental goals: the one-cluster edit's time, and that each edit wrote and listed exactly the
    stacks it changes."""
    one, catalog = edits["one_cluster"], edits["catalog"]
    figures = ratio(one, edits["one_cluster_fleet"])
    goals = [
        goal(
            "edit",
            f"t(synth after a one-cluster edit of {EDIT_FLEET_SIZE} clusters) / t(synth of a one-cluster fleet)",
            figures["median_of_paired"],
            GOAL_EDIT_RATIO,
            details=figures,
        )
    ]
    for name, item in (("edit-listed", one), ("catalog-edit-listed", catalog)):
        expected = len(item["expected"])
        exact = item["listed_by_changed"] == [item["expected"]] and item["stack_files_rewritten"] == [expected]
        goals.append(
            {
                "name": name,
                "measure": f"stacks written and listed by `changed --format json` (expected exactly {expected})",
                "value": float(max(item["stack_files_rewritten"], default=0)),
                "limit": float(expected),
                "strict": False,
                "ok": exact,
                "digits": 0,
                "details": {},
            }
        )
    return goals


def _changed_goals(changed: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The goals of `changed --base-ref`: the one-cluster edit's time and memory, and what each scenario
    synthesized, listed and said."""
    one = changed["one_cluster"]
    figures = ratio(one, changed["one_cluster_fleet"])
    peak = int(one["memory_kib"]["tree_peak_upper_bound"])
    goals = [
        goal(
            "changed",
            f"t(changed --base-ref --head, one-cluster edit of {EDIT_FLEET_SIZE} clusters) / t(synth of a one-cluster fleet)",
            figures["median_of_paired"],
            GOAL_CHANGED_RATIO,
            details=figures,
        ),
        goal(
            "changed-memory",
            "peak MiB of that changed (every process's peak, summed)",
            peak / 1024,
            GOAL_CHANGED_MEMORY_KIB / 1024,
            digits=0,
        ),
    ]
    one_expected, catalog_expected = one["expected"], changed["catalog"]["expected"]
    tool = changed["tool"]
    checks = [
        (
            "changed-edit-listed",
            f"stacks listed (expected exactly {len(one_expected)}), and synthesized here: the base's alone",
            max((len(listed) for listed in one["listed"]), default=0),
            one["listed"] == [one_expected]
            and all(c == {"base": len(one_expected)} for c in one["synthesized"])
            and not any(one["base_by_its_own_code"]),
        ),
        (
            "changed-catalog-listed",
            f"stacks listed, and synthesized on each side (expected exactly {len(catalog_expected)})",
            max((len(listed) for listed in changed["catalog"]["listed"]), default=0),
            changed["catalog"]["listed"] == [catalog_expected]
            and all(
                c == {"base": len(catalog_expected), "head": len(catalog_expected)}
                for c in changed["catalog"]["synthesized"]
            ),
        ),
        (
            "changed-tool",
            f"stacks compared, the base synthesized by its own code, the report saying why (expected "
            f"{tool['expected_stacks']})",
            max(tool["stacks"], default=0),
            tool["stacks"] == [tool["expected_stacks"]]
            and all(tool["base_by_its_own_code"])
            and len(tool["notes"]) == 1
            and tool["notes"][0].startswith("every stack compared")
            and "the tool differs" in tool["notes"][0],
        ),
    ]
    limits = {"changed-edit-listed": len(one_expected), "changed-catalog-listed": len(catalog_expected)}
    for name, promise, value, kept in checks:
        goals.append(
            {
                "name": name,
                "measure": promise,
                "value": float(value),
                "limit": float(limits.get(name, tool["expected_stacks"])),
                "strict": False,
                "ok": kept,
                "digits": 0,
                "details": {},
            }
        )
    return goals


def derive(
    floors: Mapping[str, Mapping[str, Any]],
    example: Mapping[str, Any],
    sizes: Sequence[dict[str, Any]],
    ablated: list[dict[str, Any]] | None = None,
    edits: Mapping[str, Mapping[str, Any]] | None = None,
    changed: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The goals, as ratios within this run, and the per-cluster figures behind them.

    `floors`: "cdktf" (python -c "import cdktf") and "app" (the app's import floor); `example`: the example
    fleet's `python main.py`; `sizes`: one entry per fleet size, smallest first. Each has the wall times
    of its runs in repetition order (`wall_s_all`), their median and minimum, and the median CPU time.
    `ablated`: the ablation's rows (see `ablation`).
    """
    t_floor, cpu_floor = float(floors["app"]["wall_s_median"]), float(floors["app"]["cpu_s_median"])
    for item in sizes:
        beyond = float(item["wall_s_median"]) - t_floor
        item["derived"].update(
            {
                "beyond_floor_s": beyond,
                "per_cluster_beyond_floor_ms": 1000 * beyond / item["clusters"],
                "per_resource_block_beyond_floor_ms": 1000 * beyond / max(item["output"]["resource_blocks"], 1),
                # CPU time (Python + node) is far less sensitive to a busy machine than wall time.
                "cpu_per_cluster_beyond_floor_ms": 1000
                * (float(item["cpu_s_median"]) - cpu_floor)
                / item["clusters"],
            }
        )
    by_size = {int(s["clusters"]): s for s in sizes}
    example_ratio = ratio(example, floors["cdktf"])
    memory = by_size.get(GOAL_MEMORY_SIZE)
    goals = [
        goal(
            "example",
            f'python main.py (example fleet) / python -c "{engine_import()}"',
            example_ratio["median_of_paired"],
            GOAL_EXAMPLE_RATIO,
            details=example_ratio,
        ),
        _pair_goal("scaling", by_size, GOAL_SCALING_SIZES, GOAL_SCALING_RATIO),
        _pair_goal("linear", by_size, GOAL_LINEAR_SIZES, GOAL_LINEAR_RATIO),
        goal(
            "memory",
            f"peak MiB of the {GOAL_MEMORY_SIZE}-cluster synthesis (every process's peak, summed)",
            None if memory is None else int(memory["memory_kib"]["tree_peak_upper_bound"]) / 1024,
            GOAL_MEMORY_KIB / 1024,
            digits=0,
        ),
        *(_edit_goals(edits) if edits is not None else []),
        *(_changed_goals(changed) if changed is not None else []),
    ]
    rows = ablated or []
    derived: dict[str, Any] = {
        "goals": goals,
        "all_goals_met": all(g["ok"] for g in goals),
        "identical_output_across_repeats": all(s["output_identical_across_repeats"] for s in [example, *sizes]),
        "ablation": rows,
        "every_speedup_same_output": all(r["same_output"] for r in rows),
        "every_speedup_on_internals_pays": all(r["pays"] is not False for r in rows),
    }
    fit = _slope([(int(s["clusters"]), float(s["wall_s_median"])) for s in sizes])
    if fit is not None:
        derived["marginal_s_per_cluster"], derived["fitted_fixed_s"] = fit
        derived["fitted_fixed_beyond_floor_s"] = fit[1] - t_floor
    return derived


def render_goal(item: Mapping[str, Any]) -> str:
    if item["value"] is None:
        return f"goal {item['name']}: {item['measure']} not measured (needs those --sizes)"
    verdict = "met" if item["ok"] else "MISSED"
    relation = "<" if item["strict"] else "<="
    value = f"{item['value']:.{item['digits']}f}"
    line = f"goal {item['name']}: {item['measure']} = {value} ({relation} {item['limit']:g}: {verdict})"
    if item["details"]:
        d = item["details"]
        line += (
            f"\n  median of the ratios within each repetition; of medians {d['of_medians']:.2f}, "
            f"of the fastest runs {d['of_fastest']:.2f}, of CPU times {d['of_cpu']:.2f}"
        )
    return line


def _mib(kib: int) -> str:
    return f"{kib / 1024:.0f}"


def _run_line(label: str, item: Mapping[str, Any]) -> str:
    peaks = item["memory_kib"]["peaks_by_name"]
    return (
        f"{label}: {item['wall_s_median']:.2f} s wall (runs {', '.join(f'{w:.2f}' for w in item['wall_s_all'])}), "
        f"{item['cpu_s_median']:.2f} s CPU, peak python {_mib(peaks.get('python', 0))} MiB "
        f"+ node {_mib(peaks.get('node', 0))} MiB"
    )


def _columns(rows: Sequence[Sequence[str]], left: int = 0) -> list[str]:
    """Rows as aligned columns (the first `left` columns left-aligned), a rule under the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for index, row in enumerate(rows):
        cells = [c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def render_ablation(rows: Sequence[Mapping[str, Any]], fleets: Sequence[str]) -> list[str]:
    header = ["speed-up switched off", *(f"{f}: wall s, CPU s, saves" for f in fleets), "relies on", "verdict"]
    table: list[Sequence[str]] = [header]
    for row in rows:
        cells = [row["speedup"]]
        for fleet in fleets:
            f = row["fleets"][fleet]
            cells.append(f"{f['wall_s_median']:.2f}, {f['cpu_s_median']:.2f}, {100 * f['cpu_saved_share']:.0f} %")
        verdict = {True: "pays", False: "DOES NOT PAY", None: "public API"}[row["pays"]]
        if not row["same_output"]:
            verdict += "; OUTPUT DIFFERS"
        cells += [row["relies_on"], verdict]
        table.append(cells)
    return _columns(table, left=1)


def render_table(result: Mapping[str, Any]) -> str:
    machine, floors, sizes, derived = result["machine"], result["floors"], result["sizes"], result["derived"]
    commit = (machine["git_commit"] or "unknown")[:12] + (" (dirty)" if machine["git_dirty"] else "")
    lines = [
        f"Synthesis benchmark  {machine['date']}  {machine['cpu_count']} CPUs  Python {machine['python']}  "
        f"node {machine['node']}  commit {commit}  load average {machine['load_average']}",
        f"repeats: {result['settings']['repeat']} (medians); cluster: {OFFERINGS_PER_CLUSTER} offerings, "
        f"{POOLS_PER_CLUSTER} static pools x {NODES_PER_POOL} nodes",
        "",
        _run_line(f'python -c "{engine_import()}"', floors["cdktf"]),
        _run_line("app import floor", floors["app"]),
        _run_line("example fleet (python main.py)", result["example"]),
        "",
    ]
    header = (
        "clusters", "wall s", "min s", "CPU s", "beyond floor s", "ms/cluster", "CPU ms/cluster", "blocks",
        "instances", "ms/block", "py MiB", "node MiB", "tree MiB", "output MiB",
    )  # fmt: skip
    rows: list[Sequence[str]] = [header]
    for s in sizes:
        mem, out, d = s["memory_kib"], s["output"], s["derived"]
        rows.append(
            (
                str(s["clusters"]),
                f"{s['wall_s_median']:.2f}",
                f"{s['wall_s_min']:.2f}",
                f"{s['cpu_s_median']:.2f}",
                f"{d['beyond_floor_s']:.2f}",
                f"{d['per_cluster_beyond_floor_ms']:.0f}",
                f"{d['cpu_per_cluster_beyond_floor_ms']:.0f}",
                str(out["resource_blocks"]),
                str(out["resource_instances"]),
                f"{d['per_resource_block_beyond_floor_ms']:.1f}",
                _mib(mem["peaks_by_name"].get("python", 0)),
                _mib(mem["peaks_by_name"].get("node", 0)),
                _mib(mem["tree_peak_upper_bound"]),
                f"{out['bytes'] / MIB:.2f}",
            )
        )
    lines += _columns(rows)
    lines.append("")
    if "changed" in result:
        lines += [*render_changed(result["changed"]), ""]
    lines.extend(render_goal(g) for g in derived["goals"])
    if "marginal_s_per_cluster" in derived:
        lines.append(
            f"fit: {1000 * derived['marginal_s_per_cluster']:.0f} ms per cluster, fixed {derived['fitted_fixed_s']:.2f} s "
            f"({derived['fitted_fixed_beyond_floor_s']:+.2f} s beyond the app import floor)"
        )
    lines.append(
        "output identical across repeats: " + ("yes" if derived["identical_output_across_repeats"] else "NO")
    )
    if derived["ablation"]:
        lines += [
            "",
            f"ablation (each speed-up off alone; saves = share of CPU it saves; {result['settings']['engine']}):",
        ]
        lines += render_ablation(derived["ablation"], result["settings"]["ablation_fleets"])
        for note in result.get("ablation_notes", []):
            lines.append(f"note: {note}")
    if result["source_changed_during_run"]:
        lines.append("WARNING: main.py or themelio_gpu/ changed while the benchmark ran; the figures mix versions")
    return "\n".join(lines)


def parse_sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"--sizes takes numbers like 1,10,50,100: {error}") from error
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("--sizes needs at least one count of clusters, each >= 1")
    return sizes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=DEFAULT_SIZES,
        help="fleet sizes, comma-separated (default 1,10,100,1000)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; medians are reported")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="JSON results (default bench-results/benchmark.json)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated fleets and one output per size")
    parser.add_argument(
        "--only",
        choices=["changed"],
        help="changed: only the goals of `changed --base-ref` (default JSON bench-results/benchmark-changed.json)",
    )
    return parser


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def child_env() -> dict[str, str]:
    """The environment of the measured processes: the user's, with every speed-up on (the default path)."""
    from themelio_gpu.speedups import ENV

    env = {**os.environ, **CHILD_ENV}
    for name in ("CDKTF_OUTDIR", ENV):
        env.pop(name, None)
    return env


class Series:
    """Repeated runs of one command that synthesizes (or not) into an output folder."""

    def __init__(
        self, command: Sequence[str], outdir: Path | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        self.command, self.outdir, self.env = list(command), outdir, dict(env or {})
        self.runs: list[Run] = []
        self.output: Output | None = None
        self.digests: set[str] = set()

    def run(self, env: Mapping[str, str], rep: int) -> Run:
        outdir = None if self.outdir is None else self.outdir.with_name(f"{self.outdir.name}-{rep}")
        command = [*self.command, *(["--outdir", str(outdir), "--quiet"] if outdir else [])]
        run = measure(command, {**env, **self.env})
        self.runs.append(run)
        if outdir is not None:
            output = inspect_output(outdir)
            self.digests.add(output.digest)
            if self.output is None:
                self.output = output
            shutil.rmtree(outdir)
        return run

    def stats(self) -> dict[str, Any]:
        result = _stats(self.runs)
        if self.output is not None:
            result["output"] = asdict(self.output)
            result["output_identical_across_repeats"] = len(self.digests) == 1
        return result


class EditSeries(Series):
    """Synthesis after an edit of a fleet synthesized before: each run starts from a copy of that output,
    applies the edit, runs `main.py` (incremental) into the copy, then asks `changed --format json` (untimed)
    which stacks changed and counts the stack files that were written again."""

    def __init__(self, command: Sequence[str], base: Path, edit: tuple[Path, str]) -> None:
        super().__init__(command)
        self.base, (self.file, self.edited) = base, edit
        self.listed: set[tuple[str, ...]] = set()
        self.rewritten: set[int] = set()

    def run(self, env: Mapping[str, str], rep: int) -> Run:
        outdir = self.base.with_name(f"{self.base.name}-edit-{rep}")
        shutil.copytree(self.base, outdir, copy_function=shutil.copy2)
        inodes = {p: p.stat().st_ino for p in outdir.glob("stacks/*/cdk.tf.json")}
        text = self.file.read_text(encoding="utf-8")
        self.file.write_text(self.edited, encoding="utf-8")
        try:
            run = measure([*self.command, "--outdir", str(outdir), "--quiet"], {**env, **self.env})
        finally:
            self.file.write_text(text, encoding="utf-8")
        self.runs.append(run)
        self.rewritten.add(sum(1 for p, inode in inodes.items() if not p.exists() or p.stat().st_ino != inode))
        report = subprocess.run(
            [
                sys.executable,
                "-m",
                "themelio_gpu",
                "changed",
                "--base",
                str(self.base),
                "--head",
                str(outdir),
                "--format",
                "json",
            ],
            cwd=PROJECT_ROOT,
            env=dict(env),
            capture_output=True,
            text=True,
            check=True,
        )
        stacks = json.loads(report.stdout)["stacks"]
        self.listed.add(tuple(sorted(s["name"] for s in stacks if s["status"] != "unchanged")))
        shutil.rmtree(outdir)
        return run

    def stats(self) -> dict[str, Any]:
        result = _stats(self.runs)
        result["listed_by_changed"] = [list(listed) for listed in sorted(self.listed)]
        result["stack_files_rewritten"] = sorted(self.rewritten)
        return result


_SYNTHESIZING = re.compile(r"^changed: synthesizing (\d+) stacks? of (.*)$", re.MULTILINE)
_OWN_CODE = "with its own code"
"""What `changed` says when it synthesizes the base commit whole, by its own code."""


def changed_repository(folder: Path, catalog: Path, stacks: Path, *, other_tool: bool = False) -> Path:
    """A git repository of one commit: this checkout's tool (themelio_gpu/, main.py, Pipfile.lock) and the
    fleet (catalog/gpu-catalog.yaml, stacks/). `other_tool`: the commit's code has a comment more, so its tool
    differs from this checkout's."""
    shutil.copytree(
        PROJECT_ROOT / "themelio_gpu", folder / "themelio_gpu", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("main.py", "Pipfile.lock"):
        shutil.copy(PROJECT_ROOT / name, folder / name)
    if other_tool:
        marker = folder / "themelio_gpu" / "__init__.py"
        marker.write_text(marker.read_text(encoding="utf-8") + "# another tool\n", encoding="utf-8")
    (folder / "catalog").mkdir()
    shutil.copy(catalog, folder / "catalog" / "gpu-catalog.yaml")
    shutil.copytree(stacks, folder / "stacks")
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.name=bench", "-c", "user.email=bench@example.com", "commit", "-q", "-m", "fleet"],
    ):
        subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)
    return folder


class ChangedSeries(Series):
    """`changed --base-ref HEAD` in a repository of a fleet (changed_repository), its edit applied to the work
    tree while it runs. Each run starts with an empty cache (`warm`: the cache of the runs before, filled once
    before the first), and no default output folder. It reads back which stacks the report lists, what it
    notes, and how many stacks `changed` synthesized itself on each side (its progress lines)."""

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
        catalog, stacks = repo / "catalog" / "gpu-catalog.yaml", repo / "stacks"
        command = [
            sys.executable,
            "-m",
            "themelio_gpu",
            "changed",
            "--catalog",
            str(catalog),
            "--stacks-dir",
            str(stacks),
        ]
        super().__init__([*command, "--base-ref", "HEAD", *extra])
        self.edit, self.work, self.warm = edit, work, warm
        self.name = name
        self.listed: set[tuple[str, ...]] = set()
        self.synthesized: list[dict[str, int]] = []
        self.own_code: list[bool] = []
        self.notes: set[str] = set()
        self.stacks: set[int] = set()
        self.warmed = False

    def _cache(self, rep: int) -> Path:
        return self.work / f"changed-cache-{self.name}" / ("warm" if self.warm else f"run-{rep}")

    def run(self, env: Mapping[str, str], rep: int) -> Run:
        if self.warm and not self.warmed:
            self.warmed = True
            self._run(env, 0)  # fills the cache
        run = self._run(env, rep)
        self.runs.append(run)
        return run

    def _run(self, env: Mapping[str, str], rep: int) -> Run:
        from themelio_gpu.changes.cache import CACHE_ENV

        report, matrix = self.work / f"changed-{self.name}-{rep}.txt", self.work / f"matrix-{self.name}-{rep}.json"
        outputs = ["--format", f"text={report}", "--format", f"github-matrix={matrix}"]
        run_env = {**env, CACHE_ENV: str(self._cache(rep)), "CDKTF_OUTDIR": str(self.work / "no-output-folder")}
        original = self.edit[0].read_text(encoding="utf-8") if self.edit else None
        errors: list[str] = []
        try:
            if self.edit:
                self.edit[0].write_text(self.edit[1], encoding="utf-8")
            run = measure([*self.command, *outputs], run_env, errors)
        finally:
            if self.edit and original is not None:
                self.edit[0].write_text(original, encoding="utf-8")
        if rep > 0:
            self.listed.add(
                tuple(sorted(s["stack"] for s in json.loads(matrix.read_text(encoding="utf-8"))["include"]))
            )
            text = report.read_text(encoding="utf-8")
            self.notes.update(
                line.removeprefix("note: ") for line in text.splitlines() if line.startswith("note: ")
            )
            self.stacks.add(int(text.splitlines()[-1].split(" stack")[0]))
            counts: dict[str, int] = {}
            for number, label in _SYNTHESIZING.findall(errors[0]):
                side = "base" if label.startswith("git ") else "head"
                counts[side] = counts.get(side, 0) + int(number)
            self.synthesized.append(counts)
            self.own_code.append(_OWN_CODE in errors[0])
        if not self.warm:
            shutil.rmtree(self._cache(rep), ignore_errors=True)
        return run

    def stats(self) -> dict[str, Any]:
        result = _stats(self.runs)
        result["listed"] = [list(listed) for listed in sorted(self.listed)]
        result["synthesized"] = self.synthesized  # per run and side (base, head): stacks synthesized here
        result["base_by_its_own_code"] = self.own_code  # per run: the base synthesized whole by its commit's code
        result["notes"] = sorted(self.notes)
        result["stacks"] = sorted(self.stacks)
        return result


def changed_series(
    work: Path,
    env: Mapping[str, str],
    edit_fleet: tuple[Path, Path],
    edit_base: Path,
    tool_fleet: tuple[Path, Path],
) -> dict[str, Series]:
    """The `changed --base-ref` scenarios (ChangedSeries), and what they need, made untimed: a repository of the
    1,000-cluster fleet; the head the generated pipeline synthesizes before it runs `changed` (`main.py` with the
    one-cluster edit, from `edit_base`, that fleet synthesized); a repository of the tool-change fleet whose commit
    has another tool, and its head."""
    python = sys.executable
    repo = changed_repository(work / "changed-fleet", *edit_fleet)
    catalog, stacks = repo / "catalog" / "gpu-catalog.yaml", repo / "stacks"
    one, catalog_edit = edited_cluster(stacks), edited_catalog(catalog)
    head = work / "changed-head"
    shutil.copytree(edit_base, head, copy_function=shutil.copy2)
    original = one[0].read_text(encoding="utf-8")
    one[0].write_text(one[1], encoding="utf-8")
    try:
        main_py = [python, "main.py", "--catalog", str(catalog), "--stacks-dir", str(stacks)]
        measure([*main_py, "--outdir", str(head), "--quiet"], env)
    finally:
        one[0].write_text(original, encoding="utf-8")
    tool_repo = changed_repository(work / "changed-tool", *tool_fleet, other_tool=True)
    tool_head = work / "changed-tool-head"
    tool_inputs = [
        "--catalog",
        str(tool_repo / "catalog" / "gpu-catalog.yaml"),
        "--stacks-dir",
        str(tool_repo / "stacks"),
    ]
    measure([python, "main.py", *tool_inputs, "--outdir", str(tool_head), "--quiet"], env)
    return {
        "changed:one-cluster": ChangedSeries("one-cluster", repo, ["--head", str(head)], one, work),
        "changed:one-cluster:no-head": ChangedSeries("no-head", repo, [], one, work),
        "changed:one-cluster:no-head-warm": ChangedSeries("no-head-warm", repo, [], one, work, warm=True),
        "changed:catalog": ChangedSeries("catalog", repo, [], catalog_edit, work),
        "changed:tool": ChangedSeries("tool", tool_repo, ["--head", str(tool_head)], None, work),
    }


def changed_figures(series: Mapping[str, Series]) -> dict[str, Any]:
    """The `changed` scenarios' figures, with what each is expected to list."""
    return {
        "one_cluster_fleet": series["1"].stats(),
        "one_cluster": {**series["changed:one-cluster"].stats(), "expected": [cluster_name(EDITED_CLUSTER - 1)]},
        "one_cluster_no_head": series["changed:one-cluster:no-head"].stats(),
        "one_cluster_no_head_warm": series["changed:one-cluster:no-head-warm"].stats(),
        "catalog": {
            **series["changed:catalog"].stats(),
            "expected": [
                cluster_name(i) for i in range(EDIT_FLEET_SIZE) if whole_product(i) == EDITED_OFFERING_PRODUCT
            ],
        },
        "tool": {**series["changed:tool"].stats(), "expected_stacks": CHANGED_TOOL_FLEET_SIZE},
    }


def render_changed(changed: Mapping[str, Mapping[str, Any]]) -> list[str]:
    lines = [f"changed --base-ref HEAD, {EDIT_FLEET_SIZE} clusters (each run with an empty cache unless warm):"]
    for key, label in (
        ("one_cluster", "one-cluster edit, --head (as the generated pipeline runs it)"),
        ("one_cluster_no_head", "one-cluster edit, no --head (the head's files checked and planned)"),
        ("one_cluster_no_head_warm", "one-cluster edit, no --head, warm cache"),
        ("catalog", f"catalog edit served by {len(changed['catalog']['expected'])} clusters, no --head"),
        ("tool", f"another tool in the base commit, {CHANGED_TOOL_FLEET_SIZE} clusters, --head"),
    ):
        lines.append("  " + _run_line(label, changed[key]))
    return lines


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


def run_interleaved(series: dict[str, Series], env: Mapping[str, str], repeat: int) -> None:
    for rep in range(1, repeat + 1):
        # Interleaved, alternating the order, so that a busy spell of the machine spreads over all figures.
        for name, item in series.items() if rep % 2 else reversed(series.items()):
            run = item.run(env, rep)
            _progress(f"[{rep}/{repeat}] {name}: {run.wall_s:.2f} s")


def run_changed_benchmark(repeat: int, work: Path) -> dict[str, Any]:
    """`--only changed`: the `changed` goals alone, with the one-cluster fleet's synthesis they compare with."""
    env = child_env()
    python = sys.executable
    edit_fleet = write_fleet(work / "fleet-edits", EDIT_FLEET_SIZE)
    tool_fleet = write_fleet(work / f"fleet-{CHANGED_TOOL_FLEET_SIZE}", CHANGED_TOOL_FLEET_SIZE)
    one_fleet = write_fleet(work / "fleet-1", 1)
    for fleet, n in ((edit_fleet, EDIT_FLEET_SIZE), (tool_fleet, CHANGED_TOOL_FLEET_SIZE), (one_fleet, 1)):
        check_fleet(*fleet, n)
    base = work / "out-edits-base"
    _progress(f"synthesizing the {EDIT_FLEET_SIZE}-cluster fleet once (untimed)")
    fleet_inputs = ["--catalog", str(edit_fleet[0]), "--stacks-dir", str(edit_fleet[1])]
    measure([python, "main.py", *fleet_inputs, "--outdir", str(base), "--quiet"], env)
    changed = changed_series(work, env, edit_fleet, base, tool_fleet)
    one_inputs = ["--catalog", str(one_fleet[0]), "--stacks-dir", str(one_fleet[1])]
    series: dict[str, Series] = {
        "1": Series([python, "main.py", *one_inputs], work / "out-1"),
        "changed:one-cluster": changed.pop("changed:one-cluster"),
        **changed,
    }
    measure([python, "-c", FLOOR_IMPORTS], env)  # warm-up: page cache, jsii's assembly cache
    run_interleaved(series, env, repeat)
    figures = changed_figures(series)
    goals = _changed_goals(figures)
    return {"changed": figures, "derived": {"goals": goals, "all_goals_met": all(g["ok"] for g in goals)}}


def render_changed_only(result: Mapping[str, Any]) -> str:
    machine = result["machine"]
    commit = (machine["git_commit"] or "unknown")[:12] + (" (dirty)" if machine["git_dirty"] else "")
    lines = [
        f"changed benchmark  {machine['date']}  {machine['cpu_count']} CPUs  Python {machine['python']}  "
        f"node {machine['node']}  commit {commit}  load average {machine['load_average']}",
        f"repeats: {result['settings']['repeat']} (medians)",
        "",
        _run_line("one-cluster fleet (python main.py)", result["changed"]["one_cluster_fleet"]),
        *render_changed(result["changed"]),
        "",
        *(render_goal(g) for g in result["derived"]["goals"]),
    ]
    if result["source_changed_during_run"]:
        lines.append("WARNING: main.py or themelio_gpu/ changed while the benchmark ran; the figures mix versions")
    return "\n".join(lines)


def run_benchmark(sizes: Sequence[int], repeat: int, work: Path) -> dict[str, Any]:
    from themelio_gpu.engine import selected
    from themelio_gpu.speedups import ENV

    env = child_env()
    python = sys.executable
    fleets: dict[int, tuple[Path, Path]] = {}
    for n in sorted({*sizes, ABLATION_SIZE, CHANGED_TOOL_FLEET_SIZE}):
        fleets[n] = write_fleet(work / f"fleet-{n}", n)
        check_fleet(*fleets[n], n)
    _progress(f"generated fleets of {', '.join(map(str, fleets))} clusters in {work}")

    def synth(catalog: Path, stacks: Path, name: str, speedup_off: str | None = None) -> Series:
        command = [python, "main.py", "--catalog", str(catalog), "--stacks-dir", str(stacks)]
        return Series(command, work / name, {ENV: speedup_off} if speedup_off else None)

    ablation_fleets = {"example": (EXAMPLE_CATALOG, EXAMPLE_STACKS), str(ABLATION_SIZE): fleets[ABLATION_SIZE]}
    speedups, notes = ablated_speedups(selected().name)
    # Each goal's two commands run one after the other (either order), so a busy spell slows both.
    series: dict[str, Series] = {
        "cdktf": Series([python, "-c", engine_import()]),
        "example": synth(EXAMPLE_CATALOG, EXAMPLE_STACKS, "out-example"),
        **{str(n): synth(*fleets[n], f"out-{n}") for n in sizes},
        "app": Series([python, "-c", FLOOR_IMPORTS]),
    }
    if str(ABLATION_SIZE) not in series:
        series[str(ABLATION_SIZE)] = synth(*fleets[ABLATION_SIZE], f"out-{ABLATION_SIZE}")
    for speedup in speedups:
        for fleet, (catalog, stacks) in ablation_fleets.items():
            series[f"off:{speedup}:{fleet}"] = synth(catalog, stacks, f"out-off-{speedup}-{fleet}", speedup)
    # The incremental goals: a fleet synthesized once (untimed), then edited; the one-cluster edit runs right
    # after the one-cluster fleet it is compared with.
    edit_catalog, edit_stacks = write_fleet(work / "fleet-edits", EDIT_FLEET_SIZE)
    base = work / "out-edits-base"
    measure(
        [
            python,
            "main.py",
            "--catalog",
            str(edit_catalog),
            "--stacks-dir",
            str(edit_stacks),
            "--outdir",
            str(base),
            "--quiet",
        ],
        env,
    )
    edit_command = [python, "main.py", "--catalog", str(edit_catalog), "--stacks-dir", str(edit_stacks)]
    one_cluster = series.pop("1", None) or synth(*write_fleet(work / "fleet-1-edits", 1), "out-1-edits")
    changed = changed_series(work, env, (edit_catalog, edit_stacks), base, fleets[CHANGED_TOOL_FLEET_SIZE])
    series = {
        "1": one_cluster,
        "changed:one-cluster": changed.pop("changed:one-cluster"),
        "edit:one-cluster": EditSeries(edit_command, base, edited_cluster(edit_stacks)),
        **series,
        "edit:catalog": EditSeries(edit_command, base, edited_catalog(edit_catalog)),
        **changed,
    }
    measure(series["app"].command, env)  # warm-up: page cache, jsii's assembly cache
    run_interleaved(series, env, repeat)

    floors = {name: series[name].stats() for name in ("cdktf", "app")}
    example = series["example"].stats()
    size_results = [{"clusters": n, **series[str(n)].stats(), "derived": {}} for n in sizes]
    default = {"example": example, str(ABLATION_SIZE): series[str(ABLATION_SIZE)].stats()}
    off = {s: {f: series[f"off:{s}:{f}"].stats() for f in ablation_fleets} for s in speedups}
    edits = {
        "one_cluster": {**series["edit:one-cluster"].stats(), "expected": [cluster_name(EDITED_CLUSTER - 1)]},
        "catalog": {
            **series["edit:catalog"].stats(),
            "expected": [
                cluster_name(i) for i in range(EDIT_FLEET_SIZE) if whole_product(i) == EDITED_OFFERING_PRODUCT
            ],
        },
        "one_cluster_fleet": series["1"].stats(),
    }
    return {
        "floors": floors,
        "example": example,
        "sizes": size_results,
        "ablation_notes": notes,
        "edits": edits,
        "changed": changed_figures(series),
        "derived": derive(floors, example, size_results, ablation(default, off), edits, changed_figures(series)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    from themelio_gpu.engine import selected

    args = build_parser().parse_args(argv)
    if args.repeat < 1:
        raise SystemExit("--repeat must be at least 1")
    machine = machine_info()  # before the runs: the commit and code measured
    work = Path(tempfile.mkdtemp(prefix="themelio-bench-"))
    try:
        measured = (
            run_changed_benchmark(args.repeat, work)
            if args.only == "changed"
            else run_benchmark(args.sizes, args.repeat, work)
        )
    finally:
        if args.keep:
            _progress(f"kept the generated fleets and outputs in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    result = {
        "schema": 4,
        "machine": machine,
        "source_changed_during_run": source_digest() != machine["source_digest"],
        "settings": {
            "sizes": list(args.sizes),
            "only": args.only,
            "repeat": args.repeat,
            "cdktf_command": f"python -c '{engine_import()}'",
            "floor_command": f"python -c '{FLOOR_IMPORTS}'",
            "example_command": "python main.py --catalog catalog/gpu-catalog.yaml --stacks-dir stacks --outdir <tmp> --quiet",
            "synth_command": "python main.py --catalog <cat> --stacks-dir <dir> --outdir <tmp> --quiet",
            "ablation_command": "THEMELIO_SPEEDUPS_OFF=<speed-up> <synth_command>",
            "ablation_fleets": ["example", str(ABLATION_SIZE)],
            "engine": selected().describe(),
            "cluster_shape": {
                "offerings": OFFERINGS_PER_CLUSTER,
                "pools": POOLS_PER_CLUSTER,
                "nodes_per_pool": NODES_PER_POOL,
                "kubernetes_version": KUBERNETES_VERSION,
                "backend": "local",
                "access": "kubeconfig",
                "catalog_config_map": True,
            },
        },
        **measured,
    }
    print(render_changed_only(result) if args.only == "changed" else render_table(result))
    out: Path = args.out
    if args.only == "changed" and out == DEFAULT_OUT:
        out = DEFAULT_OUT.with_name("benchmark-changed.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
