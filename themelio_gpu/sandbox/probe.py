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
from themelio_gpu.plan.quota import ClusterQuotaPlan
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
    uncompared: str = ""
    """Why the row is shown but not compared with the model (a MIG name on device-plugin pools: the plugin's
    renamed MIG resources are not simulated)."""

    @property
    def agrees(self) -> bool:
        return not self.problems or bool(self.uncompared)


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


def _items(toolbox: Toolbox, sandbox: Sandbox, kind: str, *args: str) -> list[Any]:
    """The objects of a DRA kind, none where the cluster's Kubernetes serves no resource.k8s.io/v1 (before
    1.34: a device-plugin-only cluster)."""
    if not any(g.endswith("resource.k8s.io/v1") for g in kubectl(toolbox, sandbox, "api-versions").split()):
        return []
    items: list[Any] = _get(toolbox, sandbox, kind, *args)["items"]
    return items


def _get(toolbox: Toolbox, sandbox: Sandbox, *args: str) -> Any:
    return json.loads(kubectl(toolbox, sandbox, "get", *args, "-o", "json"))


def probe(plan: ClusterPlan, sandbox: Sandbox, toolbox: Toolbox) -> list[Row]:
    """One probe pod at a time (pods asking for names that share devices would take each other's), each read
    once the scheduler has decided it and deleted, with the claim the scheduler made for it, before the next."""
    planned = planned_rows(plan)
    create_all(toolbox, sandbox, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
    try:
        nodes = {n["metadata"]["name"]: n for n in _get(toolbox, sandbox, "nodes")["items"]}
        devices = _devices(_items(toolbox, sandbox, "resourceslices"))
        rows = []
        for index, (row, offering) in enumerate(planned):
            name = f"probe-{index}"
            create_all(toolbox, sandbox, [_pod(index, row, offering)])
            pod = _wait(toolbox, sandbox, 1)[name]
            claims = {
                c["metadata"]["name"]: c for c in _items(toolbox, sandbox, "resourceclaims", "-n", NAMESPACE)
            }
            events = _get(toolbox, sandbox, "events", "-n", NAMESPACE)["items"]
            _read(row, offering, pod, nodes, devices, claims, events, plan)
            rows.append(row)
            kubectl(toolbox, sandbox, "delete", "pod", name, "-n", NAMESPACE, "--grace-period=0", "--wait=true")
            _wait_claims_gone(toolbox, sandbox)
        return rows
    finally:
        with interrupts.deferred():
            interrupts.run([str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "delete",
                            "namespace", NAMESPACE, "--wait=true", "--timeout=60s"])  # fmt: skip


def _wait_claims_gone(toolbox: Toolbox, sandbox: Sandbox) -> None:
    """Until the garbage collector has deleted the claim of the pod just deleted (its devices are free again)."""
    deadline = time.monotonic() + 30
    while _items(toolbox, sandbox, "resourceclaims", "-n", NAMESPACE) and time.monotonic() < deadline:
        time.sleep(0.2)


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
        verdict = row.uncompared if row.uncompared else "yes" if row.agrees else "NO: " + "; ".join(row.problems)
        lines.append((row.name, str(row.count), landed, what, ", ".join(row.expected_pools) or "Pending", verdict))
    return table(lines, pad_last=False)


@dataclass
class QuotaRow:
    namespace: str
    grant: str
    """The offering granted one device in the namespace (`catalog quota ... OFFERING=1`)."""
    path: str
    """What was tried: the grant itself, one more, another name, the implicit name, a ResourceClaim of a class."""
    admitted: bool
    """The pod or claim was admitted and (a pod) got a device."""
    expected: bool
    message: str = ""

    @property
    def agrees(self) -> bool:
        return self.admitted == self.expected


def _other_paths(
    plan: ClusterPlan, quota: ClusterQuotaPlan, granted: str
) -> list[tuple[str, dict[str, Any], bool]]:
    """Every other way a pod or a claim could ask for a device, and whether the quota model lets it through:
    each other name, and for each class its implicit name and a ResourceClaim of it (the stack's and the DRA
    driver's). A class the model knows selects no GPU (compute-domain channels and daemons) is no GPU path:
    the model expects it admitted."""
    paths: list[tuple[str, dict[str, Any], bool]] = []
    for name in plan.advertised_names:
        if name != granted:
            paths.append((f"pod asking for {name}", {"limits": {name: "1"}}, False))
    not_gpu = {path.name for path in quota.not_gpu}
    classes = sorted({c.name for c in plan.device_classes} | {c.name for c in plan.driver_classes})
    for device_class in classes:
        implicit = f"deviceclass.resource.kubernetes.io/{device_class}"
        paths.append((f"pod asking for {implicit}", {"limits": {implicit: "1"}}, device_class in not_gpu))
        paths.append((f"ResourceClaim of {device_class}", {"claim": device_class}, device_class in not_gpu))
    return paths


def _create(toolbox: Toolbox, sandbox: Sandbox, document: dict[str, Any]) -> tuple[bool, str]:
    command = [str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "create", "-f", "-"]
    result = interrupts.run(command, input=json.dumps(document))
    return result.returncode == 0, (result.stderr or result.stdout).strip()


def _create_each(toolbox: Toolbox, sandbox: Sandbox, documents: list[dict[str, Any]]) -> dict[str, str]:
    """Create each object (kubectl sends one request per object and goes on after a refusal); returns the
    refusal message of each object the API server refused, by name."""
    command = [str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "create", "-f", "-"]
    result = interrupts.run(command, input=json.dumps({"apiVersion": "v1", "kind": "List", "items": documents}))
    refused = {}
    for line in result.stderr.splitlines():
        for document in documents:
            name = document["metadata"]["name"]
            if f'"{name}" is forbidden' in line or f'"{name}" is invalid' in line:
                refused[name] = line.split(": ", 2)[-1].strip()
    created = {line.split()[0].split("/")[-1] for line in result.stdout.splitlines() if line.endswith(" created")}
    for document in documents:
        name = document["metadata"]["name"]
        if name not in created and name not in refused:
            refused[name] = "not created: " + (result.stderr.strip().splitlines() or ["no answer"])[-1]
    return refused


def _quota_object(namespace: str, index: int, offering: ResolvedOffering, what: dict[str, Any]) -> dict[str, Any]:
    metadata = {"name": f"q-{index}", "namespace": namespace}
    if "claim" in what:
        request = {"name": "gpu", "exactly": {"deviceClassName": what["claim"], "count": 1}}
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": metadata,
                "spec": {"devices": {"requests": [request]}}}  # fmt: skip
    pod = _pod(index, Row("", 1, offering.name, []), offering)
    pod["metadata"] = metadata
    pod["spec"]["containers"][0]["resources"] = {"limits": what["limits"]}
    return pod


