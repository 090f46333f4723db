"""Helm releases of the GPU Operator and the DRA driver: derived values, overrides, release settings."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import EXAMPLE_CATALOG, cluster, fleet_of, plan_of, problems_of
from tests.requirements import shared_path
from themelio_gpu.plan.helm.known_values import iter_value_paths, parse_path
from themelio_gpu.plan.helm.values import (
    NFD_WORKER_DEFAULT_TOLERATIONS,
    operator_restarts_gpu_clients,
    with_chart_defaults,
)
from themelio_gpu.plan.model import ClusterPlan, Fleet

StackJson = Callable[[str], dict[str, Any]]
REAL_VALUES = {
    ("gpu-operator", "v26.3.3"): "gpu-operator_v26.3.3_values.yaml",
    ("gpu-operator", "v26.7.0"): "gpu-operator_v26.7.0_values.yaml",
    ("dra-driver-nvidia-gpu", "0.4.1"): "dra-driver-nvidia-gpu_chart-0.4.1_values.yaml",
    ("nvidia-dra-driver-gpu", "25.12.0"): "nvidia-dra-driver-gpu_chart-25.12.0_values.yaml",
}


def _real_values(chart: str, version: str) -> dict[str, Any]:
    path = shared_path("reference", "nvidia", REAL_VALUES[(chart, version)])
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def _exists(values: dict[str, Any], path: str) -> bool:
    node: Any = values
    for key in parse_path(path):
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True


def _derived_paths(plan: ClusterPlan, values: dict[str, Any], user: dict[str, Any]) -> list[str]:
    user_paths = set(iter_value_paths(user))
    return [
        p
        for p in iter_value_paths(values)
        if p not in user_paths and not any(p.startswith(u + ".") for u in user_paths)
    ]


@pytest.mark.parametrize("operator_version", ["v26.3.3", "v26.7.0"])
def test_every_operator_key_the_project_sets_exists_in_the_real_chart(
    example_fleet: Fleet, tmp_path: Path, operator_version: str
) -> None:
    real = _real_values("gpu-operator", operator_version)
    for plan in example_fleet.clusters:
        if plan.definition.dra_by_gpu_operator and operator_version != plan.definition.gpu_operator.version:
            continue  # the GPUCluster mode exists from v26.7.0 on (refused with older operators)
        paths = _derived_paths(plan, dict(plan.operator_values), plan.definition.gpu_operator.values)
        missing = [p for p in paths if not _exists(real, p) and not p.startswith("driver.manager.env")]
        assert not missing, f"{plan.name}: {missing}"
        assert _exists(real, "driver.manager.env")


@pytest.mark.parametrize(
    ("chart", "version"), [("dra-driver-nvidia-gpu", "0.4.1"), ("nvidia-dra-driver-gpu", "25.12.0")]
)
def test_every_dra_key_the_project_sets_exists_in_the_real_chart(
    example_fleet: Fleet, chart: str, version: str
) -> None:
    real = _real_values(chart, version)
    for plan in example_fleet.clusters:
        if plan.definition.dra_by_gpu_operator:
            assert plan.dra_values is None  # the GPU Operator installs the DRA driver itself
            continue
        assert plan.dra_values is not None
        paths = _derived_paths(plan, dict(plan.dra_values), plan.definition.dra_driver.values)
        # Open maps (nodeSelector) and lists (tolerations) are the chart's own extension points.
        missing = [
            p
            for p in paths
            if not _exists(real, p)
            and not p.startswith(("kubeletPlugin.nodeSelector.", "kubeletPlugin.tolerations"))
        ]
        assert not missing, f"{plan.name}: {missing}"


def test_dra_cluster_with_mig_and_operator_driver(example_fleet: Fleet) -> None:
    plan = example_fleet.cluster("gpu-east")
    assert plan is not None and plan.dra_values is not None
    assert dict(plan.operator_values) == {
        # Helm never upgrades crds/: the chart's pre-upgrade hook does (docs/day-two.md).
        "operator": {"upgradeCRD": True},
        "cdi": {"enabled": True},
        # Every taint: the driver's template stays the same as pools come and go (values.NODE_AGENT_TOLERATIONS).
        "daemonsets": {"tolerations": [{"operator": "Exists"}]},
        "devicePlugin": {"enabled": False},
        "driver": {
            "enabled": True,
            "manager": {
                "env": [{"name": "NODE_LABEL_FOR_GPU_POD_EVICTION", "value": "nvidia.com/dra-kubelet-plugin"}]
            },
        },
        "mig": {"strategy": "mixed"},
        "migManager": {"enabled": True},
        # The chart's defaults, which the pools' default taint nvidia.com/gpu already covers.
        "node-feature-discovery": {
            "worker": {
                "tolerations": [
                    {
                        "key": "node-role.kubernetes.io/control-plane",
                        "operator": "Equal",
                        "value": "",
                        "effect": "NoSchedule",
                    },
                    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                ]
            }
        },
        "toolkit": {"enabled": True},
    }
    assert plan.dra_values["nvidiaDriverRoot"] == "/run/nvidia/driver"
    assert plan.dra_values["gpuResourcesEnabledOverride"] is True
    assert plan.dra_values["resourceApiVersion"] == "resource.k8s.io/v1"
    assert plan.dra_values["kubeletPlugin"]["nodeSelector"] == {"nvidia.com/dra-kubelet-plugin": "true"}
    assert plan.dra_values["resources"]["computeDomains"] == {"enabled": False}


def test_dra_cluster_with_host_drivers(example_fleet: Fleet) -> None:
    plan = example_fleet.cluster("gpu-west")
    assert plan is not None and plan.dra_values is not None
    assert plan.operator_values["driver"] == {"enabled": False}
    assert plan.operator_values["toolkit"] == {"enabled": False}
    assert plan.operator_values["migManager"] == {"enabled": False}
    assert plan.dra_values["nvidiaDriverRoot"] == "/"
    # Every taint, the H100 pool's custom one among them; its node selector keeps it on the DRA pools.
    assert plan.dra_values["kubeletPlugin"]["tolerations"] == [{"operator": "Exists"}]
    # The user override is merged over the derived values.
    assert plan.dra_values["logVerbosity"] == "6"


def test_every_operand_tolerates_every_pool_taint(example_fleet: Fleet) -> None:
    """gpu-west's H100 pool carries themelio.io/reserved: NFD's worker must tolerate it, or NFD never labels
    those nodes and nothing else starts there; the ClusterPolicy's operands tolerate every taint."""
    plan = example_fleet.cluster("gpu-west")
    assert plan is not None
    gpu = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    reserved = {"key": "themelio.io/reserved", "operator": "Exists", "effect": "NoSchedule"}
    assert plan.operator_values["daemonsets"]["tolerations"] == [{"operator": "Exists"}]
    assert plan.operator_values["node-feature-discovery"]["worker"]["tolerations"] == [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule"},
        gpu,
        reserved,
    ]


