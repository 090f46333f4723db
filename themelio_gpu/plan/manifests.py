"""Kubernetes objects the stack applies itself, as plain dicts (no cdktf): the constructs wrap them in
`kubernetes_manifest` resources, and `verify` validates them beside the rendered charts."""

from __future__ import annotations

from typing import Any

from themelio_gpu.inputs.catalog.names import Names
from themelio_gpu.plan.model import DeviceClassSpec

DEVICE_CLASS_API_VERSION = "resource.k8s.io/v1"


def device_class_manifest(spec: DeviceClassSpec, names: Names) -> dict[str, Any]:
    return {
        "apiVersion": DEVICE_CLASS_API_VERSION,
        "kind": "DeviceClass",
        "metadata": {
            "name": spec.name,
            "labels": names.managed_by,
            "annotations": {names.offering_annotation: spec.offering},
        },
        "spec": {
            "extendedResourceName": spec.extended_resource_name,
            "selectors": [{"cel": {"expression": spec.selector}}],
        },
    }
