"""One sandbox: a real control plane for one cluster (kwokctl with the built binaries), its nodes and GPUs.

Everything of a sandbox lives in `<sandboxes>/<cluster>/` ($THEMELIO_SANDBOX_DIR, else .sandbox/ in the
working folder): kwok's work folder (the control plane's certificates, etcd data, logs, pids), the
kubeconfig, the chart repository and the stack's Terraform folder. `down` stops every process kwokctl
started and removes the folder; an `up` that fails or is interrupted does the same before it returns.

The control plane runs the cluster file's Kubernetes rules: the binaries are 1.36, and for an older
`kubernetesVersion` every component runs with `--emulated-version` of that minor (KEP-4330), so its feature
gates have that release's defaults (DRAExtendedResource alpha and off in 1.34/1.35); the cluster file's
`featureGates` are passed to the components it names.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themelio_gpu import interrupts
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox import chart_repository
from themelio_gpu.sandbox.errors import SandboxError, SandboxUsageError
from themelio_gpu.sandbox.nodes import simulated_nodes
from themelio_gpu.sandbox.tools import Toolbox, cache_root
from themelio_gpu.words import count

SANDBOX_DIR_ENV = "THEMELIO_SANDBOX_DIR"
BINARY_MINORS = (36, 37)
"""The minor releases of the built Kubernetes binaries (tools.toml's kubernetes-1.<minor>)."""
EMULATION_REACH = 3
"""How many minors back `--emulated-version` reaches (k8s.io/apiserver/pkg/util/compatibility)."""
KUBECTL = ("kubernetes-1.36", "kubectl")
CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
WAIT = "180s"


def sandboxes_root() -> Path:
    return Path(os.environ.get(SANDBOX_DIR_ENV) or ".sandbox")


@dataclass(frozen=True)
class Sandbox:
    cluster: str

    @property
    def folder(self) -> Path:
        return (sandboxes_root() / self.cluster).absolute()

    @property
    def kwok_name(self) -> str:
        return f"themelio-{self.cluster}"

    @property
    def kwok_workdir(self) -> Path:
        return self.folder / "kwok"

    @property
    def kubeconfig(self) -> Path:
        return self.folder / "kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.folder / "sandbox.json"

    def exists(self) -> bool:
        return self.state_file.is_file()

    def state(self) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.state_file.read_text())
        return result


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


def _kwokctl_configuration(args: dict[str, list[str]]) -> str:
    patches = [
        {
            "name": component,
            "extraArgs": [dict(zip(("key", "value"), f.split("=", 1), strict=True)) for f in flags],
        }
        for component, flags in args.items()
        if flags
    ]
    document = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokctlConfiguration",
        "componentsPatches": patches,
    }
    return json.dumps(document, indent=2) + "\n"


def kubectl(toolbox: Toolbox, sandbox: Sandbox, *args: str, stdin: str | None = None) -> str:
    command = [str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), *args]
    result = interrupts.run(command, input=stdin) if stdin is not None else interrupts.run(command)
    if result.returncode != 0:
        raise SandboxError(f"kubectl {' '.join(args[:2])}: {result.stderr.strip() or result.stdout.strip()}")
    return result.stdout


def create_all(toolbox: Toolbox, sandbox: Sandbox, items: list[dict[str, Any]]) -> str:
    """Create every object in one `kubectl create` (one request each); a refusal is a SandboxError."""
    return kubectl(
        toolbox,
        sandbox,
        "create",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}),
    )


def _kwokctl(toolbox: Toolbox, sandbox: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KWOK_WORKDIR=str(sandbox.kwok_workdir))
    # kwokctl takes kubectl from PATH (it would download one otherwise): the built one comes first.
    env["PATH"] = f"{toolbox.binary(*KUBECTL).parent}{os.pathsep}{env.get('PATH', '')}"
    return interrupts.run([str(toolbox.binary("kwok", "kwokctl")), *args], env=env)


