"""The quota planner: the ResourceQuota keys that close every way a namespace can take a cluster's GPUs.

How Kubernetes charges a GPU (`themelio_gpu/k8s/quota.py` holds the keys):
- a pod's extended resource request `N` (served by DRA or by a device plugin) is charged to `requests.N`,
  and a pod's implicit name `deviceclass.resource.kubernetes.io/C` to
  `requests.deviceclass.resource.kubernetes.io/C`, when the pod is created;
- every device a ResourceClaim of class C requests is charged to `C.deviceclass.resource.k8s.io/devices`,
  `requests.deviceclass.resource.kubernetes.io/C` and, when C sets `extendedResourceName: N`, `requests.N`.
  The claim the scheduler creates for a pod's extended or implicit request skips only the key the pod
  already paid, so a device taken through class C, by any of the three routes, is charged to all three
  keys of C; without the gate only the `devices` key sees claims;
- a device-plugin GPU is charged to `requests.N` only;
- a key no ResourceQuota of the namespace lists limits nothing.

So one key per class closes all three routes through it, and `requests.N` closes every class that maps N
(the device-class mapping is per class, so two classes with one name share that counter) and the device
plugin's N. The plan below, per cluster: one `requests.N` key for every name anything serves (the grant,
or 0), and a `devices` key at 0 for each GPU class that no name can carry honestly (a class without an
extended resource name, such as the chart's `mig.nvidia.com`, or a class sharing a granted name while
selecting other devices). Every offering's grant sits on one name; everything not granted is 0.

This module is pure Python (no cdktf): the CLI, the stacks' outputs, Kueue and preflight all call it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from themelio_gpu.inputs.catalog.capability import DeviceKind
from themelio_gpu.inputs.catalog.catalog import ResolvedOffering
from themelio_gpu.inputs.catalog.products import GpuProduct
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.k8s.dra import implicit_name
from themelio_gpu.k8s.nvidia import (
    COMPUTE_DOMAIN_CHANNEL_CLASS,
    COMPUTE_DOMAIN_DAEMON_CLASS,
    GPU,
    GPU_CLASS,
    MIG_CLASS,
    VFIO_CLASS,
    mig_resource,
)
from themelio_gpu.k8s.quota import class_charges, device_plugin_charges, devices_key, requests_key
from themelio_gpu.plan.model import ClusterPlan

# --- Devices ---------------------------------------------------------------------------------------------


def whole_gpus(products: Mapping[str, GpuProduct]) -> frozenset[DeviceKind]:
    """Every whole GPU of the cluster's product table (built-in and the catalog's): what an any-GPU class takes."""
    return frozenset(DeviceKind(key) for key in products)


def mig_devices(products: Mapping[str, GpuProduct]) -> frozenset[DeviceKind]:
    """Every MIG device of the cluster's product table: what the chart's mig.nvidia.com takes."""
    return frozenset(DeviceKind(p.key, profile) for p in products.values() for profile in p.mig_profiles)


def offering_devices(offering: ResolvedOffering) -> frozenset[DeviceKind]:
    """The devices an offering's class selects (aliases share it), as the catalog resolved them: one product's
    (or MIG profile's), every product a capability meets, or any whole GPU for the chart-served name."""
    return frozenset(offering.takes)


def driver_class_devices(products: Mapping[str, GpuProduct]) -> dict[str, frozenset[DeviceKind]]:
    """What each class of the DRA driver's installer selects (chart templates/deviceclass-*.yaml, identical in
    0.4.1 and 25.12.0; the GPU Operator's GPUCluster creates the same classes). Which of them a cluster has,
    and which extended resource name they map, is `ClusterPlan.driver_classes` (per installer and settings)."""
    whole = whole_gpus(products)
    return {
        GPU_CLASS: whole,
        MIG_CLASS: mig_devices(products),
        VFIO_CLASS: whole,  # whole GPUs bound to vfio-pci for passthrough
        COMPUTE_DOMAIN_DAEMON_CLASS: frozenset(),  # IMEX daemons, not GPUs
        COMPUTE_DOMAIN_CHANNEL_CLASS: frozenset(),  # IMEX channels, not GPUs
    }


# --- Paths -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuotaPath:
    """One way to devices: a DeviceClass (its extended name, its implicit name, a ResourceClaim of it), or a
    resource name a device plugin advertises."""

    name: str
    """The class name, or for a device plugin the resource name."""
    device_plugin: bool
    extended_resource_name: str | None
    """The name charged as `requests.<name>`: the class's extendedResourceName, or the device plugin's name."""
    devices: frozenset[DeviceKind]
    source: str
    """`catalog`, `dra-driver-chart` or `device-plugin`."""

    @property
    def charged_keys(self) -> tuple[str, ...]:
        """Every key Kubernetes charges for a device taken through this path (see the module docstring)."""
        if self.device_plugin:
            return device_plugin_charges(self.name)
        return class_charges(self.name, self.extended_resource_name)

    @property
    def label(self) -> str:
        if self.device_plugin:
            return f"{self.name} from the device plugin"
        routes = [self.extended_resource_name] if self.extended_resource_name else []
        routes += [implicit_name(self.name), "ResourceClaims"]
        return f"class {self.name} ({', '.join(routes)})"


@dataclass(frozen=True)
class Grant:
    """A resource name a grant can sit on: the offering it belongs to and the paths that carry it."""

    name: str
    offering: str
    paths: tuple[QuotaPath, ...]
    """The paths a grant on `requests.<name>` opens."""


@dataclass(frozen=True)
class ClusterQuotaPlan:
    cluster: str
    paths: tuple[QuotaPath, ...]
    """Every path to a GPU in the cluster: our classes, the DRA chart's, the device plugin's names."""
    not_gpu: tuple[QuotaPath, ...]
    """Classes that select no GPU (compute-domain channels and daemons): no GPU quota applies to them."""
    grants: Mapping[str, Grant]
    """Resource name -> what a grant on it means; only names some path carries with the offering's devices."""
    grant_names: Mapping[str, str]
    """Offering -> the name its grant sits on by default (the old name while migration aliases are served)."""
    name_keys: tuple[str, ...]
    """`requests.<name>` for every name anything in the cluster serves: the grant, or 0."""
    closed_keys: tuple[str, ...]
    """`devices` keys of classes no grant may use: always 0."""
    offering_devices: Mapping[str, frozenset[DeviceKind]]
    serving: Mapping[str, tuple[QuotaPath, ...]]
    """Resource name -> every path charged to `requests.<name>`."""

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(sorted((*self.name_keys, *self.closed_keys)))

    def key_for(self, path: QuotaPath) -> str:
        """The key this plan limits the path with: its name's counter, unless its own counter is closed."""
        if path.device_plugin:
            return requests_key(path.name)
        if path.extended_resource_name and devices_key(path.name) not in self.closed_keys:
            return requests_key(path.extended_resource_name)
        return devices_key(path.name)

    def hard(self, grants: Mapping[str, int]) -> dict[str, str]:
        """`spec.hard` for a namespace: `grants` maps resource names (`resolve_grants`) to counts, rest 0."""
        hard = dict.fromkeys(self.keys, 0)
        for name, count in grants.items():
            hard[requests_key(name)] = count
        return {key: str(count) for key, count in sorted(hard.items())}

    def zero_keys(self, granted_names: Iterable[str]) -> tuple[str, ...]:
        """Every key except those of `granted_names`: what must be 0 in every namespace."""
        skip = {requests_key(n) for n in granted_names}
        return tuple(k for k in self.keys if k not in skip)

    def reach(self, grants: Mapping[str, int]) -> dict[str, int]:
        """Offering -> the most devices of it a namespace can hold under `hard(grants)`.

        More than the offering's own grant only where another granted name can take its devices too: the
        chart-served nvidia.com/gpu (any whole GPU) is a pool of its own that can be taken as any product.
        """
        reach: dict[str, int] = {}
        for offering, devices in self.offering_devices.items():
            reach[offering] = sum(
                count
                for name, count in grants.items()
                if any(p.devices & devices for p in self.grants[name].paths)
            )
        return reach


def plan_quota(plan: ClusterPlan) -> ClusterQuotaPlan:
    """The quota plan of one cluster: its paths, the keys that close them, the names grants sit on."""
    offerings = {o.name: o for o in plan.offerings}
    aliases = plan.definition.serve_migration_aliases
    owner: dict[str, str] = {}  # resource name -> offering, for every name an offering is served by
    for offering in plan.offerings:
        for name in offering.advertised_names(aliases):
            owner[name] = offering.name
    devices = {name: offering_devices(o) for name, o in offerings.items()}

    paths: list[QuotaPath] = []
    not_gpu: list[QuotaPath] = []
    for spec in plan.device_classes:
        paths.append(QuotaPath(spec.name, False, spec.extended_resource_name, devices[spec.offering], "catalog"))
    driver_devices = driver_class_devices(plan.products)
    for driver_class in plan.driver_classes:
        selects = driver_devices.get(driver_class.name)
        if selects is None:
            raise AssertionError(f"quota: no device set known for the installer's class {driver_class.name}")
        path = QuotaPath(
            driver_class.name, False, driver_class.extended_resource_name, selects, "dra-driver-chart"
        )
        (paths if selects else not_gpu).append(path)
    paths.extend(_device_plugin_paths(plan))

    serving: dict[str, list[QuotaPath]] = {}
    for path in paths:
        if path.extended_resource_name:
            serving.setdefault(path.extended_resource_name, []).append(path)

    grants: dict[str, Grant] = {}
    closed: set[str] = set()
    for name, carried_by in serving.items():
        owning = owner.get(name)
        if owning is None:
            continue  # nothing of the catalog: requests.<name> stays 0
        members = tuple(p for p in carried_by if p.devices <= devices[owning])
        if not members:
            continue  # no path carries only the offering's devices: requests.<name> stays 0
        for path in carried_by:
            if path not in members and not path.device_plugin:
                # Shares the name but selects other devices (the chart's any-GPU class beside a product
                # class named nvidia.com/gpu): its own counter at 0 keeps the grant to the offering's devices.
                closed.add(devices_key(path.name))
        # A device plugin's name cannot be split from a class's: its GPUs stay reachable (see reach()).
        open_paths = tuple(p for p in carried_by if p in members or p.device_plugin)
        grants[name] = Grant(name, owning, open_paths)
    for path in paths:
        if not path.device_plugin and not path.extended_resource_name:
            closed.add(devices_key(path.name))  # no name can carry it: mig.nvidia.com, vfio.gpu.nvidia.com

    grant_names: dict[str, str] = {}
    for offering in plan.offerings:
        # The grant follows the name existing workloads and quotas use: the old one while migrating.
        candidates = [a.name for a in offering.aliases if aliases] + [offering.name]
        usable = [n for n in candidates if n in grants]
        if usable:
            grant_names[offering.name] = usable[0]
    return ClusterQuotaPlan(
        cluster=plan.name,
        paths=tuple(paths),
        not_gpu=tuple(not_gpu),
        grants=MappingProxyType(dict(sorted(grants.items()))),
        grant_names=MappingProxyType(grant_names),
        name_keys=tuple(sorted(requests_key(n) for n in serving)),
        closed_keys=tuple(sorted(closed)),
        offering_devices=MappingProxyType(devices),
        serving=MappingProxyType({n: tuple(p) for n, p in sorted(serving.items())}),
    )


def _device_plugin_paths(plan: ClusterPlan) -> list[QuotaPath]:
    """The names the device plugin advertises on the cluster's device-plugin pools (MIG strategy mixed)."""
    kinds: dict[str, set[DeviceKind]] = {}
    for pool in plan.pools:
        if pool.dra:
            continue
        if pool.mig_devices is None:
            kinds.setdefault(GPU, set()).add(DeviceKind(pool.product.key))
        else:
            for profile in pool.mig_devices:
                name = mig_resource(profile)
                kinds.setdefault(name, set()).add(DeviceKind(pool.product.key, profile))
    return [QuotaPath(n, True, n, frozenset(k), "device-plugin") for n, k in sorted(kinds.items())]


# --- Grants from the command line -------------------------------------------------------------------------


def resolve_grants(
    quota: ClusterQuotaPlan, plan: ClusterPlan, requested: Sequence[tuple[str, int]]
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Resource name -> count for `hard`, and (name, message) problems.

    An offering's name alone puts its count on the offering's grant name; naming several names of one
    offering (its own and its aliases) puts each count on that name, so a namespace can split its grant.
    """
    problems: list[tuple[str, str]] = []
    offerings = {o.name: o for o in plan.offerings}
    alias_of = {a.name: o for o in plan.offerings for a in o.aliases}
    given: dict[str, tuple[ResolvedOffering, int]] = {}
    for name, count in requested:
        offering = offerings.get(name) or alias_of.get(name)
        if name in given:
            problems.append((name, "listed twice"))
        elif offering is None:
            problems.append((name, f"cluster {plan.name} serves no offering of that name; {_served(plan)}"))
        elif name in alias_of and not plan.definition.serve_migration_aliases:
            problems.append(
                (
                    name,
                    f"is a migration alias of {offering.name}, which cluster {plan.name} no longer serves "
                    f"(serveMigrationAliases: false); grant {offering.name}",
                )
            )
        elif name not in quota.grants and not (name == offering.name and name in quota.grant_names):
            problems.append((name, _not_grantable(quota, plan, name, offering)))
        else:
            given[name] = (offering, count)
    grants: dict[str, int] = {}
    for name, (offering, count) in given.items():
        alone = not any(o.name == offering.name for n, (o, _) in given.items() if n != name)
        if name == offering.name and alone:
            grants[quota.grant_names[name]] = count
        elif name in quota.grants:
            grants[name] = count
        else:
            problems.append((name, _not_grantable(quota, plan, name, offering)))
    return dict(sorted(grants.items())), problems


def parse_grants(items: Sequence[str], problems: Problems) -> list[tuple[str, str, int]]:
    """(item, name, count) of each command-line `OFFERING=COUNT`; a problem for each item that is not one."""
    requested: list[tuple[str, str, int]] = []
    for item in items:
        name, sep, count = item.partition("=")
        if not sep or not count.isdigit():
            problems.add("command line", item, "write OFFERING=COUNT with a whole number, e.g. nvidia.com/a100=4")
        else:
            requested.append((item, name, int(count)))
    return requested


def requested_grants(
    quota: ClusterQuotaPlan, plan: ClusterPlan, requested: Sequence[tuple[str, str, int]], problems: Problems
) -> dict[str, int]:
    """resolve_grants of parse_grants' items, each problem named by the first item that names its offering."""
    grants, found = resolve_grants(quota, plan, [(name, count) for _, name, count in requested])
    item_of = {name: item for item, name, _ in reversed(requested)}  # the first item naming it
    for name, message in found:
        problems.add("command line", item_of[name], message)
    return grants


def _served(plan: ClusterPlan) -> str:
    names = [n for o in plan.offerings for n in o.advertised_names(plan.definition.serve_migration_aliases)]
    return f"it serves: {', '.join(sorted(names))}" if names else "it serves no offering"


def _not_grantable(quota: ClusterQuotaPlan, plan: ClusterPlan, name: str, offering: ResolvedOffering) -> str:
    carried = quota.serving.get(name, ())
    where = quota.grant_names.get(offering.name)
    instead = f"; grant {where}" if where and where != name else ""
    if not carried:
        return f"nothing in cluster {plan.name} serves {name} (no DeviceClass, no device-plugin pool){instead}"
    wider = ", ".join(p.label for p in carried)
    return (
        f"{name} reaches more than {offering.display_name} in cluster {plan.name} ({wider} selects other GPUs "
        f"too), so it cannot hold a grant of {offering.name}{instead}"
    )


def grant_notes(quota: ClusterQuotaPlan, plan: ClusterPlan, grants: Mapping[str, int]) -> list[str]:
    """Honest consequences of a grant, one sentence each: where a count sits, and any-GPU pools."""
    notes = []
    for name, count in sorted(grants.items()):
        offering = quota.grants[name].offering
        if name != offering and count and quota.grant_names.get(offering) == name:
            notes.append(
                f"{offering}: the grant sits on {name}, the name cluster {plan.name} migrates from, until "
                f"serveMigrationAliases: false; {offering} itself is 0 (name both to split the grant)"
            )
    own: dict[str, int] = {}
    for name, count in grants.items():
        own[quota.grants[name].offering] = own.get(quota.grants[name].offering, 0) + count
    for offering, devices in sorted(quota.offering_devices.items()):
        # Other offerings' grants that can be taken as this offering's devices. Only news when one of them
        # is not narrower than this one (a product inside "any GPU" is not news from that side); then every
        # such grant counts, so the total is what the namespace can hold (`reach`).
        others = sorted(
            (name, count)
            for name, count in grants.items()
            if count
            and quota.grants[name].offering != offering
            and any(p.devices & devices for p in quota.grants[name].paths)
        )
        if any(not quota.offering_devices[quota.grants[name].offering] < devices for name, _ in others):
            total = own.get(offering, 0) + sum(c for _, c in others)
            listed = ", ".join(f"{n}={c}" for n, c in others)
            notes.append(
                f"{offering}: this namespace can hold up to {total} of its devices ({own.get(offering, 0)} "
                f"granted, plus {listed}, which can be taken as them too)"
            )
    return notes


__all__ = [
    "ClusterQuotaPlan",
    "DeviceKind",
    "Grant",
    "QuotaPath",
    "driver_class_devices",
    "grant_notes",
    "mig_devices",
    "offering_devices",
    "plan_quota",
    "resolve_grants",
    "whole_gpus",
]
