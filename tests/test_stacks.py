"""The synthesized stacks: snapshots, determinism, providers, backends, ordering, no secrets or paths."""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from tests.builders import cluster, fleet_of
from tests.conftest import EXAMPLE_CATALOG, EXAMPLE_CLUSTERS, FIXTURE_SNAPSHOTS, ROOT
from tests.snapshot import assert_matches_snapshot, assert_no_stale_snapshots
from themelio_gpu.plan.model import Fleet
from themelio_gpu.settings import DEFAULT_OUTDIR

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
    # The real App().synth(), as main.py runs it: Testing.synth skips the step where cdktf adds its default
    # local backend to a stack that holds no backend object.
    from themelio_gpu.outputs.synth import synthesize

    synthesize(fleet_of(tmp_path, cluster(backend=backend)), tmp_path / "out", progress=None)
    stack = json.loads((tmp_path / "out" / "stacks" / "test" / "cdk.tf.json").read_text())
    terraform: dict[str, Any] = stack["terraform"]
    return {k: v for k, v in terraform.items() if k not in ("required_providers", "required_version")}


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


def test_local_state_files_are_kept_out_of_commits_by_gitignore(tmp_path: Path) -> None:
    """Where the local backend puts a cluster's state (in the project root by default), its backup and its lock
    file are ignored by the project's .gitignore: `git add -A` must never commit state (it holds secrets)."""
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_bytes((ROOT / ".gitignore").read_bytes())
    stack_folder = PurePosixPath(DEFAULT_OUTDIR, "stacks", "test")
    default = _backend_of(tmp_path, {"type": "local"})["backend"]["local"]["path"]
    state = PurePosixPath(posixpath.normpath(stack_folder / default))
    assert state == PurePosixPath("terraform.test.tfstate")  # the project root
    custom = stack_folder / "state" / "test.tfstate"
    # Terraform's local state manager writes <state>.backup and locks with .<state file>.lock.info beside it.
    paths = [state, PurePosixPath(f"{state}.backup"), state.with_name(f".{state.name}.lock.info"), custom]
    fleet_files = [PurePosixPath("stacks/test.yaml"), PurePosixPath("catalog/gpu-catalog.yaml")]
    check = subprocess.run(
        ["git", "-C", str(repo), "check-ignore", "--no-index", "--verbose", "--non-matching"]
        + [str(p) for p in (*paths, *fleet_files)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode in (0, 1), check.stderr
    unignored = {line.split("\t")[-1] for line in check.stdout.splitlines() if line.startswith("::")}
    assert unignored == {str(p) for p in fleet_files}, (
        f"not ignored (only the fleet's own files may be): {unignored}"
    )


def _one_cluster_per_backend() -> list[dict[str, Any]]:
    return [cluster(name=f"{b['type']}-{i}", backend=b) for i, (b, _) in enumerate(BACKENDS)]


def test_every_backend_type_synthesizes_one_backend_and_the_same_bytes_anywhere(tmp_path: Path) -> None:
    from themelio_gpu.outputs.synth import synthesize

    fleet = fleet_of(tmp_path, *_one_cluster_per_backend())
    synthesize(fleet, tmp_path / "once", progress=None)
    synthesize(fleet, tmp_path / "twice", progress=None)
    files = _all_files(tmp_path / "once")
    assert files == _all_files(tmp_path / "twice")
    stacks = {rel: json.loads(content) for rel, content in files.items() if rel.endswith("cdk.tf.json")}
    assert len(stacks) == len(BACKENDS)
    # cdktf's default local backend path is absolute from the synthesizing process's working directory.
    machine_paths = {str(ROOT), str(tmp_path), str(Path.home()), str(Path.cwd())}
    for rel, stack in stacks.items():
        terraform = stack["terraform"]
        blocks = [f"backend.{name}" for name in terraform.get("backend", {})]
        blocks += ["cloud"] if "cloud" in terraform else []
        assert len(blocks) == 1, f"{rel}: {blocks}"
        assert stack["//"]["metadata"]["backend"] == blocks[0].removeprefix("backend."), rel
        text = files[rel].decode()
        assert not [p for p in machine_paths if p in text], rel


def test_kubernetes_backend_gives_other_stacks_a_remote_state_of_itself(tmp_path: Path) -> None:
    from cdktf import TerraformStack, Testing

    from themelio_gpu.constructs.kubernetes_backend import KubernetesBackend

    app = Testing.app(outdir=str(tmp_path))  # without one, cdktf makes a /tmp/cdktf.outdir.* and leaves it
    backend = KubernetesBackend(TerraformStack(app, "origin"), {"secret_suffix": "origin", "namespace": "tf"})
    reader = TerraformStack(app, "reader")
    backend.get_remote_state_data_source(reader, "origin_state", "origin")
    data = json.loads(Testing.synth(reader))["data"]["terraform_remote_state"]["origin_state"]
    assert data == {"backend": "kubernetes", "config": {"namespace": "tf", "secret_suffix": "origin"}}


@pytest.mark.parametrize(
    ("backend", "expected"),
    [
        ({"type": "local"}, ">= 1.0"),
        ({"type": "s3", "bucket": "b", "region": "r"}, ">= 1.10"),
        ({"type": "s3", "bucket": "b", "region": "r", "useLockfile": False, "dynamodbTable": "t"}, ">= 1.0"),
        ({"type": "cloud", "organization": "o"}, ">= 1.1"),
        ({"type": "remote", "organization": "o"}, ">= 1.0"),
        ({"type": "kubernetes"}, ">= 1.0"),
    ],
)
def test_required_version_is_the_oldest_terraform_with_what_the_stack_uses(
    backend: dict[str, Any], expected: str, tmp_path: Path
) -> None:
    assert fleet_of(tmp_path, cluster(backend=backend)).clusters[0].terraform_version == expected


@pytest.mark.parametrize(
    ("name", "expected"), [("gpu-east", ">= 1.10"), ("gpu-lab", ">= 1.0"), ("gpu-west", ">= 1.1")]
)
def test_stacks_declare_their_required_terraform_version(name: str, expected: str, stack_json: StackJson) -> None:
    assert stack_json(name)["terraform"]["required_version"] == expected


def test_user_text_that_looks_like_a_terraform_template_stays_literal(tmp_path: Path) -> None:
    import yaml

    from themelio_gpu.outputs.synth import synthesize

    # Terraform reads `${` and `%{` in any resource, provider or output string as a template.
    catalog = yaml.safe_load(EXAMPLE_CATALOG.read_text(encoding="utf-8"))
    catalog["offerings"]["nvidia.com/a100"]["displayName"] = "A100 ${price} %{ if x }y%{ endif }"
    test = cluster(
        access={"kubeconfig": {"path": "${HOME}/.kube/config", "context": "%{ctx}"}},
        offerings=["nvidia.com/a100"],
        nodePools=[cluster()["nodePools"][0]],
        gpuOperator={"values": {"driver": {"repository": "${REGISTRY}/nvidia"}}},
        catalogConfigMap={},
    )
    synthesize(fleet_of(tmp_path, test, catalog=catalog), tmp_path / "out", progress=None)
    text = (tmp_path / "out" / "stacks" / "test" / "cdk.tf.json").read_text()
    stack = json.loads(text)
    assert stack["provider"]["kubernetes"] == [
        {"config_context": "%%{ctx}", "config_path": "$${HOME}/.kube/config"}
    ]
    assert "repository: $${REGISTRY}/nvidia" in stack["resource"]["helm_release"]["gpu_operator"]["values"][0]
    labels = stack["output"]["gpu_labels"]["value"]["gpuLabels"]["nvidia.com/a100"]
    assert labels["displayName"] == "A100 $${price} %%{ if x }y%%{ endif }"
    assert (
        "$${price}"
        in stack["resource"]["kubernetes_config_map_v1"]["catalog_config_map"]["data"]["gpu-labels.yaml"]
    )
    for unescaped in ("${HOME}", "${REGISTRY}", "${price}", "%{ctx}", "%{ if"):
        assert text.count(unescaped) == text.count(unescaped[0] + unescaped), unescaped


def test_no_stack_depends_on_another(synthesized: Path, example_fleet: Fleet) -> None:
    # GpuClusterStack skips cdktf's preparing pass, which exists only to wire references between stacks.
    manifest = json.loads((synthesized / "manifest.json").read_text())
    assert {name: stack["dependencies"] for name, stack in manifest["stacks"].items()} == {
        plan.name: [] for plan in example_fleet.clusters
    }
