"""Running the real helm: named by $HELM, found on PATH, or the one `make sandbox-tools` built; its failures are
messages, never tracebacks."""

from __future__ import annotations

import os
import shutil
import subprocess

from themelio_gpu import interrupts

HELM_ENV = "HELM"
HELM_TIMEOUT_SECONDS = 300


class HelmMissingError(Exception):
    """No helm to run: one clear message, exit 2."""


class ChartError(Exception):
    """One chart cannot be had (pulled, copied, found) or rendered: the message says which and why."""


def helm_binary(purpose: str = "verify renders the real charts with `helm template`") -> str:
    """helm named by $HELM, else the one on PATH, else the one the project's tool build made."""
    named = os.environ.get(HELM_ENV)
    if named:
        if shutil.which(named) is None:
            raise HelmMissingError(f"${HELM_ENV} is {named!r}, which is not an executable helm")
        return named
    found = shutil.which("helm")
    if found is not None:
        return found
    # sandbox is a layer below charts (pyproject.toml [tool.importlinter]): its tool cache, never the reverse.
    from themelio_gpu.sandbox.tools import load_tools

    built = load_tools()["helm"]
    if built.built():
        return str(built.path("helm"))
    raise HelmMissingError(
        f"helm is not installed: {purpose}. Run `make sandbox-tools` (builds helm {built.version} from its Go "
        f"module), or install helm (v3.8 or later) on PATH, or name it in ${HELM_ENV}"
    )


def run_helm(helm: str, args: list[str], what: str) -> str:
    """helm's stdout; ChartError with helm's own message when it fails."""
    try:
        done = interrupts.run([helm, *args], timeout=HELM_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        raise ChartError(f"{what}: helm did not finish within {HELM_TIMEOUT_SECONDS}s") from None
    except OSError as error:
        raise HelmMissingError(f"cannot run {helm}: {error.strerror or error}") from None
    if done.returncode != 0:
        message = " ".join(line.strip() for line in done.stderr.strip().splitlines() if line.strip())
        raise ChartError(f"{what}: {message or f'helm exited with {done.returncode}'}")
    return done.stdout
