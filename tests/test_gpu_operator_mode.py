"""`draDriver.managedBy: gpu-operator`: the GPU Operator's GPUCluster installs the DRA driver (v26.7.0+).

Planned on the fixture fleet tests/fixtures/fleets/gpu-operator-mode, and every refusal of the mode
triggered by a definition made bad in exactly one way. Rendering with the real chart:
test_gpu_operator_mode_render.py.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import cluster, fleet_of, plan_of, problems_of
from tests.conftest import FIXTURES
from themelio_gpu.dryrun.cluster_match import classes_for_cluster, match_cluster
from themelio_gpu.dryrun.resourceslices import load_resourceslices
from themelio_gpu.inputs.catalog.names import DEFAULT_NAMES
from themelio_gpu.inputs.catalog.selectors import CHART_CLASS_SELECTORS
from themelio_gpu.k8s.nvidia import GPU_CLASS, MIG_CONFIG
from themelio_gpu.k8s.scheduling import TaintSpec, untolerated
from themelio_gpu.live.device_classes import expected_device_classes
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.helm.values import CONTROL_PLANE_TOLERATION, gpu_pool_tolerations
from themelio_gpu.plan.model import ClusterPlan, Fleet

FLEET = FIXTURES / "fleets" / "gpu-operator-mode"
CATALOG = FLEET / "catalog" / "gpu-catalog.yaml"
STACKS = FLEET / "stacks"
# The fleet sets no names: the class standing in for gpu.nvidia.com has the default name.
GENERIC_GPU_CLASS = DEFAULT_NAMES.generic_gpu_class


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return load_fleet(CATALOG, STACKS)


def definition(name: str = "gpu-next") -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((STACKS / f"{name}.yaml").read_text(encoding="utf-8"))
    return data


def advertisers(plan: ClusterPlan) -> Counter[str]:
    """How many classes, ours and the installer's, advertise each extended resource name."""
    names = [c.extended_resource_name for c in plan.device_classes]
    names += [d.extended_resource_name for d in plan.driver_classes if d.extended_resource_name]
    return Counter(names)


# --- Planned ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gpu-forge", "gpu-next"])
def test_one_operator_release_with_a_gpu_cluster_and_no_cluster_policy(fleet: Fleet, name: str) -> None:
    plan = plan_of(fleet, name)
    (release,) = plan.releases
    assert (release.name, release.chart, release.version) == ("gpu-operator", "gpu-operator", "v26.7.0")
    assert release.namespace == plan.definition.gpu_operator.namespace
    assert plan.dra_release is None and plan.dra_values is None and plan.dra_enabled
    values = release.values
    assert values["clusterPolicy"] == {"deployCR": False}
    assert values["gpuCluster"] == {"deployCR": True}
    assert values["draDriver"]["computeDomains"] == {"enabled": plan.definition.dra_driver.compute_domains}
    # The GPUCluster's DaemonSets take daemonsets.tolerations (every taint); NFD must reach the nodes to label
    # them.
    tolerations = gpu_pool_tolerations(plan.pools)
    assert values["daemonsets"] == {"tolerations": [{"operator": "Exists"}]}
    assert values["node-feature-discovery"]["worker"]["tolerations"] == [
        CONTROL_PLANE_TOLERATION,
        *tolerations,
    ]
    # ClusterPolicy-only settings are not written: nothing reads them in this mode.
    assert not {"devicePlugin", "migManager", "toolkit", "mig", "cdi"} & set(values)


def test_custom_taints_reach_every_toleration_list(fleet: Fleet) -> None:
    """NFD's worker tolerates each custom taint by its key and effect; the operands tolerate every taint."""
    values = plan_of(fleet, "gpu-forge").operator_values
    custom = [
        {"key": "themelio.io/dedicated", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "themelio.io/maintenance", "operator": "Exists", "effect": "NoExecute"},
    ]
    nfd = values["node-feature-discovery"]["worker"]["tolerations"]
    assert all(t in nfd for t in custom)
    taints = [TaintSpec(t["key"], "any", t["effect"]) for t in custom]
    assert not untolerated(values["daemonsets"]["tolerations"], taints)


