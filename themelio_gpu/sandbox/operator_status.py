"""The GPU Operator's own answer in the sandbox: whether its controller runs, and what its custom resources say.

NVIDIA's controller runs against the sandbox (components/gpu_operator.py) wherever the stack installs the operator
and the machine gives it a mount namespace; it reconciles the ClusterPolicy (or the GPUCluster of v26.7.0's
operator-managed mode), labels the nodes and creates its operands, whose placement `sandbox probe` compares with
`verify`'s model like every other DaemonSet's. What only a container runtime gives stays unmet (the validator's
marker files, the driver's containers): the operator's status conditions say what it waits for, and are shown as
they are, never made up. A controller that should run and does not (it ended, or never started) fails the probe.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from themelio_gpu.sandbox.components.gpu_operator import DEPLOYMENT, operator_builds
from themelio_gpu.sandbox.folder import Sandbox, kubectl
from themelio_gpu.sandbox.supervisor import Supervisor, stat
from themelio_gpu.sandbox.tools import Toolbox

KINDS = ("clusterpolicies.nvidia.com", "gpuclusters.nvidia.com")
COMPONENT = "gpu-operator"
WAIT_SECONDS = 60.0
"""How long each custom resource has to get a status from the controller."""


@dataclass
class ResourceStatus:
    resource: str
    """`ClusterPolicy/cluster-policy`."""
    state: str
    conditions: list[str] = field(default_factory=list)
    """`<type>=<status> (<reason>): <message>` each, as the operator wrote them."""


@dataclass
class OperatorStatus:
    version: str
    expected: bool
    """The sandbox runs NVIDIA's controller (its state says it can run here)."""
    running: bool
    why: str = ""
    """Why it does not run: the machine's reason, or that it ended (its log)."""
    resources: list[ResourceStatus] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.running or not self.expected


def running_operator(toolbox: Toolbox, sandbox: Sandbox) -> str | None:
    """The version of NVIDIA's controller running (the build its binary is: the one the Deployment's image
    names, components/operator_launcher.py), None while none runs."""
    builds = {Path(b["operator"]).resolve(): v for v, b in operator_builds(toolbox).items()}
    supervisor = Supervisor(sandbox.folder)
    launchers = {p.pid for p in supervisor.processes(COMPONENT) if supervisor.running(p)}
    for entry in Path("/proc").iterdir() if launchers else []:
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            version = builds.get((entry / "exe").resolve()) if parent in launchers else None
        except (OSError, ValueError, IndexError):
            continue
        found = stat(int(entry.name)) if version else None
        if version and found is not None and found[0] not in "ZX":
            return version
    return None


def _deployment(toolbox: Toolbox, sandbox: Sandbox, namespace: str) -> bool:
    """The stack's operator Deployment exists (components/gpu_operator.py: the operator runs as its pod)."""
    found = kubectl(toolbox, sandbox, "get", "deployments", "-n", namespace, "-o", "name", "--ignore-not-found")
    return f"deployment.apps/{DEPLOYMENT}" in found.split()


def _resources(toolbox: Toolbox, sandbox: Sandbox) -> list[dict[str, Any]]:
    served = kubectl(toolbox, sandbox, "api-resources", "-o", "name").split()
    found = []
    for kind in KINDS:
        if kind in served:
            found += json.loads(kubectl(toolbox, sandbox, "get", kind, "-o", "json"))["items"]
    return found


def _status(item: dict[str, Any]) -> ResourceStatus:
    status = item.get("status") or {}
    conditions = [
        f"{c.get('type')}={c.get('status')} ({c.get('reason') or '-'})"
        + (f": {c['message']}" if c.get("message") else "")
        for c in status.get("conditions") or []
    ]
    return ResourceStatus(f"{item['kind']}/{item['metadata']['name']}", str(status.get("state") or ""), conditions)


def read(toolbox: Toolbox, sandbox: Sandbox) -> OperatorStatus | None:
    """The operator's status in the sandbox, once each custom resource has one (or the wait ends); None where the
    stack installs no operator."""
    state = sandbox.state().get("gpuOperator")
    if state is None:
        return None
    expected = bool(state.get("runs"))
    why = str(state.get("why") or "")
    if expected and not _deployment(toolbox, sandbox, str(state.get("namespace"))):
        # Its pod never starts: a chart of the stack's own (a local chart folder's stand-in) that makes none.
        expected, why = (
            False,
            f"the stack makes no Deployment {state.get('namespace')}/{DEPLOYMENT} for it to run as",
        )
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        items = _resources(toolbox, sandbox)
        version = running_operator(toolbox, sandbox) if expected else None
        running = version is not None
        waiting = running and any(not (i.get("status") or {}).get("state") for i in items)
        if not waiting or time.monotonic() > deadline:
            break
        time.sleep(1)
    if expected and not running:
        why = f"NVIDIA's controller should run here and does not (its log: {sandbox.folder / 'logs' / 'gpu-operator.log'})"
    return OperatorStatus(
        version or str(state.get("version")), expected, running, why, [_status(i) for i in items]
    )


def after_upgrade(toolbox: Toolbox, sandbox: Sandbox, version: str) -> dict[str, Any]:
    """After an apply that may have upgraded the operator's chart (`sandbox upgrade`): once the build of
    `version` (the chart's appVersion, which its Deployment's image names) runs in place of the one before (as
    the rollout replaces the pod, components/operator_launcher.py) or the wait ends, the version running and each
    custom resource's state; {} where the stack installs no operator."""
    state = sandbox.state().get("gpuOperator")
    if state is None:
        return {}
    if state.get("runs") and version in operator_builds(toolbox):
        deadline = time.monotonic() + WAIT_SECONDS
        while running_operator(toolbox, sandbox) != version and time.monotonic() < deadline:
            time.sleep(0.5)
    status = read(toolbox, sandbox)
    if status is None:
        return {}
    return {
        "running": status.version if status.running else None,
        "why": status.why,
        "resources": {r.resource: r.state for r in status.resources},
    }


def lines(status: OperatorStatus) -> list[str]:
    """What the probe prints of it."""
    if status.running:
        head = (
            f"GPU Operator {status.version}: NVIDIA's controller runs (built from source); its status as it says "
            "it (the operands' pods are Running and Ready as kwok marks them: no container runs)"
        )
    else:
        head = f"GPU Operator {status.version}: NVIDIA's controller does not run: {status.why}"
    out = [head]
    for resource in status.resources:
        out.append(f"  {resource.resource}: state {resource.state or '(none)'}")
        out += [f"    {condition}" for condition in resource.conditions]
    return out
