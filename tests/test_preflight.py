"""`preflight` against a real HTTP server on 127.0.0.1 serving recorded-shape API responses (tests/fakeapi.py).

Every scenario runs the whole preflight through the official kubernetes client; the server records each
request, so the tests also prove that the only write is one `dryRun=All` DeviceClass create.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLE_CATALOG, EXAMPLE_STACKS
from tests.fakeapi import SCENARIOS, FakeApiServer, _label_matcher, _matches
from themelio_gpu.live.api import DEVICE_CLASSES
from themelio_gpu.live.device_classes import LiveClass, winning_class
from themelio_gpu.live.gate import PROBE_RESOURCE_NAME
from themelio_gpu.live.kubeconfig import KubeconfigError, api_kubeconfig
from themelio_gpu.live.pools import node_contract_problems
from themelio_gpu.live.preflight import run_preflight
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan, Fleet

ROOT = Path(__file__).resolve().parents[1]
QUOTA_FLEET = ROOT / "tests" / "fixtures" / "fleets" / "quota-chart-gpu"


@pytest.fixture(scope="module")
def east(example_fleet: Fleet) -> ClusterPlan:
    plan = example_fleet.cluster("gpu-east")
    assert plan is not None
    return plan


def run(plan: ClusterPlan, scenario: str | Path) -> tuple[int, list[str], FakeApiServer]:
    """Preflight against the scenario; also proves, for every scenario, that the only write was the dry run."""
    with FakeApiServer.for_scenario(scenario) as server, server.api_client() as client:
        out = io.StringIO()
        code = run_preflight(plan, out, api_client=client)
    assert [(w.method, w.path, w.query) for w in server.writes] == [("POST", DEVICE_CLASSES, {"dryRun": ["All"]})]
    return code, out.getvalue().splitlines(), server


def lines_of(lines: list[str], status: str) -> list[str]:
    return [line for line in lines if line.startswith(f"{status} ")]


def only(lines: list[str], status: str, check: str) -> str:
    found = [line for line in lines if line.startswith(f"{status:<4} {check}: ")]
    assert len(found) == 1, f"expected one {status} {check} line in:\n" + "\n".join(lines)
    return found[0]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --- Fixtures are what the generator writes --------------------------------------------------------------


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("make_fixtures", SCENARIOS / "make_fixtures.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    return generator


def test_fixtures_match_their_generator() -> None:
    generator = _generator()
    expected: dict[str, str] = generator.render()
    stale = []
    for name in generator.SCENARIOS:
        for path in (SCENARIOS / name).rglob("*"):
            rel = path.relative_to(SCENARIOS).as_posix()
            if path.is_file() and rel not in expected:
                stale.append(rel)
    differ = [
        rel
        for rel, text in expected.items()
        if not (SCENARIOS / rel).is_file() or (SCENARIOS / rel).read_text() != text
    ]
    assert not differ and not stale, (
        f"fixtures out of date (differ: {differ}, not generated: {stale}); "
        "run .venv/bin/python tests/fixtures/apiserver/make_fixtures.py and review the diff"
    )


# --- Scenarios -------------------------------------------------------------------------------------------


def test_healthy_cluster_passes(east: ClusterPlan) -> None:
    code, lines, _ = run(east, "healthy")
    assert code == 0, "\n".join(lines)
    assert [line.split(":", 1)[0] for line in lines[:-1]] == [
        "OK   connection",
        "OK   server-version",
        "OK   extended-resource-gate",
        "OK   device-class a100-40gb-mig-1g.5gb.gpu.themelio.io",
        "OK   device-class a100-40gb-mig-3g.20gb.gpu.themelio.io",
        "OK   device-class a100-40gb.gpu.themelio.io",
        "OK   device-class gpu.nvidia.com",
        "OK   device-class legacy-mig-1g.5gb.gpu.themelio.io",
        "OK   device-class legacy-mig-3g.20gb.gpu.themelio.io",
        "OK   extended-resources",
        "OK   device-plugin",
        "OK   resource-slices",
        "OK   offering nvidia.com/a100",
        "OK   offering nvidia.com/a100-mig-1g.5gb",
        "OK   offering nvidia.com/a100-mig-3g.20gb",
        "OK   offering nvidia.com/gpu",
        "WARN unselected-devices",
        "OK   resource-quotas",
        "OK   pool a100-whole",
        "OK   pool a100-mig",
    ]
    assert only(lines, "OK", "server-version").endswith("v1.34.2 (declared 1.34.2)")
    assert "112 devices in 5 ResourceSlices on 5 nodes" in only(lines, "OK", "resource-slices")
    offerings = [line for line in lines if line.startswith("OK   offering ")]
    assert offerings == [
        "OK   offering nvidia.com/a100: 16 devices on 2 nodes "
        "(class a100-40gb.gpu.themelio.io; 16 shared with nvidia.com/gpu by design)",
        "OK   offering nvidia.com/a100-mig-1g.5gb: 48 devices on 3 nodes (class a100-40gb-mig-1g.5gb.gpu.themelio.io)",
        "OK   offering nvidia.com/a100-mig-3g.20gb: 24 devices on 3 nodes (class a100-40gb-mig-3g.20gb.gpu.themelio.io)",
        "OK   offering nvidia.com/gpu: 16 devices on 2 nodes (class gpu.nvidia.com; 16 shared with nvidia.com/a100 by design)",
    ]
    # all-balanced also makes 2g.10gb slices, which no offering of gpu-east sells: worth a warning.
    assert "24 devices no offering selects: 24x NVIDIA A100-SXM4-40GB 2g.10gb (" in only(
        lines, "WARN", "unselected-devices"
    )
    assert only(lines, "OK", "resource-quotas") == (
        "OK   resource-quotas: 2 namespaces with GPU keys (team-a, team-b) limit all 8 ways to a GPU; 1 with "
        "quotas but no GPU key (kube-system): every GPU is open to them"
    )
    assert lines[-1] == "Summary: 19 OK, 1 WARN, 0 FAIL: cluster gpu-east passed"


def test_the_only_write_is_one_dry_run_probe(east: ClusterPlan) -> None:
    _, _, server = run(east, "healthy")
    body = server.writes[0].body
    assert body is not None
    assert body["spec"] == {"extendedResourceName": PROBE_RESOURCE_NAME}
    assert body["metadata"]["generateName"] == "themelio-preflight-probe-"
    assert {r.method for r in server.requests} == {"GET", "POST"}


def test_every_scenario_has_a_test() -> None:
    # run() checks the read-only promise, so each scenario folder must be exercised by some test here.
    source = Path(__file__).read_text()
    # A scenario is a folder with scenario.yaml (loading make_fixtures.py may leave a __pycache__ beside them).
    scenarios = [p for p in SCENARIOS.iterdir() if (p / "scenario.yaml").is_file()]
    assert scenarios
    untested = [p.name for p in scenarios if f'"{p.name}")' not in source]
    assert not untested


def test_gate_off_fails_and_says_what_to_enable(east: ClusterPlan) -> None:
    code, lines, _ = run(east, "gate-off")
    assert code == 1
    gate = only(lines, "FAIL", "extended-resource-gate")
    assert "silently dropped spec.extendedResourceName" in gate
    assert (
        "--feature-gates=DRAExtendedResource=true on kube-apiserver, kube-scheduler, kube-controller-manager, kubelet"
        in gate
    )
    assert "The definition declares it on for kube-apiserver: the server disagrees" in gate
    # The classes applied while the gate was off lost the field too.
    assert "has no spec.extendedResourceName, the plan expects nvidia.com/a100:" in only(
        lines, "FAIL", "device-class a100-40gb.gpu.themelio.io"
    )


def test_device_plugin_and_class_on_one_node_fail(east: ClusterPlan) -> None:
    code, lines, _ = run(east, "plugin-and-class")
    assert code == 1
    line = only(lines, "FAIL", "device-plugin gpu-east-a100-01")
    assert "status.allocatable has nvidia.com/gpu=8" in line
    assert "nvidia.com/dra-kubelet-plugin=true" in line
    assert "DeviceClass gpu.nvidia.com serves nvidia.com/gpu" in line
    assert len(lines_of(lines, "FAIL")) == 1


def test_version_mismatch_fails(east: ClusterPlan) -> None:
    code, lines, _ = run(east, "version-mismatch")
    assert code == 1
    line = only(lines, "FAIL", "server-version")
    assert "the server runs v1.35.0, the definition declares kubernetesVersion 1.34.2" in line
    assert east.file in line


def test_older_patch_release_is_a_warning(east: ClusterPlan, tmp_path: Path) -> None:
    scenario = tmp_path / "older-patch"
    scenario.mkdir()
    (scenario / "scenario.yaml").write_text(yaml.safe_dump({"base": str(SCENARIOS / "healthy")}))
    version = json.loads((SCENARIOS / "healthy" / "version.json").read_text())
    (scenario / "version.json").write_text(json.dumps({**version, "gitVersion": "v1.34.1"}))
    code, lines, _ = run(east, scenario)
    assert code == 0
    assert "the server runs v1.34.1, older than the declared 1.34.2" in only(lines, "WARN", "server-version")


def test_missing_class_fails(east: ClusterPlan) -> None:
    code, lines, _ = run(east, "missing-class")
    assert code == 1
    line = only(lines, "FAIL", "device-class a100-40gb-mig-3g.20gb.gpu.themelio.io")
    assert "missing: the stack gpu-east has not created it" in line
    assert len(lines_of(lines, "FAIL")) == 1


def test_two_classes_serving_one_name_fail(east: ClusterPlan) -> None:
    code, lines, _ = run(east, "duplicate-class")
    assert code == 1
    line = only(lines, "FAIL", "extended-resource nvidia.com/a100")
    assert "a100-40gb.gpu.themelio.io (created 2026-03-05T10:04:37Z)" in line
    assert "a100.gpu.example.org (created 2026-04-11T15:20:03Z)" in line
    assert "a100.gpu.example.org, created later, wins, not the planned a100-40gb.gpu.themelio.io" in line


def test_node_missing_a_contract_label_and_taint_fails(east: ClusterPlan) -> None:
    code, lines, _ = run(east, "bad-labels")
    assert code == 1
    assert only(lines, "FAIL", "pool a100-mig") == (
        "FAIL pool a100-mig: node gpu-east-a100-12: missing labels themelio.io/team=research; "
        "missing taints nvidia.com/gpu=present:NoSchedule"
    )
    assert only(lines, "OK", "pool a100-whole")


def test_offering_selecting_nothing_fails(east: ClusterPlan) -> None:
    code, lines, _ = run(east, "empty-slices")
    assert code == 1
    for offering, class_name in (
        ("nvidia.com/a100-mig-1g.5gb", "a100-40gb-mig-1g.5gb.gpu.themelio.io"),
        ("nvidia.com/a100-mig-3g.20gb", "a100-40gb-mig-3g.20gb.gpu.themelio.io"),
    ):
        line = only(lines, "FAIL", f"offering {offering}")
        assert f"class {class_name} selects none of the 16 published devices" in line
    assert only(lines, "OK", "offering nvidia.com/a100")


def test_resource_api_not_served_fails_once_and_skips_dra_checks(east: ClusterPlan) -> None:
    code, lines, _ = run(east, "no-resource-api")
    assert code == 1
    assert "resource.k8s.io/v1 is not served" in only(lines, "FAIL", "extended-resource-gate")
    assert "Kubernetes 1.34 or later" in only(lines, "FAIL", "extended-resource-gate")
    assert not [line for line in lines if "device-class" in line or "offering" in line]
    assert len(lines_of(lines, "FAIL")) == 1


@pytest.fixture(scope="module")
def quota_east() -> ClusterPlan:
    """gpu-east from the quota fixture fleet (tests/fixtures/fleets/quota-chart-gpu), the same cluster as recorded."""
    plan = load_fleet(QUOTA_FLEET / "catalog" / "gpu-catalog.yaml", QUOTA_FLEET / "stacks").cluster("gpu-east")
    assert plan is not None
    return plan


def test_quota_holes_name_each_open_path_and_the_key_to_add(quota_east: ClusterPlan) -> None:
    code, lines, _ = run(quota_east, "quota-holes")
    assert code == 1
    # team-c has what the tool used to emit: only requests.nvidia.com/a100.
    assert [line for line in lines if line.startswith("FAIL quota team-c:")] == [
        "FAIL quota team-c: class a100-40gb-mig-1g.5gb.gpu.themelio.io (nvidia.com/a100-mig-1g.5gb, "
        "deviceclass.resource.kubernetes.io/a100-40gb-mig-1g.5gb.gpu.themelio.io, ResourceClaims) is not limited: "
        "add requests.nvidia.com/a100-mig-1g.5gb (its grant, or 0)",
        "FAIL quota team-c: class a100-40gb-mig-3g.20gb.gpu.themelio.io (nvidia.com/a100-mig-3g.20gb, "
        "deviceclass.resource.kubernetes.io/a100-40gb-mig-3g.20gb.gpu.themelio.io, ResourceClaims) is not limited: "
        "add requests.nvidia.com/a100-mig-3g.20gb (its grant, or 0)",
        "FAIL quota team-c: class legacy-mig-1g.5gb.gpu.themelio.io (nvidia.com/mig-1g.5gb, "
        "deviceclass.resource.kubernetes.io/legacy-mig-1g.5gb.gpu.themelio.io, ResourceClaims) is not limited: "
        "add requests.nvidia.com/mig-1g.5gb (its grant, or 0)",
        "FAIL quota team-c: class legacy-mig-3g.20gb.gpu.themelio.io (nvidia.com/mig-3g.20gb, "
        "deviceclass.resource.kubernetes.io/legacy-mig-3g.20gb.gpu.themelio.io, ResourceClaims) is not limited: "
        "add requests.nvidia.com/mig-3g.20gb (its grant, or 0)",
        "FAIL quota team-c: class gpu.nvidia.com (nvidia.com/gpu, deviceclass.resource.kubernetes.io/gpu.nvidia.com, "
        "ResourceClaims) is not limited: add requests.nvidia.com/gpu (its grant, or 0)",
        "FAIL quota team-c: class mig.nvidia.com (deviceclass.resource.kubernetes.io/mig.nvidia.com, ResourceClaims) "
        "is not limited: add mig.nvidia.com.deviceclass.resource.k8s.io/devices (0)",
        "FAIL quota team-c: class vfio.gpu.nvidia.com (deviceclass.resource.kubernetes.io/vfio.gpu.nvidia.com, "
        "ResourceClaims) is not limited: add vfio.gpu.nvidia.com.deviceclass.resource.k8s.io/devices (0)",
    ]
    # team-d lists every key, but in a scoped quota: that limits neither claims nor pods outside its scope.
    assert "ResourceQuota gpu-high has scopes" in only(lines, "WARN", "quota team-d")
    assert len([line for line in lines if line.startswith("FAIL quota team-d:")]) == 8
    # The complete namespaces pass, and nothing else fails.
    assert not [line for line in lines if line.startswith(("FAIL quota team-a", "FAIL quota team-b"))]
    assert {line.split(":")[0] for line in lines_of(lines, "FAIL")} == {"FAIL quota team-c", "FAIL quota team-d"}


def test_the_planned_quota_closes_what_preflight_checks(quota_east: ClusterPlan) -> None:
    """The planner's keys for gpu-east are the recorded cluster's complete set (an independent record)."""
    from themelio_gpu.plan.quota import plan_quota

    generator = _generator()
    assert set(plan_quota(quota_east).keys) == set(generator.EAST_GPU_KEYS)


def test_no_namespace_with_a_gpu_key_is_a_warning(quota_east: ClusterPlan, tmp_path: Path) -> None:
    scenario = tmp_path / "no-gpu-quotas"
    (scenario / "api" / "v1").mkdir(parents=True)
    (scenario / "scenario.yaml").write_text(yaml.safe_dump({"base": str(SCENARIOS / "healthy")}))
    (scenario / "api" / "v1" / "resourcequotas.json").write_text(
        json.dumps({"kind": "ResourceQuotaList", "apiVersion": "v1", "metadata": {}, "items": []})
    )
    code, lines, _ = run(quota_east, scenario)
    assert code == 0
    assert only(lines, "WARN", "resource-quotas") == (
        "WARN resource-quotas: no namespace has a GPU quota key: every namespace can take every GPU "
        "(python -m themelio_gpu catalog quota --cluster gpu-east --namespace NS ...)"
    )


def east_variant(
    tmp_path: Path,
    change: Callable[[dict[str, Any]], None],
    change_catalog: Callable[[dict[str, Any]], None] | None = None,
) -> ClusterPlan:
    """gpu-east with `change` applied to its definition (and the catalog's), planned from copies in tmp_path."""
    data = yaml.safe_load((EXAMPLE_STACKS / "gpu-east.yaml").read_text())
    change(data)
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "gpu-east.yaml").write_text(yaml.safe_dump(data))
    catalog = EXAMPLE_CATALOG
    if change_catalog is not None:
        catalog_data = yaml.safe_load(catalog.read_text())
        change_catalog(catalog_data)
        catalog = tmp_path / "gpu-catalog.yaml"
        catalog.write_text(yaml.safe_dump(catalog_data))
    plan = load_fleet(catalog, stacks).cluster("gpu-east")
    assert plan is not None
    return plan