def test_host_driver_leaves_the_driver_alone(fleet: Fleet) -> None:
    values = plan_of(fleet, "gpu-next").operator_values
    assert values["driver"] == {"enabled": False}
    assert "hostPaths" not in values  # the GPUCluster's validator finds a host driver at / by itself


def test_without_host_driver_the_nvidiadriver_resource_installs_it(fleet: Fleet) -> None:
    values = plan_of(fleet, "gpu-forge").operator_values
    assert values["driver"] == {"enabled": True, "nvidiaDriverCRD": {"enabled": True}, "version": "580.95.05"}
    assert values["hostPaths"] == {"driverInstallDir": "/run/nvidia/driver"}
    assert values["draDriver"]["featureGates"] == {"NVMLDeviceHealthCheck": True}


@pytest.mark.parametrize("name", ["gpu-forge", "gpu-next"])
def test_every_served_name_is_advertised_by_exactly_one_class(fleet: Fleet, name: str) -> None:
    plan = plan_of(fleet, name)
    assert advertisers(plan) == Counter(plan.advertised_names)
    assert set(advertisers(plan).values()) == {1}


def test_the_operator_class_maps_no_name_so_ours_maps_nvidia_gpu(fleet: Fleet) -> None:
    plan = plan_of(fleet, "gpu-next")
    (gpu,) = [d for d in plan.driver_classes if d.name == GPU_CLASS]
    assert gpu.extended_resource_name is None
    (ours,) = [c for c in plan.device_classes if c.extended_resource_name == "nvidia.com/gpu"]
    assert ours.name == GENERIC_GPU_CLASS != GPU_CLASS
    assert ours.selector == CHART_CLASS_SELECTORS[GPU_CLASS]  # any whole GPU, as the chart's class
    assert ours.offering == "nvidia.com/gpu" and not ours.is_alias


def test_installer_classes_follow_compute_domains(fleet: Fleet) -> None:
    forge = {d.name for d in plan_of(fleet, "gpu-forge").driver_classes}
    nxt = {d.name for d in plan_of(fleet, "gpu-next").driver_classes}
    domains = {"compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com"}
    assert domains <= forge and not domains & nxt
    assert not {c.name for p in fleet.clusters for c in p.device_classes} & (forge | nxt)


def test_chart_mode_keeps_the_charts_mapping_and_no_class_of_ours(tmp_path: Path) -> None:
    (plan,) = fleet_of(tmp_path, cluster(offerings=["nvidia.com/a100", "nvidia.com/gpu"])).clusters
    assert GENERIC_GPU_CLASS not in {c.name for c in plan.device_classes}
    (gpu,) = [d for d in plan.driver_classes if d.name == GPU_CLASS]
    assert gpu.extended_resource_name == "nvidia.com/gpu"
    assert advertisers(plan) == Counter(plan.advertised_names)


def test_no_pool_gets_the_mig_manager_label(fleet: Fleet) -> None:
    for plan in fleet.clusters:
        for pool in plan.pools:
            assert MIG_CONFIG not in pool.labels, pool.name
    balanced = next(p for p in plan_of(fleet, "gpu-forge").pools if p.name == "a100-balanced")
    assert balanced.labels["mig_profile"] == "all-balanced"
    assert dict(balanced.mig_devices or {}) == {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}


def test_offline_match_and_preflight_expect_our_class_for_nvidia_gpu(fleet: Fleet) -> None:
    plan = plan_of(fleet, "gpu-next")
    expected = {c.name: c.extended_resource_name for c in expected_device_classes(plan)}
    assert expected["any-gpu.gpu.themelio.io"] == "nvidia.com/gpu" and GPU_CLASS not in expected
    under_test = {c.name: c for c in classes_for_cluster(plan)}
    assert under_test[GENERIC_GPU_CLASS].shares_devices
    assert under_test[GPU_CLASS].offering is None  # the operator's class serves no offering
    slices = FIXTURES / "resourceslices"
    devices = [d for f in ("h100-node.yaml", "a100-40gb-mig-node.yaml") for d in load_resourceslices(slices / f)]
    report = match_cluster(plan, devices)
    assert report.ok and not report.overlaps, report
    generic = next(c for c in report.classes if c.name == GENERIC_GPU_CLASS)
    h100 = next(c for c in report.classes if c.name == "h100-80gb.gpu.themelio.io")
    assert generic.devices == h100.devices and len(h100.devices) == 8


