"""What the live sandbox tests share (tests/test_sandbox_live.py, tests/test_sandbox_teardown.py): the tools
(skipping without them), a sandboxes' folder of the test's own, the charts, a small DRA cluster, a `sandbox`
command line, and the tests' own count of what a sandbox left running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, write_fleet
from tests.requirements import ROOT, shared_path, unavailable
from themelio_gpu.sandbox.errors import MissingToolError
from themelio_gpu.sandbox.folder import SANDBOX_DIR_ENV
from themelio_gpu.sandbox.supervisor import stat
from themelio_gpu.sandbox.tools import Toolbox, toolbox

CONTROL_PLANE_TOOLS = ("kubernetes-1.36", "etcd", "kwok", "helm")
NVIDIA_TOOLS = (
    "dra-driver-25.12", "mock-nvml", "gpu-operator-26.7", "gpu-operator-26.3", "gpu-operator-crds-26.7",
    "gpu-operator-crds-26.3",
)  # fmt: skip
"""What a DRA cluster's sandbox runs beside the control plane: NVIDIA's DRA driver on the mock NVML, the GPU
Operator's controller (components/)."""

DRA_CLUSTER = cluster(
    name="live",
    nodePools=[
        {
            "name": "whole",
            "product": "a100-40gb",
            "gpusPerNode": 2,
            "provisioning": {"static": {"nodes": ["gpu-a"]}},
        },
        {
            "name": "sliced",
            "product": "a100-40gb",
            "gpusPerNode": 1,
            "mig": {"profile": "1g.5gb"},
            "provisioning": {"provisioned": {}},
        },
    ],
)


def control_plane_tools(*more: str) -> Toolbox:
    """The built tools of the control plane, NVIDIA's (and `more`), or the test skips saying which are missing."""
    try:
        return toolbox((*CONTROL_PLANE_TOOLS, *NVIDIA_TOOLS, *more))
    except MissingToolError as error:
        unavailable(str(error))
        raise


def sandboxes_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The test's sandboxes' folder ($THEMELIO_SANDBOX_DIR); afterwards no process of it may be left."""
    root = tmp_path / "sandboxes"
    monkeypatch.setenv(SANDBOX_DIR_ENV, str(root))
    yield root
    survivors = processes_of(root)
    for pid in survivors:  # never leave one behind, even when the test failed
        os.kill(pid, signal.SIGKILL)
    assert not survivors, f"processes outlived the sandbox: {survivors}"


def charts(tmp_path: Path) -> Path:
    """A chart cache with the charts the fixture clusters pin (linked to ../shared's real charts)."""
    source = shared_path("reference", "charts")
    cache = tmp_path / "charts"
    if cache.is_dir():
        return cache
    cache.mkdir()
    for chart in source.iterdir():
        if (chart / "Chart.yaml").is_file():
            (cache / chart.name).symlink_to(chart)
    return cache


def sandbox_command(
    tmp_path: Path, sandboxes: Path, *args: str, definitions: list[dict[str, Any]] | None = None
) -> subprocess.Popen[str]:
    """`python -m themelio_gpu sandbox ARGS` on a fleet of `definitions` (default: DRA_CLUSTER)."""
    catalog, stacks = write_fleet(tmp_path, definitions or [DRA_CLUSTER])
    env = dict(os.environ, **{SANDBOX_DIR_ENV: str(sandboxes)}, THEMELIO_CHART_CACHE=str(charts(tmp_path)))
    return subprocess.Popen(
        [sys.executable, "-m", "themelio_gpu", "sandbox", *args, "--catalog", str(catalog), "--stacks-dir", str(stacks)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def processes_of(root: Path) -> list[int]:
    """The tests' own count (the sandbox knows its processes by the identities its supervisor recorded): every
    live process but this one whose environment names `root` or a folder under it as $THEMELIO_SANDBOX_DIR,
    which every sandbox command the tests start, and every process of those sandboxes, inherit. Zombies are not
    counted: they run nothing and hold no port (where init does not reap orphans, they stay)."""
    prefix = f"{SANDBOX_DIR_ENV}={root.absolute()}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environment = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        info = stat(int(entry.name))
        if info is None or info[0] in "ZX":
            continue
        if any(item == prefix or item.startswith(prefix + b"/") for item in environment):
            found.append(int(entry.name))
    return sorted(found)
