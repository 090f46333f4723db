"""What every probe shares on the cluster's side: the pod (and ResourceClaimTemplate) an ask becomes, waiting for
the scheduler's decision, the pod's own claims and their devices, and which pool a node is of.

A node's pool is read from the sandbox's own record of the nodes it registered (`sandbox.json`), not from the
node's labels: a probe must still say where a pod landed when a pool's labels are wrong.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from themelio_gpu.sandbox.cluster import Sandbox
from themelio_gpu.sandbox.outcomes import decided, refused_on_its_own_charge
from themelio_gpu.sandbox.placement import Ask
from themelio_gpu.sandbox.rest import Rest

WAIT_SECONDS = 60.0
"""How long the scheduler has to decide a pod, and the garbage collector to remove a deleted pod's claims."""
IMAGE = "registry.invalid/probe"

DeviceKey = tuple[str, str, str]
"""(driver, pool, device): a device of a ResourceSlice, as a claim's allocation names it."""


def dra_items(api: Rest, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
    """The objects of a DRA kind; none where the cluster serves no resource.k8s.io/v1."""
    return api.items(kind, namespace) if api.serves_dra() else []


def pod_objects(name: str, namespace: str, ask: Ask) -> list[dict[str, Any]]:
    """The pod that makes the ask: a resource name in its container's limits, or a ResourceClaimTemplate of the
    class it claims from (the second seed's recipe), with the ask's node selector and tolerations."""
    container: dict[str, Any] = {"name": "probe", "image": IMAGE}
    spec: dict[str, Any] = {"containers": [container], "tolerations": [dict(t) for t in ask.tolerations]}
    objects: list[dict[str, Any]] = []
    if ask.claim_class is not None:
        request = {"name": "gpu", "exactly": {"deviceClassName": ask.claim_class, "count": ask.count}}
        objects.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"spec": {"devices": {"requests": [request]}}},
            }
        )
        container["resources"] = {"claims": [{"name": "gpu"}]}
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": name}]
    else:
        container["resources"] = {"limits": {k: str(v) for k, v in ask.limits.items()}}
    if ask.selector:
        spec["nodeSelector"] = dict(ask.selector)
    objects.append(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    )
    return objects


def claim_object(name: str, namespace: str, device_class: str, count: int = 1) -> dict[str, Any]:
    """A ResourceClaim of `count` devices of the class, as a namespace would create one itself."""
    request = {"name": "gpu", "exactly": {"deviceClassName": device_class, "count": count}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [request]}},
    }


def wait_decided(
    api: Rest, namespace: str, names: Iterable[str], seconds: float = WAIT_SECONDS
) -> dict[str, dict[str, Any]]:
    """The named pods once the scheduler has decided each (bound, or PodScheduled False; a claim refused on the
    pod's own charge is not its answer yet: outcomes.refused_on_its_own_charge), or as they are when the wait
    ends (an undecided pod is a timeout for its row, never a Pending one)."""
    wanted = set(names)
    deadline = time.monotonic() + seconds
    while True:
        pods = {p["metadata"]["name"]: p for p in api.items("Pod", namespace)}
        mine = {name: pods[name] for name in wanted if name in pods}
        answered = all(decided(p) and not refused_on_its_own_charge(p) for p in mine.values())
        if (len(mine) == len(wanted) and answered) or time.monotonic() > deadline:
            return mine
        time.sleep(0.1)


def events(api: Rest, namespace: str) -> list[dict[str, Any]]:
    return api.items("Event", namespace)


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The pod's own ResourceClaims: the one the scheduler made for its extended or implicit request
    (`status.extendedResourceClaimStatus`) and those of its `resourceClaims` (`status.resourceClaimStatuses`)."""
    status = pod.get("status", {})
    names = [
        s["resourceClaimName"] for s in status.get("resourceClaimStatuses") or [] if s.get("resourceClaimName")
    ]
    extended = status.get("extendedResourceClaimStatus")
    if extended and extended.get("resourceClaimName"):
        names.insert(0, extended["resourceClaimName"])
    return names


def allocation(claim: Mapping[str, Any]) -> list[tuple[str, DeviceKey]]:
    """(request, device) of each device allocated to the claim."""
    results = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
    return [(r["request"], (r["driver"], r["pool"], r["device"])) for r in results]


def request_classes(claim: Mapping[str, Any]) -> dict[str, str]:
    """Request name -> the DeviceClass it asks for."""
    return {
        r["name"]: (r.get("exactly") or r).get("deviceClassName", "")
        for r in claim.get("spec", {}).get("devices", {}).get("requests", [])
    }


def wait_gone(api: Rest, namespace: str, kind: str, names: Iterable[str]) -> list[str]:
    """Until none of the named objects exists (a deleted pod's claims: its devices are free again); returns those
    still there when the wait ends."""
    wanted = set(names)
    deadline = time.monotonic() + WAIT_SECONDS
    while wanted:
        left = sorted(wanted & {i["metadata"]["name"] for i in api.items(kind, namespace)})
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)
    return []


def pool_of(sandbox: Sandbox) -> Callable[[str], str]:
    """Node -> the pool the sandbox registered it for (`(no GPU pool)` for its CPU and control-plane nodes)."""
    nodes = sandbox.state().get("nodes", {})
    return lambda node: str(nodes.get(node, {}).get("pool") or "(no GPU pool)")


def devices_by_key(slices: list[dict[str, Any]]) -> dict[DeviceKey, dict[str, Any]]:
    found = {}
    for item in slices:
        spec = item["spec"]
        for device in spec.get("devices", []):
            found[(spec["driver"], spec["pool"]["name"], device["name"])] = device
    return found


def describe_device(device: Mapping[str, Any]) -> str:
    attributes = {k: next(iter(v.values())) for k, v in device.get("attributes", {}).items()}
    memory = device.get("capacity", {}).get("memory", {}).get("value", "?")
    profile = attributes.get("profile", "whole GPU")
    return f"{attributes.get('productName', '?')} {profile} {memory}"
