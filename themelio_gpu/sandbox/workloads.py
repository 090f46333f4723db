"""GPU workloads held across an upgrade: what a running cluster has when its stack changes, and what each felt.

Before the upgrade, in the namespace `themelio-day-two`: for every offering the cluster serves, a one-replica
Deployment whose pod asks for `<name>: 1` with the offering's node selector and tolerations (the scheduler
allocates a device through the DeviceClass that maps the name, or the node's allocatable on a device-plugin
pool), and for every DeviceClass in the cluster, a ResourceClaim of it and a one-replica Deployment whose pod
uses the claim. Deployments, because a pod that is evicted comes back as a new pod, as users' workloads do:
whether it then runs again or stays Pending is part of what the upgrade did.

After it, each workload is one of: `kept its device` (the same pod, bound, with the same allocation, its
devices still published), `evicted` (another pod now, running or Pending), `claim deallocated`, `device gone`
(allocated, but no ResourceSlice publishes the device any more), `lost its device` (its node's GPUs got a new
MIG layout: the MIG Manager destroys every MIG device of a GPU it reconfigures, so what used one is stopped),
or, for one that never ran, `Pending before`. New pods, one per name the new stack serves, show where new work lands and
through which class. kwok runs no container: a pod is Running as soon as it is bound.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from themelio_gpu import interrupts
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox.cluster import KUBECTL, Sandbox, create_all, kubectl
from themelio_gpu.sandbox.tools import Toolbox

NAMESPACE = "themelio-day-two"
LABEL = "day-two.themelio.io/workload"
WAIT_SECONDS = 90.0
KEPT = "kept its device"
UNDISTURBED = (KEPT, "Pending before")
"""Outcomes that are no disturbance: the workload runs as before, or never ran."""


@dataclass(frozen=True)
class Seen:
    """One workload's pod as read at one moment."""

    pod: str = ""
    uid: str = ""
    node: str = ""
    phase: str = ""
    pending: str = ""
    """The scheduler's reason, while its pod is not bound."""
    device_class: str = ""
    devices: tuple[str, ...] = ()
    """Allocated devices as `pool/device` (or the device plugin's count)."""
    claim_uid: str = ""


@dataclass
class Workload:
    name: str
    asks: str
    """What its pod asks for: `nvidia.com/a100: 1` or `claim of <class>`."""
    before: Seen = field(default_factory=Seen)
    after: Seen = field(default_factory=Seen)
    outcome: str = ""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40].strip("-")


def _deployment(name: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
    labels = {LABEL: name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def _container(limits: dict[str, str] | None = None, claim: str | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits:
        resources["limits"] = limits
    if claim:
        resources["claims"] = [{"name": claim}]
    return {"name": "work", "image": "registry.invalid/gpu-work", "resources": resources}


def name_pod_spec(plan: ClusterPlan, name: str) -> dict[str, Any]:
    """A pod asking for one of `name`, placed as the offering (or the offering an alias resolves to) says."""
    offering = next(o for o in plan.offerings if o.name == name or name in {a.name for a in o.aliases})
    spec: dict[str, Any] = {
        "containers": [_container(limits={name: "1"})],
        "tolerations": [t.model_dump(exclude_none=True) for t in offering.tolerations],
        "terminationGracePeriodSeconds": 0,
    }
    if offering.node_selector:
        spec["nodeSelector"] = dict(offering.node_selector)
    return spec


def _claim_objects(device_class: str) -> tuple[str, list[dict[str, Any]]]:
    name = f"claim-{_slug(device_class)}"
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]}},
    }
    pod_spec = {
        "containers": [_container(claim="gpu")],
        "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
        # Wherever the class's devices are: a claim is placed by its devices, whatever the node's taints.
        "tolerations": [{"operator": "Exists"}],
        "terminationGracePeriodSeconds": 0,
    }
    return name, [claim, _deployment(name, pod_spec)]


def get_json(toolbox: Toolbox, sandbox: Sandbox, *args: str) -> Any:
    return json.loads(kubectl(toolbox, sandbox, "get", *args, "-o", "json"))