def test_static_pool_node_that_does_not_exist_fails(tmp_path: Path) -> None:
    plan = east_variant(
        tmp_path, lambda d: d["nodePools"][0]["provisioning"]["static"]["nodes"].append("gpu-east-a100-03")
    )
    code, lines, _ = run(plan, "healthy")
    assert code == 1
    assert only(lines, "FAIL", "pool a100-whole") == (
        "FAIL pool a100-whole: node gpu-east-a100-03 (provisioning.static.nodes) does not exist"
    )


def test_provisioned_pool_without_nodes_is_a_warning(tmp_path: Path) -> None:
    spare = {"name": "a100-spare", "product": "a100-40gb", "gpusPerNode": 8, "provisioning": {"provisioned": {}}}
    plan = east_variant(tmp_path, lambda d: d["nodePools"].append(spare))
    code, lines, _ = run(plan, "healthy")
    assert code == 0
    assert only(lines, "WARN", "pool a100-spare") == (
        "WARN pool a100-spare: no node carries gpu.themelio.io/pool=a100-spare yet "
        "(provisioned pool: nodes appear when they are created)"
    )


def test_two_offerings_selecting_the_same_devices_fail(tmp_path: Path) -> None:
    # Whole A100 40GB with at least 40Gi: exactly the devices nvidia.com/a100 sells.
    big = {
        "deviceClass": "big.gpu.example.com",
        "product": "a100-40gb",
        "displayName": "A100 with 40Gi",
        "quota": {"waldurComponent": "gpu_big"},
        "constraints": {"minMemory": "40Gi"},
    }
    plan = east_variant(
        tmp_path,
        lambda d: d["offerings"].append("example.com/big-gpu"),
        lambda c: c["offerings"].update({"example.com/big-gpu": big}),
    )
    code, lines, _ = run(plan, "healthy")
    assert code == 1
    assert "missing: the stack gpu-east has not created it" in only(
        lines, "FAIL", "device-class big.gpu.example.com"
    )
    overlap = only(lines, "FAIL", "overlap example.com/big-gpu & nvidia.com/a100")
    assert "16 devices are selected by 2 offerings (gpu-east-a100-01/gpu-0, gpu-east-a100-01/gpu-1," in overlap
    # nvidia.com/gpu (the chart's "any whole GPU") overlaps both by design and is not reported.
    assert not [line for line in lines if line.startswith("FAIL overlap") and "nvidia.com/gpu" in line]


