"""What changes on a cluster beside its stack when its definition changes, done on the sandbox as it happens
on a real cluster, so that the new stack meets what it would meet there.

- A new `kubernetesVersion` (or DRAExtendedResource setting): the platform team upgrades the control plane
  first, one minor at a time, keeping etcd's data. Here the same 1.36 binaries restart with the new
  `--emulated-version` (KEP-4330; none at 1.36) and feature gates: kwokctl stops the components, its saved
  configuration (`kwok.yaml`) gets the new flags, and kwokctl starts them again on the same etcd data folder
  (control_plane.restart: the sandbox's supervisor owns what it starts).
  A change of the binaries' minor (1.36 to 1.37) is not done in place: `down`, then `up` at the new version.
- Nodes the new definition names that the cluster lacks (a node added to a static pool, a new pool's nodes)
  join before the stack labels them, as nodes do; they are registered as `up` registers nodes.
- A pool whose devices change (a new MIG layout): the MIG Manager reconfigures the GPUs once the stack's new
  `nvidia.com/mig.config` label is applied, and the DRA kubelet plugin publishes the new devices (with the GPU
  Operator v26.7.0 it restarts the plugin itself; before, an admin does, docs/cluster-definitions.md). Neither
  runs here: after the apply, the sandbox replaces the node's ResourceSlice with the new layout's devices.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from themelio_gpu import interrupts
from themelio_gpu.k8s.version import parse_kubernetes_version
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox import control_plane
from themelio_gpu.sandbox.cluster import (
    BINARY_MINORS,
    CONTROL_PLANE,
    EMULATION_REACH,
    Sandbox,
    binary_minor,
    create_all,
    feature_gate_args,
    kubectl,
)
from themelio_gpu.sandbox.errors import SandboxError, SandboxUsageError
from themelio_gpu.sandbox.inventory import record_joined_nodes
from themelio_gpu.sandbox.nodes import SimulatedNode, simulated_nodes
from themelio_gpu.sandbox.tools import Toolbox

OWN_FLAGS = ("--emulated-version=", "--feature-gates=DRAExtendedResource=")
"""The component flags the sandbox sets from the cluster file (cluster.feature_gate_args), and only those."""


def _with_flags(configuration: list[Any], flags: dict[str, list[str]]) -> list[Any]:
    """kwokctl's saved configuration with each control-plane component's own flags replaced by `flags`."""
    for document in configuration:
        if not isinstance(document, dict) or document.get("kind") != "KwokctlConfiguration":
            continue
        for component in document.get("components", []):
            if component.get("name") in CONTROL_PLANE:
                kept = [a for a in component.get("args", []) if not a.startswith(OWN_FLAGS)]
                component["args"] = kept + [f"--{flag}" for flag in flags[component["name"]]]
        document["componentsPatches"] = [
            {"name": name, "extraArgs": [dict(zip(("key", "value"), f.split("=", 1), strict=True)) for f in given]}
            for name, given in flags.items()
            if given
        ]
    return configuration


def control_plane_change(plan: ClusterPlan, sandbox: Sandbox) -> str:
    """What the running control plane would need to run the plan's rules ('' when nothing)."""
    state = sandbox.state()
    if feature_gate_args(plan.definition) == state.get("componentFlags"):
        return ""
    running = str(state.get("kubernetesVersion", "?"))
    return f"Kubernetes {running} -> {plan.definition.kubernetes_version}"


def upgrade_control_plane(
    plan: ClusterPlan, sandbox: Sandbox, toolbox: Toolbox, say: Callable[[str], None]
) -> float:
    """Restart the control plane with the plan's version rules, etcd's data kept; returns the seconds the API
    server was away."""
    state = sandbox.state()
    running = parse_kubernetes_version(str(state["kubernetesVersion"]))
    assert running is not None, "the sandbox recorded the version it was brought up at"
    old_minor = running.minor
    new_minor = plan.definition.minor_version
    if binary_minor(plan.definition) != binary_minor_of(old_minor):
        raise SandboxUsageError(
            f"the sandbox runs Kubernetes 1.{binary_minor_of(old_minor)} binaries and {plan.name} now needs "
            f"1.{binary_minor(plan.definition)}'s: not done in place; `sandbox down {plan.name}` and `sandbox up` it"
        )
    if abs(new_minor - old_minor) > 1:
        raise SandboxUsageError(
            f"kubernetesVersion 1.{old_minor} -> {plan.definition.kubernetes_version}: Kubernetes upgrades one "
            "minor at a time (the API server's version skew policy); upgrade through each minor between"
        )
    flags = feature_gate_args(plan.definition)

    def edit(saved: Path) -> None:
        configuration = _with_flags(list(yaml.safe_load_all(saved.read_text())), flags)
        saved.write_text(yaml.safe_dump_all(configuration, sort_keys=False))

    say(
        f"sandbox: {plan.name}: {control_plane_change(plan, sandbox)}: the control plane restarts, etcd's data kept"
    )
    started = time.monotonic()
    with interrupts.deferred():  # stopped and started whole: a half-restarted control plane helps no one
        control_plane.restart(toolbox, sandbox, edit)
        _wait_ready(toolbox, sandbox)
        state.update(kubernetesVersion=plan.definition.kubernetes_version, componentFlags=flags)
        sandbox.state_file.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    return time.monotonic() - started


