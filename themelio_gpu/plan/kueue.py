"""Kueue for one cluster: which ResourceFlavors, which ClusterQueues admit to them, and how much each holds.

Kueue 0.19 (KueueDRAIntegrationExtendedResource, beta and on) charges a DRA-backed extended resource
request to the DeviceClass's `extendedResourceName` and does not count the scheduler's claim again, so the
covered resources are the names holding grants in the cluster. Like a ResourceQuota, a name has its own
counter: each device kind's capacity goes to one name (the grant name of the narrowest offering that sells
it; the old name while migration aliases are served), every other name gets 0 in that flavor. Kueue admits
nothing for a name a ClusterQueue does not cover.

Flavors and queues, after Kueue's own rules (v0.19.2):
- A pool open to every GPU workload (no taint beyond the GPU taint `nvidia.com/gpu:NoSchedule`, which every
  offering tolerates by default) shares one flavor per product, `nvidia-<product>`, in the ClusterQueue
  `gpus` (every namespace). Its `nodeTaints` are unique by key and effect (the ResourceFlavor webhook
  refuses two): where the pools' values differ, the taint is written without a value, and the flavor's
  `tolerations` (which Kueue adds to every pod it admits) tolerate each hard taint with `Exists`.
- A reserved pool (a NoSchedule or NoExecute taint beyond that) gets a flavor of its own, `pool-<pool>`,
  selecting it by the pool label (`<labelDomain>/pool`, by default `gpu.themelio.io/pool`). It is in no queue
  but the one the cluster definition grants it (`kueue.queues`: a ClusterQueue for the namespaces listed,
  with a LocalQueue in each); only that flavor tolerates the reservation, so no other workload Kueue admits
  is let into the pool. A reserved pool no queue grants has no flavor: Kueue admits nothing there.
- CRD limits are checked, with the definition's location: a ResourceFlavor takes at most 8 node labels,
  taints and tolerations; a resource group at most 64 covered resources and 64 flavors. Each queue has one
  resource group, so the limit of 16 groups is never reached.

Capacity comes from the pools: static nodes x devices per node, or a Karpenter pool's `maxGpus`. A pool of
unknown size (provisioned, or Karpenter without `maxGpus`) counts 0: raise nominalQuota by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from themelio_gpu.inputs.catalog.capability import DeviceKind
from themelio_gpu.inputs.catalog.names import DEFAULT_NAMES, Names
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.inputs.problems import KeyPath
from themelio_gpu.k8s import names as k8s_names
from themelio_gpu.k8s.nvidia import DEPLOY_DEVICE_PLUGIN
from themelio_gpu.k8s.scheduling import BLOCKING_EFFECTS, TaintSpec
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.plan.quota import ClusterQuotaPlan, plan_quota

DEFAULT_QUEUE = "gpus"
"""The ClusterQueue of the pools open to every workload, for every namespace."""
FLAVOR_FIELD_LIMIT = 8
"""ResourceFlavor nodeLabels, nodeTaints and tolerations: maxProperties / maxItems 8."""
GROUP_LIMIT = 64
"""A ClusterQueue resource group: at most 64 coveredResources and 64 flavors."""
# The API server sets it on every namespace to the namespace's name: a queue granted to named namespaces
# selects them by it (a label of a namespace's own choosing could be added by whoever may label it).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Flavor:
    name: str
    pools: tuple[PoolContract, ...]
    node_labels: Mapping[str, str]
    node_taints: tuple[TaintSpec, ...]
    """Unique by key and effect; a taint whose value differs between the pools has none."""
    tolerations: tuple[tuple[str, str], ...]
    """(key, effect) of each hard taint, tolerated with Exists: Kueue adds these to every pod it admits."""


@dataclass(frozen=True)
class Queue:
    name: str
    namespaces: tuple[str, ...] | None
    """The namespaces it admits from; None for every namespace (the default queue)."""
    flavors: tuple[Flavor, ...]


@dataclass(frozen=True)
class KueuePlan:
    queues: tuple[Queue, ...]
    """The default queue `gpus` first, then the definition's queues in its order."""
    covered: tuple[str, ...]
    """The resource names every queue covers: the cluster's grant names."""
    capacity: Mapping[str, Mapping[str, int]]
    """Flavor -> resource name -> devices (0 for the names its devices do not go to)."""
    counted: Mapping[str, frozenset[str]]
    """Flavor -> the resource names its devices go to, whatever the pools' size: the names Kueue can admit in
    it (a pool of unknown size counts 0 until nominalQuota is raised by hand)."""
    notes: tuple[str, ...]
    """What the file cannot say itself: pools of unknown size, reserved pools no queue grants."""

    @property
    def flavors(self) -> tuple[Flavor, ...]:
        return tuple(sorted((f for q in self.queues for f in q.flavors), key=lambda f: f.name))


def flavor_name(product: str) -> str:
    return f"nvidia-{product}"


def reserved_flavor_name(pool: str) -> str:
    return f"pool-{pool}"


