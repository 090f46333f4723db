"""Each check of `sandbox probe` shown failing on the real sandbox: one thing broken at a time.

A throwaway copy of the fixture fleet `probe-mutations` is deployed once to a sandbox (real API server,
scheduler and controllers). The untouched probe agrees on every row. Then each mutation breaks one thing,
where the fault would live: in the cluster's live state (a DeviceClass, a node's labels or taints, as a drifted
cluster has them), or in what the cluster is given beside the stack (the namespace's ResourceQuota that
`catalog quota` writes, the ResourceFlavor of `kueue.yaml`). The whole probe runs (placement, quota, the Jobs
through Kueue's own controller, DaemonSets) and the mutation is reverted. The probe must fail exactly the rows that go through what was broken, listed
below and in docs/sandbox.md, and no other; the models (the fleet's own files) are never changed.

Needs the tools of `make sandbox-tools` and ../shared's charts (skipped with the reason without them; in CI
nothing skips). One sandbox for the whole module: about a minute to set up and one probe run per mutation.
`make test` (CI's too) runs the untouched probe and a covering slice of the mutations, one for each kind of row
the probe has (`CI_SLICE`); `make probe-mutations` runs every mutation (THEMELIO_EVERY_MUTATION=1).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.live_sandbox import charts, processes_of
from tests.requirements import unavailable
from themelio_gpu.dryrun.cel_kubernetes import compile_selector
from themelio_gpu.k8s.dra import implicit_name
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.render import contracts
from themelio_gpu.render import kueue as rendered_kueue
from themelio_gpu.sandbox import admission, daemonsets, deploy, kueue_probe, probe
from themelio_gpu.sandbox import cluster as sandbox_cluster
from themelio_gpu.sandbox.errors import MissingToolError
from themelio_gpu.sandbox.tools import Toolbox
from themelio_gpu.sandbox.workflow import _needed
from themelio_gpu.verify.sandbox_prediction import predict

FLEET = Path(__file__).parent / "fixtures" / "fleets" / "probe-mutations"
A100 = "a100-40gb.gpu.themelio.io"
L4 = "l4.gpu.themelio.io"


@dataclass(frozen=True)
class Live:
    plan: ClusterPlan
    sandbox: sandbox_cluster.Sandbox
    tools: Toolbox

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        return sandbox_cluster.kubectl(self.tools, self.sandbox, *args, stdin=stdin)

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json"))


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    root = tmp_path_factory.mktemp("mutations")
    fleet_dir = shutil.copytree(FLEET, root / "fleet")  # the throwaway copy the stack is synthesized from
    catalog, stacks = fleet_dir / "catalog" / "gpu-catalog.yaml", fleet_dir / "stacks"
    plan = load_fleet(catalog, stacks).cluster("mutations")
    assert plan is not None
    try:
        tools = _needed([plan], "terraform")
    except MissingToolError as error:
        unavailable(str(error))
        raise
    with pytest.MonkeyPatch.context() as env:
        env.setenv(sandbox_cluster.SANDBOX_DIR_ENV, str(root / "sandboxes"))
        sandbox = sandbox_cluster.up(plan, tools, charts(root), say=lambda _: None)
        try:
            steps = deploy.execute("apply", "terraform", plan, sandbox, tools, catalog, stacks)
            assert all(s.code == 0 for s in steps), steps[-1].output[-3000:]
            yield Live(plan, sandbox, tools)
        finally:
            deploy.execute("destroy", "terraform", plan, sandbox, tools, catalog, stacks)
            sandbox_cluster.down(plan.name, say=lambda _: None)
    survivors = processes_of(root)
    assert not survivors, f"processes outlived the sandbox: {survivors}"


def failing(live: Live) -> tuple[set[str], str]:
    """Every row of a whole probe that disagrees with the model, and the probe's tables (for the message)."""
    rows = probe.probe(live.plan, live.sandbox, live.tools)
    quota = admission.quota_probe(live.plan, live.sandbox, live.tools)
    queued = kueue_probe.probe_kueue(live.plan, live.sandbox, live.tools)
    placed = daemonsets.compare(live.tools, live.sandbox, predict(live.plan, live.sandbox, live.tools))
    found = {f"placement: {r.key}" for r in rows if not r.agrees}
    found |= {f"quota {q.grant}: {q.tried}" for q in quota if not q.agrees}
    found |= {f"kueue: {k.key}" for k in queued if not k.agrees}
    found |= {f"daemonset: {d.name}" for d in placed if not d.agrees}
    tables = [probe.as_table(rows), admission.quota_table(quota), kueue_probe.as_table(queued)]
    return found, "\n".join([*tables, daemonsets.as_table(placed)])


# --- the mutations ----------------------------------------------------------------------------------------


@contextmanager
def _patched(
    live: Live, kind: str, name: str, patch: list[dict[str, Any]], undo: list[dict[str, Any]]
) -> Iterator[None]:
    live.kubectl("patch", kind, name, "--type=json", "-p", json.dumps(patch))
    try:
        yield
    finally:
        live.kubectl("patch", kind, name, "--type=json", "-p", json.dumps(undo))


