"""No node gets an extended resource name from both a device plugin and DRA (KEP-5004): a node running the DRA
kubelet plugin must not advertise, through a device plugin, a name a DeviceClass serves.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from themelio_gpu.k8s.nvidia import DEPLOY_DEVICE_PLUGIN, DRA_KUBELET_PLUGIN
from themelio_gpu.live.api import NODES, Api
from themelio_gpu.live.device_classes import LiveClass, expected_device_classes
from themelio_gpu.live.report import Report
from themelio_gpu.plan.model import ClusterPlan


def check_device_plugin_overlap(plan: ClusterPlan, live: Sequence[LiveClass], api: Api, report: Report) -> None:
    """A node must not get one extended resource name from both a device plugin and DRA (KEP-5004)."""
    served: dict[str, set[str]] = defaultdict(set)
    for cls in live:
        if cls.extended_resource_name:
            served[cls.extended_resource_name].add(cls.name)
    for spec in expected_device_classes(plan):
        served[spec.extended_resource_name].add(spec.name)
    nodes = api.list_items(NODES, [("labelSelector", f"{DRA_KUBELET_PLUGIN}=true")])
    clashes = 0
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name", ""))
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        for resource in sorted(set(allocatable) & set(served)):
            clashes += 1
            report.fail(
                f"device-plugin {name}",
                f"status.allocatable has {resource}={allocatable[resource]} from a device plugin, and the node runs "
                f"the DRA kubelet plugin ({DRA_KUBELET_PLUGIN}=true) while DeviceClass "
                f"{', '.join(sorted(served[resource]))} serves {resource}: one node must not get a name from both. "
                f"Stop the device plugin there ({DEPLOY_DEVICE_PLUGIN}=false)",
            )
    if not clashes:
        report.ok(
            "device-plugin",
            f"none of the {len(nodes)} nodes with {DRA_KUBELET_PLUGIN}=true advertises a DeviceClass's extended "
            "resource through a device plugin",
        )
