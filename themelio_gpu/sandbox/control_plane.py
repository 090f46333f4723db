"""The control plane of one sandbox: kwokctl (`--runtime binary`) starts etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok's controller from the built binaries; the sandbox's
supervisor owns them.

Ports: every port a component listens on is one the kernel has just handed out (bound to port 0, read,
closed), given to kwokctl explicitly in its configuration (`options`: kubeApiserverPort, etcdPort, etcdPeerPort,
kubeControllerManagerPort, kubeSchedulerPort, kwokControllerPort; KwokctlConfiguration v1alpha1 of kwok 0.8.0).
Left to itself, kwokctl would try ports from 32767 down (pkg/utils/net), the same ones for every sandbox of the
machine, whatever checkout or tool cache it comes from. Another process may still take a port between its
choice and the component's bind: the component's log then says "bind: address already in use", and the start
is made again on new ports (ATTEMPTS in all), never failed for it.

Processes: kwokctl itself runs as the supervisor's `control-plane.kwokctl`, and each component it starts in a
session of its own writes a pid file (kwok/clusters/<name>/pids/<binary>.pid, pkg/kwokctl/runtime/exec.go);
they are adopted as `control-plane.<binary>` once it returns, or at `down` if the command that started them was
killed, and only if they carry the sandbox's tag (supervisor.py). `kwokctl delete` is never needed: `stop` ends
them by their recorded identity and the sandbox's folder goes with their data.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Callable
from pathlib import Path

from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.folder import KUBECTL, Sandbox, kubectl
from themelio_gpu.sandbox.supervisor import Supervisor
from themelio_gpu.sandbox.tools import Toolbox

NAME = "control-plane"
"""The supervisor's name of its processes: `control-plane.kwokctl`, `control-plane.<binary>`."""
NODE_LEASES = "kube-node-lease"
"""The namespace of the nodes' leases (kwok holds them for the nodes it manages)."""
PORTS = (
    "kubeApiserverPort",
    "etcdPort",
    "etcdPeerPort",
    "kubeControllerManagerPort",
    "kubeSchedulerPort",
    "kwokControllerPort",
)
"""KwokctlConfiguration's options for every port a component of the binary runtime listens on."""
ATTEMPTS = 3
RESTARTS = 2
"""How many times a component that ended while the control plane started is started again (`kwokctl start
cluster` starts what does not run): the controller manager gives the API server 10 s to be healthy and exits
(cmd/kube-controller-manager/app/controllermanager.go), which a busy machine's API server can miss."""
GRACE = 1.0
"""Seconds between SIGTERM and SIGKILL at stop. Measured: the controller manager and kwok's controller end
within 0.1 s of SIGTERM, the scheduler in 5 s, etcd in 7 s, the API server not within 20 s (its graceful
shutdown); their data goes with the sandbox's folder, so they have nothing to save."""
PORT_LOST = "bind: address already in use"
WAIT = "180s"


def free_ports(count: int, besides: int | None = None) -> list[int]:
    """`count` distinct ports the kernel hands out now (each bound to port 0 on every address, all at once so
    they differ, then closed), none of them `besides`."""
    held: list[socket.socket] = []
    try:
        while len(held) < count:
            probe = socket.socket()
            probe.bind(("0.0.0.0", 0))
            if probe.getsockname()[1] == besides:
                probe.close()
                continue
            held.append(probe)
        return [probe.getsockname()[1] for probe in held]
    finally:
        for probe in held:
            probe.close()


def configuration(flags: dict[str, list[str]], ports: dict[str, int]) -> str:
    """kwokctl's configuration: each component's flags (`componentsPatches`) and every port (`options`)."""
    patches = [
        {
            "name": component,
            "extraArgs": [dict(zip(("key", "value"), f.split("=", 1), strict=True)) for f in component_flags],
        }
        for component, component_flags in flags.items()
        if component_flags
    ]
    document = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokctlConfiguration",
        "options": ports,
        "componentsPatches": patches,
    }
    return json.dumps(document, indent=2) + "\n"


