"""`verify` with the real charts (../shared/reference/charts) and a real helm: the example fleet and the
fixture fleets (both operator modes) are proven, overrides that break placement fail naming the pool and
the DaemonSet, and gpu-west's H100 pool is reached since its tolerations come from the pool taints (and
was not before)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import cluster, fleet_of, write_fleet
from tests.conftest import ROOT
from tests.requirements import binary, shared_path
from themelio_gpu.cli import main
from themelio_gpu.k8s.nvidia import DEPLOY_CLIENT
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.helm.known_values import render_values_yaml
from themelio_gpu.plan.helm.values import NFD_WORKER_DEFAULT_TOLERATIONS, OPERAND_DEFAULT_TOLERATIONS
from themelio_gpu.plan.model import ClusterPlan, Fleet
from themelio_gpu.verify.charts import ChartSource
from themelio_gpu.verify.clusters import verify_cluster
from themelio_gpu.verify.proof import ClusterProof, Row
from themelio_gpu.verify.render import render_release
from themelio_gpu.verify.validation import load_kubernetes_validate

FLEETS = ROOT / "tests" / "fixtures" / "fleets"
StackJson = Callable[[str], dict[str, Any]]
Prove = Callable[[Fleet], dict[str, ClusterProof]]


def fixture_fleet(name: str) -> Fleet:
    folder = (FLEETS / name).relative_to(ROOT)
    return load_fleet(folder / "catalog" / "gpu-catalog.yaml", folder / "stacks")


@pytest.fixture(scope="session")
def helm() -> str:
    return binary("helm", "HELM")


@pytest.fixture(scope="session")
def charts() -> Path:
    return shared_path("reference", "charts")


@pytest.fixture(scope="session")
def prove(helm: str, charts: Path, tmp_path_factory: pytest.TempPathFactory) -> Prove:
    kv = load_kubernetes_validate()

    def run(fleet: Fleet) -> dict[str, ClusterProof]:
        work = tmp_path_factory.mktemp("verify")
        source = ChartSource(helm, charts)
        return {plan.name: verify_cluster(plan, source, work, kv) for plan in fleet.clusters}

    return run


@pytest.fixture(scope="session")
def example_proofs(prove: Prove, example_fleet: Fleet) -> dict[str, ClusterProof]:
    return prove(example_fleet)


@pytest.fixture(scope="session")
def coverage_proofs(prove: Prove) -> dict[str, ClusterProof]:
    return prove(fixture_fleet("coverage"))


@pytest.fixture(scope="session")
def breaking_proofs(prove: Prove) -> dict[str, ClusterProof]:
    return prove(fixture_fleet("breaking-overrides"))


@pytest.fixture(scope="session")
def gpu_operator_mode_proofs(prove: Prove) -> dict[str, ClusterProof]:
    return prove(fixture_fleet("gpu-operator-mode"))


def rows(proof: ClusterProof, pool: str) -> dict[str, Row]:
    found = next(p for p in proof.pools if p.pool.name == pool)
    return {row.workload: row for row in found.rows}


# --- fleets that must pass --------------------------------------------------------------------------------


def test_example_fleet_is_proven(example_fleet: Fleet, example_proofs: dict[str, ClusterProof]) -> None:
    # Whatever clusters the fleet holds: each is proven, on every pool, with a DRA kubelet plugin where due.
    assert sorted(example_proofs) == sorted(plan.name for plan in example_fleet.clusters)
    for name, proof in example_proofs.items():
        assert proof.failures == [], name
        assert len(proof.pools) == len(proof.plan.pools)
        for pool in proof.pools:
            placed = {r.workload: r for r in pool.rows}
            plugins = [r for w, r in placed.items() if w.endswith("-kubelet-plugin")]
            assert [(r.outcome == "runs") for r in plugins] == [pool.pool.dra], (name, pool.pool.name)
            if pool.pool.mig_devices is not None and "nvidia-mig-manager" in placed:
                assert placed["nvidia-mig-manager"].outcome == "runs", (name, pool.pool.name)
            device_plugin = placed.get("nvidia-device-plugin-daemonset")
            if device_plugin is not None and not pool.pool.dra:
                assert device_plugin.outcome == "runs", (name, pool.pool.name)
            if device_plugin is not None and pool.pool.dra and device_plugin.outcome.startswith("does not run"):
                # A mixed cluster: our label keeps the device plugin off the DRA pool, honoured.
                assert "nvidia.com/gpu.deploy.device-plugin=false" in device_plugin.outcome


def test_gpu_operator_mode_fleet_is_proven(gpu_operator_mode_proofs: dict[str, ClusterProof]) -> None:
    for name, proof in gpu_operator_mode_proofs.items():
        assert proof.failures == [], name
        assert any(line.startswith("operands: ") and "GPUCluster gpu-cluster" in line for line in proof.lines)
        for pool in proof.pools:
            placed = rows(proof, pool.pool.name)
            for workload in ("gpu-operator-node-feature-discovery-worker", "nvidia-dra-driver-kubelet-plugin"):
                assert (placed[workload].outcome, placed[workload].ok) == ("runs", True), (name, workload)
            for workload in ("nvidia-dra-validator", "nvidia-dcgm-exporter-dra"):
                # Their claims ask gpu.nvidia.com for a whole GPU: a MIG pool publishes none (as the real
                # operator and scheduler show in the sandbox), which no stack setting changes.
                if pool.pool.mig_devices is None:
                    assert (placed[workload].outcome, placed[workload].ok) == ("runs", True), (name, workload)
                else:
                    assert placed[workload].ok is None and "a MIG node publishes only" in placed[workload].outcome
            driver = placed.get("nvidia-gpu-driver-<os>-<hash>")
            # The operator installs the driver (an NVIDIADriver) unless the nodes have one.
            assert (driver is None) is proof.plan.definition.host_driver, name
            assert driver is None or (driver.source, driver.outcome) == ("NVIDIADriver default", "runs")
            assert not [w for w in placed if "device-plugin" in w or "mig-manager" in w]


def test_gpu_operator_mode_fleet_covers_what_it_claims(gpu_operator_mode_proofs: dict[str, ClusterProof]) -> None:
    plans = [p.plan for p in gpu_operator_mode_proofs.values()]
    pools = [(d, c) for plan in plans for d, c in zip(plan.definition.node_pools, plan.pools, strict=True)]
    assert {plan.definition.host_driver for plan in plans} == {True, False}
    assert {plan.definition.dra_driver.compute_domains for plan in plans} == {True, False}
    assert any(d.provisioning.karpenter is not None for d, _ in pools)
    assert any(any(t.key != "nvidia.com/gpu" for t in c.taints) for _, c in pools)  # taints of its own
    assert any(c.mig_devices is not None for _, c in pools)


def test_gpu_operator_mode_must_render_a_gpu_cluster_and_no_cluster_policy(prove: Prove) -> None:
    fleet = fixture_fleet("gpu-operator-mode")
    plan = fleet.clusters[0]
    # Values that slipped past the definition checks: the operator would run a ClusterPolicy instead.
    values = {**plan.operator_values, "clusterPolicy": {"deployCR": True}, "gpuCluster": {"deployCR": False}}
    releases = (dataclasses.replace(plan.operator_release, values=values),)
    proof = prove(Fleet(fleet.catalog, (dataclasses.replace(plan, releases=releases),)))[plan.name]
    assert (
        "GPU Operator: draDriver.managedBy: gpu-operator needs a GPUCluster and no ClusterPolicy, but the operator "
        "release renders ClusterPolicy cluster-policy"
    ) in proof.failures


def test_gpu_west_h100_is_reached_now(example_proofs: dict[str, ClusterProof]) -> None:
    h100 = rows(example_proofs["gpu-west"], "h100")
    for name in (
        "gpu-operator-node-feature-discovery-worker",
        "dra-driver-nvidia-gpu-kubelet-plugin",
        "nvidia-operator-validator",
        "gpu-feature-discovery",
        "nvidia-dcgm-exporter",
    ):
        assert (h100[name].outcome, h100[name].ok) == ("runs", True), name


def test_a_class_sharing_the_charts_extended_resource_name_fails(prove: Prove, example_fleet: Fleet) -> None:
    # The plan refuses this (see test_node_pools); the proof must catch it too, from the rendered charts.
    plan = example_fleet.cluster("gpu-lab")
    assert plan is not None and plan.dra_release is not None
    ours = plan.device_classes[0]
    colliding = dataclasses.replace(ours, extended_resource_name="nvidia.com/gpu")
    broken = dataclasses.replace(plan, device_classes=(colliding, *plan.device_classes[1:]))
    failures = prove(Fleet(example_fleet.catalog, (broken,)))["gpu-lab"].failures
    assert any(
        f.startswith(
            f"extended resource name nvidia.com/gpu is advertised by 2 DeviceClasses: {ours.name} (this stack), "
            "gpu.nvidia.com (chart "
        )
        for f in failures
    ), failures


def test_gpu_west_h100_was_not_reached_with_the_values_before_the_fix(prove: Prove, example_fleet: Fleet) -> None:
    plan = example_fleet.cluster("gpu-west")
    assert plan is not None
    # Before the fix the operator values set no tolerations: the charts' defaults applied.
    before = {k: v for k, v in plan.operator_values.items() if k not in ("daemonsets", "node-feature-discovery")}
    releases = (dataclasses.replace(plan.operator_release, values=before), *plan.releases[1:])
    proof = prove(Fleet(example_fleet.catalog, (dataclasses.replace(plan, releases=releases),)))["gpu-west"]
    h100 = rows(proof, "h100")
    assert h100["gpu-operator-node-feature-discovery-worker"].outcome == (
        "does not run: taint themelio.io/reserved=training:NoSchedule not tolerated"
    )
    plugin = h100["dra-driver-nvidia-gpu-kubelet-plugin"]
    assert plugin.ok is False and "feature.node.kubernetes.io/pci-10de.present" in plugin.outcome
    assert h100["nvidia-operator-validator"].ok is False
    assert all(row.ok is not False for row in rows(proof, "a10g").values())  # the default taint is fine
    assert any(
        f.startswith("pool h100: DaemonSet gpu-operator-node-feature-discovery-worker") for f in proof.failures
    )


def test_coverage_fleet_is_proven(coverage_proofs: dict[str, ClusterProof]) -> None:
    for name, proof in coverage_proofs.items():
        assert proof.failures == [], name


def test_coverage_fleet_covers_what_it_claims(coverage_proofs: dict[str, ClusterProof]) -> None:
    plans = [p.plan for p in coverage_proofs.values()]
    pools = [(plan, d, c) for plan in plans for d, c in zip(plan.definition.node_pools, plan.pools, strict=True)]
    assert {plan.definition.gpu_operator.version for plan in plans} == {"v26.3.3", "v26.7.0"}
    assert {(r.chart, r.version) for plan in plans for r in plan.releases[1:]} == {
        ("dra-driver-nvidia-gpu", "0.4.1"),
        ("nvidia-dra-driver-gpu", "25.12.0"),
    }
    assert any(d.provisioning.karpenter is not None for _, d, _ in pools)
    assert any(len(c.taints) > 1 for _, _, c in pools)  # extra taints
    assert {t.effect for _, _, c in pools for t in c.taints} == {"NoSchedule", "NoExecute", "PreferNoSchedule"}
    assert any(d.mig is not None and d.mig.profile for _, d, _ in pools)
    assert any(d.mig is not None and d.mig.config for _, d, _ in pools)
    assert any(all(p.dra for p in plan.pools) is False and any(p.dra for p in plan.pools) for plan in plans)
    assert any(not d.dra and d.mig is not None for _, d, _ in pools)  # MIG under the device plugin


def test_device_plugin_and_dra_plugin_split_a_mixed_cluster(coverage_proofs: dict[str, ClusterProof]) -> None:
    proof = coverage_proofs["fx-mixed-device-plugin"]
    for pool in proof.pools:
        placed = {r.workload: r for r in pool.rows}
        plugin = placed["nvidia-device-plugin-daemonset"]
        dra = placed["nvidia-dra-driver-gpu-kubelet-plugin"]
        assert (plugin.outcome == "runs") is (not pool.pool.dra), pool.pool.name
        assert (dra.outcome == "runs") is pool.pool.dra, pool.pool.name
        if pool.pool.mig_devices is not None:
            assert placed["nvidia-mig-manager"].outcome == "runs", pool.pool.name


def test_karpenter_pool_is_proven_on_every_instance_and_capacity_type(
    coverage_proofs: dict[str, ClusterProof],
) -> None:
    pool = next(p for p in coverage_proofs["fx-karpenter-taints"].pools if p.pool.name == "h100-train")
    assert len(pool.nodes) == 6
    assert all(row.outcome == "runs" for row in pool.rows if row.ok is not None and row.expect.value == "must run")


# --- overrides that break placement ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cluster_name", "expected"),
    [
        (
            "bk-operand-tolerations",
            "pool h100-reserved: DaemonSet nvidia-operator-validator (ClusterPolicy cluster-policy) must run here, "
            "but does not run: taint themelio.io/reserved=training:NoSchedule not tolerated",
        ),
        (
            "bk-nfd-tolerations",
            "pool a100-mig: DaemonSet gpu-operator-node-feature-discovery-worker (chart gpu-operator) must run "
            "here, but does not run: taint nvidia.com/gpu=present:NoSchedule not tolerated",
        ),
        (
            "bk-dra-plugin-tolerations",
            "pool h100-reserved: DaemonSet nvidia-dra-driver-gpu-kubelet-plugin (chart dra-driver-nvidia-gpu) must "
            "run here, but does not run: taint nvidia.com/gpu=present:NoSchedule not tolerated",
        ),
        (
            "bk-device-plugin-on-dra",
            "pool a100-mig: DaemonSet nvidia-device-plugin-daemonset (ClusterPolicy cluster-policy) must not run "
            "here, but runs",
        ),
        (
            "bk-no-gfd",
            "pool a100-mig: DaemonSet nvidia-mig-manager (ClusterPolicy cluster-policy) must run here, but does not "
            "run: nodeSelector nvidia.com/gpu.deploy.mig-manager=true",
        ),
        (
            "bk-plugin-affinity",
            "pool a100-mig: DaemonSet dra-driver-nvidia-gpu-kubelet-plugin (chart dra-driver-nvidia-gpu) must run "
            "here, but does not run: required node affinity: none of its 1 terms matches, e.g. kubernetes.io/arch",
        ),
        (
            "bk-plugin-affinity",
            "schema: release dra-driver-nvidia-gpu: DaemonSet dra-driver-nvidia-gpu-kubelet-plugin (apps/v1): "
            "spec.template.spec.tolerations.0: Additional properties are not allowed ('operater' was unexpected)",
        ),
        (
            "bk-gpucluster-tolerations",
            "pool h100-reserved: DaemonSet nvidia-dra-driver-kubelet-plugin (GPUCluster gpu-cluster) must run here, "
            "but does not run: taint themelio.io/reserved=training:NoSchedule not tolerated",
        ),
        (
            "bk-gpucluster-tolerations",
            "pool h100-reserved: DaemonSet nvidia-dra-validator (GPUCluster gpu-cluster) must run here, but does not "
            "run: taint themelio.io/reserved=training:NoSchedule not tolerated; its ResourceClaim needs a device "
            "that nvidia-dra-driver-kubelet-plugin publishes",
        ),
        (
            # The MIG pool's validator could not run anyway (no whole GPU there): its plugin is what breaks.
            "bk-gpucluster-tolerations",
            "pool a100-mig: DaemonSet nvidia-dra-driver-kubelet-plugin (GPUCluster gpu-cluster) must run here, but "
            "does not run: taint nvidia.com/gpu=present:NoSchedule not tolerated",
        ),
        (
            "bk-gpucluster-nfd-tolerations",
            "pool h100-reserved: DaemonSet gpu-operator-node-feature-discovery-worker (chart gpu-operator) must run "
            "here, but does not run: taint themelio.io/reserved=training:NoExecute not tolerated",
        ),
        (
            "bk-gpucluster-nfd-tolerations",
            "pool h100-reserved: DaemonSet nvidia-dra-driver-kubelet-plugin (GPUCluster gpu-cluster) must run here, "
            "but does not run: nodeSelector nvidia.com/gpu.deploy.dra-driver=true (node has no",
        ),
        (
            "bk-gpucluster-nfd-tolerations",
            "pool h100-reserved: DaemonSet nvidia-gpu-driver-<os>-<hash> (NVIDIADriver default) must run here, but "
            "does not run",
        ),
    ],
)
def test_breaking_overrides_fail_naming_pool_and_daemonset(
    breaking_proofs: dict[str, ClusterProof], cluster_name: str, expected: str
) -> None:
    failures = breaking_proofs[cluster_name].failures
    assert any(f.startswith(expected) for f in failures), failures


def test_every_breaking_cluster_fails(breaking_proofs: dict[str, ClusterProof]) -> None:
    assert all(proof.failures for proof in breaking_proofs.values())
    # An emptied operand toleration list hits only the pool with the extra taint.
    assert not [f for f in breaking_proofs["bk-operand-tolerations"].failures if "a100-mig" in f]
    # NFD's worker, short of one taint, misses only the pool that carries it.
    assert not [f for f in breaking_proofs["bk-gpucluster-nfd-tolerations"].failures if "a100-mig" in f]


# --- what the stack passes to helm ----------------------------------------------------------------------


def test_verify_renders_the_values_text_the_helm_release_gets(example_fleet: Fleet, stack_json: StackJson) -> None:
    for plan in example_fleet.clusters:
        releases = stack_json(plan.name)["resource"]["helm_release"]
        for spec in plan.releases:
            release = next(r for r in releases.values() if r["name"] == spec.name)
            assert release["values"] == [render_values_yaml(spec.values)]
            assert (release["chart"], release["version"], release["namespace"], release["repository"]) == (
                spec.chart,
                spec.version,
                spec.namespace,
                spec.repository,
            )


def _render(plan: ClusterPlan, helm: str, charts: Path, tmp_path: Path, index: int) -> list[Any]:
    spec = plan.releases[index]
    chart_dir = ChartSource(helm, charts).chart_dir(spec)
    return list(render_release(helm, spec, chart_dir, plan.definition, tmp_path).objects)


def _plugin_node_selector(objects: list[Any]) -> dict[str, str]:
    plugin = next(
        o for o in objects if o["kind"] == "DaemonSet" and o["metadata"]["name"].endswith("-kubelet-plugin")
    )
    selector: dict[str, str] = plugin["spec"]["template"]["spec"]["nodeSelector"]
    return selector


@pytest.mark.parametrize("chart", [("dra-driver-nvidia-gpu", "0.4.1"), ("nvidia-dra-driver-gpu", "25.12.0")])
def test_with_operator_v26_7_the_dra_plugin_selects_the_gpu_client_label(
    chart: tuple[str, str], helm: str, charts: Path, tmp_path: Path
) -> None:
    draft = {"chart": chart[0], "version": chart[1]}
    new = fleet_of(tmp_path, cluster(gpuOperator={"version": "v26.7.0"}, draDriver=draft)).clusters[0]
    assert _plugin_node_selector(_render(new, helm, charts, tmp_path, 1)) == {
        "nvidia.com/dra-kubelet-plugin": "true",
        DEPLOY_CLIENT: "true",
    }
    assert "manager" not in new.operator_values["driver"]  # the eviction label is for older operators
    (tmp_path / "old").mkdir()
    old = fleet_of(tmp_path / "old", cluster(draDriver=draft)).clusters[0]
    assert _plugin_node_selector(_render(old, helm, charts, tmp_path, 1)) == {
        "nvidia.com/dra-kubelet-plugin": "true"
    }
    assert old.operator_values["driver"]["manager"]["env"][0]["name"] == "NODE_LABEL_FOR_GPU_POD_EVICTION"


@pytest.mark.parametrize("version", ["v26.3.3", "v26.7.0"])
def test_kept_default_tolerations_are_the_real_charts(charts: Path, version: str) -> None:
    values = yaml.safe_load((charts / f"gpu-operator-{version}" / "values.yaml").read_text(encoding="utf-8"))
    assert values["daemonsets"]["tolerations"] == list(OPERAND_DEFAULT_TOLERATIONS)
    assert values["node-feature-discovery"]["worker"]["tolerations"] == list(NFD_WORKER_DEFAULT_TOLERATIONS)


def test_rendered_operator_values_keep_the_chart_defaults_and_add_pool_taints(
    example_fleet: Fleet, helm: str, charts: Path, tmp_path: Path
) -> None:
    plan = example_fleet.cluster("gpu-west")
    assert plan is not None
    objects = _render(plan, helm, charts, tmp_path, 0)
    worker = next(o for o in objects if o["kind"] == "DaemonSet")
    tolerations = worker["spec"]["template"]["spec"]["tolerations"]
    assert [t["key"] for t in tolerations] == [
        "node-role.kubernetes.io/control-plane",
        "nvidia.com/gpu",
        "themelio.io/reserved",
    ]
    # The operands tolerate every taint (values.NODE_AGENT_TOLERATIONS): the chart renders it as written.
    policy = next(o for o in objects if o["kind"] == "ClusterPolicy")
    assert policy["spec"]["daemonsets"]["tolerations"] == [{"operator": "Exists"}]


# --- the command line -----------------------------------------------------------------------------------


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "themelio_gpu", "verify", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_cli_proves_a_cluster_and_exits_zero(helm: str, charts: Path) -> None:
    result = run_cli("--cluster", "gpu-west", "--charts", str(charts), env={"HELM": helm})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "pool h100 (DRA; Karpenter: h100-p5.48xlarge-on-demand)" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith("verify OK: 1 cluster, 2 pools")


def test_cli_fails_naming_pool_and_daemonset(helm: str, charts: Path) -> None:
    folder = FLEETS / "breaking-overrides"
    result = run_cli(
        "--catalog",
        str(folder / "catalog" / "gpu-catalog.yaml"),
        "--stacks-dir",
        str(folder / "stacks"),
        "--cluster",
        "bk-operand-tolerations",
        "--charts",
        str(charts),
        env={"HELM": helm},
    )
    assert result.returncode == 1
    assert "bk-operand-tolerations: pool h100-reserved: DaemonSet nvidia-operator-validator" in result.stdout
    assert "verify FAILED: 5 problems in bk-operand-tolerations" in result.stdout


def test_cli_without_helm_says_so(tmp_path: Path) -> None:
    python_only = tmp_path / "bin"
    python_only.mkdir()
    result = run_cli(
        "--charts",
        "..",
        env={"PATH": str(python_only), "HELM": "", "THEMELIO_TOOLS_CACHE": str(tmp_path / "none")},
    )
    assert result.returncode == 2
    assert "verify: helm is not installed" in result.stderr
    assert "Traceback" not in result.stderr
    named = run_cli("--charts", "..", env={"HELM": str(tmp_path / "no-helm")})
    assert named.returncode == 2 and "which is not an executable helm" in named.stderr


def test_cli_without_kubernetes_validate_says_so(
    helm: str, charts: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib

    real = importlib.import_module

    def without(name: str, package: str | None = None) -> Any:
        if name == "kubernetes_validate":
            raise ImportError(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", without)
    monkeypatch.setenv("HELM", helm)
    assert main(["verify", "--charts", str(charts)]) == 2
    assert "verify: kubernetes-validate is not installed" in capsys.readouterr().err


def test_cli_chart_that_cannot_be_had(helm: str, charts: Path, tmp_path: Path) -> None:
    catalog, stacks = write_fleet(tmp_path, [cluster(name="offline")])
    inputs = ["--catalog", str(catalog), "--stacks-dir", str(stacks)]
    cache = tmp_path / "cache"
    no_cache = run_cli(*inputs, env={"HELM": helm, "THEMELIO_CHART_CACHE": str(cache)})
    assert no_cache.returncode == 2 and "Traceback" not in no_cache.stderr
    assert (
        f"{cache}: no chart cache yet: fetch the charts first (`python -m themelio_gpu charts fetch`), or name a "
        "folder of <chart>-<version> chart folders with --charts"
    ) in no_cache.stderr
    cache.mkdir()
    (cache / "gpu-operator-v26.3.3").symlink_to(charts / "gpu-operator-v26.3.3")
    partial = run_cli(*inputs, env={"HELM": helm, "THEMELIO_CHART_CACHE": str(cache)})
    assert partial.returncode == 1
    assert (
        f"offline: release dra-driver-nvidia-gpu: {cache}/dra-driver-nvidia-gpu-0.4.1: no such chart folder (the "
        "chart cache does not hold it yet: run `python -m themelio_gpu charts fetch`)"
    ) in partial.stdout
    empty = tmp_path / "no-charts"
    empty.mkdir()
    local = run_cli(*inputs, "--charts", str(empty), env={"HELM": helm})
    assert local.returncode == 1
    assert f"{empty}/gpu-operator-v26.3.3: no such chart folder" in local.stdout
    missing = run_cli(*inputs, "--charts", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "--charts" in missing.stderr and "no such folder" in missing.stderr


def test_cli_values_the_chart_refuses(helm: str, charts: Path, tmp_path: Path) -> None:
    refused = cluster(name="refused", draDriver={"values": {"gpuResourcesEnabledOverride": False}})
    catalog, stacks = write_fleet(tmp_path, [refused])
    result = run_cli(
        "--catalog", str(catalog), "--stacks-dir", str(stacks), "--charts", str(charts), env={"HELM": helm}
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert (
        "refused: release dra-driver-nvidia-gpu: helm template dra-driver-nvidia-gpu (dra-driver-nvidia-gpu 0.4.1) refused the values"
        in result.stdout
    )
    assert "nothing proven for this cluster" in result.stdout


def test_cli_unknown_cluster(example_fleet: Fleet) -> None:
    result = run_cli("--cluster", "nope")
    assert result.returncode == 2
    known = ", ".join(sorted(plan.name for plan in example_fleet.clusters))
    assert f"command line: nope: no cluster of that name; known: {known}" in result.stderr


def test_helm_is_not_needed_to_list_the_command() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "themelio_gpu", "verify", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0 and "--charts" in result.stdout


@pytest.mark.parametrize(("version", "message"), [("1.20", "(oldest: 1.25.0)"), ("1.99", "(newest: 1.37.0)")])
def test_a_version_without_schemas_fails_the_proof_with_a_message(
    helm: str, charts: Path, tmp_path: Path, version: str, message: str
) -> None:
    pool = {**cluster()["nodePools"][0], "dra": False}
    catalog, stacks = write_fleet(
        tmp_path, [cluster(kubernetesVersion=version, offerings=["nvidia.com/gpu"], nodePools=[pool])]
    )
    result = run_cli(
        "--catalog", str(catalog), "--stacks-dir", str(stacks), "--charts", str(charts), env={"HELM": helm}
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"has no schemas for Kubernetes {version} {message}" in result.stdout
    assert f"warning: {stacks}/test.yaml: kubernetesVersion: Kubernetes {version} is " in result.stderr
