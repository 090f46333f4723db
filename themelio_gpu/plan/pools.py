"""The cluster's node pools as label contracts, each pool's own fields checked on the way.

Apart from the fleet's orchestration because a pool's checks (names, static nodes owned once, Karpenter
instance types, its product) concern the pool alone; coverage.py then matches the contracts to offerings.
"""

from __future__ import annotations

from collections.abc import Mapping

from themelio_gpu.inputs.catalog.names import Names
from themelio_gpu.inputs.catalog.products import PRODUCTS, GpuProduct, unknown_product_message
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.clusters.pool_contract import PoolContract, pool_contract
from themelio_gpu.inputs.problems import KeyPath, Problems
from themelio_gpu.k8s import names as k8s_names


def pool_contracts(
    cluster: ClusterDefinition,
    products: Mapping[str, GpuProduct] | None,
    names: Names,
    file: str,
    problems: Problems,
) -> tuple[PoolContract, ...]:
    """The pools' label contracts in file order; a pool of an unknown product is left out (its problem says why)."""
    device_plugin = any(not p.dra for p in cluster.node_pools)
    contracts = []
    pool_names: dict[str, int] = {}
    node_owner: dict[str, str] = {}
    for index, pool in enumerate(cluster.node_pools):
        where = ("nodePools", index)
        for message in k8s_names.dns1123_label(pool.name):
            problems.add(file, (*where, "name"), message)
        if pool.name in pool_names:
            problems.add(file, (*where, "name"), f"pool {pool.name!r} is also nodePools[{pool_names[pool.name]}]")
        pool_names.setdefault(pool.name, index)
        static = pool.provisioning.static
        for node in static.nodes if static else ():
            for message in k8s_names.dns1123_subdomain(node):
                problems.add(file, (*where, "provisioning", "static", "nodes"), message)
            if node in node_owner:
                problems.add(
                    file,
                    (*where, "provisioning", "static", "nodes"),
                    f"node {node} is already in pool {node_owner[node]}; a node belongs to one pool",
                )
            node_owner.setdefault(node, pool.name)
        karpenter = pool.provisioning.karpenter
        if karpenter is not None and not cluster.karpenter:
            problems.add(
                file,
                (*where, "provisioning", "karpenter"),
                "the cluster does not declare karpenter: true (Karpenter's CRDs)",
            )
        for i, instance_type in enumerate(karpenter.instance_types if karpenter else ()):
            # Values of a node.kubernetes.io/instance-type requirement: label values, as the NodePool CRD checks.
            for message in k8s_names.label_value(instance_type):
                problems.add(file, (*where, "provisioning", "karpenter", "instanceTypes", i), message)
        # Without a catalog (it failed to load) only the built-in products are known; the others may be
        # the catalog's own, so they are not called unknown.
        product = (PRODUCTS if products is None else products).get(pool.product)
        if product is None:
            if products is not None:
                problems.add(file, (*where, "product"), unknown_product_message(pool.product, products))
            continue
        found: list[tuple[KeyPath, str]] = []
        contract = pool_contract(
            pool, product, device_plugin, found, names, mig_manager=not cluster.dra_by_gpu_operator
        )
        for field, message in found:
            problems.add(file, (*where, *field), message)
        contracts.append(contract)
    return tuple(contracts)


KARPENTER_RELEASE = "1.14.1"
"""The Karpenter release whose behaviour with DRA the sandbox showed (docs/consumers.md#karpenter)."""


def karpenter_dra_pools(cluster: ClusterDefinition) -> list[tuple[KeyPath, str]]:
    """Warnings, as (location, message): Karpenter pools that serve their offerings only through DRA. Karpenter
    launches a node for a pending pod only where an instance type lists every extended resource the pod asks
    for; a DRA pool's `nvidia.com/<offering>` is served by a DeviceClass's `extendedResourceName`, which it does
    not read, so it launches no node for such a pod: on an empty pool the pod stays Pending. The cluster file has
    no minimum size for a Karpenter pool, so every such pool is named."""
    return [
        (
            ("nodePools", index, "provisioning", "karpenter"),
            f"pool {pool.name} is a Karpenter pool serving its GPUs only through DRA: Karpenter {KARPENTER_RELEASE} "
            "launches no node for a pod asking for a DRA-backed name (nvidia.com/<offering>; no instance type lists "
            "it), so such pods stay Pending while the pool has no node. Keep warm nodes in it, or serve it through "
            "the device plugin (dra: false): docs/consumers.md#karpenter-and-dra",
        )
        for index, pool in enumerate(cluster.node_pools)
        if pool.provisioning.karpenter is not None and pool.dra
    ]
