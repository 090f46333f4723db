"""How ResourceQuota charges GPUs (pkg/quota/v1/evaluator/core, pods.go and resource_claims.go, 1.34-1.37 with
DRAExtendedResource on in kube-apiserver and kube-controller-manager), the keys once:

- a pod's extended resource request `N` (served by DRA or a device plugin) is charged to `requests.N`, and a
  pod's implicit name `deviceclass.resource.kubernetes.io/C` to `requests.deviceclass.resource.kubernetes.io/C`;
- every device a ResourceClaim of class C requests is charged to `C.deviceclass.resource.k8s.io/devices`,
  `requests.deviceclass.resource.kubernetes.io/C` and, when C sets `extendedResourceName: N`, `requests.N`;
- a device-plugin GPU is charged to `requests.N` only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from themelio_gpu.k8s.dra import implicit_name
from themelio_gpu.k8s.quantity import parse_quantity

REQUESTS_PREFIX = "requests."
DEVICES_SUFFIX = ".deviceclass.resource.k8s.io/devices"


def requests_key(resource: str) -> str:
    return f"{REQUESTS_PREFIX}{resource}"


def implicit_key(device_class: str) -> str:
    return requests_key(implicit_name(device_class))


def devices_key(device_class: str) -> str:
    return f"{device_class}{DEVICES_SUFFIX}"


def class_charges(device_class: str, extended_resource_name: str | None) -> tuple[str, ...]:
    """Every key charged for a device taken through a DeviceClass, by any route (its extended name, its
    implicit name, a ResourceClaim): the claim the scheduler makes for a pod skips only the key the pod paid."""
    keys = [devices_key(device_class), implicit_key(device_class)]
    if extended_resource_name:
        keys.append(requests_key(extended_resource_name))
    return tuple(keys)


def device_plugin_charges(resource: str) -> tuple[str, ...]:
    """The keys charged for a device-plugin GPU."""
    return (requests_key(resource),)


def pod_charges(limits: Mapping[str, int]) -> dict[str, int]:
    """What quota admission charges a pod for its extended resources (an implicit name is one): `requests.<name>`
    for each, when the pod is created (podComputeUsageHelper; requests default to limits)."""
    return {requests_key(name): count for name, count in sorted(limits.items()) if "/" in name}


def claim_charges(
    device_class: str, extended_resource_name: str | None, count: int = 1, paid: str | None = None
) -> dict[str, int]:
    """What quota admission charges a ResourceClaim of `count` devices of the class; the claim the scheduler
    creates for a pod's extended or implicit request skips the key the pod `paid` already."""
    return {key: count for key in class_charges(device_class, extended_resource_name) if key != paid}


def exceeded(hard: Mapping[str, str], used: Mapping[str, int], charges: Mapping[str, int]) -> tuple[str, ...]:
    """The keys a ResourceQuota with `hard` and `used` refuses `charges` by (sorted, as the API server lists them);
    a key the quota does not list limits nothing."""
    return tuple(
        sorted(
            key
            for key, amount in charges.items()
            if amount and key in hard and used.get(key, 0) + amount > parse_quantity(hard[key]).value
        )
    )


_EXCEEDED = re.compile(r"exceeded quota: (?P<quota>[^,]+), requested: (?P<requested>\S*), used: ")


def parse_exceeded(message: str) -> tuple[str, tuple[str, ...]] | None:
    """(quota, keys) from quota admission's refusal ("exceeded quota: NAME, requested: K=V,K2=V2, used: ...,
    limited: ...", apiserver's admission/plugin/resourcequota), wherever it is quoted; None if it is none."""
    found = _EXCEEDED.search(message)
    if found is None:
        return None
    keys = tuple(sorted(part.split("=", 1)[0] for part in found["requested"].split(",") if part))
    return str(found["quota"]), keys