def device_classes(toolbox: Toolbox, sandbox: Sandbox) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in get_json(toolbox, sandbox, "deviceclasses")["items"]}


def published_devices(toolbox: Toolbox, sandbox: Sandbox) -> set[str]:
    """Every device a ResourceSlice publishes, as `pool/device`."""
    found = set()
    for item in get_json(toolbox, sandbox, "resourceslices")["items"]:
        for device in item["spec"].get("devices", []):
            found.add(f"{item['spec']['pool']['name']}/{device['name']}")
    return found


def start(toolbox: Toolbox, sandbox: Sandbox, plan: ClusterPlan) -> list[Workload]:
    """Create the workloads (any left from before go first) and read each once the scheduler decided it."""
    remove(toolbox, sandbox)
    create_all(toolbox, sandbox, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
    workloads: list[Workload] = []
    objects: list[dict[str, Any]] = []
    for offering in plan.offerings:
        name = f"name-{_slug(offering.name)}"
        workloads.append(Workload(name, f"{offering.name}: 1"))
        objects.append(_deployment(name, name_pod_spec(plan, offering.name)))
    for device_class in sorted(device_classes(toolbox, sandbox)):
        name, items = _claim_objects(device_class)
        workloads.append(Workload(name, f"claim of {device_class}"))
        objects += items
    create_all(toolbox, sandbox, objects)
    seen = wait_decided(toolbox, sandbox, {w.name for w in workloads})
    for workload in workloads:
        workload.before = seen.get(workload.name, Seen())
    return workloads


def _pending_reason(pod: dict[str, Any], events: Sequence[dict[str, Any]]) -> str:
    name = pod["metadata"]["name"]
    messages = [
        e.get("message", "")
        for e in events
        if e["involvedObject"].get("name") == name and e.get("reason") == "FailedScheduling"
    ]
    conditions = [
        c.get("message", "") for c in pod.get("status", {}).get("conditions", []) if c["type"] == "PodScheduled"
    ]
    return str((messages or conditions or ["not scheduled yet"])[-1])


def _claim_of(pod: dict[str, Any]) -> str:
    status = pod.get("status", {}).get("extendedResourceClaimStatus")
    if status:
        return str(status.get("resourceClaimName", ""))
    for claim in pod.get("status", {}).get("resourceClaimStatuses") or []:
        return str(claim.get("resourceClaimName", ""))
    for claim in pod.get("spec", {}).get("resourceClaims") or []:
        return str(claim.get("resourceClaimName", ""))
    return ""


def _seen(pod: dict[str, Any], claims: Mapping[str, Any], events: Any) -> Seen:
    node = pod.get("spec", {}).get("nodeName", "")
    claim = claims.get(_claim_of(pod), {})
    requests = claim.get("spec", {}).get("devices", {}).get("requests", [])
    device_class = next(((r.get("exactly") or r).get("deviceClassName", "") for r in requests), "")
    results = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
    devices = tuple(sorted(f"{r['pool']}/{r['device']}" for r in results))
    if node and not claim:  # the device-plugin path: the node's allocatable
        limits = pod["spec"]["containers"][0].get("resources", {}).get("limits", {})
        devices = tuple(f"{node}: {n} {k} (device plugin)" for k, n in limits.items())
    phase = pod.get("status", {}).get("phase", "")
    if pod["metadata"].get("deletionTimestamp"):
        phase = "Terminating"
    return Seen(
        pod["metadata"]["name"],
        pod["metadata"]["uid"],
        node,
        phase,
        "" if node else _pending_reason(pod, events),
        device_class,
        devices,
        claim.get("metadata", {}).get("uid", ""),
    )


def read(toolbox: Toolbox, sandbox: Sandbox, names: set[str] | None = None) -> dict[str, Seen]:
    """The newest pod of each workload (by its label), or of each bare pod named in `names`."""
    pods = get_json(toolbox, sandbox, "pods", "-n", NAMESPACE)["items"]
    claims = {
        c["metadata"]["name"]: c for c in get_json(toolbox, sandbox, "resourceclaims", "-n", NAMESPACE)["items"]
    }
    events = get_json(toolbox, sandbox, "events", "-n", NAMESPACE)["items"]
    found: dict[str, Seen] = {}
    # A workload whose pod was evicted has its new pod and, for a while, the old one terminating: the new one
    # is what it has now.
    for pod in sorted(pods, key=lambda p: "deletionTimestamp" not in p["metadata"]):
        owner = pod["metadata"].get("labels", {}).get(LABEL) or pod["metadata"]["name"]
        if names is None or owner in names:
            found[owner] = _seen(pod, claims, events)
    return found


def _decided(seen: Seen) -> bool:
    return bool(seen.node) or seen.pending != "not scheduled yet"


def wait_decided(toolbox: Toolbox, sandbox: Sandbox, names: set[str]) -> dict[str, Seen]:
    """Until each named workload has a pod the scheduler bound or gave a reason for not binding."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        seen = read(toolbox, sandbox, names)
        if (set(seen) >= names and all(_decided(s) for s in seen.values())) or time.monotonic() > deadline:
            return seen
        time.sleep(0.5)


def settle(
    toolbox: Toolbox, sandbox: Sandbox, workloads: Sequence[Workload], reconfigured: Sequence[str] = ()
) -> None:
    """Read every workload after the upgrade, once controllers have had their say, and judge what it felt;
    `reconfigured`: nodes whose GPUs got a new MIG layout (cluster_changes.republish_changed_slices)."""
    seen = wait_decided(toolbox, sandbox, {w.name for w in workloads})
    published = published_devices(toolbox, sandbox)
    for workload in workloads:
        workload.after = seen.get(workload.name, Seen())
        workload.outcome = outcome(workload.before, workload.after, published, set(reconfigured))


def outcome(
    before: Seen, after: Seen, published: set[str], reconfigured: frozenset[str] | set[str] = frozenset()
) -> str:
    """What the upgrade did to one workload (the module's docstring)."""
    if not before.node:
        return "Pending before" if not after.node else f"Pending before, running after on {after.node}"
    if not after.uid:
        return "evicted: no pod left"
    if after.uid != before.uid:
        where = f"running again on {after.node}" if after.node else f"Pending after: {after.pending}"
        return f"evicted, {where}"
    if after.phase not in ("Running", "Pending"):
        return f"evicted ({after.phase})"
    if before.devices and not after.devices:
        return "claim deallocated"
    if after.devices != before.devices:
        return f"devices changed: {', '.join(after.devices)}"
    if after.node in reconfigured and after.devices:
        return "lost its device: the MIG Manager re-created its GPU's MIG devices (new layout)"
    gone = [d for d in after.devices if "(device plugin)" not in d and d not in published]
    if gone:
        return f"device gone from its node's ResourceSlice: {', '.join(gone)}"
    return KEPT


@dataclass(frozen=True)
class NewPod:
    name: str
    """The extended resource name it asks for."""
    seen: Seen


def new_pods(toolbox: Toolbox, sandbox: Sandbox, plan: ClusterPlan) -> list[NewPod]:
    """One new pod per offering the cluster now serves: where new work lands, through which class."""
    pods = {f"new-{_slug(o.name)}": o.name for o in plan.offerings}
    create_all(
        toolbox,
        sandbox,
        [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": NAMESPACE},
             "spec": name_pod_spec(plan, name)}
            for pod, name in pods.items()
        ],
    )  # fmt: skip
    seen = wait_decided(toolbox, sandbox, set(pods))
    return [NewPod(name, seen.get(pod, Seen())) for pod, name in pods.items()]


def remove(toolbox: Toolbox, sandbox: Sandbox, *, wait: bool = True) -> None:
    """Delete the workloads' namespace and (`wait`) wait until it is gone, whatever interrupts meanwhile."""
    with interrupts.deferred():
        interrupts.run([str(toolbox.binary(*KUBECTL)), "--kubeconfig", str(sandbox.kubeconfig), "delete",
                        "namespace", NAMESPACE, "--ignore-not-found", f"--wait={str(wait).lower()}",
                        "--timeout=120s"])  # fmt: skip
