"""`sandbox probe`: ask the real scheduler for every GPU name the cluster serves, the way the ADR's users do.

For each name a pod asks for `name: 1` in its container's limits, with the offering's node selector and
tolerations (what the consumers' files give a workload); one more pod asks for one device more than the
largest node of its pools has. The real kube-scheduler places them: through DRA (it builds a ResourceClaim
from the DeviceClass whose `extendedResourceName` is the name, allocates devices from the ResourceSlices and
writes `pod.status.extendedResourceClaimStatus`), or, on a device-plugin pool, by the node's allocatable.
Each row says where the pod landed and which devices it got (product, MIG profile, memory), or why it stays
Pending (the scheduler's own event), beside what this tool's model expects: the pools `plan.placements`
gives the offering that its selector and tolerations reach. A row where the two differ fails the probe.
The offering's class also answers to its implicit name on its DRA pools, and a reserved pool takes the pods
its Kueue queue admits; `admission.py` asks quota admission, `daemonsets.py` the DaemonSet controller.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Any

from themelio_gpu import interrupts
from themelio_gpu.dryrun.cel_kubernetes import CelError, compile_selector
from themelio_gpu.dryrun.resourceslices import Device, parse_resourceslices
from themelio_gpu.inputs.catalog.catalog import ResolvedOffering
from themelio_gpu.inputs.clusters.pool_contract import PoolContract
from themelio_gpu.k8s.dra import implicit_name
from themelio_gpu.k8s.scheduling import selector_mismatches, untolerated
from themelio_gpu.plan.kueue import Flavor, plan_kueue
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox import slice_compare
from themelio_gpu.sandbox.cluster import KUBECTL, Sandbox, create_all, kubectl
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.tools import Toolbox
from themelio_gpu.tables import table

NAMESPACE = "themelio-probe"
WAIT_SECONDS = 60.0


@dataclass
class Row:
    name: str
    """The extended resource name the pod asks for."""
    count: int
    offering: str
    expected_pools: list[str]
    """The model: pools serving the offering that the pod's selector and tolerations reach; empty: Pending."""
    node: str = ""
    pool: str = ""
    devices: list[str] = field(default_factory=list)
    """What was allocated: `product profile memory` per device, or the device plugin's count."""
    pending: str = ""
    """The scheduler's reason when the pod stayed Pending."""
    problems: list[str] = field(default_factory=list)
    cel_checked: int = 0
    """Allocated devices the offline CEL evaluator was asked about (each must match its class there too)."""
    uncompared: str = ""
    slices: str = ""
    """Whose ResourceSlices the row ran on (slice_compare.publishers): of the node it landed on, else of its
    expected pools' nodes; `driver` (NVIDIA's DRA driver), `sandbox`, or none (the device plugin)."""
    via: str = ""
    """How the pod is admitted, when not directly: through a Kueue queue's flavor."""
    flavor: Flavor | None = field(default=None, repr=False, compare=False)
    """Why the row is shown but not compared with the model (a MIG name on device-plugin pools: the plugin's
    renamed MIG resources are not simulated)."""

    @property
    def agrees(self) -> bool:
        return not self.problems or bool(self.uncompared)


def _reachable(offering: ResolvedOffering, pool: PoolContract, flavor: Flavor | None = None) -> bool:
    """Whether the probe's pod for the offering (admitted through `flavor`, if given) can land on the pool."""
    selector = {**offering.node_selector, **(flavor.node_labels if flavor else {})}
    if selector_mismatches(selector, pool.labels):
        return False
    return not untolerated(_tolerations(offering, flavor), pool.taints)


def _tolerations(offering: ResolvedOffering, flavor: Flavor | None) -> list[dict[str, Any]]:
    """The offering's tolerations, and what Kueue adds to a pod it admits in the flavor (its taints, Exists)."""
    own = [t.model_dump(exclude_none=True) for t in offering.tolerations]
    added = [{"key": k, "operator": "Exists", "effect": e} for k, e in (flavor.tolerations if flavor else ())]
    return own + added


def _per_node(pool: PoolContract) -> int:
    return sum(pool.devices_per_node().values()) if pool.mig_devices is not None else pool.gpus_per_node


