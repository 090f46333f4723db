"""An independent model of Kubernetes' ResourceQuota evaluation for GPUs, to judge the quotas the tool emits.

Written from the Kubernetes sources, not from the planner (themelio_gpu/plan/quota.py is not imported):
`pkg/quota/v1/evaluator/core/pods.go` and `resource_claims.go` at the 1.34-1.37 state with
DRAExtendedResource on. It builds a cluster's DeviceClasses (the plan's, and the DRA chart's from a table
of its templates, checked against `helm template` in test_quota.py), one device of every kind its pools
publish (evaluated with the offline CEL engine), then every way a namespace can ask for a device:

- a pod requesting an extended resource name, served by any class that maps the name (the scheduler picks
  the newest; the model lets the adversary pick) or by a device plugin on device-plugin nodes;
- a pod requesting a class's implicit name `deviceclass.resource.kubernetes.io/<class>`;
- a ResourceClaim of any class.

Each is charged as the evaluators charge the pod and the claim (the scheduler's claim for a pod's request
included), and a linear program finds the most devices of an offering a namespace can hold: every key a
ResourceQuota lists caps the sum of what is charged to it; a key it does not list caps nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from themelio_gpu.dryrun.cel_kubernetes import compile_selector
from themelio_gpu.dryrun.resourceslices import Device, parse_resourceslices
from themelio_gpu.inputs.catalog.products import GpuProduct
from themelio_gpu.plan.model import ClusterPlan

INFINITE = float("inf")
GPU_DRIVER = "gpu.nvidia.com"
GPU = f"device.driver == '{GPU_DRIVER}' && device.attributes['{GPU_DRIVER}'].type == "
CD = "device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com'].type == "

# The DRA driver chart's DeviceClasses, from templates/deviceclass-*.yaml (dra-driver-nvidia-gpu 0.4.1 and
# nvidia-dra-driver-gpu 25.12.0 are identical): name -> (selector, rendered only with computeDomains).
# gpu.nvidia.com adds extendedResourceName nvidia.com/gpu when it renders resource.k8s.io/v1.
CHART_CLASSES: dict[str, tuple[str, bool]] = {
    "gpu.nvidia.com": (GPU + "'gpu'", False),
    "mig.nvidia.com": (GPU + "'mig'", False),
    "vfio.gpu.nvidia.com": (GPU + "'vfio'", False),
    "compute-domain-daemon.nvidia.com": (CD + "'daemon'", True),
    "compute-domain-default-channel.nvidia.com": (
        CD + "'channel' && device.attributes['compute-domain.nvidia.com'].id == 0",
        True,
    ),
}


@dataclass(frozen=True)
class ModelClass:
    name: str
    extended_resource_name: str | None
    selector: str


@dataclass(frozen=True)
class Unit:
    """One physical device: what a namespace holds. A vfio device is the same GPU as its `gpu` device."""

    pool: str
    kind: str


@dataclass(frozen=True)
class Route:
    """One way to ask for a device, and what Kubernetes charges for one device taken that way."""

    label: str
    usage: Mapping[str, int]
    units: frozenset[Unit]


# --- The evaluators, as Go has them ----------------------------------------------------------------------


def pod_usage(requests: Mapping[str, int]) -> dict[str, int]:
    """podComputeUsageHelper: an extended resource (incl. an implicit name) is charged as requests.<name>."""
    return {f"requests.{name}": q for name, q in requests.items() if "/" in name}


def claim_usage(
    requests: Sequence[tuple[str, int]],
    mapping: Mapping[str, str],
    extended_claim: bool,
    pod_requests: Mapping[str, int],
) -> dict[str, int]:
    """claimEvaluator.Usage + setResourceQuantity for `exactly` requests (class, count).

    `mapping` is the device-class mapping (class -> extendedResourceName). For the scheduler's claim
    (`extended_claim`, owner verified), a request matching the pod's own request by name and quantity skips
    the key the pod already paid.
    """
    result: dict[str, int] = {}
    reqs = [(f"requests.{n}", q) for n, q in pod_requests.items()]

    def add(key: str, q: int) -> None:
        result[key] = result.get(key, 0) + q

    for device_class, q in requests:
        add(f"{device_class}.deviceclass.resource.k8s.io/devices", q)
        implicit = f"requests.deviceclass.resource.kubernetes.io/{device_class}"
        is_implicit = extended_claim and (implicit, q) in reqs
        explicit = f"requests.{mapping[device_class]}" if device_class in mapping else None
        is_explicit = bool(explicit) and not is_implicit and extended_claim and (explicit, q) in reqs
        if not extended_claim or not is_implicit or is_explicit:
            add(implicit, q)
        if explicit is not None and (not extended_claim or is_implicit or not is_explicit):
            add(explicit, q)
        if is_implicit:
            reqs.remove((implicit, q))
        elif is_explicit:
            assert explicit is not None
            reqs.remove((explicit, q))
    return result


def _merge(*usages: Mapping[str, int]) -> dict[str, int]:
    total: dict[str, int] = {}
    for usage in usages:
        for key, q in usage.items():
            total[key] = total.get(key, 0) + q
    return total


# --- The cluster ----------------------------------------------------------------------------------------


def _device(
    pool: str, index: int, attributes: Mapping[str, Any], capacity: Mapping[str, str], driver: str
) -> Device:
    typed = {k: ({"int": v} if isinstance(v, int) else {"string": v}) for k, v in attributes.items()}
    if driver == GPU_DRIVER:
        typed["driverVersion"] = {"version": "590.48.1"}
        if "cudaComputeCapability" in attributes:  # a version attribute, as the driver publishes it (9.0.0)
            typed["cudaComputeCapability"] = {"version": f"{attributes['cudaComputeCapability']}.0"}
    doc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{pool}-{index}"},
        "spec": {
            "driver": driver,
            "nodeName": f"{pool}-node",
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"d{index}",
                    "attributes": typed,
                    "capacity": {k: {"value": v} for k, v in capacity.items()},
                }
            ],
        },
    }
    return parse_resourceslices(json.dumps(doc))[0]


@dataclass
class ClusterModel:
    plan: ClusterPlan
    classes: list[ModelClass]
    dra_devices: list[tuple[Unit, Device]]
    plugin_units: dict[str, set[Unit]]
    """Resource name a device plugin advertises -> the units behind it."""
    unit_devices: dict[Unit, Device]

    @classmethod
    def of(cls, plan: ClusterPlan, every_kind: bool = True) -> ClusterModel:
        classes = [ModelClass(c.name, c.extended_resource_name, c.selector) for c in plan.device_classes]
        values = plan.dra_values or {}
        resources = values.get("resources") or {}
        chart = plan.dra_values is not None and (resources.get("gpus") or {}).get("enabled") is True
        # The GPU Operator's GPUCluster (gpuCluster.deployCR) creates the same classes from its own manifests,
        # but its gpu.nvidia.com maps no extended resource name.
        operator = (plan.operator_values.get("gpuCluster") or {}).get("deployCR") is True
        if chart or operator:
            if chart:
                domains = (resources.get("computeDomains") or {}).get("enabled") is True
                v1 = (values.get("resourceApiVersion") or "resource.k8s.io/v1") == "resource.k8s.io/v1"
            else:
                gpu_cluster_domains = (plan.operator_values.get("draDriver") or {}).get("computeDomains") or {}
                domains, v1 = gpu_cluster_domains.get("enabled") is not False, False
            for name, (selector, needs_domains) in CHART_CLASSES.items():
                if needs_domains and not domains:
                    continue
                extended = "nvidia.com/gpu" if name == "gpu.nvidia.com" and v1 else None
                classes.append(ModelClass(name, extended, selector))
        dra: list[tuple[Unit, Device]] = []
        plugin: dict[str, set[Unit]] = {}
        unit_devices: dict[Unit, Device] = {}
        index = 0
        pools: list[tuple[str, GpuProduct, Iterable[str | None], bool]] = [
            (p.name, p.product, [None] if p.mig_devices is None else list(p.mig_devices), p.dra)
            for p in plan.pools
        ]
        if every_kind and (chart or operator):
            # A DRA node of every product in every MIG layout: a quota must not depend on what the pools
            # publish today, since a class selects whatever appears. Every product the cluster's catalog
            # knows: the built-in table and the catalog's own products.
            pools += [(f"any-{p.key}", p, [None, *p.mig_profiles], True) for p in plan.products.values()]
        for pool_name, product, profiles, on_dra in pools:
            base: dict[str, Any] = {"productName": product.product_names[0], "brand": "Nvidia"}
            # What the driver publishes of the product: capability offerings select on these.
            if product.architecture:
                base["architecture"] = product.architecture
            if product.compute_capability:
                base["cudaComputeCapability"] = product.compute_capability
            kinds: list[tuple[str, dict[str, Any], dict[str, str]]] = []
            for profile in profiles:
                if profile is None:
                    kinds.append(("gpu", {**base, "type": "gpu"}, {"memory": f"{product.memory_gib}Gi"}))
                else:
                    # A MIG device publishes at most its profile's size (1g.24gb: 24 GiB), usually less.
                    most = profile.split("g.", 1)[1].split("gb", 1)[0]
                    attributes = {**base, "type": "mig", "profile": profile}
                    kinds.append((f"mig {profile}", attributes, {"memory": f"{most}Gi"}))
            for kind, attributes, memory in kinds:
                index += 1
                unit = Unit(pool_name, kind)
                device = _device(pool_name, index, attributes, memory, GPU_DRIVER)
                unit_devices[unit] = device
                if not on_dra:
                    profile = attributes.get("profile")
                    name = "nvidia.com/gpu" if profile is None else f"nvidia.com/mig-{profile.replace('+', '.')}"
                    plugin.setdefault(name, set()).add(unit)
                    continue
                dra.append((unit, device))
                if kind == "gpu":  # the same GPU, bound to vfio-pci (PassthroughSupport)
                    index += 1
                    vfio = _device(pool_name, index, {**attributes, "type": "vfio"}, memory, GPU_DRIVER)
                    dra.append((unit, vfio))
            if on_dra and any(c.name.startswith("compute-domain-") for c in classes):
                for kind in ("channel", "daemon"):
                    index += 1
                    device = _device(pool_name, index, {"type": kind, "id": 0}, {}, "compute-domain.nvidia.com")
                    dra.append((Unit(pool_name, f"imex {kind}"), device))
        return cls(plan, classes, dra, plugin, unit_devices)

    def selected(self, selector: str, devices: Iterable[tuple[Unit, Device]]) -> frozenset[Unit]:
        compiled = compile_selector(selector)
        return frozenset(unit for unit, device in devices if compiled.evaluate(device))

    def class_units(self, model_class: ModelClass) -> frozenset[Unit]:
        return self.selected(model_class.selector, self.dra_devices)

    def offering_units(self) -> dict[str, frozenset[Unit]]:
        """Offering -> the physical devices its own class selects, wherever they sit (DRA or device plugin)."""
        everything = list(self.unit_devices.items())
        # The catalog's selector of the offering (a chart-served one: any whole GPU, as gpu.nvidia.com).
        return {o.name: self.selected(o.selector, everything) for o in self.plan.offerings}

    def gpu_units(self) -> frozenset[Unit]:
        return frozenset(self.unit_devices)

    def routes(self) -> list[Route]:
        """Every way to ask for one device, charged as the evaluators do."""
        mapping = {c.name: c.extended_resource_name for c in self.classes if c.extended_resource_name}
        routes = []
        for c in self.classes:
            units = self.class_units(c)
            if c.extended_resource_name:
                pod = {c.extended_resource_name: 1}
                usage = _merge(pod_usage(pod), claim_usage([(c.name, 1)], mapping, True, pod))
                routes.append(Route(f"pod {c.extended_resource_name} -> {c.name}", usage, units))
            if len(c.name) <= 63:
                pod = {f"deviceclass.resource.kubernetes.io/{c.name}": 1}
                usage = _merge(pod_usage(pod), claim_usage([(c.name, 1)], mapping, True, pod))
                routes.append(Route(f"pod implicit {c.name}", usage, units))
            routes.append(Route(f"ResourceClaim {c.name}", claim_usage([(c.name, 1)], mapping, False, {}), units))
        for name, plugged in sorted(self.plugin_units.items()):
            routes.append(Route(f"pod {name} -> device plugin", pod_usage({name: 1}), frozenset(plugged)))
        return routes


# --- The most devices a namespace can hold ----------------------------------------------------------------


def _simplex_max(a: list[list[Fraction]], b: list[Fraction]) -> Fraction:
    """max sum(x) s.t. a x <= b, x >= 0, with b >= 0 and every column non-negative and non-zero (bounded)."""
    rows, cols = len(a), len(a[0]) if a else 0
    if cols == 0:
        return Fraction(0)
    # Tableau: constraints with slacks, last row the objective (maximise sum x -> minimise -sum x).
    t = [[*a[i], *(Fraction(int(i == j)) for j in range(rows)), b[i]] for i in range(rows)]
    t.append([Fraction(-1)] * cols + [Fraction(0)] * rows + [Fraction(0)])
    basis = [cols + i for i in range(rows)]
    while True:
        entering = next((j for j in range(cols + rows) if t[-1][j] < 0), None)  # Bland's rule
        if entering is None:
            return t[-1][-1]
        ratios = [(t[i][-1] / t[i][entering], basis[i], i) for i in range(rows) if t[i][entering] > 0]
        assert ratios, "unbounded, though every route is charged to a listed key"
        _, _, leave = min(ratios)
        pivot = t[leave][entering]
        t[leave] = [v / pivot for v in t[leave]]
        for i in range(rows + 1):
            if i != leave and t[i][entering] != 0:
                factor = t[i][entering]
                t[i] = [v - factor * w for v, w in zip(t[i], t[leave], strict=True)]
        basis[leave] = entering


def most_devices(routes: Sequence[Route], units: frozenset[Unit], hard: Mapping[str, str]) -> float:
    """The most devices among `units` a namespace can hold under `hard` (INFINITE if a route is unlimited)."""
    useful = [r for r in routes if r.units & units]
    limited_keys = sorted(hard)
    for route in useful:
        if not any(route.usage.get(k, 0) > 0 for k in limited_keys):
            return INFINITE
    a = [[Fraction(r.usage.get(k, 0)) for r in useful] for k in limited_keys]
    b = [Fraction(int(hard[k])) for k in limited_keys]
    return float(_simplex_max(a, b)) if useful else 0.0


def unlimited_routes(routes: Sequence[Route], hard: Mapping[str, str]) -> list[str]:
    return sorted(r.label for r in routes if r.units and not any(r.usage.get(k, 0) > 0 for k in hard))


def admits(route: Route, count: int, hard: Mapping[str, str]) -> bool:
    """A namespace with nothing yet can take `count` devices this way."""
    return all(int(hard[k]) >= q * count for k, q in route.usage.items() if k in hard)


__all__ = ["ClusterModel", "Route", "admits", "claim_usage", "most_devices", "pod_usage", "unlimited_routes"]