# --- Refused ---------------------------------------------------------------------------------------------


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split("/")
    node: Any = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    if value is _DELETE:
        del node[last]
    else:
        node[last] = value


_DELETE = object()
_GPU_OPERATOR_REFUSALS = [
    ("gpuOperator/version", "v26.3.3", "gpuOperator.version", "needs GPU Operator v26.7.0 or later"),
    ("gpuOperator/version", _DELETE, "gpuOperator.version", "but the cluster pins v26.3.3"),
    ("kubernetesVersion", "1.34", "kubernetesVersion", "1.34 does not say the patch release"),
    ("kubernetesVersion", "1.34.1", "kubernetesVersion", "needs Kubernetes 1.34.2 or later"),
    ("kubernetesVersion", "1.33", "kubernetesVersion", "the cluster runs 1.33. Upgrade the control plane"),
    ("nodePools/0/dra", False, "nodePools[0].dra", "uses the device plugin, which the GPUCluster does not run"),
    ("nodePools/1/mig/createdBy", _DELETE, "nodePools[1].mig", "the GPUCluster has no MIG Manager"),
    ("nodePools/1/mig/createdBy", "mig-manager", "nodePools[1].mig", "say so with mig.createdBy: external"),
    ("draDriver/newCluster", _DELETE, "draDriver.newCluster", "is for new clusters only"),
    ("draDriver/newCluster", False, "draDriver.newCluster", "`kubectl get clusterpolicy` finds none"),
    ("draDriver/namespace", "nvidia-dra", "draDriver.namespace", "does not install"),
    ("draDriver/values", {"logVerbosity": "6"}, "draDriver.values", "under gpuOperator.values.draDriver"),
    ("draDriver/version", "0.4.1", "draDriver.version", "configures the separate DRA driver release"),
    (
        "gpuOperator/values",
        {"clusterPolicy": {"deployCR": True}},
        "gpuOperator.values.clusterPolicy.deployCR",
        "sets it to false",
    ),
    (
        "gpuOperator/values",
        {"gpuCluster": {"deployCR": False}},
        "gpuOperator.values.gpuCluster.deployCR",
        "sets it to true",
    ),
]


@pytest.mark.parametrize(("path", "value", "location", "message"), _GPU_OPERATOR_REFUSALS)
def test_gpu_operator_mode_refusals(tmp_path: Path, path: str, value: Any, location: str, message: str) -> None:
    data = definition()
    _set(data, path, value if value is _DELETE else copy.deepcopy(value))
    problems = problems_of(tmp_path, data, catalog=CATALOG)
    file = f"stacks/{data['name']}.yaml"  # where tests/builders.py wrote it
    assert any(p.startswith(f"{file}: {location}: ") and message in p for p in problems), problems


@pytest.mark.parametrize(
    ("changes", "location", "message"),
    [
        (
            {"driver": {"version": "570.86.15"}},
            "driver.version",
            "needs NVIDIA driver 580 or later, not 570.86.15",
        ),
        ({"driver": {"version": "latest"}}, "driver.version", "not latest"),
        (
            {"driver": {"nvidiaDriverCRD": {"enabled": False}}},
            "driver.nvidiaDriverCRD.enabled",
            "installs no driver",
        ),
    ],
)
def test_operator_installed_driver_refusals(
    tmp_path: Path, changes: dict[str, Any], location: str, message: str
) -> None:
    data = definition("gpu-forge")
    data["gpuOperator"]["values"] = changes
    problems = problems_of(tmp_path, data, catalog=CATALOG)
    assert [p for p in problems if f"gpuOperator.values.{location}: " in p and message in p], problems