def _workdir(sandbox: Sandbox) -> Path:
    return sandbox.kwok_workdir / "clusters" / sandbox.kwok_name


def _lost_ports(sandbox: Sandbox) -> list[str]:
    """The components whose log says another process had taken their port."""
    logs = _workdir(sandbox) / "logs"
    return sorted(
        log.stem
        for log in (logs.glob("*.log") if logs.is_dir() else [])
        if PORT_LOST in log.read_text(errors="replace")
    )


def _ended(sandbox: Sandbox) -> list[str]:
    """The components kwokctl started (a pid file) that are no longer running. A pid file without a number yet
    is one kwokctl is writing (it is empty for a moment): not a component that ended (taken for one, it stopped a
    start that was going well: "kwokctl exit None", seen once in CI)."""
    pids = _workdir(sandbox) / "pids"
    ended = []
    for pid_file in sorted(pids.glob("*.pid")) if pids.is_dir() else []:
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            continue
        try:
            running = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            running = ""
        if not running or running.rsplit(")", 1)[1].split()[0] in "ZX":
            ended.append(pid_file.stem)
    return ended


def start(
    toolbox: Toolbox,
    sandbox: Sandbox,
    binaries: dict[str, Path],
    flags: dict[str, list[str]],
    *,
    port: int | None = None,
    say: Callable[[str], None] = print,
) -> dict[str, int]:
    """Start the control plane on free ports (the API server's on `port` if given) and adopt its processes;
    returns the ports. `binaries`: kwokctl's `--<component>-binary` flags. Raises SandboxError with kwokctl's
    words if it cannot start."""
    supervisor = Supervisor(sandbox.folder)
    env = dict(os.environ, KWOK_WORKDIR=str(sandbox.kwok_workdir))
    # kwokctl takes kubectl from PATH (it would download one otherwise): the built one comes first.
    env["PATH"] = f"{toolbox.binary(*KUBECTL).parent}{os.pathsep}{env.get('PATH', '')}"
    config = sandbox.folder / "kwokctl.yaml"
    log = sandbox.folder / "logs" / "kwokctl.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    kwokctl = str(toolbox.binary("kwok", "kwokctl"))

    def lost_or_ended() -> bool:
        return bool(_lost_ports(sandbox) or _ended(sandbox))

    def run(command: list[str]) -> int | None:
        """kwokctl `command`, stopped as soon as a component loses its port or ends."""
        return supervisor.run(f"{NAME}.kwokctl", command, log=log, env=env, abort=lost_or_ended)

    for attempt in range(1, ATTEMPTS + 1):
        ports = dict(zip(PORTS, free_ports(len(PORTS), besides=port), strict=True))
        if port is not None:
            ports["kubeApiserverPort"] = port
        config.write_text(configuration(flags, ports))
        command = [
            kwokctl, "create", "cluster", "--name", sandbox.kwok_name,
            "--runtime", "binary", "--kubeconfig", str(sandbox.kubeconfig), "--wait", WAIT, "--config", str(config),
            *(f"--{flag}-binary={path}" for flag, path in binaries.items()),
        ]  # fmt: skip
        log.write_text("")
        code = run(command)
        for _ in range(RESTARTS):
            ended = _ended(sandbox)
            if not ended or _lost_ports(sandbox):
                break
            say(f"sandbox: {', '.join(ended)} of the control plane ended while it started: starting it again")
            for name in ended:  # kwokctl takes a pid that answers signal 0 for running, a zombie's too
                (_workdir(sandbox) / "pids" / f"{name}.pid").unlink(missing_ok=True)
            code = run([kwokctl, "start", "cluster", "--name", sandbox.kwok_name, "--wait", WAIT])
        lost, ended = _lost_ports(sandbox), _ended(sandbox)
        if code == 0 and not lost and not ended:
            adopted = supervisor.adopt_pid_files(_workdir(sandbox) / "pids", NAME)
            if len(adopted) >= len(binaries):
                return ports
            ended = [f"{len(binaries) - len(adopted)} of its {len(binaries)} components (running: "
                     f"{', '.join(p.name for p in adopted) or 'none'})"]  # fmt: skip
        stop(sandbox)
        if lost and attempt < ATTEMPTS:
            say(
                f"sandbox: another process took the port of {', '.join(lost)} meanwhile: starting again on new ports"
            )
            shutil.rmtree(sandbox.kwok_workdir, ignore_errors=True)
            continue
        logs = _workdir(sandbox) / "logs"
        why = (
            f"{', '.join(lost)} lost its port to another process {ATTEMPTS} times"
            if lost
            else f"{', '.join(ended)} ended (its log in {logs})"
            if ended
            else f"kwokctl exit {code}"
        )
        raise SandboxError(
            f"kwokctl could not start the control plane: {why} (logs in {logs} and {log}, kept with --keep):\n"
            f"{log.read_text(errors='replace').strip()[-3000:]}"
        )
    raise AssertionError("unreachable")