def test_chart_default_tolerations_are_kept_unless_covered() -> None:
    control_plane, gpu = NFD_WORKER_DEFAULT_TOLERATIONS
    no_execute = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}
    # Untainted pools: the chart's defaults stay as they are.
    assert with_chart_defaults(NFD_WORKER_DEFAULT_TOLERATIONS, []) == [control_plane, gpu]
    # Another effect of the same key covers nothing; every key of that effect, or every taint, covers it.
    assert with_chart_defaults([gpu], [no_execute]) == [gpu, no_execute]
    assert with_chart_defaults([gpu], [{"operator": "Exists", "effect": "NoSchedule"}]) == [
        {"operator": "Exists", "effect": "NoSchedule"}
    ]
    assert with_chart_defaults([control_plane, gpu], [{"operator": "Exists"}]) == [{"operator": "Exists"}]
    # Exists covers the Equal default of the same key; an Equal never covers an Exists.
    cp_exists = {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
    assert with_chart_defaults([control_plane], [cp_exists]) == [cp_exists]
    assert with_chart_defaults([gpu], [{**gpu, "operator": "Equal", "value": "present"}])[0] == gpu


def test_the_gpu_client_label_replaces_the_eviction_label_from_operator_v26_7(tmp_path: Path) -> None:
    new = fleet_of(tmp_path, cluster(gpuOperator={"version": "v26.7.0"})).clusters[0]
    assert new.dra_values is not None
    assert new.dra_values["kubeletPlugin"]["nodeSelector"] == {
        "nvidia.com/dra-kubelet-plugin": "true",
        "nvidia.com/gpu.deploy.client": "true",
    }
    assert new.operator_values["driver"] == {"enabled": True}
    assert operator_restarts_gpu_clients("v26.7.0") and operator_restarts_gpu_clients("v27.1.0")
    assert not operator_restarts_gpu_clients("v26.3.3")


def test_cluster_without_dra_installs_only_the_operator_with_its_device_plugin(tmp_path: Path) -> None:
    pools = [
        {"name": "old", "product": "a10g", "gpusPerNode": 1, "dra": False, "provisioning": {"provisioned": {}}}
    ]
    plan = fleet_of(tmp_path, cluster(offerings=["nvidia.com/gpu"], nodePools=pools)).clusters[0]
    assert plan.dra_values is None
    assert plan.operator_values["devicePlugin"] == {"enabled": True}
    assert plan.operator_values["driver"] == {"enabled": True}  # no DRA plugin to evict: no manager env

    from cdktf import Testing

    from themelio_gpu.constructs.gpu_cluster_stack import GpuClusterStack

    app = Testing.app(outdir=str(tmp_path / "out"))  # without one, cdktf makes a /tmp/cdktf.outdir.* and leaves it
    stack = yaml.safe_load(Testing.synth(GpuClusterStack(app, plan)))
    assert list(stack["resource"]["helm_release"]) == ["gpu_operator"]
    assert "kubernetes_manifest" not in stack["resource"]


def test_rejected_override_keys_name_the_key_and_suggest_the_right_one(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        cluster(
            gpuOperator={"values": {"devicePlugin": {"enable": True}}}, draDriver={"values": {"kubeletPlugn": {}}}
        ),
    )
    # Each at the key's own line: values.devicePlugin.enable is line 13 of the file builders.py writes.
    assert (
        "stacks/test.yaml: gpuOperator.values.devicePlugin.enable: unknown values key devicePlugin.enable "
        "(did you mean devicePlugin.enabled?) for chart gpu-operator v26.3.3 (line 13, column 7)"
    ) in problems, problems
    assert any(
        p.startswith(
            "stacks/test.yaml: draDriver.values.kubeletPlugn: unknown values key kubeletPlugn (did you mean "
        )
        for p in problems
    ), problems


def test_keys_removed_upstream_are_rejected(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path, cluster(gpuOperator={"version": "v26.7.0", "values": {"operator": {"defaultRuntime": "docker"}}})
    )
    assert any("unknown values key operator.defaultRuntime" in p for p in problems)


def test_release_settings(stack_json: StackJson) -> None:
    releases = stack_json("gpu-east")["resource"]["helm_release"]
    operator, driver = releases["gpu_operator"], releases["dra_driver_nvidia_gpu"]
    assert operator["repository"] == "https://helm.ngc.nvidia.com/nvidia"
    assert (operator["chart"], operator["version"], operator["namespace"]) == (
        "gpu-operator",
        "v26.3.3",
        "gpu-operator",
    )
    assert driver["repository"] == "oci://registry.k8s.io/dra-driver-nvidia/charts"
    assert (driver["chart"], driver["version"], driver["namespace"]) == (
        "dra-driver-nvidia-gpu",
        "0.4.1",
        "nvidia-dra-driver-gpu",
    )
    for release in (operator, driver):
        assert release["create_namespace"] is True
        assert release["atomic"] is True
        assert release["wait"] is True
        assert release["cleanup_on_fail"] is True
        assert release["max_history"] == 10
        assert release["timeout"] > 0


def test_values_are_readable_sorted_yaml(stack_json: StackJson) -> None:
    (text,) = stack_json("gpu-east")["resource"]["helm_release"]["dra_driver_nvidia_gpu"]["values"]
    top_keys = [line.split(":")[0] for line in text.splitlines() if line and not line.startswith(" ")]
    assert top_keys == sorted(top_keys)
    assert 'nvidia.com/dra-kubelet-plugin: "true"' in text  # a string, as the node selector needs
    assert yaml.safe_load(text)["kubeletPlugin"]["nodeSelector"] == {"nvidia.com/dra-kubelet-plugin": "true"}


def test_upgrade_from_the_25x_chart_keeps_the_release_and_resource_names(tmp_path: Path) -> None:
    old = cluster(
        draDriver={
            "chart": "nvidia-dra-driver-gpu",
            "version": "25.12.0",
            "upgradeFrom25x": True,
        }
    )
    plan = fleet_of(tmp_path, old).clusters[0]
    assert plan.dra_values is not None
    assert plan.dra_values["nameOverride"] == "nvidia-dra-driver-gpu"

    from themelio_gpu.plan.helm.values import dra_release_name

    assert dra_release_name(plan.definition) == "nvidia-dra-driver-gpu"
    # The 25.x chart is only published on NGC; the new name defaults to registry.k8s.io.
    assert plan.definition.dra_driver.chart_repository() == "https://helm.ngc.nvidia.com/nvidia"
    assert fleet_of(tmp_path, cluster()).clusters[0].definition.dra_driver.chart_repository().startswith("oci://")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"node-feature-discovery": {"worker": {"nodeSelector": {1: "x"}}}}, "values keys must be strings, got 1"),
        ({"validator": {"env": datetime.date(2020, 1, 1)}}, "cannot render date value at validator.env"),
    ],
)
def test_override_values_that_yaml_cannot_carry_to_helm(
    tmp_path: Path, values: dict[Any, Any], message: str
) -> None:
    problems = problems_of(tmp_path, cluster(gpuOperator={"values": values}))
    assert any(": gpuOperator.values: " in p and message in p and "quote it in YAML" in p for p in problems), (
        problems
    )


