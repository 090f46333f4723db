"""How ResourceQuota charges GPUs (pkg/quota/v1/evaluator/core, pods.go and resource_claims.go, 1.34-1.37 with
DRAExtendedResource on in kube-apiserver and kube-controller-manager), the keys once:

- a pod's extended resource request `N` (served by DRA or a device plugin) is charged to `requests.N`, and a
  pod's implicit name `deviceclass.resource.kubernetes.io/C` to `requests.deviceclass.resource.kubernetes.io/C`;
- every device a ResourceClaim of class C requests is charged to `C.deviceclass.resource.k8s.io/devices`,
  `requests.deviceclass.resource.kubernetes.io/C` and, when C sets `extendedResourceName: N`, `requests.N`;
- a device-plugin GPU is charged to `requests.N` only.
"""

from __future__ import annotations

from themelio_gpu.k8s.dra import implicit_name

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
