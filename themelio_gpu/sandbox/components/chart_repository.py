"""The sandbox's Helm chart repository: the cluster's pinned charts from the chart cache, served on loopback.

GPU clusters often cannot reach NVIDIA's repositories; neither can the sandbox. `helm package` turns each
cached chart folder into its archive, `helm repo index` writes the index, and a small HTTP server on
127.0.0.1 (a port the kernel picks) serves the folder, as a chart museum on the cluster's network would.
It is the sandbox's first component (components/base.py): every cluster's sandbox runs it, its server is a
process of the sandbox's supervisor, and `down` stops it.

The stack is pointed at it the way a fleet is pointed at its mirror: the sandbox synthesizes it with the
server's address as the fleet's mirror ($THEMELIO_CHART_MIRROR, docs/charts.md), so the stack's own chart
sources are what is deployed. A chart from a local chart folder needs no server: the stack ships it (an asset).
A release whose cluster file names a repository address of its own is the one exception: the sandbox cannot
reach that address, so that release alone is pointed at the sandbox's repository by an override file.
"""

from __future__ import annotations

import functools
import http.server
import signal
import sys
import time
from pathlib import Path
from typing import Any

from themelio_gpu import interrupts
from themelio_gpu.plan.model import ClusterPlan, HelmReleaseSpec
from themelio_gpu.sandbox.components.base import Component, Context, answers
from themelio_gpu.sandbox.errors import SandboxError

STARTUP = 20.0
"""Seconds the server has to listen and answer."""


def _own_sources(plan: ClusterPlan) -> list[tuple[HelmReleaseSpec, str, str | None]]:
    """Each release, its cluster file's key and the repository that key names (None: the fleet's mirror)."""
    definition = plan.definition
    keys = (("gpuOperator", definition.gpu_operator.repository), ("draDriver", definition.dra_driver.repository))
    return [(release, key, own) for release, (key, own) in zip(plan.releases, keys, strict=False)]


def own_repositories(plan: ClusterPlan) -> dict[str, str]:
    """{address: `<key>.repository`} of each release whose cluster file names a repository address of its own:
    the fleet's mirror does not replace it, and the sandbox cannot reach it."""
    return {own: f"{key}.repository" for release, key, own in _own_sources(plan) if release.repository and own}


def mirror_is_local_folder(plan: ClusterPlan) -> bool:
    """The fleet's mirror is a local chart folder (a release without a repository of its own ships a chart
    from a folder): the sandbox keeps it, as it keeps every local chart folder."""
    return any(release.archive is not None and own is None for release, _, own in _own_sources(plan))


def package_charts(plan: ClusterPlan, cache: Path, helm: Path, folder: Path) -> list[str]:
    """Package every chart the cluster installs from a repository into `folder` and index it; returns
    `chart version` of each (the charts from local chart folders ship with the stack instead)."""
    folder.mkdir(parents=True, exist_ok=True)
    packaged = []
    for release in (r for r in plan.releases if r.archive is None):
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


class ChartRepository(Component):
    """The chart repository as a component: its state is `chartRepository` (the address deploy.py gives the
    stack as the fleet's mirror) and `charts` (what it serves)."""

    name = "chart-repository"
    tools = ("helm",)

    def wanted(self, plan: ClusterPlan) -> bool:
        return True

    def start(self, context: Context) -> dict[str, Any]:
        folder = context.sandbox.folder / "charts"
        packaged = package_charts(context.plan, context.charts, context.toolbox.binary("helm"), folder)
        port_file = context.sandbox.folder / "chart-repository.port"
        port_file.unlink(missing_ok=True)
        log = context.log(self.name)
        command = [
            sys.executable,
            "-m",
            "themelio_gpu.sandbox.components.chart_repository",
            str(folder),
            str(port_file),
        ]
        server = context.supervisor.start(self.name, command, log=log, cwd=Path(__file__).resolve().parents[3])
        deadline = time.monotonic() + STARTUP
        while time.monotonic() < deadline:
            if port_file.is_file() and port_file.read_text().strip():
                return {"chartRepository": f"http://127.0.0.1:{int(port_file.read_text())}", "charts": packaged}
            if not context.supervisor.running(server):
                break
            time.sleep(0.05)
        raise SandboxError(f"the chart repository server did not start ({log}): {log.read_text()[-2000:]}")

    def ready(self, context: Context, state: dict[str, Any]) -> None:
        url = f"{state['chartRepository']}/index.yaml"
        deadline = time.monotonic() + STARTUP
        while why := answers(url):
            if time.monotonic() > deadline:
                raise SandboxError(f"the chart repository does not answer at {url}: {why}")
            time.sleep(0.1)
        context.say(
            f"sandbox: charts {', '.join(state['charts']) or '(none)'} served at {state['chartRepository']}"
        )


def _serve(folder: str, port_file: str) -> None:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=folder)
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        Path(port_file).write_text(str(server.server_address[1]))
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        server.serve_forever()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
