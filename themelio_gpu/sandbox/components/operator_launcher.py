"""The GPU Operator's pod, as a process: the operator runs while the stack's `gpu-operator` Deployment is Available.

Run by the gpu-operator component (gpu_operator.py) as a script (`python operator_launcher.py SETTINGS`: it imports
nothing of this project), a process of the sandbox's supervisor. It waits (`kubectl wait`, a watch) until the Deployment exists and
is Available, reads its container's arguments and environment from the API, and starts the operator as a child in
its own mount namespace with the manifests bound at /opt/gpu-operator. When the Deployment is deleted (the stack's
destroy), it stops the operator, as the kubelet stops a deleted pod's container; when the operator ends on its own,
it starts it again after `BACK_OFF` seconds, as the kubelet restarts a crashed container. `down` stops the launcher
and the operator together (one process group).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

BACK_OFF = 10.0
"""Seconds before an operator that ended on its own is started again."""
STOP_GRACE = 10.0
MOUNT = (
    'set -e; assets="$1"; shift; '
    "if [ ! -d /opt/gpu-operator ]; then mount -t tmpfs -o mode=0755 tmpfs /opt; mkdir /opt/gpu-operator; fi; "
    'mount --bind "$assets" /opt/gpu-operator; exec "$@"'
)
"""Inside the operator's own mount namespace: /opt/gpu-operator is the built manifests folder (an empty tmpfs over
/opt gives it a mount point where the machine has none), then the operator itself."""


def operator_environment(container: dict[str, Any], namespace: str) -> tuple[dict[str, str], list[str]]:
    """The container's environment as its pod would have it, and what of it cannot be had out of a pod."""
    env: dict[str, str] = {}
    unresolved: list[str] = []
    for entry in container.get("env") or []:
        source = entry.get("valueFrom")
        if source is None:
            env[entry["name"]] = str(entry.get("value", ""))
        elif (source.get("fieldRef") or {}).get("fieldPath") == "metadata.namespace":
            env[entry["name"]] = namespace
        else:
            unresolved.append(f"{entry['name']} ({', '.join(source)})")
    return env, unresolved


def operator_arguments(container: dict[str, Any], kubeconfig: str, namespace: str, flags: str) -> list[str]:
    """The container's arguments, and what running out of a pod needs: the kubeconfig, no metrics or health
    listener (a pod has a network of its own), and its leader election in its own namespace, which out of a pod it
    cannot find (controller-runtime reads it from the pod's service account): with `-leader-elect-namespace`
    where the operator has it (`flags`, its usage text), else without leader election (v26.3.3 has no such flag;
    a sandbox runs one operator)."""
    args = [str(a) for a in container.get("args") or []]
    args += [f"-kubeconfig={kubeconfig}", "--metrics-bind-address=0", "--health-probe-bind-address=0"]
    elect = [a for a in args if a.lstrip("-") in ("leader-elect", "leader-elect=true")]
    if elect and "-leader-elect-namespace" in flags:
        args.append(f"--leader-elect-namespace={namespace}")
    elif elect:
        args = [a for a in args if a not in elect]
    return args


def _say(text: str) -> None:
    print(f"launcher: {text}", flush=True)


def _wait(kubectl: list[str], condition: str, target: str) -> None:
    """Until `kubectl wait` says so (a watch, no polling; it gives up after an hour and is asked again)."""
    while subprocess.run([*kubectl, "wait", condition, target, "--timeout=1h"], check=False).returncode != 0:
        time.sleep(1)


def _command(settings: dict[str, Any], kubectl: list[str], target: str) -> tuple[list[str], dict[str, str]]:
    found = subprocess.run([*kubectl, "get", target, "-o", "json"], check=True, capture_output=True, text=True)
    containers = json.loads(found.stdout)["spec"]["template"]["spec"]["containers"]
    container = next((c for c in containers if c.get("name") == settings["deployment"]), containers[0])
    env, unresolved = operator_environment(container, settings["namespace"])
    if unresolved:
        _say(f"not set (only a pod has them): {', '.join(unresolved)}")
    usage = subprocess.run([settings["operator"], "--help"], check=False, capture_output=True, text=True)
    args = operator_arguments(
        container, settings["kubeconfig"], settings["namespace"], usage.stderr + usage.stdout
    )
    command = [*settings["unshare"], "/bin/sh", "-c", MOUNT, "gpu-operator", settings["assets"]]
    return [*command, settings["operator"], *args], {**os.environ, **env}


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def launch(settings: dict[str, Any]) -> None:
    kubectl = [settings["kubectl"], "--kubeconfig", settings["kubeconfig"], "-n", settings["namespace"]]
    target = f"deployment/{settings['deployment']}"
    while True:
        _wait(kubectl, "--for=create", target)
        _wait(kubectl, "--for=condition=Available", target)
        command, env = _command(settings, kubectl, target)
        _say(f"the Deployment is Available: {' '.join(command)}")
        operator = subprocess.Popen(command, env=env)
        watch = [*kubectl, "wait", "--for=delete", target, "--timeout=-1s"]
        deleted = subprocess.Popen(watch)
        while operator.poll() is None:
            if deleted.poll() is not None:
                if deleted.returncode == 0:
                    break
                time.sleep(1)  # the watch failed (the API server busy): watch again
                deleted = subprocess.Popen(watch)
            time.sleep(0.5)
        if operator.poll() is None:
            _say("the Deployment is deleted: the operator is stopped, as its pod would be")
            _stop(operator)
            continue
        _say(f"the operator ended (exit {operator.returncode}); started again in {BACK_OFF:.0f} s")
        _stop(deleted)
        time.sleep(BACK_OFF)


if __name__ == "__main__":
    launch(json.loads(sys.argv[1]))
