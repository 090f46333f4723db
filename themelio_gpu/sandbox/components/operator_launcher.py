"""The GPU Operator's pod, as a process: the operator runs while the stack's `gpu-operator` Deployment is Available.

Run by the gpu-operator component (gpu_operator.py) as a script (`python operator_launcher.py SETTINGS`: it imports
nothing of this project), a process of the sandbox's supervisor. It waits (`kubectl wait`, a watch) until the
Deployment exists and its rollout is done, reads its container's image, arguments and environment from the API,
and starts the build of the operator version the image names (`v26.7.0` of `nvcr.io/nvidia/gpu-operator:v26.7.0`)
as a child in its own mount namespace, with that build's manifests bound at /opt/gpu-operator. It watches the
Deployment (`kubectl get --watch`): when its template changes (a new generation: a chart upgrade's new image,
arguments or environment), it stops the operator and starts the one the new template names, as a rollout replaces
the pod; when the Deployment is deleted (the stack's destroy), it stops the operator, as the kubelet stops a deleted
pod's container; when the operator ends on its own, it starts it again after `BACK_OFF` seconds, as the kubelet
restarts a crashed container. An image whose version has no build here runs nothing (it says so): never another
version in its place. `down` stops the launcher and the operator together (one process group).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
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


def image_version(container: dict[str, Any]) -> str:
    """The tag of the container's image (`v26.7.0` of `nvcr.io/nvidia/gpu-operator:v26.7.0`), "" without one."""
    image = str(container.get("image") or "").split("@", 1)[0]
    name, _, tag = image.rpartition(":")
    return tag if name and "/" not in tag else ""


def _container(settings: dict[str, Any], deployment: dict[str, Any]) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return next((c for c in containers if c.get("name") == settings["deployment"]), containers[0])


def _command(
    settings: dict[str, Any], build: dict[str, str], container: dict[str, Any]
) -> tuple[list[str], dict[str, str]]:
    env, unresolved = operator_environment(container, settings["namespace"])
    if unresolved:
        _say(f"not set (only a pod has them): {', '.join(unresolved)}")
    usage = subprocess.run([build["operator"], "--help"], check=False, capture_output=True, text=True)
    args = operator_arguments(
        container, settings["kubeconfig"], settings["namespace"], usage.stderr + usage.stdout
    )
    command = [*settings["unshare"], "/bin/sh", "-c", MOUNT, "gpu-operator", build["assets"]]
    return [*command, build["operator"], *args], {**os.environ, **env}


def _stop(process: subprocess.Popen[Any]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class _Watch:
    """`kubectl get --watch` of the Deployment: each event's type and the Deployment's generation, read by a
    thread; watched again whenever kubectl ends (the API server restarted, a Kubernetes upgrade), unless the
    Deployment is gone meanwhile (then a DELETED event)."""

    def __init__(self, kubectl: list[str], target: str) -> None:
        self.kubectl, self.target = kubectl, target
        self.events: queue.Queue[tuple[str, int]] = queue.Queue()
        self.process = self._start()

    def _start(self) -> subprocess.Popen[str]:
        command = [*self.kubectl, "get", self.target, "--watch", "--output-watch-events", "-o",
                   'jsonpath={.type} {.object.metadata.generation}{"\\n"}']  # fmt: skip
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, args=(process,), daemon=True).start()
        return process

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            kind, _, generation = line.strip().partition(" ")
            self.events.put((kind, int(generation) if generation.isdigit() else 0))

    def next(self, timeout: float) -> tuple[str, int] | None:
        """The next event, or None after `timeout` seconds."""
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            pass
        if self.process.poll() is not None and self.events.empty():
            time.sleep(1)
            there = subprocess.run(
                [*self.kubectl, "get", self.target, "--ignore-not-found", "-o", "name"],
                check=False, capture_output=True, text=True,
            )  # fmt: skip
            if there.returncode == 0 and not there.stdout.strip():
                return ("DELETED", 0)
            self.process = self._start()
        return None

    def stop(self) -> None:
        _stop(self.process)


def _run(settings: dict[str, Any], kubectl: list[str], target: str) -> None:
    """One rollout of the Deployment: the operator its template names runs until the template changes or the
    Deployment is deleted."""
    found = subprocess.run([*kubectl, "get", target, "-o", "json"], check=True, capture_output=True, text=True)
    deployment = json.loads(found.stdout)
    generation = int(deployment["metadata"].get("generation") or 0)
    container = _container(settings, deployment)
    version = image_version(container)
    build = settings["operators"].get(version)
    operator: subprocess.Popen[bytes] | None = None
    if build is None:
        builds = ", ".join(sorted(settings["operators"])) or "none"
        _say(f"the Deployment runs the GPU Operator {version or container.get('image')}: no build of it here "
             f"(built: {builds}); it does not run")  # fmt: skip
    else:
        command, env = _command(settings, build, container)
        _say(
            f"the Deployment (generation {generation}) is rolled out: the GPU Operator {version}: {' '.join(command)}"
        )
        operator = subprocess.Popen(command, env=env)
    watch = _Watch(kubectl, target)
    try:
        while True:
            if build is not None and operator is not None and operator.poll() is not None:
                _say(f"the operator ended (exit {operator.returncode}); started again in {BACK_OFF:.0f} s")
                time.sleep(BACK_OFF)
                command, env = _command(settings, build, container)
                operator = subprocess.Popen(command, env=env)
            event = watch.next(timeout=0.5)
            if event is None:
                continue
            kind, seen = event
            if kind == "DELETED":
                _say("the Deployment is deleted: the operator is stopped, as its pod would be")
                return
            if seen and seen != generation:
                _say(f"the Deployment's template changed (generation {generation} -> {seen}): the operator is "
                     "stopped, as a rollout replaces its pod")  # fmt: skip
                return
    finally:
        watch.stop()
        if operator is not None and operator.poll() is None:
            _stop(operator)


def launch(settings: dict[str, Any]) -> None:
    kubectl = [settings["kubectl"], "--kubeconfig", settings["kubeconfig"], "-n", settings["namespace"]]
    target = f"deployment/{settings['deployment']}"
    while True:
        _wait(kubectl, "--for=create", target)
        while subprocess.run([*kubectl, "rollout", "status", target, "--timeout=1h"], check=False).returncode != 0:
            time.sleep(1)  # deleted meanwhile, or the API server restarting: waited for again
            _wait(kubectl, "--for=create", target)
        try:
            _run(settings, kubectl, target)
        except subprocess.CalledProcessError:
            time.sleep(1)  # deleted between the rollout and the read: waited for again


if __name__ == "__main__":
    launch(json.loads(sys.argv[1]))
