"""What a component of the sandbox is: the `Component` protocol and the `Context` it starts from.

A component is one program run beside the control plane for a cluster that needs it (the chart repository;
NVIDIA's GPU Operator controller, the DRA driver's kubelet plugin per node, Kueue, Karpenter): one module under
components/ with one class implementing this protocol, listed once in the ordered registry
(components/__init__.py). Every process it runs goes through the sandbox's supervisor (`context.supervisor`),
named `<component name>` or `<component name>.<part>` (one a node: `dra-kubelet-plugin.gpu-east-a100-01`), so
that `down` stops it by the identity it recorded, whatever happened to the command that started it.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.folder import Sandbox
from themelio_gpu.sandbox.supervisor import Supervisor
from themelio_gpu.sandbox.tools import Toolbox


@dataclass(frozen=True)
class Context:
    """What a component starts from: the cluster's plan, its sandbox (folder, kubeconfig; the control plane
    is up and every node registered), the built tools (the component's `tools` among them), the chart cache,
    `say` for one line to the user, and whether to start the components only the probe asks of."""

    plan: ClusterPlan
    sandbox: Sandbox
    toolbox: Toolbox
    charts: Path
    say: Callable[[str], None]
    probe_components: bool = True
    """Start the components only the probe asks of (`Component.probe_only`) too."""

    @property
    def supervisor(self) -> Supervisor:
        return Supervisor(self.sandbox.folder)

    def log(self, name: str) -> Path:
        """Where the process `name` writes its output: `<sandbox>/logs/<name>.log`."""
        folder = self.sandbox.folder / "logs"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / f"{name}.log"


class Component(Protocol):
    """One program beside the control plane. Subclass it (explicitly: `stop` has a default) and add an instance
    to components/__init__.py's COMPONENTS, in the order they start (`down` stops them in reverse)."""

    name: str
    """Its processes' names start with it; lowercase words and dashes."""
    tools: tuple[str, ...]
    """The tools.toml names of what it runs (`sandbox up` requires them built)."""
    probe_only: bool = False
    """Only the probe asks anything of it (nothing the stack applies needs it): `sandbox run` and `check`
    without --probe do not start it. `sandbox up` starts it, for a `sandbox probe` to come."""

    def wanted(self, plan: ClusterPlan) -> bool:
        """Whether this cluster's sandbox runs it."""
        ...

    def tools_for(self, plan: ClusterPlan) -> tuple[str, ...]:
        """The tools this cluster's sandbox needs of it: `tools`, unless which build depends on the cluster (the
        GPU Operator at the chart's appVersion)."""
        return self.tools

    def start(self, context: Context) -> dict[str, Any]:
        """Start its processes (through `context.supervisor`) and return what the sandbox's state
        (`sandbox.json`) keeps of it: top-level keys of its own, e.g. an address. May wait for another
        component started before it; must not wait for its own readiness (`ready` does)."""
        ...

    def ready(self, context: Context, state: dict[str, Any]) -> None:
        """Return once it serves; raise SandboxError saying why not (its log's path in the message)."""
        ...

    def stop(self, supervisor: Supervisor) -> None:
        """Stop its processes (SIGTERM to each one's group, then SIGKILL). Runs at `down` without the plan,
        possibly after a kill -9 of the command that started it, and when nothing of it runs."""
        supervisor.stop(supervisor.processes(self.name))


def answers(url: str) -> str:
    """One GET of a component's URL on loopback (never through a proxy): "" when it answers 200, else why not."""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with direct.open(url, timeout=5) as answer:
            return "" if answer.status == 200 else f"HTTP {answer.status}"
    except OSError as error:
        return str(error)