def quota_probe(plan: ClusterPlan, sandbox: Sandbox, toolbox: Toolbox) -> list[QuotaRow]:
    """Per offering with pools: a namespace whose ResourceQuota is what `catalog quota` writes for a grant of
    one device. The grant is admitted (and scheduled), one more is refused by the API server's quota
    admission, and so is every other path to a device; anything else admitted is a hole in the quota model."""
    from themelio_gpu.outputs.contracts import WALDUR_RESOURCE_QUOTA_NAME, resource_quota
    from themelio_gpu.plan.quota import plan_quota, resolve_grants

    quota = plan_quota(plan)
    rows: list[QuotaRow] = []
    for number, (row, offering) in enumerate(
        r for r in planned_rows(plan) if r[0].count == 1 and r[0].expected_pools
    ):
        if row.name != offering.name:
            continue  # one namespace per offering; its aliases are among the other paths
        namespace = f"themelio-quota-{number}"
        grants, problems = resolve_grants(quota, plan, [(offering.name, 1)])
        if problems:
            raise SandboxError(f"catalog quota {offering.name}=1: {problems}")
        hard = quota.hard(grants)
        granted = next(iter(grants))  # where `catalog quota` puts the grant: a migrating offering's legacy name
        objects = [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            resource_quota(WALDUR_RESOURCE_QUOTA_NAME, namespace, hard, plan.names),
        ]
        create_all(toolbox, sandbox, objects)
        try:
            _wait_quota_ready(toolbox, sandbox, namespace)
            attempts = [
                (f"the grant ({granted})", {"limits": {granted: "1"}}, True),
                ("one more", {"limits": {granted: "1"}}, False),
            ]
            attempts += _other_paths(plan, quota, granted)
            # The grant first (and its claim charged), then every other attempt in one request per object.
            documents = [_quota_object(namespace, i, offering, what) for i, (_, what, _) in enumerate(attempts)]
            admitted, message = _create(toolbox, sandbox, documents[0])
            rows.append(
                QuotaRow(namespace, offering.name, attempts[0][0], admitted, True, "" if admitted else message)
            )
            if admitted:
                _wait_claim_charged(toolbox, sandbox, namespace)
            answers = _create_each(toolbox, sandbox, documents[1:])
            for (path, _, expected), document in zip(attempts[1:], documents[1:], strict=True):
                refusal = answers.get(document["metadata"]["name"])
                rows.append(QuotaRow(namespace, offering.name, path, refusal is None, expected, refusal or ""))
            _devices_past_admission(toolbox, sandbox, namespace, rows)
        finally:
            with interrupts.deferred():
                interrupts.run([str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "delete",
                                "namespace", namespace, "--wait=false"])  # fmt: skip
    return rows