def planned_rows(plan: ClusterPlan) -> list[tuple[Row, ResolvedOffering]]:
    pools = {p.name: p for p in plan.pools}
    rows: list[tuple[Row, ResolvedOffering]] = []
    for offering in plan.offerings:
        expected = [p for p in plan.placements.get(offering.name, ()) if _reachable(offering, pools[p])]
        names = [offering.name, *(a.name for a in offering.aliases if a.name in plan.advertised_names)]
        plugin_mig = bool(expected) and all(
            not pools[p].dra and pools[p].mig_devices is not None for p in expected
        )
        why = "not compared: MIG devices of device-plugin pools (the plugin's renamed MIG names are not simulated)"
        for name in names:
            rows.append(
                (Row(name, 1, offering.name, list(expected), uncompared=why if plugin_mig else ""), offering)
            )
        if expected:
            too_many = max(_per_node(pools[p]) for p in expected) + 1
            rows.append((Row(offering.name, too_many, offering.name, []), offering))
        through_dra = [p for p in expected if pools[p].dra]
        if through_dra:
            device_class = serving_class(plan, offering)
            via = f"its class's implicit name ({device_class})"
            rows.append((Row(implicit_name(device_class), 1, offering.name, through_dra, via=via), offering))
    rows.extend(_reserved_rows(plan))
    return rows


def serving_class(plan: ClusterPlan, offering: ResolvedOffering) -> str:
    """The DeviceClass the cluster has for the offering: the stack's own, else the installer's that maps its name."""
    own = [c.name for c in plan.device_classes if c.offering == offering.name and not c.is_alias]
    if own:
        return own[0]
    mapped = [d.name for d in plan.driver_classes if d.extended_resource_name == offering.name]
    if not mapped:
        raise SandboxError(f"cluster {plan.name} has no DeviceClass for {offering.name}")
    return mapped[0]


def _reserved_rows(plan: ClusterPlan) -> list[tuple[Row, ResolvedOffering]]:
    """For each queue that grants a reserved pool, a pod as Kueue admits it there: the flavor's node labels
    and tolerations added (Kueue itself does not run in the sandbox; its admission is what `kueue.yaml` says).
    It lands on the flavor's pools that serve the offering, and nowhere else."""
    rows: list[tuple[Row, ResolvedOffering]] = []
    for queue in plan_kueue(plan).queues:
        for flavor in queue.flavors:
            if not any(p.reservations for p in flavor.pools):
                continue  # an unreserved flavor: the rows above place its offerings already
            for offering in plan.offerings:
                serving = set(plan.placements.get(offering.name, ()))
                expected = [p.name for p in flavor.pools if p.name in serving and _reachable(offering, p, flavor)]
                if expected:
                    via = f"queue {queue.name}, flavor {flavor.name} (Kueue's admission as kueue.yaml says)"
                    rows.append((Row(offering.name, 1, offering.name, expected, via=via, flavor=flavor), offering))
    return rows


def probe_pod(index: int, row: Row, offering: ResolvedOffering) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "probe",
                "image": "registry.invalid/probe",
                "resources": {"limits": {row.name: str(row.count)}},
            }
        ],
        "tolerations": _tolerations(offering, row.flavor),
    }
    selector = {**offering.node_selector, **(row.flavor.node_labels if row.flavor else {})}
    if selector:
        spec["nodeSelector"] = selector
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"probe-{index}", "namespace": NAMESPACE},
        "spec": spec,
    }


def dra_items(toolbox: Toolbox, sandbox: Sandbox, kind: str, *args: str) -> list[Any]:
    """The objects of a DRA kind, none where the cluster's Kubernetes serves no resource.k8s.io/v1 (before
    1.34: a device-plugin-only cluster)."""
    if not any(g.endswith("resource.k8s.io/v1") for g in kubectl(toolbox, sandbox, "api-versions").split()):
        return []
    items: list[Any] = get_json(toolbox, sandbox, kind, *args)["items"]
    return items


def get_json(toolbox: Toolbox, sandbox: Sandbox, *args: str) -> Any:
    return json.loads(kubectl(toolbox, sandbox, "get", *args, "-o", "json"))


