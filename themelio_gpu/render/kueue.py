"""Kueue's objects for one cluster (`kueue.x-k8s.io/v1beta2`, Kueue v0.19), rendered from its Kueue plan.

What goes where, and why, is `plan/kueue.py`: ResourceFlavors (one per product for the pools open to every
workload, one per reserved pool a queue grants), the ClusterQueue `gpus` for every namespace, and for each
queue of the cluster definition a ClusterQueue for its namespaces with a LocalQueue in each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from themelio_gpu.plan.kueue import NAMESPACE_NAME_LABEL, Flavor, KueuePlan, Queue, plan_kueue
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.plan.quota import ClusterQuotaPlan

API_VERSION = "kueue.x-k8s.io/v1beta2"


@dataclass(frozen=True)
class KueueFiles:
    objects: tuple[dict[str, Any], ...]
    notes: tuple[str, ...]
    """What the objects cannot say themselves (pools of unknown size, reserved pools no queue grants)."""


def _flavor(flavor: Flavor) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": dict(flavor.node_labels)}
    if flavor.node_taints:
        spec["nodeTaints"] = [t.as_object() for t in flavor.node_taints]
    if flavor.tolerations:
        # Kueue adds these to the pods it admits in this flavor: GPU workloads need no tolerations of their own.
        spec["tolerations"] = [{"key": k, "operator": "Exists", "effect": e} for k, e in flavor.tolerations]
    return {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": flavor.name}, "spec": spec}


def _cluster_queue(kueue: KueuePlan, queue: Queue) -> dict[str, Any]:
    groups = []
    if kueue.covered and queue.flavors:
        groups.append(
            {
                "coveredResources": list(kueue.covered),
                "flavors": [
                    {
                        "name": f.name,
                        "resources": [
                            {"name": n, "nominalQuota": str(kueue.capacity[f.name][n])} for n in kueue.covered
                        ],
                    }
                    for f in queue.flavors
                ],
            }
        )
    selector: dict[str, Any] = {}
    if queue.namespaces is not None:
        selector = {
            "matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": list(queue.namespaces)}]
        }
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": queue.name},
        "spec": {"namespaceSelector": selector, "resourceGroups": groups},
    }


def _local_queues(queue: Queue) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "LocalQueue",
            "metadata": {"name": queue.name, "namespace": namespace},
            "spec": {"clusterQueue": queue.name},
        }
        for namespace in queue.namespaces or ()
    ]


def kueue_objects(plan: ClusterPlan, quota: ClusterQuotaPlan) -> KueueFiles:
    """ResourceFlavors, then ClusterQueues (`gpus` first), then the LocalQueues of the granted namespaces."""
    kueue = plan_kueue(plan, quota)
    objects = [_flavor(f) for f in kueue.flavors]
    objects += [_cluster_queue(kueue, q) for q in kueue.queues]
    objects += [local for q in kueue.queues for local in _local_queues(q)]
    return KueueFiles(tuple(objects), kueue.notes)
