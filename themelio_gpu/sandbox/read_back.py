"""What the sandbox reads back around an upgrade: the DeviceClasses and the names they map (how long a name had
no class while the stack was applied, and whether two served it at once), the GPU Operator's CRDs against its chart's, and Helm
releases an interrupted upgrade left pending."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from themelio_gpu import interrupts
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.cluster import KUBECTL, Sandbox, kubectl
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.tools import Toolbox

POLL_SECONDS = 0.2


def class_names(toolbox: Toolbox, sandbox: Sandbox) -> dict[str, str]:
    """Every DeviceClass and the extended resource name it maps, as the API server stores it ('' for none:
    with DRAExtendedResource off the API server drops the field)."""
    items = json.loads(kubectl(toolbox, sandbox, "get", "deviceclasses", "-o", "json"))["items"]
    return {c["metadata"]["name"]: c.get("spec", {}).get("extendedResourceName", "") for c in items}


@dataclass
class ClassWatch:
    """DeviceClasses polled while the stack is applied: for each class and each name mapped before and after,
    the longest time it was missing; and each name two classes or more served at once (the scheduler takes the
    one created later: DeviceClass API reference), with how many polls saw it so."""

    polls: int = 0
    seconds: float = 0.0
    missing_since: dict[str, float] = field(default_factory=dict)
    longest: dict[str, float] = field(default_factory=dict)
    """`class <name>` or `name <extended resource name>`: the longest gap seen, in seconds."""
    shared: dict[str, int] = field(default_factory=dict)
    """Extended resource name: the polls that saw it served by more than one class."""

    def observe(self, present: set[str], now: float, shared: set[str] | None = None) -> None:
        for key in self.longest:
            if key in present:
                if key in self.missing_since:
                    gap = now - self.missing_since.pop(key)
                    self.longest[key] = max(self.longest[key], gap)
            else:
                self.missing_since.setdefault(key, now)
        for name in shared or ():
            self.shared[name] = self.shared.get(name, 0) + 1

    def close(self, now: float) -> None:
        for key, since in self.missing_since.items():
            self.longest[key] = max(self.longest[key], now - since)


def _present(toolbox: Toolbox, sandbox: Sandbox) -> tuple[set[str], set[str]]:
    """The keys present (`class X`, `name Y`), and the names served by more than one class."""
    names = class_names(toolbox, sandbox)
    served = [n for n in names.values() if n]
    shared = {n for n in served if served.count(n) > 1}
    return {f"class {c}" for c in names} | {f"name {n}" for n in served}, shared


@contextmanager
def watching_classes(toolbox: Toolbox, sandbox: Sandbox, kept: set[str]) -> Iterator[ClassWatch]:
    """Poll the classes in a thread while the block runs; `kept`: the keys (`class X`, `name Y`) present before
    and after, whose gaps count."""
    watch = ClassWatch(longest=dict.fromkeys(kept, 0.0))
    done = threading.Event()
    started = time.monotonic()

    def poll() -> None:
        while not done.is_set():
            try:
                present, shared = _present(toolbox, sandbox)
            except (SandboxError, interrupts.StoppedError, ValueError):
                return
            watch.polls += 1
            watch.observe(present, time.monotonic(), shared)
            done.wait(POLL_SECONDS)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        with interrupts.ending_workers():
            yield watch
    finally:
        done.set()
        thread.join()
        watch.close(time.monotonic())
        watch.seconds = time.monotonic() - started


def _versions(crd: Mapping[str, Any]) -> dict[str, Any]:
    return {v["name"]: v.get("schema") for v in crd.get("spec", {}).get("versions", [])}


def operator_crds(plan: ClusterPlan, charts: Path, toolbox: Toolbox, sandbox: Sandbox) -> dict[str, str]:
    """Each CRD of the GPU Operator's chart (`crds/`) as the cluster has it: `the chart's` when every version's
    schema is the chart's, else what differs. Helm installs `crds/` once and never upgrades it; the chart's
    pre-upgrade hook (`operator.upgradeCRD`) does."""
    release = plan.operator_release
    folder = charts / f"{release.chart}-{release.version}" / "crds"
    if release.archive is not None or not folder.is_dir():
        return {}
    found: dict[str, str] = {}
    for path in sorted(folder.glob("*.yaml")):
        wanted = yaml.safe_load(path.read_text())
        if not isinstance(wanted, dict) or wanted.get("kind") != "CustomResourceDefinition":
            continue
        name = wanted["metadata"]["name"]
        result = interrupts.run(
            [
                str(toolbox.binary(*KUBECTL)),
                "--kubeconfig",
                str(sandbox.kubeconfig),
                "get",
                "crd",
                name,
                "-o",
                "json",
            ]
        )
        if result.returncode != 0:
            found[name] = "missing"
            continue
        have = json.loads(result.stdout)
        same = _versions(have) == _versions(wanted)
        gen = have["metadata"].get("annotations", {}).get("controller-gen.kubebuilder.io/version", "?")
        found[name] = (
            f"the chart's ({release.version})"
            if same
            else f"stale: not {release.version}'s (controller-gen {gen})"
        )
    return found


def pending_releases(toolbox: Toolbox, sandbox: Sandbox) -> list[tuple[str, str, str]]:
    """(release, namespace, status) of every Helm release an operation left pending (pending-install,
    pending-upgrade, pending-rollback): Helm refuses the next one ("another operation is in progress")."""
    result = interrupts.run(
        [str(toolbox.binary("helm")), "list", "--all-namespaces", "--pending", "--output", "json",
         "--kubeconfig", str(sandbox.kubeconfig)]
    )  # fmt: skip
    if result.returncode != 0:
        return []
    return [(r["name"], r["namespace"], r["status"]) for r in json.loads(result.stdout or "[]")]


def recovery(toolbox: Toolbox, sandbox: Sandbox, cluster: str) -> list[str]:
    """How to recover each release left pending, one line each (none: nothing to say)."""
    lines = []
    for name, namespace, status in pending_releases(toolbox, sandbox):
        undo = (
            f"helm uninstall {name} -n {namespace}"
            if status == "pending-install"
            else f"helm rollback {name} -n {namespace}"
        )
        lines.append(
            f"Helm release {name} in {namespace} is {status} (the operation was cut short); Helm refuses the next "
            f"one until it is undone: `{undo} --kubeconfig {sandbox.kubeconfig}`, then `sandbox apply {cluster}`"
        )
    return lines