def stop(sandbox: Sandbox) -> None:
    """Stop the control plane by the identities recorded (a kwokctl still starting it first, so that it starts
    nothing more), adopting first what kwokctl started for a command killed before it could."""
    supervisor = Supervisor(sandbox.folder)
    supervisor.stop(supervisor.processes(f"{NAME}.kwokctl"))
    supervisor.adopt_pid_files(_workdir(sandbox) / "pids", NAME)
    supervisor.stop(supervisor.processes(NAME), grace=GRACE)


def restart(toolbox: Toolbox, sandbox: Sandbox, edit: Callable[[Path], None]) -> None:
    """Stop the control plane, let `edit` change kwokctl's saved configuration (its path given), and start it
    again on the same etcd data folder and ports (a Kubernetes upgrade, upgrade.py). `kwokctl stop cluster`
    lets every component end on its own (etcd writes its data), then whatever is left is stopped by its
    recorded identity; `kwokctl start cluster` runs as the supervisor's, and what it starts is adopted.

    kwok stands in for every node's kubelet, and a kwok that starts takes an identity of its own: it manages a
    node only once it holds the node's lease, which the kwok before it held for 200 s after its last renewal.
    A node's kubelet keeps running through a control plane's upgrade; here its stand-in is stopped first and its
    nodes' leases deleted, so the next kwok takes them at once (else pods were neither started nor removed for
    up to 200 s after an upgrade: a destroy then waited 150 s for the GPU Operator's pods to go)."""
    supervisor = Supervisor(sandbox.folder)
    env = dict(os.environ, KWOK_WORKDIR=str(sandbox.kwok_workdir))
    env["PATH"] = f"{toolbox.binary(*KUBECTL).parent}{os.pathsep}{env.get('PATH', '')}"
    log = sandbox.folder / "logs" / "kwokctl.log"
    kwokctl = str(toolbox.binary("kwok", "kwokctl"))
    supervisor.stop(supervisor.processes(f"{NAME}.kwok-controller"), grace=GRACE)
    kubectl(toolbox, sandbox, "delete", "leases", "--all", "--namespace", NODE_LEASES)
    supervisor.run(f"{NAME}.kwokctl", [kwokctl, "stop", "cluster", "--name", sandbox.kwok_name], log=log, env=env)
    stop(sandbox)
    for name in _ended(sandbox):  # kwokctl takes a pid that answers signal 0 for running, a zombie's too
        (_workdir(sandbox) / "pids" / f"{name}.pid").unlink(missing_ok=True)
    edit(_workdir(sandbox) / "kwok.yaml")
    command = [kwokctl, "start", "cluster", "--name", sandbox.kwok_name, "--wait", WAIT]
    code = supervisor.run(f"{NAME}.kwokctl", command, log=log, env=env)
    adopted = supervisor.adopt_pid_files(_workdir(sandbox) / "pids", NAME)
    ended = _ended(sandbox)
    if code != 0 or ended:
        why = f"{', '.join(ended)} ended" if ended else f"kwokctl exit {code}"
        raise SandboxError(
            f"kwokctl could not start the control plane again: {why} ({len(adopted)} running; logs in "
            f"{_workdir(sandbox) / 'logs'} and {log}):\n{log.read_text(errors='replace').strip()[-3000:]}"
        )
