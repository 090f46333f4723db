"""NVIDIA's DRA driver publishes the GPUs: its `gpu-kubelet-plugin` (v25.12.0, built from source) per simulated node
of a DRA pool of whole GPUs, on NVIDIA's mock NVML.

Each such node gets a process of its own, run as the driver's DaemonSet runs it on a node (its flags and
environment, deployments/helm/nvidia-dra-driver-gpu/templates/kubeletplugin.yaml), with what a node would give it
made from files: a driver root holding the mock `libnvidia-ml.so.1` (a link to the built library) and an
`nvidia-smi` the plugin only locates, the node's mock profile (`MOCK_NVML_CONFIG`, gpu_profiles.py), CDI,
registrar and plugin folders of its own, and the sandbox's kubeconfig. The plugin asks NVML for the node's GPUs
and publishes the node's ResourceSlice through the API server (field manager `gpu-kubelet-plugin`), as on a real
node; the sandbox writes no slice for those nodes (nodes.py). No kubelet calls it, so no device is prepared.

What the plugin needs and a simulated node does not have: `/sys/bus/pci/devices/<bus id>` (the PCIe root,
`resource.kubernetes.io/pcieRoot`: it warns and publishes the device without it), and the hook it writes into CDI
specs (`--nvidia-cdi-hook-path`, only named there: `true` stands in). Unix sockets allow 107 bytes of path: the
registrar and plugin folders are in a short folder of the system's temporary folder, named after the sandbox's,
removed with it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from themelio_gpu.k8s.nvidia import DRA_DRIVER
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.components.base import Component, Context
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.folder import kubectl
from themelio_gpu.sandbox.gpu_profiles import Profile, driver_publishes, node_profile, profile_for
from themelio_gpu.sandbox.nodes import simulated_nodes
from themelio_gpu.sandbox.slice_compare import publisher
from themelio_gpu.sandbox.supervisor import Supervisor
from themelio_gpu.words import count

PLUGIN_TOOL = "dra-driver-25.12"
MOCK_TOOL = "mock-nvml"
LIBRARY = "libnvidia-ml.so.550.163.01"
IMAGE = "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0"
"""`--image-name` (required): the image the DaemonSet would run, used only to render CDI templates."""
STARTUP = 90.0
"""Seconds every plugin has to publish its node's slice."""


@dataclass(frozen=True)
class PublishedNode:
    """A node whose GPUs the driver publishes: its pool, GPU count and the profile its NVML reads."""

    name: str
    pool: str
    gpus: int
    profile: Profile


def published_nodes(plan: ClusterPlan) -> list[PublishedNode]:
    """Every node of the cluster whose GPUs the driver's plugin publishes, in the cluster file's order."""
    contracts = {c.name: c for c in plan.pools}
    found = []
    for node in simulated_nodes(plan):
        contract = contracts.get(node.pool)
        if contract is not None and driver_publishes(contract):
            profile = profile_for(contract.product)
            assert profile is not None  # driver_publishes says there is one
            found.append(PublishedNode(node.name, contract.name, contract.gpus_per_node, profile))
    return found


