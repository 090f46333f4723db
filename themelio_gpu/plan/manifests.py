"""Kubernetes objects the stack applies itself, as plain dicts (no cdktf): the constructs wrap them in
`kubernetes_manifest` resources, and `verify` validates them beside the rendered charts."""

from __future__ import annotations

from typing import Any

from themelio_gpu.constructs.naming import FIELD_MANAGER
from themelio_gpu.plan.fleet import DeviceClassSpec

DEVICE_CLASS_API_VERSION = "resource.k8s.io/v1"


def device_class_manifest(spec: DeviceClassSpec) -> dict[str, Any]:
    return {
        "apiVersion": DEVICE_CLASS_API_VERSION,
        "kind": "DeviceClass",
        "metadata": {
            "name": spec.name,
            "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER},
            "annotations": {"gpu.themelio.io/offering": spec.offering},
        },
        "spec": {
            "extendedResourceName": spec.extended_resource_name,
            "selectors": [{"cel": {"expression": spec.selector}}],
        },
    }
