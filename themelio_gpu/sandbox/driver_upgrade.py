"""NVIDIA's rolling driver upgrade, watched to its end after an apply that changed the driver (`sandbox upgrade`).

A GPU Operator chart upgrade usually brings a new driver version (26.3.3's 580.126.20, 26.7.0's 595.91.07). The
operator's driver DaemonSet is `OnDelete`: its upgrade controller (k8s-operator-libs pkg/upgrade, run by NVIDIA's
own controller in the sandbox) takes the nodes through `upgrade-required`, `cordon-required`,
`wait-for-jobs-required`, `pod-deletion-required` (it deletes the node's GPU pods: `gpuPodDeletion`),
`pod-restart-required` (the driver pod), then uncordons them to `upgrade-done`, `maxParallelUpgrades` at a time,
in the node label `nvidia.com/gpu-driver-upgrade-state`; it looks again every two minutes
(controllers/upgrade_controller.go), so each node takes about that long here. While a node is cordoned the node
lifecycle controller taints it `node.kubernetes.io/unschedulable`, a taint the stack's `kubernetes_node_taint`
plans away (a node's taints are one list): the second plan of an upgrade is only meaningful once it is over.

Which pods the upgrade deletes is NVIDIA's rule (cmd/gpu-operator/main.go `gpuPodSpecFilter`): those asking for a
resource named `nvidia.com/gpu*` or `nvidia.com/mig-*`, and those whose own ResourceClaims (the pod's
`spec.resourceClaims`) hold a device of the `gpu.nvidia.com` driver. A pod asking for another extended resource
name (the catalog's `nvidia.com/a100`, served by a DeviceClass's `extendedResourceName`) has neither: it is left
running while its node's driver is replaced (docs/day-two.md).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from themelio_gpu.sandbox.folder import Sandbox, kubectl
from themelio_gpu.sandbox.tools import Toolbox

STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
DONE = "upgrade-done"
FAILED = "upgrade-failed"
DAEMONSET = "nvidia-driver-daemonset"
WAIT_SECONDS = 900.0
"""How long the upgrade may take: about two minutes a node here (the controller's requeue)."""
POLL_SECONDS = 2.0


@dataclass
class DriverUpgrade:
    """What NVIDIA's upgrade controller did to each node, as the state label went."""

    version: str
    """The driver version the ClusterPolicy asks for."""
    states: dict[str, list[str]] = field(default_factory=dict)
    """Node: each state it was seen in, in order."""
    finished: bool = False
    seconds: float = 0.0

    @property
    def failed(self) -> list[str]:
        return sorted(node for node, seen in self.states.items() if seen and seen[-1] == FAILED)


def _driver(toolbox: Toolbox, sandbox: Sandbox, namespace: str) -> tuple[str, dict[str, Any] | None]:
    """The ClusterPolicy's driver version ("" without one, or with the driver off) and the driver DaemonSet."""
    policies = json.loads(kubectl(toolbox, sandbox, "get", "clusterpolicies.nvidia.com", "-o", "json"))["items"]
    if not policies:
        return "", None
    driver = (policies[0].get("spec") or {}).get("driver") or {}
    if driver.get("enabled") is False:
        return "", None
    found = kubectl(
        toolbox, sandbox, "get", "daemonset", DAEMONSET, "-n", namespace, "-o", "json", "--ignore-not-found"
    )
    return str(driver.get("version") or ""), json.loads(found) if found.strip() else None


def _in_progress(version: str, daemonset: dict[str, Any] | None, states: dict[str, str]) -> bool:
    """The DaemonSet is not yet the asked version everywhere, or a node is still on its way."""
    if daemonset is None:
        return False  # the operator deploys no driver (no node for it): nothing to upgrade
    status = daemonset.get("status") or {}
    images = [c.get("image", "") for c in daemonset["spec"]["template"]["spec"]["containers"]]
    if version and not any(version in image for image in images):
        return True
    if status.get("observedGeneration", 0) < daemonset["metadata"].get("generation", 0):
        return True
    if status.get("updatedNumberScheduled", 0) < status.get("desiredNumberScheduled", 0):
        return True
    return any(state not in (DONE, FAILED) for state in states.values())


def watch(
    toolbox: Toolbox, sandbox: Sandbox, namespace: str, seconds: float = WAIT_SECONDS
) -> DriverUpgrade | None:
    """Until every driver pod is the ClusterPolicy's version and every node is `upgrade-done` (or failed), or
    `seconds` pass; None where the operator deploys no driver (no ClusterPolicy, its driver off, or no driver
    DaemonSet: the base's operator made it if it ever will)."""
    version, daemonset = _driver(toolbox, sandbox, namespace)
    if daemonset is None:
        return None
    upgrade = DriverUpgrade(version)
    started = time.monotonic()
    while True:
        nodes = json.loads(kubectl(toolbox, sandbox, "get", "nodes", "-l", STATE_LABEL, "-o", "json"))["items"]
        states = {n["metadata"]["name"]: n["metadata"]["labels"][STATE_LABEL] for n in nodes}
        for node, state in states.items():
            seen = upgrade.states.setdefault(node, [])
            if not seen or seen[-1] != state:
                seen.append(state)
        if not _in_progress(version, daemonset, states):
            upgrade.finished = True
            break
        if time.monotonic() - started > seconds:
            break
        time.sleep(POLL_SECONDS)
        version, daemonset = _driver(toolbox, sandbox, namespace)
    upgrade.seconds = round(time.monotonic() - started, 1)
    return upgrade


def lines(upgrade: DriverUpgrade) -> list[str]:
    """What `sandbox upgrade` prints of it."""
    head = (
        f"NVIDIA's driver upgrade to {upgrade.version}: "
        + ("done" if upgrade.finished else "NOT finished")
        + f" in {upgrade.seconds:.0f} s"
        + (f"; failed on {', '.join(upgrade.failed)}" if upgrade.failed else "")
    )
    return [head] + [f"  {node}: {' -> '.join(seen)}" for node, seen in sorted(upgrade.states.items())]
