"""NFD's worker, where its pod is placed: the labels it would publish land on the nodes its DaemonSet reaches.

The stack installs Node Feature Discovery with the GPU Operator; its worker DaemonSet is placed by the real
DaemonSet controller and scheduler (its tolerations and affinity as the chart renders them), and kwok marks its
pods Running. The worker itself cannot run: it reads a node's PCI devices and os-release, which a simulated node
does not have. So this component stands in for what it would find, and only where it would find it: once an NFD
worker pod is bound to a node, that node gets NFD's labels (`nodes.NFD_GPU_NODE` on a GPU node: its NVIDIA PCI
device, OS and kernel; the OS and kernel on another), written with the field manager `MANAGER` so that `down`
lists them apart (they stay after uninstall, as NFD's do without its prune job). A node the worker never reaches
(a taint it does not tolerate) gets none, and then neither the GPU Operator nor the DRA driver's DaemonSets
select it: what verify predicts, and what a real cluster does.

Run as a process of the sandbox (`nfd-worker`): `python -m themelio_gpu.sandbox.components.nfd_worker <folder>`.
It reads which nodes have GPUs (`nfd/gpu-nodes.json`, then `sandbox.json`'s nodes of a pool, and the nodes
Karpenter launches), asks the API server for NFD's worker pods every `POLL` seconds, and ends on SIGTERM.
"""

from __future__ import annotations

import json
import signal
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.components.base import Component, Context
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.nodes import NFD_GPU_NODE, NFD_PCI_LABEL, simulated_nodes
from themelio_gpu.sandbox.rest import Rest, path

POLL = 0.5
WORKER_PODS = "app.kubernetes.io/name=node-feature-discovery,role=worker"
"""The NFD chart's labels on its worker's pods (the GPU Operator's subchart renders them)."""
MANAGER = "themelio-sandbox-nfd"
"""The field manager of the labels written here, for `down`'s inventory."""
KARPENTER_POOL = "karpenter.sh/nodepool"
SYSTEM_LABELS = {k: v for k, v in NFD_GPU_NODE.items() if k != NFD_PCI_LABEL}
"""What the worker finds on a node without a GPU: its OS and kernel."""


def gpu_nodes(folder: Path) -> set[str]:
    """The sandbox's GPU nodes as registered (at `up`, and by an upgrade since: `sandbox.json`)."""
    names: set[str] = set(json.loads((folder / "nfd" / "gpu-nodes.json").read_text()))
    state = folder / "sandbox.json"
    if state.is_file():
        names |= {n for n, v in json.loads(state.read_text()).get("nodes", {}).items() if v.get("pool")}
    return names


def label_once(api: Rest, folder: Path, done: set[str]) -> list[str]:
    """Label every node an NFD worker pod is bound to and that is not done yet; a line a node."""
    pods = api.get(path("Pod") + "?labelSelector=" + urllib.parse.quote(WORKER_PODS))
    bound = sorted({p["spec"]["nodeName"] for p in pods["items"] if p.get("spec", {}).get("nodeName")} - done)
    if not bound:
        return []
    gpus = gpu_nodes(folder)
    now = []
    for name in bound:
        node = api.get(path("Node", None, name))
        gpu = name in gpus or KARPENTER_POOL in node["metadata"].get("labels", {})
        labels = NFD_GPU_NODE if gpu else SYSTEM_LABELS
        where = path("Node", None, name) + f"?fieldManager={MANAGER}"
        answer = api.request("PATCH", where, {"metadata": {"labels": labels}}, "application/merge-patch+json")
        if answer.status != 200:
            raise SandboxError(f"PATCH {where}: {answer.status} {answer.message}")
        done.add(name)
        now.append(f"{name}: NFD's worker is placed here: labelled {'a GPU node' if gpu else 'its OS and kernel'}")
    return now


def main(folder: Path) -> None:
    api = Rest(folder / "kubeconfig")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    done: set[str] = set()
    while True:
        try:
            for line in label_once(api, folder, done):
                print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)
        except SandboxError as error:  # the API server busy or a node gone meanwhile: tried again
            print(f"{time.strftime('%H:%M:%S')} {error}", flush=True)
        time.sleep(POLL)


class NfdWorker(Component):
    """The labeller (process `nfd-worker`); no state of its own."""

    name = "nfd-worker"
    tools: tuple[str, ...] = ()

    def wanted(self, plan: ClusterPlan) -> bool:
        return any(node.pool for node in simulated_nodes(plan)) or any(
            pool.provisioning.karpenter is not None for pool in plan.definition.node_pools
        )

    def start(self, context: Context) -> dict[str, Any]:
        folder = context.sandbox.folder / "nfd"
        folder.mkdir(parents=True, exist_ok=True)
        names = sorted(node.name for node in simulated_nodes(context.plan) if node.pool)
        (folder / "gpu-nodes.json").write_text(json.dumps(names) + "\n")
        command = [sys.executable, "-m", "themelio_gpu.sandbox.components.nfd_worker", str(context.sandbox.folder)]
        context.supervisor.start(
            self.name, command, log=context.log(self.name), cwd=Path(__file__).resolve().parents[3]
        )
        return {}

    def ready(self, context: Context, state: dict[str, Any]) -> None:
        if not all(context.supervisor.running(p) for p in context.supervisor.processes(self.name)):
            log = context.log(self.name)
            raise SandboxError(
                f"the NFD worker's labeller ended while it started ({log}): {log.read_text()[-2000:]}"
            )
        context.say(
            "sandbox: NFD's labels (its NVIDIA PCI device, the OS and kernel) are written on each node as NFD's "
            "worker pod is placed there: the worker cannot read a simulated node's PCI devices or os-release"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
