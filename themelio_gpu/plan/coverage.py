"""Placement: which node pools can provide each offering a cluster serves, and why the others cannot.

Apart from the fleet's orchestration because it is one rule with its own vocabulary (the facts a class
selects on, MIG layouts, the device plugin's names); the reasons it gives are what a user reads when an
offering has nowhere to run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from themelio_gpu.inputs.catalog.capability import DeviceKind
from themelio_gpu.inputs.catalog.catalog import ResolvedOffering
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.k8s.nvidia import device_plugin_resource


def device_plugin_names(offering: ResolvedOffering, pool: PoolContract) -> list[str]:
    """The names the device plugin would advertise on `pool` for the devices `offering` selects."""
    if offering.capability is None:
        return [device_plugin_resource(offering.mig_profile)]
    if pool.mig_devices is None:
        return [device_plugin_resource(None)]
    taken = set(offering.takes)
    return [device_plugin_resource(p) for p in pool.mig_devices if DeviceKind(pool.product.key, p) in taken]


def pool_misses(
    offering: ResolvedOffering, pool: PoolContract, advertised: Sequence[str], refused_mig: str | None = None
) -> str | None:
    """Why `pool` cannot provide `offering` (None: it can), judged on the facts its class selects on.

    `refused_mig`: where the pool's MIG setting was refused (its own problem says why), so that its missing MIG
    devices are not put down to MIG being off."""
    capability = offering.capability
    if capability is not None:
        misses = capability.product_misses(pool.product)
        if misses:
            return f"pool {pool.name}: {'; '.join(misses)}"
    elif offering.product is not None and pool.product.key != offering.product.key:
        return ""  # another product: not worth a reason
    if not offering.is_mig and not pool.provides_whole():
        return f"pool {pool.name} runs its GPUs in MIG mode, which publishes no whole GPU"
    if offering.is_mig:
        if pool.mig_devices is None:
            layout = f"its MIG setting {refused_mig} is refused" if refused_mig else "MIG off"
        else:
            layout = ", ".join(pool.mig_devices)
        if offering.mig_profile is not None and not pool.provides_mig(offering.mig_profile):
            return f"pool {pool.name} has no {offering.mig_profile} devices ({layout})"
        kinds = set(offering.takes)
        if capability is not None and not any(
            DeviceKind(pool.product.key, p) in kinds for p in (pool.mig_devices or {})
        ):
            return f"pool {pool.name} has no MIG devices that can meet it ({layout})"
    plugin_names = device_plugin_names(offering, pool)
    if not pool.dra and not set(plugin_names) & set(advertised):
        shown = ", ".join(plugin_names)
        return f"pool {pool.name} uses the device plugin, which advertises {shown}, not {offering.name}"
    return None


def check_coverage(
    cluster: ClusterDefinition,
    offerings: Sequence[ResolvedOffering],
    pools: Sequence[PoolContract],
    file: str,
    problems: Problems,
) -> Mapping[str, tuple[str, ...]]:
    """Every offering the cluster serves needs a pool whose GPUs publish its devices; returns the placements."""
    placements: dict[str, tuple[str, ...]] = {}
    refused = {
        p.name: f"nodePools[{i}].mig"
        for i, p in enumerate(cluster.node_pools)
        if p.mig is not None and any(c.name == p.name and c.mig_devices is None for c in pools)
    }
    for offering in offerings:
        names = offering.advertised_names(cluster.serve_migration_aliases)
        found = [(pool, pool_misses(offering, pool, names, refused.get(pool.name))) for pool in pools]
        placements[offering.name] = tuple(pool.name for pool, miss in found if miss is None)
        if placements[offering.name]:
            continue
        reasons = [miss for _, miss in found if miss]
        if offering.capability is not None:
            what = offering.capability.describe()
        else:
            what = f"{offering.product.display_name if offering.product else 'whole'} GPUs"
        detail = "; ".join(reasons) or f"no pool has {what}"
        index = cluster.offerings.index(offering.name)
        problems.add(file, ("offerings", index), f"no node pool can provide {offering.name}: {detail}")
    return MappingProxyType(placements)
