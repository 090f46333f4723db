"""Karpenter's own controller with its kwok cloud provider (sigs.k8s.io/karpenter/kwok v1.14.1, built from its
module) for a cluster with a Karpenter pool: the sandbox registers no node of such a pool; Karpenter launches
them for pending pods, as it would on the cloud, and they register as kwok nodes.

What the component gives it, as Karpenter's chart and its cloud give it in a cluster:
- Karpenter's CRDs (NodePool, NodeClaim, NodeOverlay, the kwok provider's KWOKNodeClass, CapacityBuffer),
  installed before the stack (the README asks users the same: the stack's NodePool needs them);
- a KWOKNodeClass named as each pool's `nodeClassRef` names its node class. The kwok provider manages only
  NodePools whose `nodeClassRef` is a KWOKNodeClass (`GetSupportedNodeClasses`), so the sandbox applies the
  stack's NodePool with that group and kind in `sandbox_override.tf.json` (`node_pool_overrides`): the one field
  that names the cloud; every other field is applied as the stack says;
- its instance types (INSTANCE_TYPES_FILE_PATH): each of the pools' `instanceTypes`, with the CPU, memory and
  pods of the sandbox's nodes, and, on a device-plugin pool, the GPUs the device plugin advertises (a DRA pool's
  instance type lists no GPU name, as its nodes advertise none), offered for the pools' capacity types but
  `reserved` (which needs a cloud's capacity reservation) in one zone;
- KUBECONFIG, no leader election, and its metrics and health ports from the kernel (two sandboxes side by side).
Beside it, the sandbox's slice writer (karpenter_slices.py) publishes each launched node's GPUs as it
registers, as the DRA driver's kubelet plugin would on the node.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from themelio_gpu.inputs.clusters.definition import KarpenterNodes
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.components.base import Component, Context, answers
from themelio_gpu.sandbox.control_plane import free_ports
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.folder import kubectl
from themelio_gpu.sandbox.nodes import node_allocatable

NODE_CLASS = {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass"}
"""The node class the kwok provider supports: the stack's NodePool is applied with it in the sandbox."""
CRDS = "karpenter-crds"
ZONE = "sandbox-zone-a"
STARTUP = 120.0
"""Seconds Karpenter has to sync its caches and answer its readiness probe (a busy machine's)."""
PRODUCT_FIELDS = ("key", "display_name", "product_names", "memory_gib", "architecture", "compute_capability")
"""What of a GPU product its published devices carry (nodes.gpu_devices)."""
UNOFFERED = "reserved"
"""A capacity type the kwok provider offers only with a capacity reservation, which the sandbox has none of."""


def karpenter_pools(plan: ClusterPlan) -> dict[str, KarpenterNodes]:
    return {
        pool.name: pool.provisioning.karpenter
        for pool in plan.definition.node_pools
        if pool.provisioning.karpenter is not None
    }


def instance_types(plan: ClusterPlan) -> list[dict[str, Any]]:
    """The kwok provider's instance types for the cluster's Karpenter pools (its instance_types.json format).
    An instance type listed by two pools is declared as the first one lists it."""
    contracts = {c.name: c for c in plan.pools}
    declared: dict[str, dict[str, Any]] = {}
    for name, karpenter in karpenter_pools(plan).items():
        offered = [c for c in karpenter.capacity_types if c != UNOFFERED]
        for instance_type in karpenter.instance_types:
            entry = declared.setdefault(
                instance_type,
                {
                    "name": instance_type,
                    "architecture": "amd64",
                    "operatingSystems": ["linux"],
                    "resources": node_allocatable(contracts[name]),
                    "offerings": [],
                },
            )
            known = {o["Requirements"][0]["values"][0] for o in entry["offerings"]}
            for capacity in (c for c in offered if c not in known):
                entry["offerings"].append(
                    {
                        "Price": 1.0,
                        "Available": True,
                        "Requirements": [
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity]},
                            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]},
                        ],
                    }
                )
    return list(declared.values())


def node_pool_overrides(stack: dict[str, Any]) -> dict[str, Any]:
    """`resource.kubernetes_manifest` entries of an override file: each NodePool of the stack with its
    `nodeClassRef` pointing at the kwok provider's node class of the same name (the manifest otherwise as the
    stack has it)."""
    overrides = {}
    for address, resource in stack.get("resource", {}).get("kubernetes_manifest", {}).items():
        manifest = resource.get("manifest")  # a Terraform expression (a string) for a for_each of manifests
        if (
            not isinstance(manifest, dict)
            or manifest.get("kind") != "NodePool"
            or not str(manifest.get("apiVersion")).startswith("karpenter.sh/")
        ):
            continue
        spec = json.loads(json.dumps(manifest))
        reference = spec["spec"]["template"]["spec"]["nodeClassRef"]
        reference.update(NODE_CLASS)
        overrides[address] = {"manifest": spec}
    return overrides


