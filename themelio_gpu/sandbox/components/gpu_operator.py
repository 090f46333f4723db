"""NVIDIA's GPU Operator controller (`cmd/gpu-operator`, built from source at the version the Deployment's image
names: the chart's appVersion) runs against the sandbox as its image runs it in the cluster, from the moment the
stack's release has its Deployment up, and is replaced by the new version's after a chart upgrade.

A real cluster starts the operator when Helm has created its Deployment and the scheduler has placed its pod;
kwok marks that pod Running but runs no container. So the component starts a launcher at `up`
(operator_launcher.py) that waits until the release's `gpu-operator` Deployment exists and is Available, reads its
container's arguments and environment from the API (`OPERATOR_NAMESPACE` from the pod's namespace, the images it
names), and runs the operator while the Deployment is there, with what the pod would give it:
- the operands' manifests at `/opt/gpu-operator`, a path fixed in its code (controllers/state_manager.go,
  internal/state/manager.go): the operator runs in a mount namespace of its own (`unshare --mount`, with a user
  namespace where the sandbox runs without root) in which the built tool's `opt/gpu-operator` is bound there, so
  sandboxes of two operator versions run side by side and the machine's /opt is never touched;
- `-kubeconfig` with the sandbox's kubeconfig (the operator runs out of the cluster), and its leader election in
  its own namespace (`--leader-elect-namespace`: out of a pod it cannot find one; each sandbox has its own API
  server, so two sandboxes never share a lease);
- no metrics or health listener (`--metrics-bind-address=0`, `--health-probe-bind-address=0`): a pod has its own
  network namespace, two operators on one machine would not.
What only a node's container runtime gives stays unmet: its operands' containers never run, so the validator
writes no marker files and the operator reports its operands as it finds them (its own status conditions, which
`sandbox probe` shows as they are).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from themelio_gpu import interrupts
from themelio_gpu.plan.helm.values import OPERATOR_CHART
from themelio_gpu.plan.model import ClusterPlan, HelmReleaseSpec
from themelio_gpu.sandbox.components.base import Component, Context
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.tools import Toolbox, load_tools

DEPLOYMENT = "gpu-operator"
"""The chart's Deployment (templates/operator.yaml names it so whatever the release's name)."""
LAUNCHER = Path(__file__).with_name("operator_launcher.py")
"""Run as a script (it imports nothing of this project): the operator's pod, as a process."""
ASSETS = "opt/gpu-operator"
"""Where the built tool holds the operands' manifests (tools.toml), bound at /opt/gpu-operator."""


def operator_release(plan: ClusterPlan) -> HelmReleaseSpec | None:
    return next((r for r in plan.releases if r.chart == OPERATOR_CHART), None)


def _builds_of(binary: str) -> dict[str, str]:
    """{appVersion: tool name} of every tool of tools.toml that builds `binary` from the GPU Operator's source."""
    return {t.version: t.name for t in load_tools().values() if t.binaries.get(binary)}


def operator_tools() -> dict[str, str]:
    """Every build of the GPU Operator's controller."""
    return _builds_of("gpu-operator")


def manage_crds_tools() -> dict[str, str]:
    """Every build of NVIDIA's `manage-crds` (the CRD hook's program, helm_hooks.py)."""
    return _builds_of("manage-crds")


def operator_builds(toolbox: Toolbox) -> dict[str, dict[str, str]]:
    """{appVersion: its binary and manifests} of every GPU Operator built here: the launcher runs the one the
    Deployment's image names, the chart's at install and the new chart's after an upgrade."""
    builds = {}
    for version, tool in operator_tools().items():
        if tool in toolbox.tools and toolbox.tools[tool].built():
            builds[version] = {
                "operator": str(toolbox.binary(tool, "gpu-operator")),
                "assets": str(toolbox.binary(tool, ASSETS)),
            }
    return builds


def unshare_command() -> list[str] | None:
    """The `unshare` that gives a process a private mount namespace here (root's, or a user namespace's), or
    None when the machine allows neither (then the operator cannot run: its manifests must be at its path)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    for flags in (["--mount", "--propagation", "private"], ["--user", "--map-root-user", "--mount"]):
        command = [unshare, *flags]
        tried = interrupts.run(
            [*command, "/bin/sh", "-c", "mount -t tmpfs tmpfs /mnt || mount -t tmpfs tmpfs /tmp"]
        )
        if tried.returncode == 0:
            return command
    return None


class GpuOperator(Component):
    """The operator's controller for a cluster whose stack installs the GPU Operator (its state: `gpuOperator`,
    its version and namespace, or why it cannot run here)."""

    name = "gpu-operator"
    tools = ()
    """Plan-dependent: `tools_for` names the build of the chart's appVersion."""

    def wanted(self, plan: ClusterPlan) -> bool:
        return operator_release(plan) is not None

    def tools_for(self, plan: ClusterPlan) -> tuple[str, ...]:
        """The operator's build of the chart's appVersion, and its `manage-crds` (the chart's CRD hook,
        helm_hooks.py)."""
        release = operator_release(plan)
        if release is None:
            return ()
        found = (operator_tools().get(release.version), manage_crds_tools().get(release.version))
        return tuple(tool for tool in found if tool)

    def start(self, context: Context) -> dict[str, Any]:
        release = operator_release(context.plan)
        assert release is not None
        tool = operator_tools().get(release.version)
        if tool is None:
            why = (
                f"no build of the GPU Operator {release.version} (tools.toml builds {', '.join(operator_tools())})"
            )
            return {"gpuOperator": {"version": release.version, "runs": False, "why": why}}
        unshare = unshare_command()
        if unshare is None:
            why = (
                "no private mount namespace here (`unshare --mount`, and in a user namespace, are refused), and the "
                "operator reads its manifests from /opt/gpu-operator only (controllers/state_manager.go)"
            )
            return {"gpuOperator": {"version": release.version, "runs": False, "why": why}}
        launcher = {
            "kubectl": str(context.toolbox.binary("kubernetes-1.36", "kubectl")),
            "kubeconfig": str(context.sandbox.kubeconfig),
            "namespace": release.namespace,
            "deployment": DEPLOYMENT,
            "operators": operator_builds(context.toolbox),
            "unshare": unshare,
        }
        command = [sys.executable, str(LAUNCHER), json.dumps(launcher)]
        context.supervisor.start(self.name, command, log=context.log(self.name))
        return {"gpuOperator": {"version": release.version, "namespace": release.namespace, "runs": True}}

    def ready(self, context: Context, state: dict[str, Any]) -> None:
        operator = state["gpuOperator"]
        if not operator["runs"]:
            context.say(f"sandbox: the GPU Operator's controller does not run here: {operator['why']}")
            return
        (process,) = context.supervisor.processes(self.name)
        if not context.supervisor.running(process):
            log = context.log(self.name)
            raise SandboxError(f"the GPU Operator's launcher ended ({log}): {log.read_text()[-2000:]}")
        context.say(
            f"sandbox: NVIDIA's GPU Operator {operator['version']} (its controller, built from source) starts once "
            f"the stack's Deployment {operator['namespace']}/{DEPLOYMENT} is Available"
        )