def test_a_too_old_operator_is_one_message_not_one_per_missing_key(tmp_path: Path) -> None:
    data = definition()
    data["gpuOperator"]["version"] = "v26.3.3"
    problems = problems_of(tmp_path, data, catalog=CATALOG)
    assert problems == [
        f"stacks/{data['name']}.yaml: gpuOperator.version: draDriver.managedBy: gpu-operator needs GPU Operator "
        "v26.7.0 or later (the GPUCluster resource is new in v26.7.0), but the cluster pins v26.3.3. Set "
        "gpuOperator.version: v26.7.0, or keep draDriver.managedBy: chart (a ClusterPolicy and a separate DRA "
        "driver release) (line 12, column 3)"
    ]


def test_every_refusal_is_reported_in_one_run(tmp_path: Path) -> None:
    data = definition()
    data["kubernetesVersion"] = "1.34"
    data["nodePools"][0]["dra"] = False
    del data["nodePools"][1]["mig"]["createdBy"]
    del data["draDriver"]["newCluster"]
    locations = {p.split(": ")[1] for p in problems_of(tmp_path, data, catalog=CATALOG)}
    assert {"kubernetesVersion", "nodePools[0].dra", "nodePools[1].mig", "draDriver.newCluster"} <= locations


@pytest.mark.parametrize("version", ["1.34.2", "1.34.10", "1.35", "1.37"])
def test_kubernetes_versions_the_mode_takes(tmp_path: Path, version: str) -> None:
    data = definition()
    data["kubernetesVersion"] = version
    if version.startswith(("1.34", "1.35")):
        data["featureGates"] = definition("gpu-forge")["featureGates"]
    (plan,) = fleet_of(tmp_path, data, catalog=CATALOG).clusters
    assert plan.definition.dra_by_gpu_operator


@pytest.mark.parametrize(
    ("changes", "location", "message"),
    [
        ({"draDriver": {"newCluster": True}}, "draDriver.newCluster", "applies only to draDriver.managedBy"),
        (
            {"gpuOperator": {"version": "v26.7.0", "values": {"gpuCluster": {"deployCR": True}}}},
            "gpuOperator.values.gpuCluster.deployCR",
            "Choose the mode with draDriver.managedBy: gpu-operator",
        ),
    ],
)
def test_chart_mode_refuses_the_other_modes_settings(
    tmp_path: Path, changes: dict[str, Any], location: str, message: str
) -> None:
    problems = problems_of(tmp_path, cluster(**changes))
    assert [p for p in problems if f": {location}: " in p and message in p], problems


def test_chart_mode_refuses_externally_made_mig(tmp_path: Path) -> None:
    data = cluster()
    data["nodePools"][1]["mig"]["createdBy"] = "external"
    problems = problems_of(tmp_path, data)
    assert [p for p in problems if "nodePools[1].mig.createdBy: external is for draDriver.managedBy" in p], (
        problems
    )


def test_catalog_cannot_take_the_generic_class_name(tmp_path: Path) -> None:
    catalog = yaml.safe_load(CATALOG.read_text(encoding="utf-8"))
    catalog["offerings"]["nvidia.com/a100"]["deviceClass"] = GENERIC_GPU_CLASS
    problems = problems_of(tmp_path, cluster(), catalog=catalog)
    assert [p for p in problems if 'offerings["nvidia.com/a100"].deviceClass: ' in p and "choose another" in p], (
        problems
    )


# --- Synthesized -----------------------------------------------------------------------------------------


def test_the_stack_installs_the_operator_alone_and_its_classes_after_it(fleet: Fleet, tmp_path: Path) -> None:
    from themelio_gpu.outputs.synth import synthesize

    synthesize(fleet, tmp_path, progress=None)
    for plan in fleet.clusters:
        stack = json.loads((tmp_path / "stacks" / plan.name / "cdk.tf.json").read_text(encoding="utf-8"))
        resources = stack["resource"]
        assert list(resources["helm_release"]) == ["gpu_operator"], plan.name
        (release,) = resources["helm_release"].values()
        assert release["namespace"] == plan.definition.gpu_operator.namespace
        assert yaml.safe_load(release["values"][0]) == plan.operator_values
        classes = resources["kubernetes_manifest"]["device_class"]
        assert classes["depends_on"] == ["helm_release.gpu_operator"]
        assert sorted(classes["for_each"]) == sorted(c.name for c in plan.device_classes)
