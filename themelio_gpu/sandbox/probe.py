"""`sandbox probe`: ask the real scheduler for every GPU name the cluster serves, the way the ADR's users do.

For each name a pod asks for `name: 1` in its container's limits, with the offering's node selector and
tolerations (what the consumers' files give a workload); one more pod asks for one device more than the
largest node of its pools has. The real kube-scheduler places them: through DRA (it builds a ResourceClaim
from the DeviceClass whose `extendedResourceName` is the name, allocates devices from the ResourceSlices and
writes `pod.status.extendedResourceClaimStatus`), or, on a device-plugin pool, by the node's allocatable.
Each row says where the pod landed and which devices it got (product, MIG profile, memory), or why it stays
Pending (the scheduler's own event), beside what this tool's model expects: the pools `plan.placements`
gives the offering that its selector and tolerations reach. A row where the two differ fails the probe.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from themelio_gpu import interrupts
from themelio_gpu.inputs.catalog.catalog import ResolvedOffering
from themelio_gpu.inputs.clusters.pool_contract import PoolContract, untolerated
from themelio_gpu.plan.fleet import ClusterPlan
from themelio_gpu.sandbox.cluster import KUBECTL, Sandbox
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.tools import Toolbox

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

    @property
    def agrees(self) -> bool:
        return not self.problems


def _reachable(offering: ResolvedOffering, pool: PoolContract) -> bool:
    if any(pool.labels.get(k) != v for k, v in offering.node_selector.items()):
        return False
    tolerations = [t.model_dump(exclude_none=True) for t in offering.tolerations]
    return not untolerated(tolerations, pool.taints)


def _per_node(pool: PoolContract) -> int:
    return sum(pool.devices_per_node().values()) if pool.mig_devices is not None else pool.gpus_per_node


def planned_rows(plan: ClusterPlan) -> list[tuple[Row, ResolvedOffering]]:
    pools = {p.name: p for p in plan.pools}
    rows: list[tuple[Row, ResolvedOffering]] = []
    for offering in plan.offerings:
        expected = [p for p in plan.placements.get(offering.name, ()) if _reachable(offering, pools[p])]
        names = [offering.name, *(a.name for a in offering.aliases if a.name in plan.advertised_names)]
        for name in names:
            rows.append((Row(name, 1, offering.name, list(expected)), offering))
        if expected:
            too_many = max(_per_node(pools[p]) for p in expected) + 1
            rows.append((Row(offering.name, too_many, offering.name, []), offering))
    return rows


def _pod(index: int, row: Row, offering: ResolvedOffering) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "probe",
                "image": "registry.invalid/probe",
                "resources": {"limits": {row.name: str(row.count)}},
            }
        ],
        "tolerations": [t.model_dump(exclude_none=True) for t in offering.tolerations],
    }
    if offering.node_selector:
        spec["nodeSelector"] = dict(offering.node_selector)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"probe-{index}", "namespace": NAMESPACE},
        "spec": spec,
    }


def _kubectl(toolbox: Toolbox, sandbox: Sandbox, *args: str, stdin: str | None = None) -> str:
    command = [str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), *args]
    result = interrupts.run(command, input=stdin)
    if result.returncode != 0:
        raise SandboxError(f"kubectl {' '.join(args[:2])}: {result.stderr.strip()}")
    return result.stdout


def _get(toolbox: Toolbox, sandbox: Sandbox, *args: str) -> Any:
    return json.loads(_kubectl(toolbox, sandbox, "get", *args, "-o", "json"))


def probe(plan: ClusterPlan, sandbox: Sandbox, toolbox: Toolbox) -> list[Row]:
    """Submit every probe pod, wait until the scheduler has decided each, read what it did, clean up."""
    planned = planned_rows(plan)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    pods = [_pod(i, row, offering) for i, (row, offering) in enumerate(planned)]
    _kubectl(
        toolbox,
        sandbox,
        "create",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [namespace, *pods]}),
    )
    try:
        decided = _wait(toolbox, sandbox, len(pods))
        nodes = {n["metadata"]["name"]: n for n in _get(toolbox, sandbox, "nodes")["items"]}
        devices = _devices(_get(toolbox, sandbox, "resourceslices")["items"])
        claims = {
            c["metadata"]["name"]: c for c in _get(toolbox, sandbox, "resourceclaims", "-n", NAMESPACE)["items"]
        }
        events = _get(toolbox, sandbox, "events", "-n", NAMESPACE)["items"]
        rows = []
        for index, (row, offering) in enumerate(planned):
            pod = decided[f"probe-{index}"]
            _read(row, offering, pod, nodes, devices, claims, events, plan)
            rows.append(row)
        return rows
    finally:
        with interrupts.deferred():
            interrupts.run([str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "delete",
                            "namespace", NAMESPACE, "--wait=true", "--timeout=60s"])  # fmt: skip


def _wait(toolbox: Toolbox, sandbox: Sandbox, count: int) -> dict[str, Any]:
    """Until every pod is bound or the scheduler has said why not (PodScheduled False: Unschedulable, or a
    plugin's error such as DRA's "cannot allocate all claims")."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        pods = {p["metadata"]["name"]: p for p in _get(toolbox, sandbox, "pods", "-n", NAMESPACE)["items"]}
        undecided = [name for name, pod in pods.items() if not _decided(pod)]
        if (len(pods) == count and not undecided) or time.monotonic() > deadline:
            return pods
        time.sleep(0.5)


def _decided(pod: dict[str, Any]) -> bool:
    if pod.get("spec", {}).get("nodeName"):
        return True
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "PodScheduled" and c.get("status") == "False" for c in conditions)


def _devices(slices: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    found = {}
    for item in slices:
        spec = item["spec"]
        for device in spec.get("devices", []):
            found[(spec["driver"], spec["pool"]["name"], device["name"])] = device
    return found


def _describe(device: dict[str, Any]) -> str:
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
    row.devices = [_describe(d) for d in allocated]
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
    return json.dumps([{**asdict(r), "agrees": r.agrees} for r in rows], indent=2)


def as_table(rows: list[Row]) -> str:
    header = ("name", "count", "landed on (pool)", "devices or why Pending", "model", "agrees")
    lines = [header]
    for row in rows:
        landed = f"{row.node} ({row.pool})" if row.node else "Pending"
        what = "; ".join(row.devices) if row.node else row.pending[:90]
        lines.append((row.name, str(row.count), landed, what, ", ".join(row.expected_pools) or "Pending",
                      "yes" if row.agrees else "NO: " + "; ".join(row.problems)))  # fmt: skip
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line[:-1], widths, strict=True)) + "  " + line[-1]
        for line in lines
    )
