"""The Terraform state backend of a cluster's stack, with locking wherever the backend offers it."""

from __future__ import annotations

from typing import Any, assert_never

from themelio_gpu.constructs.kubernetes_backend import KubernetesBackend
from themelio_gpu.constructs.providers import (
    AzurermBackend,
    CloudBackend,
    GcsBackend,
    HttpBackend,
    LocalBackend,
    NamedCloudWorkspace,
    NamedRemoteWorkspace,
    RemoteBackend,
    S3Backend,
    TerraformBackend,
    TerraformStack,
)
from themelio_gpu.inputs.clusters import definition as d

STATE_PREFIX = "themelio-gpu"


def configure_backend(stack: TerraformStack, cluster: str, backend: d.Backend) -> TerraformBackend:
    """The stack's one backend object. Every type needs one: without it cdktf's `App.synth()` adds its
    default local backend, whose absolute path differs per machine (and a second backend breaks init)."""
    match backend:
        case d.LocalBackend():
            # Always a relative path: cdktf's default is absolute, which would differ per machine.
            return LocalBackend(stack, path=backend.path or f"../../../terraform.{cluster}.tfstate")
        case d.S3Backend():
            s3 = S3Backend(
                stack,
                bucket=backend.bucket,
                key=backend.key or f"{STATE_PREFIX}/{cluster}.tfstate",
                region=backend.region,
                encrypt=backend.encrypt,
                dynamodb_table=backend.dynamodb_table,
                profile=backend.profile,
                kms_key_id=backend.kms_key_id,
            )
            if backend.use_lockfile:
                # S3-native locking (Terraform 1.10+, OpenTofu 1.10+) postdates cdktf 0.21's S3Backend class.
                stack.add_override("terraform.backend.s3.use_lockfile", True)
            return s3
        case d.GcsBackend():
            return GcsBackend(stack, bucket=backend.bucket, prefix=backend.prefix or f"{STATE_PREFIX}/{cluster}")
        case d.AzurermBackend():
            return AzurermBackend(
                stack,
                resource_group_name=backend.resource_group_name,
                storage_account_name=backend.storage_account_name,
                container_name=backend.container_name,
                key=backend.key or f"{STATE_PREFIX}/{cluster}.tfstate",
                use_azuread_auth=backend.use_azuread_auth,
            )
        case d.KubernetesBackend():
            config: dict[str, Any] = {
                "secret_suffix": backend.secret_suffix or cluster,
                "namespace": backend.namespace,
            }
            if backend.in_cluster_config:
                config["in_cluster_config"] = True
            if backend.config_path:
                config["config_path"] = backend.config_path
            if backend.config_context:
                config["config_context"] = backend.config_context
            return KubernetesBackend(stack, config)
        case d.HttpBackend():
            return HttpBackend(
                stack,
                address=backend.address,
                lock_address=backend.lock_address or backend.address,
                unlock_address=backend.unlock_address or backend.address,
                lock_method=backend.lock_method,
                unlock_method=backend.unlock_method,
            )
        case d.CloudBackend():
            return CloudBackend(
                stack,
                organization=backend.organization,
                hostname=backend.hostname,
                workspaces=NamedCloudWorkspace(backend.workspace or f"{STATE_PREFIX}-{cluster}"),
            )
        case d.RemoteBackend():
            return RemoteBackend(
                stack,
                organization=backend.organization,
                hostname=backend.hostname,
                workspaces=NamedRemoteWorkspace(name=backend.workspace or f"{STATE_PREFIX}-{cluster}"),
            )
        case _:
            assert_never(backend)