def pool_device_kinds(pool: PoolContract) -> tuple[DeviceKind, ...]:
    """The kinds of device the pool publishes: its product's whole GPU, or each MIG profile of its layout."""
    if pool.mig_devices is None:
        return (DeviceKind(pool.product.key),)
    return tuple(DeviceKind(pool.product.key, profile) for profile in pool.mig_devices)


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


def _flavor(name: str, pools: Sequence[PoolContract]) -> Flavor:
    # Labels every pool of the flavor carries, from the label contract (not the pools' extra labels): at most
    # the 8 a ResourceFlavor takes. The pool label is among them where the flavor has one pool.
    shared = set(pools[0].labels.items()).intersection(*(p.labels.items() for p in pools[1:]))
    owned = pools[0].owned_label_keys
    labels = {k: v for k, v in sorted(shared) if k in owned and k != DEPLOY_DEVICE_PLUGIN}
    values: dict[tuple[str, str], set[str]] = {}
    for pool in pools:
        for taint in pool.taints:
            values.setdefault((taint.key, taint.effect), set()).add(taint.value)
    taints = tuple(
        TaintSpec(key, next(iter(found)) if len(found) == 1 else "", effect)
        for (key, effect), found in sorted(values.items())
    )
    tolerations = tuple((t.key, t.effect) for t in taints if t.effect in BLOCKING_EFFECTS)
    return Flavor(name, tuple(pools), MappingProxyType(labels), taints, tolerations)


def check_queues(
    cluster: ClusterDefinition, pools: Sequence[PoolContract], names: Names = DEFAULT_NAMES
) -> list[tuple[KeyPath, str]]:
    """The definition's `kueue.queues`, as (location, message): names, pools that exist and are reserved, each
    granted once, namespaces. `names`: the fleet's own, for the example taint in a hint."""
    problems: list[tuple[KeyPath, str]] = []
    contracts = {p.name: p for p in pools}
    defined = [p.name for p in cluster.node_pools]
    queue_names: dict[str, int] = {}
    granted: dict[str, str] = {}
    for index, queue in enumerate(cluster.kueue.queues):
        where = ("kueue", "queues", index)
        # A LocalQueue's name is also the value of the workloads' kueue.x-k8s.io/queue-name label: a DNS label.
        problems += [((*where, "name"), m) for m in k8s_names.dns1123_label(queue.name)]
        if queue.name == DEFAULT_QUEUE:
            problems.append(
                (
                    (*where, "name"),
                    f"{DEFAULT_QUEUE} is the queue of the pools open to every workload; choose another",
                )
            )
        elif queue.name in queue_names:
            problems.append(
                ((*where, "name"), f"queue {queue.name} is also kueue.queues[{queue_names[queue.name]}]")
            )
        queue_names.setdefault(queue.name, index)
        for i, name in enumerate(queue.pools):
            at = (*where, "pools", i)
            if name not in defined:
                problems.append((at, f"no pool {name} in nodePools (pools: {', '.join(defined)})"))
            elif granted.get(name) == queue.name:
                problems.append((at, f"pool {name} is listed twice"))
            elif name in granted:
                problems.append(
                    (
                        at,
                        f"pool {name} is already granted by queue {granted[name]}: two queues would admit its devices twice",
                    )
                )
            elif name in contracts and not contracts[name].reservations:
                problems.append(
                    (
                        at,
                        f"pool {name} carries no NoSchedule or NoExecute taint beyond nvidia.com/gpu:NoSchedule, so "
                        f"the queue {DEFAULT_QUEUE} admits every namespace's work there already; a queue grants a "
                        "reserved pool (taint the pool with what only its workloads tolerate, e.g. "
                        f"{names.label_domain}/reserved=training:NoSchedule)",
                    )
                )
            granted.setdefault(name, queue.name)
        seen: set[str] = set()
        for i, namespace in enumerate(queue.namespaces):
            problems += [((*where, "namespaces", i), m) for m in k8s_names.dns1123_label(namespace)]
            if namespace in seen:
                problems.append(((*where, "namespaces", i), f"{namespace} is listed twice"))
            seen.add(namespace)
    return problems


def ungranted_reserved_pools(
    cluster: ClusterDefinition, pools: Sequence[PoolContract]
) -> list[tuple[KeyPath, str]]:
    """Warnings, as (location, message): reserved pools no `kueue.queues` entry grants. Not wrong (a cluster
    may not use Kueue), but Kueue admits nothing there and the notebook forms leave out what only they serve."""
    granted = {name for queue in cluster.kueue.queues for name in queue.pools}
    index = {pool.name: i for i, pool in enumerate(cluster.node_pools)}
    return [
        (
            ("nodePools", index[pool.name], "taints"),
            f"pool {pool.name} is reserved ({', '.join(map(str, pool.reservations))}) and no kueue.queues entry "
            "grants it: Kueue admits no work there, and the notebook forms leave out what only it serves. Grant "
            "it to the namespaces that may use it (kueue.queues: docs/cluster-definitions.md), unless the "
            "cluster does not use Kueue",
        )
        for pool in pools
        if pool.reservations and pool.name not in granted
    ]


