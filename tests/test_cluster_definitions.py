"""Cluster definition rules and fleet-wide checks, each with the message a user sees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import EXAMPLE_CATALOG, cluster, fleet_of, problems_of

ALL_COMPONENTS = ["kube-apiserver", "kube-scheduler", "kube-controller-manager", "kubelet"]


def one(problems: list[str], location: str, message: str) -> None:
    matching = [p for p in problems if f": {location}: " in p and message in p]
    assert matching, "\n".join(problems)


def test_a_valid_cluster_plans(tmp_path: Path) -> None:
    plan = fleet_of(tmp_path, cluster()).clusters[0]
    assert [c.extended_resource_name for c in plan.device_classes] == [
        "nvidia.com/a100-mig-1g.5gb",
        "nvidia.com/a100",
        "nvidia.com/mig-1g.5gb",
    ]
    # The alias of the MIG offering is served while the cluster migrates (the default).
    assert "nvidia.com/mig-1g.5gb" in plan.advertised_names


def test_aliases_can_be_dropped_when_the_migration_is_done(tmp_path: Path) -> None:
    plan = fleet_of(tmp_path, cluster(serveMigrationAliases=False)).clusters[0]
    assert "nvidia.com/mig-1g.5gb" not in plan.advertised_names
    assert all(not c.is_alias for c in plan.device_classes)


def test_alias_classes_use_the_offering_selector(tmp_path: Path) -> None:
    plan = fleet_of(tmp_path, cluster()).clusters[0]
    by_name = {c.extended_resource_name: c for c in plan.device_classes}
    assert by_name["nvidia.com/mig-1g.5gb"].selector == by_name["nvidia.com/a100-mig-1g.5gb"].selector
    assert by_name["nvidia.com/mig-1g.5gb"].name == "legacy-mig-1g.5gb.gpu.themelio.io"


def test_chart_served_nvidia_gpu_gets_no_class_of_ours(tmp_path: Path) -> None:
    plan = fleet_of(
        tmp_path, cluster(offerings=["nvidia.com/a100", "nvidia.com/gpu"], nodePools=[cluster()["nodePools"][0]])
    ).clusters[0]
    assert "nvidia.com/gpu" in plan.advertised_names
    assert "nvidia.com/gpu" not in [c.extended_resource_name for c in plan.device_classes]


# --- Kubernetes versions and the DRAExtendedResource gate ----------------------------------------------------


def test_below_1_34_is_refused(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, cluster(kubernetesVersion="1.33"))
    one(
        problems,
        "kubernetesVersion",
        "cluster test runs Kubernetes 1.33, but DeviceClasses need resource.k8s.io/v1",
    )
    assert any("Upgrade the cluster, or set dra: false on every pool" in p for p in problems)


@pytest.mark.parametrize("version", ["1.34", "1.35.1"])
def test_alpha_gate_must_be_declared_on_every_component(tmp_path: Path, version: str) -> None:
    problems = problems_of(
        tmp_path,
        cluster(
            kubernetesVersion=version, featureGates={"DRAExtendedResource": {"components": ["kube-apiserver"]}}
        ),
    )
    one(
        problems,
        "featureGates.DRAExtendedResource",
        f"runs Kubernetes {version}, where DRAExtendedResource is alpha",
    )
    one(
        problems,
        "featureGates.DRAExtendedResource",
        "Enable the gate on kube-scheduler, kube-controller-manager, kubelet",
    )


def test_alpha_gate_missing_entirely(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, cluster(kubernetesVersion="1.34"))
    one(problems, "featureGates.DRAExtendedResource", "silently drops spec.extendedResourceName")


def test_alpha_gate_declared_on_all_components_passes(tmp_path: Path) -> None:
    fleet = fleet_of(
        tmp_path,
        cluster(kubernetesVersion="1.34", featureGates={"DRAExtendedResource": {"components": ALL_COMPONENTS}}),
    )
    assert fleet.clusters[0].definition.minor_version == 34


@pytest.mark.parametrize(
    ("version", "message"), [("1.36", "beta and on by default"), ("1.37", "GA and locked on")]
)
def test_gate_cannot_be_turned_off_from_1_36(tmp_path: Path, version: str, message: str) -> None:
    problems = problems_of(
        tmp_path, cluster(kubernetesVersion=version, featureGates={"DRAExtendedResource": {"enabled": False}})
    )
    one(problems, "featureGates.DRAExtendedResource.enabled", message)


def test_clusters_without_dra_pools_skip_the_version_gate(tmp_path: Path) -> None:
    pools = [
        {
            "name": "legacy",
            "product": "a10g",
            "gpusPerNode": 1,
            "dra": False,
            "provisioning": {"provisioned": {}},
        }
    ]
    plan = fleet_of(
        tmp_path, cluster(kubernetesVersion="1.30", offerings=["nvidia.com/gpu"], nodePools=pools)
    ).clusters[0]
    assert not plan.dra_enabled
    assert plan.device_classes == ()
    assert plan.operator_values["devicePlugin"] == {"enabled": True}


# --- access, secrets and backends ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["token", "clientKey", "password"])
def test_literal_credentials_are_refused(tmp_path: Path, key: str) -> None:
    access = {"kubeconfig": {"path": "~/.kube/config", "context": "x"}, key: "s3cret"}
    problems = problems_of(tmp_path, cluster(access=access))
    one(problems, "access", "literal credentials are not accepted in a cluster definition")
    assert not any("s3cret" in p for p in problems)


def test_secret_looking_exec_env_is_refused(tmp_path: Path) -> None:
    access = {
        "api": {
            "host": "https://api.example.com",
            "clusterCaCertificate": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----",
            "exec": {"command": "aws", "env": {"AWS_SECRET_ACCESS_KEY": "x", "AWS_PROFILE": "ok"}},
        }
    }
    problems = problems_of(tmp_path, cluster(access=access))
    one(problems, "access.api.exec.env.AWS_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY is named like a credential")
    assert not any("AWS_PROFILE" in p for p in problems)


def test_access_needs_exactly_one_method(tmp_path: Path) -> None:
    one(problems_of(tmp_path, cluster(access={})), "access", "set exactly one of kubeconfig")


@pytest.mark.parametrize(
    ("backend", "location", "message"),
    [
        (
            {"type": "local", "path": "/var/state.tfstate"},
            "backend.local.path",
            "must be relative to the stack directory",
        ),
        ({"type": "s3", "bucket": "b"}, "backend.s3.region", "required key is missing"),
        (
            {"type": "consul"},
            "backend.type",
            "must be one of local, s3, gcs, azurerm, kubernetes, http, cloud, remote",
        ),
        (
            {"type": "http", "address": "https://user:pw@state.example.com"},
            "backend.address",
            "looks like a URL with a password in it",
        ),
        (
            {"type": "http", "address": "https://user@state.example.com"},
            "backend.http.address",
            "must not embed credentials",
        ),
    ],
)
def test_backend_rules(tmp_path: Path, backend: dict[str, Any], location: str, message: str) -> None:
    one(problems_of(tmp_path, cluster(backend=backend)), location, message)


# --- fleet-wide ---------------------------------------------------------------------------------------------


def test_unknown_offering_and_alias_listed_instead_of_offering(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, cluster(offerings=["nvidia.com/a200", "nvidia.com/mig-1g.5gb"]))
    one(problems, "offerings[0]", "nvidia.com/a200 is not in the catalog")
    one(problems, "offerings[1]", "nvidia.com/mig-1g.5gb is a migration alias of nvidia.com/a100-mig-1g.5gb")


def test_two_clusters_with_one_name(tmp_path: Path) -> None:
    problems = problems_of(tmp_path, cluster(), cluster())
    assert any(
        p.startswith("stacks/test.yaml: name: cluster 'test' is also defined in stacks/again-1/test.yaml")
        for p in problems
    ), problems


def test_problems_of_every_file_are_reported_together(tmp_path: Path) -> None:
    problems = problems_of(
        tmp_path,
        cluster(name="one", kubernetesVersion="1.33"),
        cluster(name="two", offerings=["nvidia.com/nope"]),
        {"name": "three", "unknownKey": 1},
    )
    files = {p.split(":")[0] for p in problems}
    assert files == {"stacks/one.yaml", "stacks/two.yaml", "stacks/three.yaml"}


@pytest.mark.parametrize(
    ("changes", "location", "message"),
    [
        ({"kubernetesVersion": "latest"}, "kubernetesVersion", "is not a Kubernetes version like 1.34"),
        (
            {"offerings": "nvidia.com/a100"},
            "offerings",
            "must be a list (`- item` lines, or [a, b]), not the text",
        ),
        ({"nodePools": []}, "nodePools", "needs at least 1 item; the list is empty"),
        ({"name": "Prod_East"}, "name", "is not a DNS-1123 label"),
        (
            {"draDriver": {"namespace": "default"}},
            "draDriver.namespace",
            "the DRA driver chart refuses the default namespace",
        ),
        (
            {"draDriver": {"version": "0.3.0"}},
            "draDriver.version",
            "no known values table for chart 'dra-driver-nvidia-gpu' version '0.3.0'",
        ),
        (
            {"gpuOperator": {"values": {"operator": {"defaultRuntime": "containerd"}}}},
            "gpuOperator.values.operator.defaultRuntime",
            "unknown values key operator.defaultRuntime",
        ),
    ],
)
def test_cluster_rules(tmp_path: Path, changes: dict[str, Any], location: str, message: str) -> None:
    one(problems_of(tmp_path, cluster(**changes)), location, message)


# What the kubernetes provider and the API server would refuse only at plan or apply time.
@pytest.mark.parametrize(
    ("changes", "location", "message"),
    [
        (
            {"catalogConfigMap": {"namespace": "Themelio_System"}},
            "catalogConfigMap.namespace",
            "is not a DNS-1123 label",
        ),
        (
            {"catalogConfigMap": {"name": "gpu_catalog"}},
            "catalogConfigMap.name",
            "'gpu_catalog' is not a DNS-1123 subdomain",
        ),
        (
            {"catalogConfigMap": {"namespace": "kube-system"}},
            "catalogConfigMap.namespace",
            "kube-system exists in every cluster, and the stack creates this namespace",
        ),
        (
            {"catalogConfigMap": {"namespace": "gpu-operator"}},
            "catalogConfigMap.namespace",
            "gpu-operator is also the namespace of the GPU Operator release, which creates it",
        ),
        (
            {"catalogConfigMap": {"namespace": "nvidia-dra-driver-gpu"}},
            "catalogConfigMap.namespace",
            "nvidia-dra-driver-gpu is also the namespace of the DRA driver release, which creates it",
        ),
        (
            {
                "access": {
                    "api": {
                        "host": "https://api.example.com",
                        "clusterCaCertificate": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----",
                        "exec": {"apiVersion": "client.authentication.k8s.io/v1alpha1", "command": "aws"},
                    }
                }
            },
            "access.api.exec.apiVersion",
            "must be one of client.authentication.k8s.io/v1beta1, client.authentication.k8s.io/v1, not the text",
        ),
        (
            {
                "karpenter": True,
                "nodePools": [
                    {
                        "name": "k",
                        "product": "a100-40gb",
                        "gpusPerNode": 8,
                        "provisioning": {
                            "karpenter": {"nodeClassRef": {"name": "gpu"}, "instanceTypes": ["p4d 24xlarge"]}
                        },
                    }
                ],
                "offerings": ["nvidia.com/a100"],
            },
            "nodePools[0].provisioning.karpenter.instanceTypes[0]",
            "label value 'p4d 24xlarge' must be letters, digits",
        ),
    ],
)
def test_provider_and_api_server_rules(
    tmp_path: Path, changes: dict[str, Any], location: str, message: str
) -> None:
    one(problems_of(tmp_path, cluster(**changes)), location, message)


def test_missing_stacks_folder_and_empty_folder(tmp_path: Path) -> None:
    from themelio_gpu.inputs.problems import InputError
    from themelio_gpu.plan.fleet import load_fleet

    with pytest.raises(InputError) as missing:
        load_fleet(EXAMPLE_CATALOG, tmp_path / "nope")
    assert "folder of cluster definitions not found" in missing.value.render()
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError) as empty:
        load_fleet(EXAMPLE_CATALOG, tmp_path / "empty")
    assert "no cluster definitions (*.yaml) in this folder" in empty.value.render()


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    from themelio_gpu.inputs.problems import InputError
    from themelio_gpu.plan.fleet import load_fleet

    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "broken.yaml").write_text("name: x\noffering: [a\n", encoding="utf-8")
    with pytest.raises(InputError) as error:
        load_fleet(EXAMPLE_CATALOG, stacks)
    assert error.value.render().startswith(f"{stacks}/broken.yaml: line 3, column 1: invalid YAML")