def _catalog_with(**charts: Any) -> dict[str, Any]:
    catalog: dict[str, Any] = yaml.safe_load(Path(EXAMPLE_CATALOG).read_text())
    catalog["charts"] = charts
    return catalog


def test_an_air_gapped_fleet_installs_every_chart_from_its_mirror_unless_a_cluster_names_its_own(
    tmp_path: Path,
) -> None:
    from themelio_gpu.charts.cache import cluster_charts

    mirror = "oci://registry.corp.example/nvidia"
    own = cluster(name="own", gpuOperator={"repository": "https://charts.corp.example/gpu"})
    fleet = fleet_of(tmp_path, cluster(), own, catalog=_catalog_with(mirror=mirror))
    mirrored, named = plan_of(fleet, "test"), plan_of(fleet, "own")
    assert {r.chart: r.repository for r in mirrored.releases} == {
        "gpu-operator": mirror,
        "dra-driver-nvidia-gpu": mirror,
    }
    assert {r.chart: r.repository for r in named.releases} == {
        "gpu-operator": "https://charts.corp.example/gpu",
        "dra-driver-nvidia-gpu": mirror,
    }
    # `charts fetch` pulls from where the releases install from.
    assert {ref.repository for ref in cluster_charts(mirrored.definition, mirror)} == {mirror}
    # Without a mirror, each chart comes from where NVIDIA publishes it.
    (tmp_path / "plain").mkdir()
    plain = fleet_of(tmp_path / "plain", cluster()).clusters[0]
    assert {r.chart: r.repository for r in plain.releases} == {
        "gpu-operator": "https://helm.ngc.nvidia.com/nvidia",
        "dra-driver-nvidia-gpu": "oci://registry.k8s.io/dra-driver-nvidia/charts",
    }


@pytest.mark.parametrize("mirror", ["ftp://mirror.example/nvidia", "https://user:secret@mirror.example", "mirror"])
def test_a_mirror_that_is_no_repository_address_is_refused_at_its_key(tmp_path: Path, mirror: str) -> None:
    problems = problems_of(tmp_path, cluster(), catalog=_catalog_with(mirror=mirror))
    assert any(": charts.mirror: " in p for p in problems), problems
    assert not any("secret" in p for p in problems)  # a credential in the address never reaches the output