def binary_minor_of(minor: int) -> int:
    """The built binaries' minor that runs (or emulates) Kubernetes 1.<minor>."""
    return next((b for b in BINARY_MINORS if b - EMULATION_REACH <= minor <= b), BINARY_MINORS[-1])


def _wait_ready(toolbox: Toolbox, sandbox: Sandbox) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            kubectl(toolbox, sandbox, "get", "--raw", "/readyz")
            kubectl(toolbox, sandbox, "wait", "--for=condition=Ready", "--timeout=60s", "node", "--all")
            return
        except SandboxError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def server_version(toolbox: Toolbox, sandbox: Sandbox) -> str:
    """The version the API server says it emulates (`kubectl version`'s emulationMinor), e.g. `1.35`."""
    shown = json.loads(kubectl(toolbox, sandbox, "version", "-o", "json"))["serverVersion"]
    return f"{shown.get('emulationMajor', shown['major'])}.{shown.get('emulationMinor', shown['minor'])}"


def _node_names(toolbox: Toolbox, sandbox: Sandbox) -> set[str]:
    return set(kubectl(toolbox, sandbox, "get", "nodes", "-o", "name").replace("node/", "").split())


def join_new_nodes(plan: ClusterPlan, sandbox: Sandbox, toolbox: Toolbox, kinds: tuple[str, ...]) -> list[str]:
    """Register the plan's nodes of these kinds (static, provisioned, karpenter) that the cluster lacks."""
    present = _node_names(toolbox, sandbox)
    new = [n for n in simulated_nodes(plan) if n.kind in kinds and n.name not in present]
    if not new:
        return []
    create_all(toolbox, sandbox, [n.manifest for n in new])
    record_joined_nodes(sandbox, [n.manifest for n in new])
    for node in new:
        status = json.dumps({"status": node.manifest["status"]})
        kubectl(toolbox, sandbox, "patch", "node", node.name, "--subresource=status", "--type=merge", "-p", status)
    slices = [s for n in new for s in n.slices]  # the sandbox's: no DRA kubelet plugin runs for a joining node
    if slices:
        create_all(toolbox, sandbox, slices)
    state = sandbox.state()
    state["nodes"] = {**state.get("nodes", {}), **{n.name: {"pool": n.pool, "kind": n.kind} for n in new}}
    sandbox.state_file.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    return [n.name for n in new]


def _devices(item: dict[str, Any]) -> list[str]:
    return sorted(d["name"] for d in item.get("spec", {}).get("devices", []))


def republish_changed_slices(plan: ClusterPlan, sandbox: Sandbox, toolbox: Toolbox) -> list[str]:
    """Replace the ResourceSlice of every node whose pool now publishes other devices (a new MIG layout);
    returns those nodes."""
    published = {
        s["spec"]["nodeName"]: s
        for s in json.loads(kubectl(toolbox, sandbox, "get", "resourceslices", "-o", "json"))["items"]
        if s["spec"].get("nodeName")
    }
    changed: list[SimulatedNode] = []
    for node in simulated_nodes(plan):
        for wanted in node.written:  # a node whose GPUs NVIDIA's DRA driver publishes is the driver's to change
            current = published.get(node.name)
            if current is not None and _devices(current) != _devices(wanted):
                changed.append(node)
    for node in changed:
        current = published[node.name]
        kubectl(toolbox, sandbox, "delete", "resourceslice", current["metadata"]["name"], "--wait=true")
        create_all(toolbox, sandbox, list(node.written))
    return [n.name for n in changed]