def _devices_past_admission(toolbox: Toolbox, sandbox: Sandbox, namespace: str, rows: list[QuotaRow]) -> None:
    """A pod admitted on another path (an implicit class name is no quota key) is closed only if it gets no
    device: the claim the scheduler makes for it is charged to the class's keys, and refused there. Each such
    pod is given until the scheduler has decided it; one that is bound got a device past the quota."""
    ours = [row for row in rows if row.namespace == namespace]  # q-<n> is the namespace's n-th attempt
    pending = {
        f"q-{i}": row
        for i, row in enumerate(ours)
        if row.admitted and not row.expected and not row.path.startswith("ResourceClaim")
    }
    deadline = time.monotonic() + WAIT_SECONDS
    while pending and time.monotonic() < deadline:
        pods = {p["metadata"]["name"]: p for p in _get(toolbox, sandbox, "pods", "-n", namespace)["items"]}
        for name in list(pending):
            pod = pods.get(name, {})
            if pod.get("spec", {}).get("nodeName"):
                pending.pop(name).message = f"admitted and bound to {pod['spec']['nodeName']}: it got a device"
            elif _decided(pod):
                row = pending.pop(name)
                reason = [c.get("message", "") for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
                row.admitted = False  # no device: the quota holds where the scheduler's claim is charged
                row.message = "admitted, no device: " + (reason[-1] if reason else "Pending")
        time.sleep(0.5)
    for row in pending.values():
        row.message = "admitted and not decided by the scheduler within the wait"


def _wait_quota_ready(toolbox: Toolbox, sandbox: Sandbox, namespace: str) -> None:
    """Quota admission refuses nothing until the quota controller has written the quota's status."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        items = _get(toolbox, sandbox, "resourcequota", "-n", namespace)["items"]
        if items and items[0].get("status", {}).get("hard"):
            return
        time.sleep(0.2)
    raise SandboxError(f"the ResourceQuota in {namespace} got no status in 30 s")


def _wait_claim_charged(toolbox: Toolbox, sandbox: Sandbox, namespace: str) -> None:
    """The grant's pod is bound and the claim the scheduler made for it exists (and is charged)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pod = _get(toolbox, sandbox, "pod", "q-0", "-n", namespace)
        if pod.get("spec", {}).get("nodeName") and pod.get("status", {}).get("extendedResourceClaimStatus"):
            return
        if pod.get("spec", {}).get("nodeName"):  # the device-plugin path: no claim
            return
        time.sleep(0.2)


def quota_table(rows: list[QuotaRow]) -> str:
    lines = [("namespace", "grant", "tried", "API server", "model", "agrees")]
    for row in rows:
        answer = ("admitted" if row.admitted else "refused") + (": " + row.message[-70:] if row.message else "")
        lines.append((row.namespace, row.grant, row.path, answer, "admit" if row.expected else "refuse",
                      "yes" if row.agrees else "NO"))  # fmt: skip
    return table(lines)