# --- Connection ----------------------------------------------------------------------------------------


def write_kubeconfig(path: Path, server: FakeApiServer, context: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(server.kubeconfig(context)))


def test_connects_with_the_definitions_kubeconfig_and_context(
    east: ClusterPlan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # gpu-east says path ~/.kube/config, context gpu-east: `~` must expand.
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with FakeApiServer.for_scenario("healthy") as server:
        write_kubeconfig(tmp_path / ".kube" / "config", server, "gpu-east")
        out = io.StringIO()
        assert run_preflight(east, out) == 0, out.getvalue()
        assert server.requests[0].path == "/version"
    assert out.getvalue().startswith(f"OK   connection: {server.url}\n")


def test_kubeconfig_and_context_arguments_override(east: ClusterPlan, tmp_path: Path) -> None:
    with FakeApiServer.for_scenario("healthy") as server:
        config = tmp_path / "other.yaml"
        write_kubeconfig(config, server, "elsewhere")
        out = io.StringIO()
        assert run_preflight(east, out, kubeconfig=str(config), context="elsewhere") == 0, out.getvalue()


def test_unreachable_server_is_one_fail_line(east: ClusterPlan, tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{closed_port()}"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "gpu-east", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "gpu-east",
            }
        )
    )
    out = io.StringIO()
    assert run_preflight(east, out, kubeconfig=str(config)) == 1
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert re.fullmatch(
        r"FAIL connection: cannot reach http://127\.0\.0\.1:\d+: Failed to establish a new connection: "
        r"\[Errno \d+\] Connection refused",
        lines[0],
    ), lines[0]
    assert lines[1] == "Summary: 0 OK, 0 WARN, 1 FAIL: cluster gpu-east is NOT ready"


