"""The GPUCluster mode rendered with the real GPU Operator v26.7.0 chart (`helm template`), per fixture cluster.

Self-contained on purpose (the `verify` command of issue 12 will render every release generically): a
render must hold a GPUCluster and no ClusterPolicy, carry the derived values, and, with the classes the
operator creates at runtime (its manifests/state-dra-driver/04*_deviceclass-*.yaml, copied in
../shared/reference/nvidia), leave every extended resource name the cluster serves to exactly one class.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import cluster, fleet_of, plan_of
from tests.requirements import binary, shared_path
from themelio_gpu.inputs.catalog.driver_classes import DriverClass
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.helm.known_values import render_values_yaml
from themelio_gpu.plan.helm.values import gpu_pool_tolerations
from themelio_gpu.plan.manifests import device_class_manifest
from themelio_gpu.plan.model import Fleet, HelmReleaseSpec

FLEET = Path(__file__).parent / "fixtures" / "fleets" / "gpu-operator-mode"
CLUSTERS = ("gpu-forge", "gpu-next")
OPERATOR_CLASS_MANIFESTS = (
    "gpu-operator_v26.7.0_gpucluster-manifest_0400_deviceclass-gpu.yaml",
    "gpu-operator_v26.7.0_gpucluster-manifest_0410_deviceclass-mig.yaml",
    "gpu-operator_v26.7.0_gpucluster-manifest_0420_deviceclass-compute-domains.yaml",
    "gpu-operator_v26.7.0_gpucluster-manifest_0430_deviceclass-vfio-gpu.yaml",
)
_COMPUTE_DOMAINS_GUARD = "{{- if .DRADriver.Spec.IsComputeDomainsEnabled }}"


@pytest.fixture(scope="module")
def fleet() -> Fleet:
    return load_fleet(FLEET / "catalog" / "gpu-catalog.yaml", FLEET / "stacks")


def helm_template(release: HelmReleaseSpec, kube_version: str, tmp_path: Path) -> list[dict[str, Any]]:
    """`helm template` of the release with the real chart at its pinned version and the exact values."""
    helm = binary("helm", "HELM")
    chart = shared_path("reference", "charts", f"{release.chart}-{release.version}")
    values = tmp_path / f"{release.name}.values.yaml"
    values.write_text(render_values_yaml(release.values), encoding="utf-8")
    command = [helm, "template", release.name, str(chart), "-n", release.namespace, "-f", str(values)]
    command += ["--api-versions", "resource.k8s.io/v1/DeviceClass", "--kube-version", kube_version]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == kind]


def operator_runtime_classes(compute_domains: bool) -> list[dict[str, Any]]:
    """The DeviceClasses the operator creates from a GPUCluster: its Go-templated manifests, filled in."""
    classes = []
    for name in OPERATOR_CLASS_MANIFESTS:
        text = shared_path("reference", "nvidia", name).read_text(encoding="utf-8")
        if _COMPUTE_DOMAINS_GUARD in text and not compute_domains:
            continue
        lines = [line for line in text.splitlines() if not line.lstrip().startswith("{{-")]
        filled = "\n".join(lines).replace("{{ .DeviceClassAPIVersion }}", "resource.k8s.io/v1")
        assert "{{" not in filled, name  # a template construct this helper does not know
        classes += [doc for doc in yaml.safe_load_all(filled) if doc]
    return classes


def as_driver_class(manifest: dict[str, Any]) -> DriverClass:
    spec = manifest["spec"]
    (selector,) = spec["selectors"]
    return DriverClass(
        manifest["metadata"]["name"], spec.get("extendedResourceName"), selector["cel"]["expression"]
    )


def by_name(item: DriverClass) -> str:
    return item.name


@pytest.mark.parametrize("name", CLUSTERS)
def test_renders_a_gpu_cluster_with_the_derived_values_and_no_cluster_policy(
    fleet: Fleet, name: str, tmp_path: Path
) -> None:
    plan = plan_of(fleet, name)
    (release,) = plan.releases
    objects = helm_template(release, plan.definition.kubernetes_version, tmp_path)
    assert of_kind(objects, "ClusterPolicy") == []
    (gpu_cluster,) = of_kind(objects, "GPUCluster")
    assert gpu_cluster["metadata"]["name"] == "gpu-cluster"
    spec = gpu_cluster["spec"]
    tolerations = gpu_pool_tolerations(plan.pools)
    assert spec["daemonsets"]["tolerations"] == [{"operator": "Exists"}]
    assert spec["draDriver"]["computeDomains"]["enabled"] is plan.definition.dra_driver.compute_domains
    assert spec["draDriver"]["version"] == "v0.5.0"
    drivers = of_kind(objects, "NVIDIADriver")
    if plan.definition.host_driver:
        assert drivers == []
    else:
        (driver,) = drivers
        assert int(str(driver["spec"]["version"]).split(".")[0]) >= 580
        assert driver["spec"]["tolerations"] == [{"operator": "Exists"}]
        assert spec["hostPaths"]["driverInstallDir"] == "/run/nvidia/driver"
    gates = plan.definition.gpu_operator.values.get("draDriver", {}).get("featureGates")
    assert spec["draDriver"].get("featureGates") == gates
    # NFD's worker must reach every pool: the operator places the DRA plugin by the labels NFD sets.
    (worker,) = [d for d in of_kind(objects, "DaemonSet") if d["metadata"]["name"].endswith("-worker")]
    rendered = worker["spec"]["template"]["spec"]["tolerations"]
    assert all(t in rendered for t in tolerations)
    # The chart renders no DeviceClass and no DRA driver workload: the operator creates them at runtime.
    assert of_kind(objects, "DeviceClass") == []
    assert not [d for d in of_kind(objects, "DaemonSet") if "dra" in d["metadata"]["name"]]


@pytest.mark.parametrize("name", CLUSTERS)
def test_every_served_name_is_advertised_by_exactly_one_class(fleet: Fleet, name: str, tmp_path: Path) -> None:
    plan = plan_of(fleet, name)
    (release,) = plan.releases
    rendered = of_kind(helm_template(release, plan.definition.kubernetes_version, tmp_path), "DeviceClass")
    ours = [device_class_manifest(c, plan.names) for c in plan.device_classes]
    classes = ours + rendered + operator_runtime_classes(plan.definition.dra_driver.compute_domains)
    assert len({c["metadata"]["name"] for c in classes}) == len(classes), "two classes with one name"
    advertised = Counter(
        c["spec"]["extendedResourceName"] for c in classes if c["spec"].get("extendedResourceName")
    )
    assert advertised == Counter(plan.advertised_names)
    assert set(advertised.values()) == {1}


@pytest.mark.parametrize("compute_domains", [False, True])
def test_the_plans_model_of_the_operators_classes_is_its_manifests(
    fleet: Fleet, tmp_path: Path, compute_domains: bool
) -> None:
    plan = next(p for p in fleet.clusters if p.definition.dra_driver.compute_domains is compute_domains)
    actual = sorted((as_driver_class(c) for c in operator_runtime_classes(compute_domains)), key=by_name)
    assert sorted(plan.driver_classes, key=by_name) == actual


@pytest.mark.parametrize("compute_domains", [False, True])
def test_the_plans_model_of_the_dra_charts_classes_is_its_render(tmp_path: Path, compute_domains: bool) -> None:
    (plan,) = fleet_of(tmp_path, cluster(draDriver={"computeDomains": compute_domains})).clusters
    release = plan.dra_release
    assert release is not None
    rendered = of_kind(helm_template(release, plan.definition.kubernetes_version, tmp_path), "DeviceClass")
    assert sorted(plan.driver_classes, key=by_name) == sorted(map(as_driver_class, rendered), key=by_name)