def probe(plan: ClusterPlan, sandbox: Sandbox, toolbox: Toolbox) -> list[Row]:
    """One probe pod at a time (pods asking for names that share devices would take each other's), each read
    once the scheduler has decided it and deleted, with the claim the scheduler made for it, before the next."""
    planned = planned_rows(plan)
    create_all(toolbox, sandbox, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
    try:
        nodes = {n["metadata"]["name"]: n for n in get_json(toolbox, sandbox, "nodes")["items"]}
        slices = dra_items(toolbox, sandbox, "resourceslices", "--show-managed-fields")
        who = slice_compare.publishers(slices)
        pools = {name: str(node["pool"]) for name, node in sandbox.state().get("nodes", {}).items()}
        devices = devices_by_key(slices)
        cel = CelCheck(
            {
                (d.driver, d.pool, d.name): d
                for d in parse_resourceslices(json.dumps({"apiVersion": "v1", "kind": "List", "items": slices}))
            },
            {c["metadata"]["name"]: _selectors(c) for c in dra_items(toolbox, sandbox, "deviceclasses")},
        )
        rows = []
        for index, (row, offering) in enumerate(planned):
            name = f"probe-{index}"
            create_all(toolbox, sandbox, [probe_pod(index, row, offering)])
            pod = wait_pods(toolbox, sandbox, 1)[name]
            claims = {
                c["metadata"]["name"]: c for c in dra_items(toolbox, sandbox, "resourceclaims", "-n", NAMESPACE)
            }
            events = get_json(toolbox, sandbox, "events", "-n", NAMESPACE)["items"]
            _read(row, offering, pod, nodes, devices, claims, events, plan)
            row.slices = whose_slices(row, who, pools, plan)
            cel.check(row, pod, claims)
            rows.append(row)
            kubectl(toolbox, sandbox, "delete", "pod", name, "-n", NAMESPACE, "--grace-period=0", "--wait=true")
            _wait_claims_gone(toolbox, sandbox)
        return rows
    finally:
        with interrupts.deferred():
            interrupts.run([str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "delete",
                            "namespace", NAMESPACE, "--wait=true", "--timeout=60s"])  # fmt: skip


def whose_slices(row: Row, who: dict[str, str], pools: dict[str, str], plan: ClusterPlan) -> str:
    """Whose slices the row ran on: its node's, else those of the nodes of the pools serving its offering (the
    scheduler tried them all); `none`: the device plugin's allocatable, no slice."""
    serving = set(row.expected_pools) | set(plan.placements.get(row.offering, ()))
    nodes = [row.node] if row.node else [n for n, pool in pools.items() if pool in serving]
    return ", ".join(sorted({who.get(n, "none") for n in nodes})) or "none"


def _selectors(device_class: dict[str, Any]) -> list[str]:
    return [s["cel"]["expression"] for s in device_class.get("spec", {}).get("selectors") or [] if "cel" in s]


@dataclass
class CelCheck:
    """The offline CEL evaluator (`dryrun/`, what `match` and `trial` use) asked about every device the real
    scheduler allocated: each must satisfy its DeviceClass's selectors there too."""

    devices: dict[tuple[str, str, str], Device]
    classes: dict[str, list[str]]

    def check(self, row: Row, pod: dict[str, Any], claims: dict[str, Any]) -> None:
        status = pod.get("status", {}).get("extendedResourceClaimStatus")
        if not pod.get("spec", {}).get("nodeName") or status is None:
            return
        claim = claims.get(status["resourceClaimName"], {})
        classes = {
            r["name"]: (r.get("exactly") or r).get("deviceClassName", "")
            for r in claim.get("spec", {}).get("devices", {}).get("requests", [])
        }
        for result in claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", []):
            device = self.devices.get((result["driver"], result["pool"], result["device"]))
            device_class = classes.get(result["request"], "")
            if device is None or device_class not in self.classes:
                row.problems.append(f"allocated {result['device']} of {device_class}, which the probe cannot read")
                continue
            row.cel_checked += 1
            for expression in self.classes[device_class]:
                try:
                    matched = compile_selector(expression).evaluate(device)
                except CelError as error:
                    row.problems.append(f"the CEL evaluator fails on {device_class}'s selector: {error}")
                    continue
                if not matched:
                    row.problems.append(
                        f"the scheduler allocated {device.name} on {device.node} for class {device_class}, but the "
                        f"offline CEL evaluator says it does not match {expression!r}"
                    )


def _wait_claims_gone(toolbox: Toolbox, sandbox: Sandbox) -> None:
    """Until the garbage collector has deleted the claim of the pod just deleted (its devices are free again)."""
    deadline = time.monotonic() + 30
    while dra_items(toolbox, sandbox, "resourceclaims", "-n", NAMESPACE) and time.monotonic() < deadline:
        time.sleep(0.2)


def wait_pods(toolbox: Toolbox, sandbox: Sandbox, count: int, namespace: str = NAMESPACE) -> dict[str, Any]:
    """Until every pod is bound or the scheduler has said why not (PodScheduled False: Unschedulable, or a
    plugin's error such as DRA's "cannot allocate all claims")."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        pods = {p["metadata"]["name"]: p for p in get_json(toolbox, sandbox, "pods", "-n", namespace)["items"]}
        undecided = [name for name, pod in pods.items() if not decided(pod)]
        if (len(pods) == count and not undecided) or time.monotonic() > deadline:
            return pods
        time.sleep(0.5)


def decided(pod: dict[str, Any]) -> bool:
    if pod.get("spec", {}).get("nodeName"):
        return True
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "PodScheduled" and c.get("status") == "False" for c in conditions)


def devices_by_key(slices: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    found = {}
    for item in slices:
        spec = item["spec"]
        for device in spec.get("devices", []):
            found[(spec["driver"], spec["pool"]["name"], device["name"])] = device
    return found


def describe_device(device: dict[str, Any]) -> str:
    attributes = {k: next(iter(v.values())) for k, v in device.get("attributes", {}).items()}
    memory = device.get("capacity", {}).get("memory", {}).get("value", "?")
    profile = attributes.get("profile", "whole GPU")
    return f"{attributes.get('productName', '?')} {profile} {memory}"


def _read(
    row: Row,
    offering: ResolvedOffering,
    pod: dict[str, Any],
    nodes: dict[str, Any],
    devices: dict[tuple[str, str, str], dict[str, Any]],
    claims: dict[str, Any],
    events: list[dict[str, Any]],
    plan: ClusterPlan,
) -> None:
    name = pod["metadata"]["name"]
    row.node = pod.get("spec", {}).get("nodeName", "")
    if not row.node:
        messages = [
            e["message"]
            for e in events
            if e["involvedObject"]["name"] == name and e["reason"] == "FailedScheduling"
        ]
        conditions = [
            c.get("message", "")
            for c in pod.get("status", {}).get("conditions", [])
            if c["type"] == "PodScheduled"
        ]
        row.pending = (messages or conditions or ["not decided within the probe's wait"])[-1]
        if row.expected_pools:
            row.problems.append(f"stayed Pending, but the model places it on {', '.join(row.expected_pools)}")
        return
    row.pool = nodes[row.node]["metadata"].get("labels", {}).get(plan.names.pool_label, "")
    if not row.expected_pools:
        row.problems.append(
            f"landed on {row.node} (pool {row.pool or 'none'}), but the model says it stays Pending"
        )
    elif row.pool not in row.expected_pools:
        row.problems.append(f"landed on pool {row.pool or 'none'}, not on {', '.join(row.expected_pools)}")
    status = pod.get("status", {}).get("extendedResourceClaimStatus")
    if status is None:  # the device-plugin path: the node advertises the name
        advertised = nodes[row.node]["status"].get("allocatable", {}).get(row.name)
        row.devices = [f"{row.count} of {advertised} {row.name} (device plugin)"]
        return
    claim = claims.get(status["resourceClaimName"], {})
    results = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
    allocated = [devices.get((r["driver"], r["pool"], r["device"]), {}) for r in results]
    row.devices = [describe_device(d) for d in allocated]
    for device in allocated:
        attributes = {k: next(iter(v.values())) for k, v in device.get("attributes", {}).items()}
        if offering.product is not None and attributes.get("productName") not in offering.product.product_names:
            row.problems.append(f"got a {attributes.get('productName')}, not a {offering.product.display_name}")
        if offering.mig_profile is not None and attributes.get("profile") != offering.mig_profile:
            row.problems.append(
                f"got profile {attributes.get('profile', 'whole GPU')}, not {offering.mig_profile}"
            )
    if len(allocated) != row.count:
        row.problems.append(f"got {len(allocated)} devices for {row.count}")


def as_json(rows: list[Row]) -> str:
    def shown(row: Row) -> dict[str, Any]:
        fields = {f.name: getattr(row, f.name) for f in dataclasses.fields(row) if f.name != "flavor"}
        return {**fields, "flavor": row.flavor.name if row.flavor else None, "agrees": row.agrees}

    return json.dumps([shown(r) for r in rows], indent=2)


def as_table(rows: list[Row]) -> str:
    header = ("name", "count", "landed on (pool)", "devices or why Pending", "slices", "model", "agrees")
    lines = [header]
    for row in rows:
        landed = f"{row.node} ({row.pool})" if row.node else "Pending"
        what = "; ".join(row.devices) if row.node else row.pending[:90]
        verdict = row.uncompared if row.uncompared else "yes" if row.agrees else "NO: " + "; ".join(row.problems)
        name = f"{row.name} via {row.via}" if row.via else row.name
        model = ", ".join(row.expected_pools) or "Pending"
        lines.append((name, str(row.count), landed, what, row.slices, model, verdict))
    return table(lines, pad_last=False)
