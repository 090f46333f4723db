"""No secret reaches the output: credentials in any field of a cluster or catalog file are refused, with a
message that never repeats them and says how to pass them instead (themelio_gpu/inputs/secrets.py)."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import EXAMPLE_CATALOG, cluster, problems_of, write_fleet
from tests.conftest import ROOT
from themelio_gpu.inputs.secrets import _walk, credential_flag, credential_in, find_secrets, is_secret_name

# Shaped like the real thing, valid for no service.
JWT = "eyJhbGciOiJSUzI1NiIsImtpZCI6IiJ9.eyJpc3MiOiJrdWJlcm5ldGVzIn0.c2lnbmF0dXJlLW5vdC1yZWFs"
AWS_KEY_ID = "AKIAQ3EGUMPZ2EXAMPL7"
AWS_SECRET = "q8Vz3Lm1Xr7Tn0Wp5Ks9Yb2Hd4Jf6GcAe+Rt/Uw1E"[:40]
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx\n-----END RSA PRIVATE KEY-----\n"
GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
SLACK = "xoxb-210987654321-Zq8Ww2Ee4Rr6Tt"
RANDOM = "Zx8Qw2Er4Ty6Ui8Op0As3Df5Gh7Jk9Lz1"
CA = "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAjMSEwHwYDVQQDDBhrM3Mtc2Vy\n-----END CERTIFICATE-----\n"


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (JWT, "a JWT"),
        (f"--token={JWT}", "a JWT"),
        (AWS_KEY_ID, "an AWS access key ID"),
        ("ASIAQ3EGUMPZ2EXAMPL7", "an AWS access key ID"),
        (AWS_SECRET, "an AWS secret access key"),
        (PRIVATE_KEY, "a PEM private key"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "a PEM private key"),
        (CA + PRIVATE_KEY, "a PEM private key"),
        ("LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JSUV2UUlCQURBTkJna3Foa2lHOXcwQkFRRUZBQVND", "PEM private key"),
        (GITHUB, "a GitHub token"),
        ("github_pat_11ABCDEFG0abcdefghijklmnopqrstuvwxyz0123456789", "a GitHub token"),
        (SLACK, "a Slack token"),
        ("glpat-Zx8Qw2Er4Ty6Ui8Op0As", "a GitLab token"),
        ("hvs.CAESIJlWsNtVQS2VfYBoRmBYFk3dN6Zk", "a Vault token"),
        ("Bearer 9f8e7d6c5b4a", "a bearer token"),
        ("https://ops:hunter2@state.example.com/x", "a URL with a password"),
        ("https://state.example.com/x?token=9f8e7d6c5b4a", "a URL carrying a credential"),
        (RANDOM, "a long random string"),
    ],
)
def test_credentials_are_recognised_by_their_value(value: str, kind: str) -> None:
    found = credential_in(value)
    assert found is not None and kind in found.kind


@pytest.mark.parametrize(
    "value",
    [
        CA,
        "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJkekNDQVIyZ0F3SUJBZ0lCQURBS0JnZ3Foa2pPUFFRREFq",  # a CA bundle
        "nvcr.io/nvidia/cloud-native/k8s-driver-manager",
        "k8s-device-plugin/v0.17.0-ubi9",
        "arn:aws:eks:us-west-2:123456789012:cluster/gpu-west",
        "arn:aws:kms:eu-central-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab",
        "sha256:2b6d5f8a7c1e9d3b4a6f8e0c2d4b6a8f0e2c4d6b8a0f2e4c6d8b0a2f4e6c8d0b",
        "123e4567-e89b-12d3-a456-426614174000",
        "a100-40gb-mig-1g.5gb.gpu.themelio.io",
        "/tmp/pytest-of-root/pytest-12/test_api_access_runs_the_exec_0/kubeconfig",
        "~/.kube/Users/Bob2/Work/Kube/Configs/ClusterProd",
        "One whole H100 SXM with 80 GB HBM3, for large training jobs.",
        "https://helm.ngc.nvidia.com/nvidia",
        "oci://registry.k8s.io/dra-driver-nvidia/charts",
    ],
)
def test_ordinary_values_are_not_mistaken_for_credentials(value: str) -> None:
    assert credential_in(value) is None


def test_a_remembered_answer_is_the_answer() -> None:
    """credential_in is memoized by the string: the answer must be what a fresh check gives, and frozen."""
    for value in (JWT, AWS_SECRET, RANDOM, CA, "nvidia.com/a100", JWT):
        assert credential_in(value) == credential_in.__wrapped__(value)
    found = credential_in(JWT)
    assert found is not None and found is credential_in(JWT)
    with pytest.raises(AttributeError):
        found.kind = "nothing"  # type: ignore[misc]


def test_every_node_is_visited_once_parents_first_in_document_order() -> None:
    document = {"a": [1, {"b": "x"}], 2: {"c": []}, "d": "y"}
    assert list(_walk(document, ("top",))) == [
        (("top",), document),
        (("top", "a"), document["a"]),
        (("top", "a", 0), 1),
        (("top", "a", 1), {"b": "x"}),
        (("top", "a", 1, "b"), "x"),
        (("top", 2), {"c": []}),
        (("top", 2, "c"), []),
        (("top", "d"), "y"),
    ]
    # Findings come in the same order: the message list follows the file.
    findings = find_secrets({"z": JWT, "a": [RANDOM, {"k": GITHUB}]})
    assert [f.path for f in findings] == [("z",), ("a", 0), ("a", 1, "k")]


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("AWS_SECRET_ACCESS_KEY", True),
        ("GITHUB_TOKEN", True),
        ("NGC_API_KEY", True),
        ("apiKey", True),
        ("clientSecret", True),
        ("password", True),
        ("AWS_PROFILE", False),
        ("AZURE_FEDERATED_TOKEN_FILE", False),
        ("GOOGLE_APPLICATION_CREDENTIALS", False),  # a path to a file: the right way
        ("secretName", False),
        ("existingSecret", False),
        ("imagePullSecrets", False),
        ("caBundle", False),
    ],
)
def test_names_of_credentials(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


@pytest.mark.parametrize(
    ("arg", "flag"),
    [
        ("--token", "--token"),
        ("--token=abc", "--token"),
        ("--password", "--password"),
        ("--client-secret", "--client-secret"),
        ("--api-key=x", "--api-key"),
        ("--token-cache-dir", None),
        ("--token-file", None),
        ("--password-stdin", None),
        ("--cluster-name", None),
        ("get-token", None),
    ],
)
def test_flags_that_take_a_credential(arg: str, flag: str | None) -> None:
    assert credential_flag(arg) == flag


# --- Every field that reaches the output ---------------------------------------------------------------------


def api_cluster(**exec_changes: Any) -> dict[str, Any]:
    exec_plugin = {"command": "aws", "args": ["eks", "get-token", "--cluster-name", "test"], **exec_changes}
    return cluster(
        access={"api": {"host": "https://api.example.com", "clusterCaCertificate": CA, "exec": exec_plugin}}
    )


def put(data: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    """`data` with `value` at `path` (missing mappings are created)."""
    data = copy.deepcopy(data)
    node: Any = data
    for part in path[:-1]:
        node = node[part] if isinstance(part, int) or part in node else node.setdefault(part, {})
    node[path[-1]] = value
    return data


BACKENDS: dict[str, dict[str, Any]] = {
    "local": {"type": "local"},
    "s3": {"type": "s3", "bucket": "b", "region": "eu-west-1"},
    "gcs": {"type": "gcs", "bucket": "b"},
    "azurerm": {"type": "azurerm", "resourceGroupName": "rg", "storageAccountName": "sa", "containerName": "c"},
    "kubernetes": {"type": "kubernetes"},
    "http": {"type": "http", "address": "https://state.example.com/x"},
    "cloud": {"type": "cloud", "organization": "o"},
    "remote": {"type": "remote", "organization": "o"},
}
BACKEND_FIELDS = [
    ("local", "path"),
    *[("s3", f) for f in ("bucket", "key", "region", "profile", "kmsKeyId", "dynamodbTable")],
    ("gcs", "bucket"),
    ("gcs", "prefix"),
    *[("azurerm", f) for f in ("resourceGroupName", "storageAccountName", "containerName", "key")],
    *[("kubernetes", f) for f in ("secretSuffix", "namespace", "configPath", "configContext")],
    *[("http", f) for f in ("address", "lockAddress", "unlockAddress", "lockMethod")],
    *[("cloud", f) for f in ("organization", "workspace", "hostname")],
    *[("remote", f) for f in ("organization", "workspace", "hostname")],
]

CLUSTER_FIELDS: list[tuple[str, dict[str, Any], str]] = [
    ("name", put(cluster(), ("name",), JWT), "name"),
    ("kubernetesVersion", put(cluster(), ("kubernetesVersion",), GITHUB), "kubernetesVersion"),
    ("kubeconfig path", put(cluster(), ("access", "kubeconfig", "path"), RANDOM), "access.kubeconfig.path"),
    ("kubeconfig context", put(cluster(), ("access", "kubeconfig", "context"), JWT), "access.kubeconfig.context"),
    (
        "api host",
        put(api_cluster(), ("access", "api", "host"), "https://u:hunter22@api.example.com"),
        "access.api.host",
    ),
    (
        "api CA",
        put(api_cluster(), ("access", "api", "clusterCaCertificate"), CA + PRIVATE_KEY),
        "access.api.clusterCaCertificate",
    ),
    ("exec command", api_cluster(command=f"/usr/bin/env TOKEN={JWT}"), "access.api.exec.command"),
    ("exec arg value", api_cluster(args=["eks", "get-token", JWT]), "access.api.exec.args[2]"),
    ("exec --token X", api_cluster(args=["get-token", "--token", "s3cr3t-value"]), "access.api.exec.args[1]"),
    ("exec --token=X", api_cluster(args=["get-token", "--token=s3cr3t-value"]), "access.api.exec.args[1]"),
    ("exec --password X", api_cluster(args=["login", "--password", "hunter22"]), "access.api.exec.args[1]"),
    ("exec bearer", api_cluster(args=["get", "Bearer 9f8e7d6c5b4a3f2e"]), "access.api.exec.args[1]"),
    ("exec env value", api_cluster(env={"PLUGIN_SETTING": JWT}), "access.api.exec.env.PLUGIN_SETTING"),
    ("exec env AWS key", api_cluster(env={"AWS_PROFILE": AWS_KEY_ID}), "access.api.exec.env.AWS_PROFILE"),
    ("exec env AWS secret", api_cluster(env={"X": AWS_SECRET}), "access.api.exec.env.X"),
    ("exec env name", api_cluster(env={"VAULT_TOKEN": "short"}), "access.api.exec.env.VAULT_TOKEN"),
    ("exec env PEM", api_cluster(env={"X": PRIVATE_KEY}), "access.api.exec.env.X"),
    ("exec apiVersion", api_cluster(apiVersion=SLACK), "access.api.exec.apiVersion"),
    *[
        (f"backend {kind}.{field}", cluster(backend={**BACKENDS[kind], field: RANDOM}), f"backend.{field}")
        for kind, field in BACKEND_FIELDS
    ],
    (
        "http address query",
        cluster(backend={**BACKENDS["http"], "address": "https://s.example.com/?token=abcdef99"}),
        "backend.address",
    ),
    ("pool name", put(cluster(), ("nodePools", 0, "name"), GITHUB), "nodePools[0].name"),
    ("pool instanceType", put(cluster(), ("nodePools", 0, "instanceType"), RANDOM), "nodePools[0].instanceType"),
    (
        "pool label value",
        put(cluster(), ("nodePools", 0, "labels"), {"team": AWS_SECRET}),
        "nodePools[0].labels.team",
    ),
    ("pool label key", put(cluster(), ("nodePools", 0, "labels"), {GITHUB: "x"}), "nodePools[0].labels"),
    (
        "pool taint",
        put(cluster(), ("nodePools", 0, "taints"), [{"key": "k", "value": RANDOM, "effect": "NoSchedule"}]),
        "nodePools[0].taints[0].value",
    ),
    (
        "karpenter",
        put(
            {**cluster(), "karpenter": True},
            ("nodePools", 0, "provisioning"),
            {"karpenter": {"nodeClassRef": {"name": JWT}, "instanceTypes": ["p5.48xlarge"]}},
        ),
        "nodePools[0].provisioning.karpenter.nodeClassRef.name",
    ),
    ("operator version", put(cluster(), ("gpuOperator", "version"), JWT), "gpuOperator.version"),
    (
        "operator repository",
        put(cluster(), ("gpuOperator", "repository"), "https://u:hunter22@charts.example.com"),
        "gpuOperator.repository",
    ),
    ("operator namespace", put(cluster(), ("gpuOperator", "namespace"), RANDOM), "gpuOperator.namespace"),
    (
        "operator values password",
        put(cluster(), ("gpuOperator", "values"), {"driver": {"licensingConfig": {"password": "hunter22"}}}),
        "gpuOperator.values.driver.licensingConfig.password",
    ),
    (
        "operator values token",
        put(cluster(), ("gpuOperator", "values"), {"toolkit": {"token": 12345678}}),
        "gpuOperator.values.toolkit.token",
    ),
    (
        "operator values env entry",
        put(cluster(), ("gpuOperator", "values"), {"toolkit": {"env": [{"name": "NGC_API_KEY", "value": "abc"}]}}),
        "gpuOperator.values.toolkit.env[0].value",
    ),
    (
        "operator values random",
        put(cluster(), ("gpuOperator", "values"), {"driver": {"repository": f"x/{RANDOM}"}}),
        "gpuOperator.values.driver.repository",
    ),
    (
        "dra values",
        put(cluster(), ("draDriver", "values"), {"kubeletPlugin": {"apiKey": "k-1"}}),
        "draDriver.values.kubeletPlugin.apiKey",
    ),
    (
        "dra repository",
        put(cluster(), ("draDriver", "repository"), f"oci://r.example.com/{JWT}"),
        "draDriver.repository",
    ),
    ("config map name", put(cluster(), ("catalogConfigMap",), {"name": GITHUB}), "catalogConfigMap.name"),
    (
        "config map namespace",
        put(cluster(), ("catalogConfigMap",), {"namespace": JWT}),
        "catalogConfigMap.namespace",
    ),
]


@pytest.mark.parametrize(("case", "data", "location"), CLUSTER_FIELDS, ids=[c[0] for c in CLUSTER_FIELDS])
def test_a_credential_in_any_cluster_field_is_refused(
    tmp_path: Path, case: str, data: dict[str, Any], location: str
) -> None:
    problems = problems_of(tmp_path, data)
    assert [p for p in problems if f": {location}" in p and "never belongs in this file" in p], "\n".join(problems)
    secret_texts = [
        JWT,
        AWS_KEY_ID,
        AWS_SECRET,
        GITHUB,
        SLACK,
        RANDOM,
        "hunter22",
        "s3cr3t-value",
        "9f8e7d6c5b4a3f2e",
    ]
    for problem in problems:
        text = problem.split(": ", 1)[1]  # after the file name, which the test builder derives from `name`
        assert not any(secret in text for secret in secret_texts), problem
        assert "BEGIN RSA PRIVATE KEY" not in text


def offering() -> dict[str, Any]:
    return {
        "deviceClass": "a100-40gb.gpu.themelio.io",
        "product": "a100-40gb",
        "displayName": "A100",
        "quota": {"waldurComponent": "gpu_a100"},
        "kubeflow": {"uiName": "A100"},
    }


CATALOG_FIELDS: list[tuple[str, tuple[str | int, ...], Any]] = [
    ("displayName", ("displayName",), JWT),
    ("description", ("description",), f"ask ops, or use {GITHUB}"),
    ("quota unit", ("quota", "unit"), RANDOM),
    ("kubeflow uiName", ("kubeflow", "uiName"), SLACK),
    ("nodeSelector value", ("placement", "nodeSelector"), {"accelerator": AWS_SECRET}),
    ("toleration", ("placement", "tolerations"), [{"key": "k", "operator": "Equal", "value": RANDOM}]),
    ("alias", ("aliases",), [{"name": "nvidia.com/old", "deviceClass": f"{RANDOM}.io"}]),
    ("constraints", ("constraints", "minDriverVersion"), AWS_KEY_ID),
]


@pytest.mark.parametrize(("case", "path", "value"), CATALOG_FIELDS, ids=[c[0] for c in CATALOG_FIELDS])
def test_a_credential_in_any_catalog_text_is_refused(tmp_path: Path, case: str, path: Any, value: Any) -> None:
    data = {"offerings": {"nvidia.com/a100": put(offering(), path, value)}}
    problems = problems_of(tmp_path, cluster(offerings=["nvidia.com/a100"]), catalog=data)
    mine = [p for p in problems if p.startswith("catalog.yaml") and "never belongs in this file" in p]
    assert mine and "catalog text is published to Waldur, Kubeflow" in mine[0], "\n".join(problems)
    assert not any(str(value) in p or JWT in p or RANDOM in p for p in problems)


def test_a_token_under_access_api_says_tokens_are_not_accepted_and_shows_exec(tmp_path: Path) -> None:
    data = put(api_cluster(), ("access", "api", "token"), JWT)
    (problem,) = [p for p in problems_of(tmp_path, data) if ": access.api: " in p]
    assert "token: tokens and other literal credentials are not accepted" in problem
    assert "exec: {command: aws, args: [eks, get-token, --cluster-name, NAME]}" in problem
    assert JWT not in problem


def test_the_secret_is_redacted_from_other_messages_about_the_same_value(tmp_path: Path) -> None:
    # The version check quotes the value it refuses: the secret in it must not be printed.
    problems = problems_of(tmp_path, put(cluster(), ("kubernetesVersion",), JWT))
    assert any("<redacted>" in p and "is not a Kubernetes version" in p for p in problems), problems
    assert not any(JWT in p for p in problems)


def test_pointers_to_credentials_kept_elsewhere_are_accepted(tmp_path: Path) -> None:
    data = api_cluster(
        args=["get-token", "--token-cache-dir", "~/.kube/cache", "--password-stdin"],
        env={"AZURE_FEDERATED_TOKEN_FILE": "/var/run/token", "GOOGLE_APPLICATION_CREDENTIALS": "~/gcp.json"},
    )
    data = put(data, ("gpuOperator", "values"), {"driver": {"imagePullSecrets": ["ngc"], "secretEnv": "ngc-env"}})
    from tests.builders import fleet_of

    assert fleet_of(tmp_path, data).clusters[0].name == "test"


def test_a_refused_secret_writes_nothing(tmp_path: Path) -> None:
    catalog, stacks = write_fleet(tmp_path, [api_cluster(args=["get-token", "--token", JWT])], EXAMPLE_CATALOG)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "main.py", "--catalog", str(catalog), "--stacks-dir", str(stacks), "--outdir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "--token passes a credential on the command line" in result.stderr
    assert JWT not in result.stderr + result.stdout
    assert not out.exists()
    assert yaml.safe_load((stacks / "test.yaml").read_text())["access"]["api"]["exec"]["args"][2] == JWT
