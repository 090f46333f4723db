"""Kueue for one cluster: a ResourceFlavor per GPU product and a ClusterQueue covering the GPU names.

Kueue 0.19 (KueueDRAIntegrationExtendedResource, beta and on) charges a DRA-backed extended resource
request to the DeviceClass's `extendedResourceName`, and does not count the scheduler's claim again, so
the covered resources are the names the cluster serves. Like a ResourceQuota, a name has its own counter:
each device kind's capacity goes to one name only (the grant name of the narrowest offering that sells
it; the old name while migration aliases are served), every other name gets 0 in that flavor. Kueue
admits nothing for a name a ClusterQueue does not cover.

Capacity comes from the pools: static nodes x devices per node, or a Karpenter pool's `maxGpus`. A pool of
unknown size (provisioned, or Karpenter without `maxGpus`) counts 0: raise nominalQuota by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from themelio_gpu.inputs.catalog.capability import DeviceKind
from themelio_gpu.inputs.clusters.pool_contract import DEPLOY_DEVICE_PLUGIN, OWNED_LABEL_KEYS, PoolContract
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.plan.fleet import ClusterPlan
from themelio_gpu.plan.helm.values import gpu_pool_tolerations
from themelio_gpu.plan.quota import ClusterQuotaPlan

API_VERSION = "kueue.x-k8s.io/v1beta2"
CLUSTER_QUEUE = "gpus"
# ResourceFlavor nodeLabels, nodeTaints and tolerations each take at most 8 entries (CRD maxProperties/Items).
_FLAVOR_LIMIT = 8


@dataclass(frozen=True)
class KueueFiles:
    objects: tuple[dict[str, Any], ...]
    unsized_pools: tuple[str, ...]
    """Pools whose size the plan does not know: their devices count 0."""


def flavor_name(product: str) -> str:
    return f"nvidia-{product}"


def pool_capacity(plan: ClusterPlan, pool: PoolContract) -> dict[DeviceKind, int] | None:
    """Devices the pool provides in total, or None when its node count is not known here."""
    definition = next(p for p in plan.definition.node_pools if p.name == pool.name)
    provisioning = definition.provisioning
    if provisioning.static is not None:
        gpus = len(provisioning.static.nodes) * pool.gpus_per_node
    elif provisioning.karpenter is not None and provisioning.karpenter.max_gpus is not None:
        gpus = provisioning.karpenter.max_gpus
    else:
        return None
    if pool.mig_devices is None:
        return {DeviceKind(pool.product.key): gpus}
    return {DeviceKind(pool.product.key, profile): n * gpus for profile, n in pool.mig_devices.items()}


def _owners(quota: ClusterQuotaPlan) -> dict[DeviceKind, str]:
    """Device kind -> the one resource name its capacity goes to."""
    owners: dict[DeviceKind, str] = {}
    kinds = set().union(*quota.offering_devices.values()) if quota.offering_devices else set()
    for kind in sorted(kinds, key=lambda k: k.sort_key):
        selling = [
            o for o, devices in quota.offering_devices.items() if kind in devices and o in quota.grant_names
        ]
        if selling:
            narrowest = min(selling, key=lambda o: (len(quota.offering_devices[o]), o))
            owners[kind] = quota.grant_names[narrowest]
    return owners


def _flavor(plan: ClusterPlan, product: str, pools: list[PoolContract]) -> dict[str, Any]:
    # Labels every pool of the product carries, from the label contract (not the pools' extra labels).
    shared = set(pools[0].labels.items()).intersection(*(p.labels.items() for p in pools[1:]))
    labels = {k: v for k, v in sorted(shared) if k in OWNED_LABEL_KEYS and k != DEPLOY_DEVICE_PLUGIN}
    taints = sorted({(t.key, t.value, t.effect) for p in pools for t in p.taints})
    if len(taints) > _FLAVOR_LIMIT:
        problems = Problems()
        problems.add(
            plan.file,
            "nodePools",
            f"the {product} pools carry {len(taints)} distinct taints; a Kueue ResourceFlavor takes at most "
            f"{_FLAVOR_LIMIT}",
        )
        problems.raise_if_any()
    spec: dict[str, Any] = {"nodeLabels": labels}
    if taints:
        spec["nodeTaints"] = [
            {"key": k, "value": v, "effect": e} if v else {"key": k, "effect": e} for k, v, e in taints
        ]
        # Kueue adds these to admitted pods: GPU workloads need no tolerations of their own.
        spec["tolerations"] = gpu_pool_tolerations(pools)
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": flavor_name(product)},
        "spec": spec,
    }


def kueue_objects(plan: ClusterPlan, quota: ClusterQuotaPlan) -> KueueFiles:
    """ResourceFlavors (one per product with pools) and the ClusterQueue `gpus` for the cluster."""
    by_product: dict[str, list[PoolContract]] = {}
    for pool in plan.pools:
        by_product.setdefault(pool.product.key, []).append(pool)
    owners = _owners(quota)
    covered = sorted(quota.grants)
    capacity: dict[str, dict[str, int]] = {}
    unsized: list[str] = []
    for product, pools in sorted(by_product.items()):
        per_name = capacity.setdefault(product, dict.fromkeys(covered, 0))
        for pool in pools:
            devices = pool_capacity(plan, pool)
            if devices is None:
                unsized.append(pool.name)
                continue
            for kind, count in devices.items():
                if kind in owners:
                    per_name[owners[kind]] += count
    objects = [_flavor(plan, product, pools) for product, pools in sorted(by_product.items())]
    groups = []
    if covered and capacity:
        groups.append(
            {
                "coveredResources": covered,
                "flavors": [
                    {
                        "name": flavor_name(product),
                        "resources": [{"name": n, "nominalQuota": str(per_name[n])} for n in covered],
                    }
                    for product, per_name in sorted(capacity.items())
                ],
            }
        )
    objects.append(
        {
            "apiVersion": API_VERSION,
            "kind": "ClusterQueue",
            "metadata": {"name": CLUSTER_QUEUE},
            "spec": {"namespaceSelector": {}, "resourceGroups": groups},
        }
    )
    return KueueFiles(tuple(objects), tuple(unsized))
