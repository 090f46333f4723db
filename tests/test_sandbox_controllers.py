"""Kueue's and Karpenter's own controllers in the sandbox, on the real control plane: Kueue admits (through its
webhooks) and refuses as the model says, the real scheduler places what it admits; Karpenter launches the nodes of
a device-plugin pool for pending pods and none for a DRA-backed name, and the node it made carries the pool's
contract; both controllers are processes of the sandbox that `down` ends.

Needs the tools of `make sandbox-tools` (Kueue and Karpenter's kwok provider among them) and ../shared's charts
(skipped with the reason without them; in CI nothing skips). The offline half is
tests/test_kueue_karpenter_model.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.builders import cluster, fleet_of, plan_of, write_fleet
from tests.live_sandbox import charts, control_plane_tools, sandboxes_folder
from themelio_gpu.sandbox import cluster as sandbox_cluster
from themelio_gpu.sandbox import deploy, karpenter_probe, kueue_probe, providers
from themelio_gpu.sandbox.supervisor import Supervisor

RESERVED = ["nvidia.com/gpu=present:NoSchedule", "themelio.io/reserved=training:NoSchedule"]
CONTROLLERS = cluster(
    name="ctl",
    karpenter=True,
    offerings=["nvidia.com/a100", "nvidia.com/h100", "nvidia.com/gpu"],
    kueue={"queues": [{"name": "training", "pools": ["h100-train"], "namespaces": ["ml"]}]},
    nodePools=[
        {
            "name": "a100",
            "product": "a100-40gb",
            "gpusPerNode": 2,
            "provisioning": {"static": {"nodes": ["gpu-a"]}},
        },
        {
            "name": "h100-train",
            "product": "h100-80gb",
            "gpusPerNode": 8,
            "taints": RESERVED,
            "provisioning": {
                "karpenter": {"nodeClassRef": {"name": "gpu"}, "instanceTypes": ["p5.48xlarge"], "maxGpus": 16}
            },
        },
        {
            "name": "a10g-plugin",
            "product": "a10g",
            "gpusPerNode": 4,
            "dra": False,
            "provisioning": {
                "karpenter": {"nodeClassRef": {"name": "gpu"}, "instanceTypes": ["g5.12xlarge"], "maxGpus": 8}
            },
        },
    ],
)


@pytest.fixture
def sandboxes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    yield from sandboxes_folder(tmp_path, monkeypatch)


def test_kueue_admits_and_karpenter_launches_as_the_models_say(sandboxes: Path, tmp_path: Path) -> None:
    tools = control_plane_tools("kueue", "karpenter-kwok", "karpenter-crds", *providers.provider_tools())
    catalog, stacks = write_fleet(tmp_path, [CONTROLLERS])
    plan = plan_of(fleet_of(tmp_path, CONTROLLERS), "ctl")
    sandbox = sandbox_cluster.up(plan, tools, charts(tmp_path), say=lambda _: None)
    supervisor = Supervisor(sandbox.folder)
    try:
        running = {p.name for p in supervisor.processes() if supervisor.running(p)}
        assert {"kueue", "karpenter", "karpenter.slices"} <= running, running
        assert not [
            n for n in sandbox.state()["nodes"].values() if n["kind"] == "karpenter"
        ]  # Karpenter's to make
        steps = deploy.execute("apply", "terraform", plan, sandbox, tools, catalog, stacks)
        assert [s.code for s in steps] == [0, 0, 0], steps[-1].output[-3000:]
        try:
            launched = karpenter_probe.probe_karpenter(plan, sandbox)
            queued = kueue_probe.probe_kueue(plan, sandbox, tools)
        finally:
            karpenter_probe.end(sandbox, tools)
    finally:
        recorded = [p for p in supervisor.processes() if p.name.startswith(("kueue", "karpenter"))]
        try:
            deploy.execute("destroy", "terraform", plan, sandbox, tools, catalog, stacks)
        finally:
            sandbox_cluster.down(plan.name, say=lambda _: None)
    assert recorded and not any(Supervisor.running(p) for p in recorded)  # ended by down, by their identity
    assert queued and all(k.agrees for k in queued), kueue_probe.as_table(queued)
    assert all(k.suspended for k in queued)  # Kueue's own webhook suspended each Job as it was created
    granted = next(k for k in queued if "the queue that grants it" in k.key)
    assert granted.real is not None and granted.real.flavor == "pool-h100-train"
    assert any("themelio.io/reserved" in added for added in granted.added)  # the flavor's toleration, by Kueue
    assert launched and all(k.agrees for k in launched), karpenter_probe.as_table(launched)
    rows = {(k.pool, k.tried): k for k in launched}
    dra = rows[("h100-train", "nvidia.com/h100 x1 on the empty pool")]
    assert dra.real.startswith("launched nothing") and "could not schedule pod" in dra.said  # the finding
    assert rows[("a10g-plugin", "nvidia.com/gpu x1 on the empty pool")].real.startswith("launched NodeClaim")
    warm = next(k for k in launched if k.pool == "h100-train" and k.tried == "a pod without a device")
    assert "8 devices published" in warm.real  # the slice writer, as the node registered
    after = next(k for k in launched if k.pool == "h100-train" and "once a node is there" in k.tried)
    assert after.agrees  # through DRA, on the node a pod without a device had Karpenter launch