@contextmanager
def _one_create_at_a_time() -> Iterator[None]:
    """Hold the machine's kwokctl lock (in the tool cache) while one control plane starts. kwokctl 0.8.0 picks
    each component's port by trying to bind from 32767 down (pkg/utils/net/unused_port.go), so two `up`s at
    once pick the same ports and one control plane fails to start; once `create --wait` returns, its
    components listen and the next `create` passes over their ports."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with (root / "kwokctl-create.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


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
    say: Any = print,
) -> Sandbox:
    """Start the control plane, register every node and publish every GPU; on any failure, leave nothing."""
    sandbox = Sandbox(plan.name)
    if sandbox.exists():
        raise SandboxUsageError(
            f"a sandbox of {plan.name} is up already ({sandbox.folder}); `sandbox down {plan.name}` first"
        )
    for address, key in chart_repository.own_repositories(plan).items():
        say(
            f"sandbox: {plan.file}: {key} {address} is out of the sandbox's reach: that release installs from the "
            "sandbox's chart repository instead (an override file; every other chart comes as the stack says)"
        )
    if port is not None and not _port_free(port):
        raise SandboxUsageError(f"port {port} on 127.0.0.1 is in use: choose another with --port, or leave it out")
    args = feature_gate_args(plan.definition)
    kubernetes = kubernetes_tool(plan.definition)
    started = time.monotonic()
    sandbox.folder.mkdir(parents=True, exist_ok=True)
    try:
        command = [
            "create", "cluster", "--name", sandbox.kwok_name, "--runtime", "binary",
            "--kubeconfig", str(sandbox.kubeconfig), "--wait", WAIT,
            "--kube-apiserver-binary", str(toolbox.binary(kubernetes, "kube-apiserver")),
            "--kube-controller-manager-binary", str(toolbox.binary(kubernetes, "kube-controller-manager")),
            "--kube-scheduler-binary", str(toolbox.binary(kubernetes, "kube-scheduler")),
            "--etcd-binary", str(toolbox.binary("etcd")),
            "--kwok-controller-binary", str(toolbox.binary("kwok")),
        ]  # fmt: skip
        if port is not None:
            command += ["--kube-apiserver-port", str(port)]
        # The components' flags through a configuration file: kwokctl 0.8.0's --extra-args panics when two
        # components each get two (it indexes its list of patches by the position of the flag).
        config = sandbox.folder / "kwokctl.yaml"
        config.write_text(_kwokctl_configuration(args))
        command += ["--config", str(config)]
        say(
            f"sandbox: starting the control plane of {plan.name} (Kubernetes {plan.definition.kubernetes_version} rules)"
        )
        with _one_create_at_a_time():
            result = _kwokctl(toolbox, sandbox, *command)
        if result.returncode != 0:
            logs = sandbox.kwok_workdir / "clusters" / sandbox.kwok_name / "logs"
            raise SandboxError(
                f"kwokctl could not start the control plane (logs in {logs}, kept with --keep):\n"
                f"{(result.stderr or result.stdout).strip()[-3000:]}"
            )
        if any(pool.provisioning.karpenter for pool in plan.definition.node_pools):
            # Karpenter's CRDs come first, as the README asks of users: the stack's NodePool needs them.
            crds = toolbox.tools["karpenter-crds"]
            for name in crds.files:
                kubectl(toolbox, sandbox, "create", "-f", str(crds.path(name)))
            kubectl(toolbox, sandbox, "wait", "--for=condition=Established", "--timeout=60s",
                     "crd/nodepools.karpenter.sh", "crd/nodeclaims.karpenter.sh")  # fmt: skip
        nodes = simulated_nodes(plan)
        _register(toolbox, sandbox, nodes)
        kubectl(toolbox, sandbox, "wait", "--for=condition=Ready", "--timeout=120s", "node", "--all")
        repository = sandbox.folder / "charts"
        packaged = chart_repository.package_charts(plan, charts, toolbox.binary("helm"), repository)
        pid, chart_port = chart_repository.start_server(repository, sandbox.folder / "chart-repository.log")
        (sandbox.folder / "chart-repository.pid").write_text(f"{pid}\n")
        slices = sum(len(n.slices) for n in nodes)
        devices = sum(len(s["spec"]["devices"]) for n in nodes for s in n.slices)
        state = {
            "cluster": plan.name,
            "kwokCluster": sandbox.kwok_name,
            "kubernetesVersion": plan.definition.kubernetes_version,
            "componentFlags": args,
            "nodes": {n.name: {"pool": n.pool, "kind": n.kind} for n in nodes},
            "chartRepository": f"http://127.0.0.1:{chart_port}",
            "charts": packaged,
        }
        sandbox.state_file.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
        kinds = ", ".join(
            f"{sum(1 for n in nodes if n.kind == k)} {k}" for k in ("static", "provisioned", "karpenter", "system")
            if any(n.kind == k for n in nodes)
        )  # fmt: skip
        say(
            f"sandbox: {plan.name} is up in {time.monotonic() - started:.0f} s: {count(len(nodes), 'node')} ({kinds}), "
            f"{count(slices, 'ResourceSlice')} with {count(devices, 'device')}; charts {', '.join(packaged)} served at "
            f"http://127.0.0.1:{chart_port}; kubeconfig {sandbox.kubeconfig}"
        )
    except BaseException as error:
        if keep and not isinstance(error, interrupts.Interrupted):
            say(f"sandbox: kept for a look (--keep): {sandbox.folder}; `sandbox down {plan.name}` removes it")
        else:
            with interrupts.deferred():
                _teardown(toolbox, sandbox)
        raise
    return sandbox


def _register(toolbox: Toolbox, sandbox: Sandbox, nodes: list[Any]) -> None:
    """Create each node, set its status as its kubelet would, then publish its slices."""
    create_all(toolbox, sandbox, [n.manifest for n in nodes])
    for node in nodes:
        status = {"status": node.manifest["status"]}
        kubectl(
            toolbox, sandbox, "patch", "node", node.name, "--subresource=status", "--type=merge",
            "-p", json.dumps(status),
        )  # fmt: skip
    slices = [s for n in nodes for s in n.slices]
    if slices:
        create_all(toolbox, sandbox, slices)


def _teardown(toolbox: Toolbox, sandbox: Sandbox) -> list[str]:
    """Stop the control plane and remove the sandbox's folder; returns what could not be done."""
    problems = []
    pid_file = sandbox.folder / "chart-repository.pid"
    if pid_file.is_file():
        chart_repository.stop_server(int(pid_file.read_text()))
    if (sandbox.kwok_workdir / "clusters" / sandbox.kwok_name).exists():
        result = _kwokctl(toolbox, sandbox, "delete", "cluster", "--name", sandbox.kwok_name)
        if result.returncode != 0:
            problems.append(f"kwokctl delete cluster: {(result.stderr or result.stdout).strip()[-1000:]}")
    _end_processes_in(sandbox.folder)
    shutil.rmtree(sandbox.folder, ignore_errors=True)
    if sandbox.folder.exists():
        problems.append(f"{sandbox.folder} could not be removed")
    with suppress(OSError):  # the sandboxes' folder too, once no other sandbox is in it
        sandbox.folder.parent.rmdir()
    return problems


def processes_in(folder: Path) -> list[int]:
    """Processes whose command line names the folder: every component kwokctl started names its work folder."""
    needle = str(folder).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if needle in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _end_processes_in(folder: Path) -> None:
    """What `kwokctl delete` did not stop (it was interrupted before it wrote a pid file): SIGTERM, then SIGKILL."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        left = processes_in(folder)
        for pid in left:
            with suppress(ProcessLookupError):
                os.kill(pid, signum)
        deadline = time.monotonic() + 5
        while left and time.monotonic() < deadline:
            left = [pid for pid in left if Path(f"/proc/{pid}").exists() and not _zombie(pid)]
            time.sleep(0.05)
        if not left:
            return


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return False


def down(cluster: str, toolbox: Toolbox, say: Any = print) -> None:
    sandbox = Sandbox(cluster)
    if not sandbox.folder.exists():
        say(f"sandbox: no sandbox of {cluster} ({sandbox.folder}); nothing to do")
        return
    problems = _teardown(toolbox, sandbox)
    if problems:
        raise SandboxError("; ".join(problems))
    say(f"sandbox: {cluster} is down; its processes are stopped and {sandbox.folder} is removed")