def plan_kueue(plan: ClusterPlan, quota: ClusterQuotaPlan | None = None) -> KueuePlan:
    """The cluster's flavors and queues, with each flavor's capacity per resource name."""
    quota = quota or plan_quota(plan)
    by_product: dict[str, list[PoolContract]] = {}
    for pool in plan.pools:
        if not pool.reservations:
            by_product.setdefault(pool.product.key, []).append(pool)
    pools = {p.name: p for p in plan.pools}
    queues = [
        Queue(
            DEFAULT_QUEUE,
            None,
            tuple(_flavor(flavor_name(k), by_product[k]) for k in sorted(by_product)),
        )
    ]
    for queue in plan.definition.kueue.queues:
        flavors = tuple(_flavor(reserved_flavor_name(n), [pools[n]]) for n in queue.pools)
        queues.append(Queue(queue.name, tuple(sorted(queue.namespaces)), flavors))

    owners = _owners(quota)
    covered = tuple(sorted(quota.grants))
    capacity: dict[str, dict[str, int]] = {}
    counted: dict[str, frozenset[str]] = {}
    unsized: list[str] = []
    for flavor in (f for q in queues for f in q.flavors):
        per_name = capacity.setdefault(flavor.name, dict.fromkeys(covered, 0))
        kinds = {kind for pool in flavor.pools for kind in pool_device_kinds(pool)}
        counted[flavor.name] = frozenset(owners[kind] for kind in kinds if kind in owners)
        for pool in flavor.pools:
            devices = pool_capacity(plan, pool)
            if devices is None:
                unsized.append(pool.name)
                continue
            for kind, count in devices.items():
                if kind in owners:
                    per_name[owners[kind]] += count
    granted = {n for q in plan.definition.kueue.queues for n in q.pools}
    notes = [
        f"pool {p}: its size is not known here, so its devices count 0; raise nominalQuota by hand"
        for p in unsized
    ]
    notes += [
        f"pool {p.name} is reserved ({', '.join(map(str, p.reservations))}) and no kueue.queues entry grants it: "
        "Kueue admits nothing there"
        for p in plan.pools
        if p.reservations and p.name not in granted
    ]
    return KueuePlan(
        queues=tuple(queues),
        covered=covered,
        capacity=MappingProxyType({k: MappingProxyType(v) for k, v in capacity.items()}),
        counted=MappingProxyType(counted),
        notes=tuple(notes),
    )


def limit_problems(plan: ClusterPlan) -> list[tuple[KeyPath, str]]:
    """What the Kueue CRDs would refuse in this cluster's kueue.yaml, as (location, message)."""
    # Bounds first, as every cluster is checked when the fleet loads: the covered names are among the names it
    # advertises, a queue's flavors no more than its pools, a flavor's taints among the pools' taints.
    taints = {(t.key, t.effect) for p in plan.pools for t in p.taints}
    if max(len(plan.advertised_names), len(plan.pools)) <= GROUP_LIMIT and len(taints) <= FLAVOR_FIELD_LIMIT:
        return []
    kueue = plan_kueue(plan)
    problems: list[tuple[KeyPath, str]] = []
    if len(kueue.covered) > GROUP_LIMIT:
        problems.append(
            (
                ("offerings",),
                f"the cluster's offerings hold grants on {len(kueue.covered)} resource names, but a Kueue "
                f"ClusterQueue covers at most {GROUP_LIMIT} (coveredResources): serve fewer offerings here, or "
                "set serveMigrationAliases: false once the migration is done",
            )
        )
    queue_at: dict[str, KeyPath] = {
        q.name: ("kueue", "queues", i, "pools") for i, q in enumerate(plan.definition.kueue.queues)
    }
    for queue in kueue.queues:
        if len(queue.flavors) > GROUP_LIMIT:
            what = "GPU products with open pools" if queue.name == DEFAULT_QUEUE else "pools"
            problems.append(
                (
                    queue_at.get(queue.name, ("nodePools",)),
                    f"the Kueue ClusterQueue {queue.name} would have {len(queue.flavors)} flavors ({what}); a "
                    f"resource group takes at most {GROUP_LIMIT}",
                )
            )
    index = {p.name: i for i, p in enumerate(plan.definition.node_pools)}
    for flavor in kueue.flavors:
        if len(flavor.node_taints) > FLAVOR_FIELD_LIMIT:
            where = (
                ("nodePools", index[flavor.pools[0].name], "taints") if len(flavor.pools) == 1 else ("nodePools",)
            )
            problems.append(
                (
                    where,
                    f"the pools of the Kueue ResourceFlavor {flavor.name} ({', '.join(p.name for p in flavor.pools)}) "
                    f"carry {len(flavor.node_taints)} taints of distinct key and effect; a ResourceFlavor takes at "
                    f"most {FLAVOR_FIELD_LIMIT}",
                )
            )
    return problems
