"""The oldest Terraform a cluster's stack works with, from what the stack uses (`terraform.required_version`).

Without it an older Terraform fails on the first feature it lacks, with an error that does not say why.
Each floor below is a feature the stack really uses; OpenTofu (1.6 and later) meets the same floors.
"""

from __future__ import annotations

from themelio_gpu.inputs.clusters.definition import CloudBackend, ClusterDefinition, S3Backend
from themelio_gpu.plan.renames import moves_addresses

# hashicorp/helm 3.x serves plugin protocol 6, which Terraform supports from 1.0 (its v3 upgrade guide).
BASELINE = (1, 0)
# The `cloud` block (HCP Terraform / Terraform Enterprise) exists from Terraform 1.1.
CLOUD_BLOCK = (1, 1)
# `moved` blocks (a renamed node pool's, `renamedFrom`) exist from Terraform 1.1.
MOVED_BLOCKS = (1, 1)
# The S3 backend's `use_lockfile` (S3-native locking) exists from Terraform 1.10.
S3_LOCKFILE = (1, 10)


def required_terraform_version(cluster: ClusterDefinition) -> str:
    floors = [BASELINE]
    backend = cluster.backend
    if isinstance(backend, CloudBackend):
        floors.append(CLOUD_BLOCK)
    if any(moves_addresses(pool) for pool in cluster.node_pools):
        floors.append(MOVED_BLOCKS)
    if isinstance(backend, S3Backend) and backend.use_lockfile:
        floors.append(S3_LOCKFILE)
    major, minor = max(floors)
    return f">= {major}.{minor}"