def test_a_missing_kubeconfig_is_bad_input(east: ClusterPlan, tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match=f"^kubeconfig {tmp_path}/missing.yaml not found$"):
        run_preflight(east, io.StringIO(), kubeconfig=str(tmp_path / "missing.yaml"))


def test_kubeconfig_environment_variable_wins_over_the_definitions_path(
    east: ClusterPlan, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "no-home"))  # the definition's ~/.kube/config does not exist
    with FakeApiServer.for_scenario("healthy") as server:
        write_kubeconfig(tmp_path / "ci" / "kubeconfig", server, "gpu-east")
        # A list, as kubectl reads it: files that do not exist are skipped.
        monkeypatch.setenv("KUBECONFIG", f"{tmp_path}/absent.yaml:{tmp_path}/ci/kubeconfig")
        out = io.StringIO()
        assert run_preflight(east, out) == 0, out.getvalue()
        # --kubeconfig still wins over the variable.
        with pytest.raises(KubeconfigError, match=f"^kubeconfig {tmp_path}/flag.yaml not found$"):
            run_preflight(east, io.StringIO(), kubeconfig=str(tmp_path / "flag.yaml"))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "gone.yaml"))
    with pytest.raises(
        KubeconfigError, match=re.escape(f"kubeconfig {tmp_path}/gone.yaml (from $KUBECONFIG) not found")
    ):
        run_preflight(east, io.StringIO())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("apiVersion: v1\nclusters: [\n", "is not valid YAML: line 3, column 1: expected the node content"),
        ("apiVersion: v1\n\tkind: Config\n", "is not valid YAML: line 2, column 1"),
        ("- a\n- b\n", "is not a kubeconfig (a mapping with clusters, users and contexts)"),
        ("", "the config file is empty"),
        ("contexts: [{name: gpu-east, context: {cluster: nowhere, user: nobody}}]\n", "cannot be used: "),
    ],
)
def test_a_corrupt_kubeconfig_is_bad_input_in_our_words(
    east: ClusterPlan, tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "config"
    config.write_text(text)
    with pytest.raises(KubeconfigError, match=f"^kubeconfig {config}[ :]") as error:
        run_preflight(east, io.StringIO(), kubeconfig=str(config))
    assert message in str(error.value)


def test_preflight_command_with_a_corrupt_kubeconfig_prints_no_traceback(tmp_path: Path) -> None:
    import subprocess

    config = tmp_path / "config"
    config.write_text("clusters: [\n")
    result = subprocess.run(
        [sys.executable, "-m", "themelio_gpu", "preflight", "gpu-east", "--kubeconfig", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stderr.startswith(f"preflight: kubeconfig {config} is not valid YAML: line 2, column 1: ")


def test_an_unknown_context_is_bad_input_naming_the_known_ones(east: ClusterPlan, tmp_path: Path) -> None:
    with FakeApiServer.for_scenario("healthy") as server:
        write_kubeconfig(tmp_path / "config", server, "gpu-east")
        with pytest.raises(KubeconfigError) as flag:
            run_preflight(east, io.StringIO(), kubeconfig=str(tmp_path / "config"), context="nope")
        renamed = east_variant(tmp_path, lambda d: d["access"]["kubeconfig"].update(context="gpu-old"))
        with pytest.raises(KubeconfigError) as definition:
            run_preflight(renamed, io.StringIO(), kubeconfig=str(tmp_path / "config"))
        assert not server.requests
    assert str(flag.value) == (
        f"kubeconfig {tmp_path}/config has no context 'nope' (its contexts: gpu-east); fix --context"
    )
    assert str(definition.value) == (
        f"kubeconfig {tmp_path}/config has no context 'gpu-old' (its contexts: gpu-east); fix "
        "access.kubeconfig.context of the cluster's definition (or pass --context)"
    )


def test_the_command_exits_2_for_a_kubeconfig_it_cannot_use(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "themelio_gpu", "preflight", "gpu-east", "--kubeconfig", str(tmp_path / "none")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (
        2,
        "",
        f"preflight: kubeconfig {tmp_path}/none not found\n",
    )


def api_access_plan(tmp_path: Path, host: str, command: str, args: list[str]) -> ClusterPlan:
    access = {
        "api": {
            "host": host,
            "clusterCaCertificate": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
            "exec": {"command": command, "args": args, "env": {"MARKER_ENV": "set"}},
        }
    }
    return east_variant(tmp_path, lambda d: d.update(access=access))


def test_api_access_builds_an_in_memory_kubeconfig_with_the_exec_plugin(tmp_path: Path) -> None:
    plan = api_access_plan(tmp_path, "https://api.gpu-east.example.com", "aws", ["eks", "get-token"])
    config = api_kubeconfig(plan.definition)
    assert config["clusters"][0]["cluster"]["server"] == "https://api.gpu-east.example.com"
    assert config["users"][0]["user"]["exec"] == {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "aws",
        "args": ["eks", "get-token"],
        "interactiveMode": "Never",
        "env": [{"name": "MARKER_ENV", "value": "set"}],
    }
    assert config["current-context"] == "gpu-east"


def test_api_access_runs_the_exec_plugin(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": "t"},
    }
    script = f"import json, os, pathlib; pathlib.Path({str(marker)!r}).write_text(os.environ['MARKER_ENV']); print(json.dumps({credential!r}))"
    plan = api_access_plan(tmp_path, f"https://127.0.0.1:{closed_port()}", sys.executable, ["-c", script])
    out = io.StringIO()
    assert run_preflight(plan, out) == 1
    assert marker.read_text() == "set"
    assert out.getvalue().startswith("FAIL connection: cannot reach https://127.0.0.1:")


# --- Units -------------------------------------------------------------------------------------------------


def test_later_created_class_wins_and_ties_go_to_the_first_name() -> None:
    old = LiveClass("b-old", "x.io/gpu", (), "2026-01-01T00:00:00Z")
    new = LiveClass("z-new", "x.io/gpu", (), "2026-02-01T00:00:00Z")
    tie = LiveClass("a-tie", "x.io/gpu", (), "2026-02-01T00:00:00Z")
    assert winning_class([old, new]) == new
    assert winning_class([old, new, tie]) == tie


def test_node_contract_ignores_extra_labels_and_taints(east: ClusterPlan) -> None:
    pool = east.pools[0]
    node: dict[str, Any] = {
        "metadata": {"labels": {**pool.labels, "extra": "x", "mig_enabled": "true"}},
        "spec": {
            "taints": [
                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                {"key": "x", "effect": "NoExecute"},
            ]
        },
    }
    assert node_contract_problems(node, pool) == ["different labels mig_enabled=true (contract: false)"]


def test_fake_server_label_selectors() -> None:
    labels = {"a": "1", "b": "2"}
    assert _matches(labels, _label_matcher("a=1,b"))
    assert _matches(labels, _label_matcher("a==1,c!=3,!c"))
    assert not _matches(labels, _label_matcher("a!=1"))
    assert not _matches(labels, _label_matcher("c"))


def _module_file(module: str) -> Path | None:
    base = ROOT / module.replace(".", "/")
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def test_preflight_does_not_import_cdktf() -> None:
    """Every import reachable from preflight, module-level or lazy, read from the source (no 9 s import)."""
    seen: set[str] = set()
    todo = ["themelio_gpu.live.preflight"]
    third_party: set[str] = set()
    while todo:
        module = todo.pop()
        file = _module_file(module)
        if module in seen or file is None:
            continue
        seen.add(module)
        parts = module.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))  # parent packages run too
        for node in ast.walk(ast.parse(file.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for name in names:
                if name.split(".")[0] == "themelio_gpu":
                    todo.append(name)
                else:
                    third_party.add(name.split(".")[0])
    assert "themelio_gpu.dryrun.cluster_match" in seen
    assert not {m for m in third_party if m.startswith(("cdktf", "jsii")) or m == "constructs"}, sorted(
        third_party
    )
    assert not {m for m in seen if m.startswith(("themelio_gpu.constructs", "themelio_gpu.constructs.providers"))}


def test_failed_exec_plugin_is_named_in_the_fail_line(tmp_path: Path) -> None:
    plan = api_access_plan(tmp_path, f"https://127.0.0.1:{closed_port()}", str(tmp_path / "no-such-plugin"), [])
    out = io.StringIO()
    assert run_preflight(plan, out) == 1
    first = out.getvalue().splitlines()[0]
    assert first.startswith("FAIL connection: cannot reach https://127.0.0.1:"), first
    assert first.endswith(f"(client: [Errno 2] No such file or directory: '{tmp_path}/no-such-plugin')"), first


# --- draDriver.managedBy: gpu-operator -----------------------------------------------------------------


def _gpu_cluster_plan() -> ClusterPlan:
    fleet = ROOT / "tests" / "fixtures" / "fleets" / "gpu-operator-mode"
    plan = load_fleet(fleet / "catalog" / "gpu-catalog.yaml", fleet / "stacks").cluster("gpu-forge")
    assert plan is not None
    return plan


def _healthy_with(tmp_path: Path, files: dict[str, Any]) -> Path:
    scenario = tmp_path / "scenario"
    (scenario / "apis" / "nvidia.com" / "v1").mkdir(parents=True)
    (scenario / "scenario.yaml").write_text(yaml.safe_dump({"base": str(SCENARIOS / "healthy")}))
    for name, content in files.items():
        (scenario / name).write_text(json.dumps(content))
    return scenario


def test_gpu_cluster_mode_fails_where_a_cluster_policy_exists(tmp_path: Path) -> None:
    policy = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicyList", "items": [{"metadata": {"name": "cp"}}]}
    scenario = _healthy_with(tmp_path, {"apis/nvidia.com/v1/clusterpolicies.json": policy})
    code, lines, _ = run(_gpu_cluster_plan(), scenario)
    assert code == 1
    line = only(lines, "FAIL", "cluster-policy")
    assert "ClusterPolicy cp exists" in line and "the two cannot coexist" in line


def test_gpu_cluster_mode_passes_the_cluster_policy_check_without_one(tmp_path: Path) -> None:
    empty = {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicyList", "items": []}
    _, lines, _ = run(
        _gpu_cluster_plan(), _healthy_with(tmp_path, {"apis/nvidia.com/v1/clusterpolicies.json": empty})
    )
    assert only(lines, "OK", "cluster-policy").endswith("no ClusterPolicy: the GPUCluster can run")
    _, lines, _ = run(_gpu_cluster_plan(), "healthy")  # no nvidia.com API at all
    assert "no ClusterPolicy API is served" in only(lines, "OK", "cluster-policy")


def test_gpu_cluster_mode_fails_below_1_34_2(tmp_path: Path) -> None:
    version = json.loads((SCENARIOS / "healthy" / "version.json").read_text())
    scenario = _healthy_with(tmp_path, {"version.json": {**version, "gitVersion": "v1.34.1"}})
    code, lines, _ = run(_gpu_cluster_plan(), scenario)
    assert code == 1
    assert "needs 1.34.2 or later" in only(lines, "FAIL", "server-version")


def test_chart_mode_runs_no_cluster_policy_check(east: ClusterPlan) -> None:
    _, lines, _ = run(east, "healthy")
    assert not [line for line in lines if "cluster-policy" in line]


def test_gpu_cluster_mode_checks_the_published_driver_version(tmp_path: Path) -> None:
    _, lines, _ = run(_gpu_cluster_plan(), "healthy")
    assert (
        only(lines, "OK", "driver-version")
        == "OK   driver-version: NVIDIA driver 580.105.8 (the GPUCluster needs 580+)"
    )
    slices = json.loads((SCENARIOS / "healthy" / "apis/resource.k8s.io/v1/resourceslices.json").read_text())
    first = slices["items"][0]
    for device in first["spec"]["devices"]:
        device["attributes"]["driverVersion"] = {"version": "570.195.3"}
    scenario = _healthy_with(tmp_path, {})
    (scenario / "apis/resource.k8s.io/v1").mkdir(parents=True)
    (scenario / "apis/resource.k8s.io/v1/resourceslices.json").write_text(json.dumps(slices))
    code, lines, _ = run(_gpu_cluster_plan(), scenario)
    assert code == 1
    line = only(lines, "FAIL", "driver-version")
    assert f"570.195.3 on {first['spec']['nodeName']}" in line and "580.105.8" not in line
