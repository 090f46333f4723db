"""No ClusterPolicy where the definition asks for the GPU Operator's GPUCluster: the operator reconciles neither
while both exist, and NVIDIA supports no in-place migration.
"""

from __future__ import annotations

from kubernetes.client.exceptions import ApiException

from themelio_gpu.live.api import CLUSTER_POLICIES, Api
from themelio_gpu.live.report import Report
from themelio_gpu.plan.model import ClusterPlan


def check_no_cluster_policy(plan: ClusterPlan, api: Api, report: Report) -> None:
    """A GPUCluster cannot run beside a ClusterPolicy: the operator reconciles neither while both exist."""
    check = "cluster-policy"
    try:
        items = api.list_items(CLUSTER_POLICIES)
    except ApiException as error:
        if error.status != 404:
            raise
        report.ok(check, "no ClusterPolicy API is served: no ClusterPolicy can exist")
        return
    names = sorted(str((i.get("metadata") or {}).get("name", "")) for i in items)
    if names:
        report.fail(
            check,
            f"ClusterPolicy {', '.join(names)} exists, but {plan.file} asks for the GPU Operator's GPUCluster "
            "(draDriver.managedBy: gpu-operator, newCluster: true): the two cannot coexist and NVIDIA supports no "
            "in-place migration. Deploy this stack to a new cluster, or keep draDriver.managedBy: chart here",
        )
    else:
        report.ok(check, "no ClusterPolicy: the GPUCluster can run")
