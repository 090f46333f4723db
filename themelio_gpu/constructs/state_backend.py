"""The Terraform state backend of a cluster's stack, with locking wherever the backend offers it."""

from __future__ import annotations

from typing import Any

from cdktf import (
    AzurermBackend,
    CloudBackend,
    GcsBackend,
    HttpBackend,
    LocalBackend,
    NamedCloudWorkspace,
    NamedRemoteWorkspace,
    RemoteBackend,
    S3Backend,
    TerraformStack,
)

from themelio_gpu.inputs.clusters import definition as d

STATE_PREFIX = "themelio-gpu"


def configure_backend(stack: TerraformStack, cluster: str, backend: d.Backend) -> None:
    match backend:
        case d.LocalBackend():
            # Always a relative path: cdktf's default is absolute, which would differ per machine.
            LocalBackend(stack, path=backend.path or f"../../../terraform.{cluster}.tfstate")
        case d.S3Backend():
            S3Backend(
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
        case d.GcsBackend():
            GcsBackend(stack, bucket=backend.bucket, prefix=backend.prefix or f"{STATE_PREFIX}/{cluster}")
        case d.AzurermBackend():
            AzurermBackend(
                stack,
                resource_group_name=backend.resource_group_name,
                storage_account_name=backend.storage_account_name,
                container_name=backend.container_name,
                key=backend.key or f"{STATE_PREFIX}/{cluster}.tfstate",
                use_azuread_auth=backend.use_azuread_auth,
            )
        case d.KubernetesBackend():
            # cdktf has no class for this backend; the override writes the same JSON a class would.
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
            stack.add_override("terraform.backend", {"kubernetes": config})
        case d.HttpBackend():
            HttpBackend(
                stack,
                address=backend.address,
                lock_address=backend.lock_address or backend.address,
                unlock_address=backend.unlock_address or backend.address,
                lock_method=backend.lock_method,
                unlock_method=backend.unlock_method,
            )
        case d.CloudBackend():
            CloudBackend(
                stack,
                organization=backend.organization,
                hostname=backend.hostname,
                workspaces=NamedCloudWorkspace(backend.workspace or f"{STATE_PREFIX}-{cluster}"),
            )
        case d.RemoteBackend():
            RemoteBackend(
                stack,
                organization=backend.organization,
                hostname=backend.hostname,
                workspaces=NamedRemoteWorkspace(name=backend.workspace or f"{STATE_PREFIX}-{cluster}"),
            )