@contextmanager
def quota_key_misspelt(live: Live, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The h100 grant's ResourceQuota (as `catalog quota` writes it for the namespace) with requests.nvidia.com/a100
    misspelt: the A100 paths of that namespace are open."""
    real = contracts.resource_quota

    def misspelt(name: str, namespace: str | None, hard: dict[str, str], names: Any) -> dict[str, Any]:
        if hard.get("requests.nvidia.com/h100") == "1":  # the namespace granted one H100
            assert "requests.nvidia.com/a100" in hard
            hard = {
                ("requests.nvidia.com/a1OO" if k == "requests.nvidia.com/a100" else k): v for k, v in hard.items()
            }
        return real(name, namespace, hard, names)

    monkeypatch.setattr(contracts, "resource_quota", misspelt)
    yield


@contextmanager
def implicit_name_left_open(live: Live, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The a100 grant's ResourceQuota without the key that closes the chart's mig.nvidia.com (no name maps it: its
    devices key is all that closes its implicit name and its claims)."""
    real = contracts.resource_quota
    closing = "mig.nvidia.com.deviceclass.resource.k8s.io/devices"

    def left_open(name: str, namespace: str | None, hard: dict[str, str], names: Any) -> dict[str, Any]:
        if hard.get("requests.nvidia.com/a100") == "1":  # the namespace granted one A100
            assert closing in hard
            hard = {k: v for k, v in hard.items() if k != closing}
        return real(name, namespace, hard, names)

    monkeypatch.setattr(contracts, "resource_quota", left_open)
    yield


@contextmanager
def device_class_names_another_product(live: Live, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The A100 offering's DeviceClass, live, selecting the L4 instead."""
    spec = live.get("deviceclass", A100)["spec"]
    expression = spec["selectors"][0]["cel"]["expression"]
    changed = expression.replace("['NVIDIA A100-SXM4-40GB', 'NVIDIA A100-PCIE-40GB']", "['NVIDIA L4']")
    assert changed != expression
    compile_selector(changed)  # still a valid selector: the API server takes it
    path = "/spec/selectors/0/cel/expression"
    with _patched(
        live,
        "deviceclass",
        A100,
        [{"op": "replace", "path": path, "value": changed}],
        [{"op": "replace", "path": path, "value": expression}],
    ):
        yield


def _node_of(live: Live, pool: str) -> str:
    return next(str(n) for n, v in live.sandbox.state()["nodes"].items() if v["pool"] == pool)


@contextmanager
def toleration_misses_the_pools_taint(live: Live, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The L4 pool's dedication taint, live, with a value the L4 offering's toleration (Equal inference) misses."""
    node = _node_of(live, "l4-inference")
    taints = live.get("node", node)["spec"]["taints"]
    index = next(i for i, t in enumerate(taints) if t["key"] == "themelio.io/dedicated")
    path = f"/spec/taints/{index}/value"
    with _patched(
        live,
        "node",
        node,
        [{"op": "replace", "path": path, "value": "training"}],
        [{"op": "replace", "path": path, "value": taints[index]["value"]}],
    ):
        yield


def _label_path(key: str) -> str:
    return "/metadata/labels/" + key.replace("~", "~0").replace("/", "~1")


@contextmanager
def pool_label_dropped(live: Live, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The pool label `<labelDomain>/pool`, live, removed from the L4 pool's node."""
    node, key = _node_of(live, "l4-inference"), live.plan.names.pool_label
    value = live.get("node", node)["metadata"]["labels"][key]
    with _patched(
        live,
        "node",
        node,
        [{"op": "remove", "path": _label_path(key)}],
        [{"op": "add", "path": _label_path(key), "value": value}],
    ):
        yield


@contextmanager
def kueue_flavor_without_the_reserved_toleration(live: Live, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """kueue.yaml's ResourceFlavor of the training queue's reserved pool without its toleration of the reservation."""
    real = rendered_kueue._flavor

    def without(flavor: Any) -> dict[str, Any]:
        rendered = real(flavor)
        if flavor.name == "pool-h100-train":
            tolerations = rendered["spec"]["tolerations"]
            kept = [t for t in tolerations if t["key"] != "themelio.io/reserved"]
            assert len(kept) == len(tolerations) - 1
            rendered["spec"]["tolerations"] = kept
        return rendered

    monkeypatch.setattr(rendered_kueue, "_flavor", without)
    yield


@contextmanager
def dra_kubelet_plugin_label_removed(live: Live, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`nvidia.com/dra-kubelet-plugin` removed from the A100 pool's node: on a real cluster it would publish no GPU
    (the driver's kubelet plugin selects it). The issue's reviewer tried this on gpu-east."""
    node, key = _node_of(live, "a100"), "nvidia.com/dra-kubelet-plugin"
    value = live.get("node", node)["metadata"]["labels"][key]
    with _patched(
        live,
        "node",
        node,
        [{"op": "remove", "path": _label_path(key)}],
        [{"op": "add", "path": _label_path(key), "value": value}],
    ):
        yield


def _quota(grant: str, *tried: str) -> set[str]:
    return {f"quota {grant}: {t}" for t in tried}


KUBELET_PLUGIN = "daemonset: dra-driver-nvidia-gpu-kubelet-plugin"
# Each mutation, and the rows it must fail: those that go through what it breaks, and no other.
MUTATIONS: dict[str, tuple[Any, set[str]]] = {
    "a quota key misspelt": (
        quota_key_misspelt,
        _quota(
            "nvidia.com/h100",
            "pod asking for nvidia.com/a100",
            f"pod asking for {implicit_name(A100)}",
            f"ResourceClaim of {A100}",
        ),
    ),
    "an implicit-name path left open": (
        implicit_name_left_open,
        _quota(
            "nvidia.com/a100",
            f"pod asking for {implicit_name('mig.nvidia.com')}",
            "ResourceClaim of mig.nvidia.com",
        ),
    ),
    "a DeviceClass selector naming another product": (
        device_class_names_another_product,
        {f"placement: {k}" for k in ("nvidia.com/a100", implicit_name(A100), f"ResourceClaim of {A100}")}
        | _quota("nvidia.com/a100", "the grant (nvidia.com/a100)")
        | {
            f"quota {g}: pod asking for {implicit_name(A100)}"
            for g in ("nvidia.com/a100", "nvidia.com/a100-mig-1g.5gb", "nvidia.com/l4", "nvidia.com/h100")
        }
        | {"kueue: nvidia.com/a100 x1 through gpus (fits its quota)"},  # admitted, its pod then finds no device
    ),
    "a toleration that misses the pool's taint": (
        toleration_misses_the_pools_taint,
        {f"placement: {k}" for k in ("nvidia.com/l4", implicit_name(L4), f"ResourceClaim of {L4}")}
        | _quota("nvidia.com/l4", "the grant (nvidia.com/l4)")
        | {
            f"quota {g}: pod asking for {implicit_name(L4)}"
            for g in ("nvidia.com/a100", "nvidia.com/a100-mig-1g.5gb", "nvidia.com/h100")
        },
    ),
    "a pool label dropped": (
        pool_label_dropped,
        {
            "kueue: nvidia.com/l4 x1 through inference (fits its quota; reserved pool l4-inference, the queue that grants it)"
        },
    ),
    "a Kueue flavor without the reserved pool's toleration": (
        kueue_flavor_without_the_reserved_toleration,
        {
            "kueue: nvidia.com/h100 x1 through training (fits its quota; reserved pool h100-train, the queue that grants it)"
        },
    ),
    # The DaemonSet no longer selects the node; and Kueue's flavor for the A100 pool carries the label among its
    # nodeLabels (plan/kueue.py: the pools' owned labels), so the Job Kueue admits there finds no node either.
    # (The driver's plugin process keeps publishing the node's GPUs here: the placement rows do not see it.)
    "nvidia.com/dra-kubelet-plugin removed from nodes": (
        dra_kubelet_plugin_label_removed,
        {KUBELET_PLUGIN, "kueue: nvidia.com/a100 x1 through gpus (fits its quota)"},
    ),
}


CI_SLICE = (
    "a quota key misspelt",
    "a DeviceClass selector naming another product",
    "a Kueue flavor without the reserved pool's toleration",
    "nvidia.com/dra-kubelet-plugin removed from nodes",
)
"""The mutations `make test` runs: one for each kind of row (quota admission; placement by name, implicit name
and ResourceClaim, with the quota rows of the scheduler's claims; a queue's flavor; DaemonSets, the issue's own
case). Each mutation left out fails rows of a kind one in the slice fails too."""
EVERY_MUTATION = "THEMELIO_EVERY_MUTATION"
RUN = list(MUTATIONS) if os.environ.get(EVERY_MUTATION) == "1" else list(CI_SLICE)


def _kind(row: str) -> str:
    if row.startswith("quota "):
        return "quota"
    if row.startswith("daemonset: "):
        return "daemonset"
    if row.startswith("kueue: "):
        return "kueue"
    return (
        "placement by name" if row.removeprefix("placement: ").startswith("nvidia.com/") else "placement by class"
    )


def test_the_slice_ci_runs_fails_every_kind_of_row_any_mutation_fails() -> None:
    assert set(CI_SLICE) <= set(MUTATIONS)
    every = {_kind(row) for _, rows in MUTATIONS.values() for row in rows}
    assert every == {"quota", "daemonset", "kueue", "placement by name", "placement by class"}
    assert {_kind(row) for name in CI_SLICE for row in MUTATIONS[name][1]} == every


def test_the_untouched_sandbox_agrees_on_every_row(live: Live) -> None:
    found, text = failing(live)
    assert found == set(), text


@pytest.mark.parametrize("name", RUN)
def test_each_mutation_fails_the_rows_that_go_through_it_and_no_other(
    live: Live, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    mutate, expected = MUTATIONS[name]
    with mutate(live, monkeypatch):
        found, text = failing(live)
    monkeypatch.undo()
    assert expected and found == expected, (
        f"{name}:\nmissing {sorted(expected - found)}\nextra {sorted(found - expected)}\n{text}"
    )
