"""The sandbox's Helm chart repository: the cluster's pinned charts from the chart cache, served on loopback.

GPU clusters often cannot reach NVIDIA's repositories; neither can the sandbox. `helm package` turns each
cached chart folder into its archive, `helm repo index` writes the index, and a small HTTP server on
127.0.0.1 (a port the kernel picks) serves the folder, as a chart museum on the cluster's network would.
The server runs in its own session until `down` stops it by the pid recorded in the sandbox's state.
"""

from __future__ import annotations

import functools
import http.server
import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

from themelio_gpu import interrupts
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.errors import SandboxError


def package_charts(plan: ClusterPlan, cache: Path, helm: Path, folder: Path) -> list[str]:
    """Package every chart the cluster pins into `folder` and index it; returns `chart version` of each."""
    folder.mkdir(parents=True, exist_ok=True)
    packaged = []
    for release in plan.releases:
        source = cache / f"{release.chart}-{release.version}"
        if not (source / "Chart.yaml").is_file():
            raise SandboxError(
                f"chart {release.chart} {release.version} is not in the chart cache ({source}): run `make charts` "
                "(or `python -m themelio_gpu charts fetch --from DIR` where NVIDIA's repositories cannot be reached)"
            )
        result = interrupts.run([str(helm), "package", str(source), "--destination", str(folder)])
        if result.returncode != 0:
            raise SandboxError(f"helm package {source}: {result.stderr.strip()}")
        packaged.append(f"{release.chart} {release.version}")
    result = interrupts.run([str(helm), "repo", "index", str(folder)])
    if result.returncode != 0:
        raise SandboxError(f"helm repo index {folder}: {result.stderr.strip()}")
    return packaged


def start_server(folder: Path, log: Path) -> tuple[int, int]:
    """Start the server in its own session; returns (pid, port) once it listens."""
    port_file = folder.parent / "chart-repository.port"
    port_file.unlink(missing_ok=True)
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "themelio_gpu.sandbox.chart_repository", str(folder), str(port_file)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            cwd=Path(__file__).resolve().parents[2],
        )  # fmt: skip
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if port_file.is_file() and port_file.read_text().strip():
            return process.pid, int(port_file.read_text())
        if process.poll() is not None:
            break
        time.sleep(0.05)
    stop_server(process.pid)
    raise SandboxError(f"the chart repository server did not start: {log.read_text()[-2000:]}")


def stop_server(pid: int) -> None:
    """End the server (its whole session), if that pid is still our server."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if b"themelio_gpu.sandbox.chart_repository" not in cmdline:
        return
    with suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    for _ in range(100):
        if not Path(f"/proc/{pid}").exists():
            return
        with suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)
    with suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _serve(folder: str, port_file: str) -> None:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=folder)
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        Path(port_file).write_text(str(server.server_address[1]))
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        server.serve_forever()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
