"""The sandbox's slice writer for the nodes Karpenter launches: as soon as such a node of a DRA pool registers, it
gets its ResourceSlice as the NVIDIA DRA driver's kubelet plugin publishes it (nodes.gpu_slices: its pool's GPUs
or MIG devices), owned by the node as the kubelet's are, so that it goes with the node when Karpenter removes it.
NFD's labels come as on every node, where NFD's worker is placed (nfd_worker.py).

Run by the Karpenter component as a process of the sandbox (`karpenter.slices`):
`python -m themelio_gpu.sandbox.components.karpenter_slices <sandbox folder>`. It reads `karpenter/pools.json`
(what each Karpenter pool's node publishes) and the sandbox's kubeconfig, asks the API server for Karpenter's
nodes every `POLL` seconds, and ends on SIGTERM.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from themelio_gpu.inputs.catalog.products import GpuProduct
from themelio_gpu.k8s.nvidia import DRA_DRIVER
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.nodes import gpu_devices, resource_slice
from themelio_gpu.sandbox.rest import Rest, path

POLL = 0.2
NODEPOOL_LABEL = "karpenter.sh/nodepool"


def _product(data: dict[str, Any]) -> GpuProduct:
    """The product as pools.json holds it (components/karpenter.py: what its devices carry)."""
    return GpuProduct(
        key=data["key"],
        display_name=data["display_name"],
        product_names=tuple(data["product_names"]),
        memory_gib=float(data["memory_gib"]),
        architecture=data["architecture"],
        compute_capability=data["compute_capability"],
        pci_device_ids=(),
    )


def owned_slice(node: dict[str, Any], pool: dict[str, Any]) -> dict[str, Any]:
    """The node's ResourceSlice, owned by the node (the garbage collector removes it with the node)."""
    name = node["metadata"]["name"]
    mig = pool["mig"]
    item = resource_slice(name, gpu_devices(name, _product(pool["product"]), pool["gpusPerNode"], mig))
    item["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
    ]
    return item


def publish_once(api: Rest, pools: dict[str, dict[str, Any]], done: set[str]) -> list[str]:
    """Publish the slices of every registered node of a Karpenter pool not done yet; returns what was done, a line
    a node."""
    listed = api.get(path("Node") + f"?labelSelector={NODEPOOL_LABEL}")
    now = []
    for node in listed["items"]:
        name, labels = node["metadata"]["name"], node["metadata"].get("labels", {})
        pool = pools.get(labels.get(NODEPOOL_LABEL, ""))
        if pool is None or name in done:
            continue
        if pool["dra"]:
            refused = api.create(owned_slice(node, pool))
            if refused is not None and "already exists" not in refused:
                raise SandboxError(f"the ResourceSlice of {name}: {refused}")
        done.add(name)
        now.append(f"{name}: registered" + (f", its {DRA_DRIVER} ResourceSlice published" if pool["dra"] else ""))
    return now


def main(folder: Path) -> None:
    pools = json.loads((folder / "karpenter" / "pools.json").read_text())
    api = Rest(folder / "kubeconfig")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    done: set[str] = set()
    while True:
        try:
            for line in publish_once(api, pools, done):
                print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)
        except SandboxError as error:  # the API server busy or a node gone meanwhile: tried again
            print(f"{time.strftime('%H:%M:%S')} {error}", flush=True)
        time.sleep(POLL)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