def pools_file(plan: ClusterPlan) -> dict[str, Any]:
    """What the slice writer needs of each Karpenter pool: the devices a node of it publishes."""
    contracts = {c.name: c for c in plan.pools}
    found = {}
    for name in karpenter_pools(plan):
        contract = contracts[name]
        found[name] = {
            "product": {field: getattr(contract.product, field) for field in PRODUCT_FIELDS},
            "gpusPerNode": contract.gpus_per_node,
            "mig": dict(contract.mig_devices) if contract.mig_devices is not None else None,
            "dra": contract.dra,
        }
    return found


class Karpenter(Component):
    """Karpenter's controller and the slice writer (processes `karpenter` and `karpenter.slices`); its state
    is `karpenter`: the health port and the log."""

    name = "karpenter"
    tools = ("karpenter-kwok", CRDS)

    def wanted(self, plan: ClusterPlan) -> bool:
        return bool(karpenter_pools(plan))

    def start(self, context: Context) -> dict[str, Any]:
        toolbox, sandbox = context.toolbox, context.sandbox
        crds = toolbox.tools[CRDS]
        for name in crds.files:
            kubectl(toolbox, sandbox, "create", "-f", str(crds.path(name)))
        names = [Path(name).stem.split("_", 1)[1] + "." + Path(name).stem.split("_", 1)[0] for name in crds.files]
        kubectl(toolbox, sandbox, "wait", "--for=condition=Established", "--timeout=60s",
                *(f"crd/{n}" for n in names))  # fmt: skip
        classes = sorted({k.node_class_ref.name for k in karpenter_pools(context.plan).values()})
        node_classes = [
            {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": n}}
            for n in classes
        ]
        kubectl(toolbox, sandbox, "create", "-f", "-",
                stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": node_classes}))  # fmt: skip
        folder = sandbox.folder / "karpenter"
        folder.mkdir(parents=True, exist_ok=True)
        types = folder / "instance-types.json"
        types.write_text(json.dumps(instance_types(context.plan), indent=1) + "\n")
        (folder / "pools.json").write_text(json.dumps(pools_file(context.plan), indent=1) + "\n")
        metrics, health = free_ports(2)
        env = {
            "KUBECONFIG": str(sandbox.kubeconfig),
            "DISABLE_LEADER_ELECTION": "true",
            "INSTANCE_TYPES_FILE_PATH": str(types),
            "METRICS_PORT": str(metrics),
            "HEALTH_PROBE_PORT": str(health),
        }
        log = context.log(self.name)
        binary = toolbox.binary("karpenter-kwok")
        context.supervisor.start(self.name, [str(binary)], log=log, env=_with(env))
        writer = [sys.executable, "-m", "themelio_gpu.sandbox.components.karpenter_slices", str(sandbox.folder)]
        context.supervisor.start(
            f"{self.name}.slices", writer, log=context.log(f"{self.name}.slices"),
            cwd=Path(__file__).resolve().parents[3],
        )  # fmt: skip
        return {"karpenter": {"health": health, "log": str(log), "nodeClasses": classes}}

    def ready(self, context: Context, state: dict[str, Any]) -> None:
        url = f"http://127.0.0.1:{state['karpenter']['health']}/readyz"
        deadline = time.monotonic() + STARTUP
        log = Path(state["karpenter"]["log"])
        while True:
            if not all(context.supervisor.running(p) for p in context.supervisor.processes(self.name)):
                raise SandboxError(f"Karpenter ended while it started ({log}): {log.read_text()[-2000:]}")
            if not (why := answers(url)):
                break
            if time.monotonic() > deadline:
                raise SandboxError(f"Karpenter is not ready at {url} ({log}): {why}")
            time.sleep(0.2)
        pools = ", ".join(karpenter_pools(context.plan))
        context.say(
            f"sandbox: Karpenter 1.14.1 (its kwok provider) launches the nodes of {pools} for pending pods; the "
            f"stack's NodePools are applied with nodeClassRef {NODE_CLASS['kind']} (the kwok provider's)"
        )


def _with(env: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **env}
