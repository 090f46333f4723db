"""The synthesized stacks: snapshots, determinism, providers, backends, ordering, no secrets or paths."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, fleet_of
from tests.conftest import EXAMPLE_CLUSTERS, FIXTURE_SNAPSHOTS, ROOT
from tests.snapshot import assert_matches_snapshot, assert_no_stale_snapshots
from themelio_gpu.plan.fleet import Fleet

StackJson = Callable[[str], dict[str, Any]]
SECRET = "tok-3x4mpl3-d0-n0t-l34k"


@pytest.mark.parametrize("name", EXAMPLE_CLUSTERS)
def test_stack_matches_reviewed_snapshot(name: str, synthesized: Path, update_snapshots: bool) -> None:
    actual = (synthesized / "stacks" / name / "cdk.tf.json").read_text(encoding="utf-8")
    assert_matches_snapshot(FIXTURE_SNAPSHOTS / "stacks" / f"{name}.cdk.tf.json", actual, update_snapshots)


def test_no_snapshot_of_a_fixture_cluster_that_is_gone(update_snapshots: bool) -> None:
    assert_no_stale_snapshots(FIXTURE_SNAPSHOTS / "stacks", ".cdk.tf.json", EXAMPLE_CLUSTERS, update_snapshots)


def test_one_stack_per_cluster(synthesized: Path, example_fleet: Fleet) -> None:
    manifest = json.loads((synthesized / "manifest.json").read_text())
    assert sorted(manifest["stacks"]) == sorted(c.name for c in example_fleet.clusters) == list(EXAMPLE_CLUSTERS)


def _all_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_synthesis_is_deterministic(synthesized: Path, example_fleet: Fleet, tmp_path: Path) -> None:
    from themelio_gpu.outputs.synth import synthesize

    synthesize(example_fleet, tmp_path / "again", progress=None)
    assert _all_files(tmp_path / "again") == _all_files(synthesized)


def test_output_has_no_machine_paths(synthesized: Path) -> None:
    forbidden = {str(ROOT), str(synthesized), str(Path.home()), "/tmp/", "/work/"}
    for rel, content in _all_files(synthesized).items():
        text = content.decode()
        for path in forbidden:
            assert path not in text, f"{rel} contains {path}"


def test_exec_plugin_token_from_environment_never_lands_in_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from themelio_gpu.outputs.synth import synthesize

    # The exec plugin reads its credentials from the environment Terraform runs in; synthesis must not copy them.
    monkeypatch.setenv("AWS_SESSION_TOKEN", SECRET)
    monkeypatch.setenv("KUBE_TOKEN", SECRET)
    fleet = fleet_of(tmp_path, cluster(access={"api": _api_access()}))
    synthesize(fleet, tmp_path / "out", progress=None)
    for rel, content in _all_files(tmp_path / "out").items():
        assert SECRET.encode() not in content, rel


def _api_access() -> dict[str, Any]:
    return {
        "host": "https://api.example.com",
        "clusterCaCertificate": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        "exec": {
            "command": "aws",
            "args": ["eks", "get-token"],
            "env": {"AWS_PROFILE": "platform", "AWS_REGION": "x"},
        },
    }


@pytest.mark.parametrize("name", EXAMPLE_CLUSTERS)
def test_providers_have_fully_qualified_pinned_sources(name: str, stack_json: StackJson) -> None:
    required = stack_json(name)["terraform"]["required_providers"]
    assert required == {
        "helm": {"source": "hashicorp/helm", "version": "3.1.1"},
        "kubernetes": {"source": "hashicorp/kubernetes", "version": "2.38.0"},
    }


def test_kubeconfig_access_configures_both_providers(stack_json: StackJson) -> None:
    provider = stack_json("gpu-east")["provider"]
    expected = {"config_context": "gpu-east", "config_path": "~/.kube/config"}
    assert provider["kubernetes"] == [expected]
    assert provider["helm"] == [{"kubernetes": expected}]


def test_exec_access_keeps_environment_variable_names(stack_json: StackJson) -> None:
    provider = stack_json("gpu-west")["provider"]
    kubernetes_exec = provider["kubernetes"][0]["exec"][0]
    helm_exec = provider["helm"][0]["kubernetes"]["exec"]
    # The typed bindings would write aws_profile, which the AWS CLI ignores.
    assert kubernetes_exec["env"] == helm_exec["env"] == {"AWS_PROFILE": "platform"}
    assert kubernetes_exec["command"] == helm_exec["command"] == "aws"
    assert provider["kubernetes"][0]["host"] == "https://gpu-west.eks.example.com"


def test_resources_are_ordered_labels_operator_driver_classes(stack_json: StackJson) -> None:
    resources = stack_json("gpu-east")["resource"]
    operator = resources["helm_release"]["gpu_operator"]
    assert sorted(operator["depends_on"]) == [
        "kubernetes_labels.node_labels_a100-mig",
        "kubernetes_labels.node_labels_a100-whole",
        "kubernetes_node_taint.node_taints_a100-mig",
        "kubernetes_node_taint.node_taints_a100-whole",
    ]
    assert resources["helm_release"]["dra_driver_nvidia_gpu"]["depends_on"] == ["helm_release.gpu_operator"]
    assert resources["kubernetes_manifest"]["device_class"]["depends_on"] == ["helm_release.dra_driver_nvidia_gpu"]


def _backend_of(tmp_path: Path, backend: dict[str, Any]) -> dict[str, Any]:
    from cdktf import Testing

    from themelio_gpu.constructs.gpu_cluster_stack import GpuClusterStack

    plan = fleet_of(tmp_path, cluster(backend=backend)).clusters[0]
    stack = GpuClusterStack(Testing.app(), plan)
    terraform: dict[str, Any] = json.loads(Testing.synth(stack))["terraform"]
    return {k: v for k, v in terraform.items() if k != "required_providers"}


BACKENDS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"type": "local"}, {"backend": {"local": {"path": "../../../terraform.test.tfstate"}}}),
    ({"type": "local", "path": "state/test.tfstate"}, {"backend": {"local": {"path": "state/test.tfstate"}}}),
    (
        {"type": "s3", "bucket": "b", "region": "eu-west-1"},
        {
            "backend": {
                "s3": {
                    "bucket": "b",
                    "encrypt": True,
                    "key": "themelio-gpu/test.tfstate",
                    "region": "eu-west-1",
                    "use_lockfile": True,
                }
            }
        },
    ),
    (
        {"type": "s3", "bucket": "b", "region": "eu-west-1", "useLockfile": False, "dynamodbTable": "locks"},
        {
            "backend": {
                "s3": {
                    "bucket": "b",
                    "dynamodb_table": "locks",
                    "encrypt": True,
                    "key": "themelio-gpu/test.tfstate",
                    "region": "eu-west-1",
                }
            }
        },
    ),
    ({"type": "gcs", "bucket": "g"}, {"backend": {"gcs": {"bucket": "g", "prefix": "themelio-gpu/test"}}}),
    (
        {"type": "azurerm", "resourceGroupName": "rg", "storageAccountName": "sa", "containerName": "tf"},
        {
            "backend": {
                "azurerm": {
                    "container_name": "tf",
                    "key": "themelio-gpu/test.tfstate",
                    "resource_group_name": "rg",
                    "storage_account_name": "sa",
                    "use_azuread_auth": True,
                }
            }
        },
    ),
    (
        {"type": "kubernetes", "namespace": "tf-state", "configContext": "ops"},
        {"backend": {"kubernetes": {"config_context": "ops", "namespace": "tf-state", "secret_suffix": "test"}}},
    ),
    (
        {"type": "http", "address": "https://state.example.com/test"},
        {
            "backend": {
                "http": {
                    "address": "https://state.example.com/test",
                    "lock_address": "https://state.example.com/test",
                    "lock_method": "LOCK",
                    "unlock_address": "https://state.example.com/test",
                    "unlock_method": "UNLOCK",
                }
            }
        },
    ),
    (
        {"type": "cloud", "organization": "themelio"},
        {
            "cloud": {
                "hostname": "app.terraform.io",
                "organization": "themelio",
                "workspaces": {"name": "themelio-gpu-test"},
            }
        },
    ),
    (
        {"type": "remote", "organization": "themelio", "workspace": "w"},
        {
            "backend": {
                "remote": {"hostname": "app.terraform.io", "organization": "themelio", "workspaces": {"name": "w"}}
            }
        },
    ),
]


@pytest.mark.parametrize(
    ("backend", "expected"), BACKENDS, ids=[f"{b['type']}-{i}" for i, (b, _) in enumerate(BACKENDS)]
)
def test_state_backends(backend: dict[str, Any], expected: dict[str, Any], tmp_path: Path) -> None:
    assert _backend_of(tmp_path, backend) == expected