def sockets_folder(sandbox_folder: Path) -> Path:
    """The registrar and plugin folders' parent: short enough for a unix socket's path, one per sandbox."""
    digest = hashlib.sha256(str(sandbox_folder).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"themelio-dra-{digest}"


def _namespace(plan: ClusterPlan) -> str:
    """The DRA driver release's namespace (the plugin's `--namespace`, for its custom resources)."""
    for release in plan.releases:
        if "dra-driver" in release.chart:
            return release.namespace
    return "default"


class DraKubeletPlugin(Component):
    """The DRA driver's kubelet plugin on every node of a DRA pool of whole GPUs (its state: `driverSlices`,
    node -> pool and profile)."""

    name = "dra-kubelet-plugin"
    tools = (PLUGIN_TOOL, MOCK_TOOL)

    def wanted(self, plan: ClusterPlan) -> bool:
        return any(driver_publishes(pool) for pool in plan.pools)

    def start(self, context: Context) -> dict[str, Any]:
        nodes = published_nodes(context.plan)
        plugin = context.toolbox.binary(PLUGIN_TOOL, "gpu-kubelet-plugin")
        mock = context.toolbox.tools[MOCK_TOOL]
        stand_in = shutil.which("true") or "/bin/true"
        sockets = sockets_folder(context.sandbox.folder)
        # The sandbox's folder is new (`up` refuses one that exists): a folder of this name is a dead sandbox's,
        # one at the same path that never came to its `down` (seen in CI: `up` ended on its "File exists").
        shutil.rmtree(sockets, ignore_errors=True)
        namespace = _namespace(context.plan)
        published: dict[str, dict[str, str]] = {}
        for index, node in enumerate(nodes):
            folder = context.sandbox.folder / "gpus" / node.name
            root = folder / "driver-root"
            (root / "usr" / "lib64").mkdir(parents=True)
            (root / "usr" / "bin").mkdir(parents=True)
            (root / "usr" / "lib64" / "libnvidia-ml.so.1").symlink_to(mock.path(LIBRARY))
            (root / "usr" / "bin" / "nvidia-smi").symlink_to(stand_in)
            profile = folder / "mock-nvml.yaml"
            document = node_profile(node.profile, mock.path("profiles"), node.name, node.gpus)
            profile.write_text(yaml.safe_dump(document, sort_keys=False))
            short = sockets / str(index)
            command = [
                str(plugin),
                f"--node-name={node.name}",
                f"--namespace={namespace}",
                f"--image-name={IMAGE}",
                f"--cdi-root={folder / 'cdi'}",
                f"--nvidia-driver-root={root}",
                f"--container-driver-root={root}",
                f"--nvidia-cdi-hook-path={stand_in}",
                f"--kubelet-registrar-directory-path={short / 'registry'}",
                f"--kubelet-plugins-directory-path={short / 'plugins'}",
                f"--kubeconfig={context.sandbox.kubeconfig}",
            ]
            (short / "registry").mkdir(parents=True)
            context.supervisor.start(
                f"{self.name}.{node.name}", command, log=context.log(f"{self.name}.{node.name}"),
                env={**os.environ, "MOCK_NVML_CONFIG": str(profile)},
            )  # fmt: skip
            published[node.name] = {"pool": node.pool, "profile": node.profile.describe}
        return {"driverSlices": published}

    def ready(self, context: Context, state: dict[str, Any]) -> None:
        """Until every node's slice is the plugin's, with as many devices as the node has GPUs."""
        expected = {n.name: n for n in published_nodes(context.plan)}
        supervisor = context.supervisor
        deadline = time.monotonic() + STARTUP
        while True:
            slices = json.loads(
                kubectl(
                    context.toolbox,
                    context.sandbox,
                    "get",
                    "resourceslices",
                    "-o",
                    "json",
                    "--show-managed-fields",
                )
            )
            devices = dict.fromkeys(expected, 0)
            for item in slices["items"]:
                node = item["spec"].get("nodeName")
                if node in devices and item["spec"]["driver"] == DRA_DRIVER and publisher(item) == "driver":
                    devices[node] += len(item["spec"].get("devices") or [])
            waiting = [name for name, node in expected.items() if devices[name] != node.gpus]
            if not waiting:
                break
            for name in waiting:
                process = supervisor.processes(f"{self.name}.{name}")
                if not process or not supervisor.running(process[0]):
                    raise SandboxError(_failed(context, name, "the DRA kubelet plugin of {node} ended"))
            if time.monotonic() > deadline:
                raise SandboxError(
                    _failed(context, waiting[0], f"{{node}} has no slice of the plugin in {STARTUP:.0f} s")
                )
            time.sleep(0.5)
        profiles = sorted({n.profile.describe for n in expected.values()})
        total = sum(n.gpus for n in expected.values())
        context.say(
            f"sandbox: NVIDIA's DRA kubelet plugin (nvidia-dra-driver-gpu v25.12.0 on the mock NVML) published "
            f"{count(len(expected), 'ResourceSlice')} with {count(total, 'device')} on {', '.join(expected)} "
            f"({'; '.join(profiles)})"
        )

    def stop(self, supervisor: Supervisor) -> None:
        supervisor.stop(supervisor.processes(self.name))
        shutil.rmtree(sockets_folder(supervisor.folder), ignore_errors=True)


def _failed(context: Context, node: str, what: str) -> str:
    log = context.log(f"{DraKubeletPlugin.name}.{node}")
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:]) if log.is_file() else "(no output)"
    return f"{what.format(node=node)} ({log}):\n{tail}"
