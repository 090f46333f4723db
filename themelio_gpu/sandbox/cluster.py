"""One sandbox: a real control plane for one cluster, its nodes and GPUs, and the components beside it.

Everything of a sandbox lives in its folder (folder.py): `up` starts the control plane (control_plane.py),
registers every node and publishes every GPU (nodes.py), then starts the components the cluster needs
(components/); every process belongs to the sandbox's supervisor (supervisor.py). `down` ends them all by the
identities recorded and removes the folder; an `up` that fails or is interrupted does the same before it
returns, and `down` does it whatever was killed before (a second Ctrl-C cannot cut it short).

The control plane runs the cluster file's Kubernetes rules: the binaries are 1.36, and for an older
`kubernetesVersion` every component runs with `--emulated-version` of that minor (KEP-4330), so its feature
gates have that release's defaults (DRAExtendedResource alpha and off in 1.34/1.35); the cluster file's
`featureGates` are passed to the components it names.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

from themelio_gpu import interrupts
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox import components, control_plane
from themelio_gpu.sandbox.components.chart_repository import own_repositories
from themelio_gpu.sandbox.errors import SandboxError, SandboxUsageError
from themelio_gpu.sandbox.folder import KUBECTL as KUBECTL
from themelio_gpu.sandbox.folder import SANDBOX_DIR_ENV as SANDBOX_DIR_ENV
from themelio_gpu.sandbox.folder import Sandbox as Sandbox
from themelio_gpu.sandbox.folder import create_all as create_all
from themelio_gpu.sandbox.folder import kubectl as kubectl
from themelio_gpu.sandbox.folder import sandboxes_root as sandboxes_root
from themelio_gpu.sandbox.nodes import simulated_nodes
from themelio_gpu.sandbox.supervisor import Supervisor
from themelio_gpu.sandbox.tools import Toolbox
from themelio_gpu.words import count

BINARY_MINORS = (36, 37)
"""The minor releases of the built Kubernetes binaries (tools.toml's kubernetes-1.<minor>)."""
EMULATION_REACH = 3
"""How many minors back `--emulated-version` reaches (k8s.io/apiserver/pkg/util/compatibility)."""
CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


def binary_minor(definition: ClusterDefinition) -> int:
    """The oldest built Kubernetes minor whose binaries run (or emulate) the cluster's version."""
    minor = definition.minor_version
    for built in BINARY_MINORS:
        if built - EMULATION_REACH <= minor <= built:
            return built
    reach = f"1.{BINARY_MINORS[0] - EMULATION_REACH} to 1.{BINARY_MINORS[-1]}"
    raise SandboxUsageError(
        f"kubernetesVersion {definition.kubernetes_version}: the sandbox's Kubernetes binaries "
        f"({', '.join(f'1.{m}' for m in BINARY_MINORS)}) run or emulate {reach} only"
    )


def kubernetes_tool(definition: ClusterDefinition) -> str:
    return f"kubernetes-1.{binary_minor(definition)}"


def feature_gate_args(definition: ClusterDefinition) -> dict[str, list[str]]:
    """Per control-plane component, the flags that give it the cluster's version rules and feature gates."""
    minor, built = definition.minor_version, binary_minor(definition)
    args: dict[str, list[str]] = {component: [] for component in CONTROL_PLANE}
    if minor < built:
        for component in CONTROL_PLANE:
            args[component].append(f"emulated-version=1.{minor}")
    gate = definition.feature_gates.dra_extended_resource
    if gate is not None:
        for component in gate.components:
            if component.value in args:
                args[component.value].append(f"feature-gates=DRAExtendedResource={str(gate.enabled).lower()}")
    return args


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def up(
    plan: ClusterPlan,
    toolbox: Toolbox,
    charts: Path,
    *,
    port: int | None = None,
    keep: bool = False,
    say: Callable[[str], None] = print,
    probe_components: bool = True,
) -> Sandbox:
    """Start the control plane, register every node and publish every GPU, start the cluster's components (without
    `probe_components`, not those only the probe asks of); on any failure, leave nothing."""
    sandbox = Sandbox(plan.name)
    if sandbox.folder.exists():
        left = "is up already" if sandbox.exists() else "was left by a command that did not finish"
        raise SandboxUsageError(
            f"a sandbox of {plan.name} {left} ({sandbox.folder}); `sandbox down {plan.name}` first"
        )
    for address, key in own_repositories(plan).items():
        say(
            f"sandbox: {plan.file}: {key} {address} is out of the sandbox's reach: that release installs from the "
            "sandbox's chart repository instead (an override file; every other chart comes as the stack says)"
        )
    if port is not None and not _port_free(port):
        raise SandboxUsageError(f"port {port} on 127.0.0.1 is in use: choose another with --port, or leave it out")
    started = time.monotonic()
    try:
        sandbox.folder.mkdir(parents=True)
    except FileExistsError:
        raise SandboxUsageError(f"another `sandbox up {plan.name}` is starting it ({sandbox.folder})") from None
    with Supervisor(sandbox.folder).command():  # recorded until its teardown is done too
        try:
            summary = _bring_up(plan, toolbox, charts, sandbox, port, say, probe_components)
        except BaseException as error:
            if keep and not isinstance(error, interrupts.Interrupted):
                say(f"sandbox: kept for a look (--keep): {sandbox.folder}; `sandbox down {plan.name}` removes it")
            else:
                teardown(sandbox)
            raise
    say(
        f"sandbox: {plan.name} is up in {time.monotonic() - started:.0f} s: {summary}; kubeconfig {sandbox.kubeconfig}"
    )
    return sandbox


def _bring_up(
    plan: ClusterPlan,
    toolbox: Toolbox,
    charts: Path,
    sandbox: Sandbox,
    port: int | None,
    say: Callable[[str], None],
    probe_components: bool,
) -> str:
    """The control plane, the nodes and their GPUs, the components, the state; returns what is up, in words."""
    args = feature_gate_args(plan.definition)
    kubernetes = kubernetes_tool(plan.definition)
    say(
        f"sandbox: starting the control plane of {plan.name} (Kubernetes {plan.definition.kubernetes_version} rules)"
    )
    binaries = {
        "kube-apiserver": toolbox.binary(kubernetes, "kube-apiserver"),
        "kube-controller-manager": toolbox.binary(kubernetes, "kube-controller-manager"),
        "kube-scheduler": toolbox.binary(kubernetes, "kube-scheduler"),
        "etcd": toolbox.binary("etcd"),
        "kwok-controller": toolbox.binary("kwok"),
    }
    ports = control_plane.start(toolbox, sandbox, binaries, args, port=port, say=say)
    nodes = simulated_nodes(plan)
    _register(toolbox, sandbox, nodes)
    kubectl(toolbox, sandbox, "wait", "--for=condition=Ready", "--timeout=120s", "node", "--all")
    started = components.start(components.Context(plan, sandbox, toolbox, charts, say, probe_components))
    if started["componentSeconds"]:
        spent = ", ".join(f"{n} {a:.1f} + {b:.1f} s" for n, (a, b) in started["componentSeconds"].items())
        say(f"sandbox: components started and ready: {spent}")
    state = {
        **started,
        "cluster": plan.name,
        "kwokCluster": sandbox.kwok_name,
        "kubernetesVersion": plan.definition.kubernetes_version,
        "componentFlags": args,
        "controlPlanePorts": ports,
        "nodes": {n.name: {"pool": n.pool, "kind": n.kind} for n in nodes},
    }
    sandbox.state_file.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    slices = sum(len(n.written) for n in nodes)
    devices = sum(len(s["spec"]["devices"]) for n in nodes for s in n.written)
    kinds = ", ".join(
        f"{sum(1 for n in nodes if n.kind == k)} {k}" for k in ("static", "provisioned", "karpenter", "system")
        if any(n.kind == k for n in nodes)
    )  # fmt: skip
    return (
        f"{count(len(nodes), 'node')} ({kinds}), {count(slices, 'ResourceSlice')} of the sandbox's own with "
        f"{count(devices, 'device')}"
    )


def _register(toolbox: Toolbox, sandbox: Sandbox, nodes: list[Any]) -> None:
    """Create each node, set its status as its kubelet would, then publish its slices."""
    create_all(toolbox, sandbox, [n.manifest for n in nodes])
    for node in nodes:
        status = {"status": node.manifest["status"]}
        kubectl(
            toolbox, sandbox, "patch", "node", node.name, "--subresource=status", "--type=merge",
            "-p", json.dumps(status),
        )  # fmt: skip
    slices = [s for n in nodes for s in n.written]
    if slices:
        create_all(toolbox, sandbox, slices)


def teardown(sandbox: Sandbox) -> list[str]:
    """End every process of the sandbox (the other commands working on it, the components, the control plane,
    anything else carrying its tag) and remove its folder; returns what could not be done. Runs whole: a
    second Ctrl-C or SIGTERM is held until it is done."""
    with interrupts.deferred():
        supervisor = Supervisor(sandbox.folder)
        supervisor.end_commands()
        components.stop(supervisor)
        control_plane.stop(sandbox)
        supervisor.end_all()
        left = [f"pid {pid}" for pid, _ in supervisor.tagged()]
        shutil.rmtree(sandbox.folder, ignore_errors=True)
        shutil.rmtree(sandbox.scratch, ignore_errors=True)
        problems = [f"{', '.join(left)} of the sandbox could not be ended"] if left else []
        if sandbox.folder.exists():
            problems.append(f"{sandbox.folder} could not be removed")
        with suppress(OSError):  # the sandboxes' folder too, once no other sandbox is in it
            sandbox.folder.parent.rmdir()
    return problems


def down(cluster: str, *, say: Callable[[str], None] = print, root: Path | None = None) -> None:
    """End everything of the cluster's sandbox (in `root`, default the sandboxes' folder) and remove it."""
    sandbox = Sandbox(cluster, root)
    if not sandbox.folder.exists():
        say(f"sandbox: no sandbox of {cluster} ({sandbox.folder}); nothing to do")
        return
    problems = teardown(sandbox)
    if problems:
        raise SandboxError("; ".join(problems))
    say(f"sandbox: {cluster} is down; its processes are ended and {sandbox.folder} is removed")
