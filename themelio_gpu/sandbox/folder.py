"""A sandbox: its folder and what is in it, and kubectl against its API server.

`.sandbox/<cluster>/` (or `$THEMELIO_SANDBOX_DIR/<cluster>/`) holds everything of one cluster's sandbox: the
control plane's work folder (`kwok/`), its kubeconfig, the state `up` wrote (`sandbox.json`), the records of its
processes (`processes/`, supervisor.py), the components' files and the stack's. Its modules below the control
plane (supervisor.py, components/) import this one, never cluster.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themelio_gpu import interrupts
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.tools import Toolbox

SANDBOX_DIR_ENV = "THEMELIO_SANDBOX_DIR"
KUBECTL = ("kubernetes-1.36", "kubectl")


def sandboxes_root() -> Path:
    return Path(os.environ.get(SANDBOX_DIR_ENV) or ".sandbox")


@dataclass(frozen=True)
class Sandbox:
    """One cluster's sandbox; `root`, the sandboxes' folder it is in (default: $THEMELIO_SANDBOX_DIR or .sandbox)."""

    cluster: str
    root: Path | None = None

    @property
    def folder(self) -> Path:
        return ((self.root or sandboxes_root()) / self.cluster).absolute()

    @property
    def kwok_name(self) -> str:
        return f"themelio-{self.cluster}"

    @property
    def kwok_workdir(self) -> Path:
        return self.folder / "kwok"

    @property
    def scratch(self) -> Path:
        """The temporary folder (TMPDIR) of the programs the sandbox runs for a deploy (Terraform and its
        providers' plugin sockets, the CDKTF CLI): short enough for a unix socket's path, one per sandbox, removed
        by `down` whatever stopped them (a provider killed with SIGKILL leaves its socket)."""
        digest = hashlib.sha256(str(self.folder).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"themelio-tmp-{digest}"

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
