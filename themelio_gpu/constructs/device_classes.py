"""DRA DeviceClasses advertising the catalog's extended resource names (ADR-0023 option B).

One `kubernetes_manifest` with for_each over the classes: each class is a map entry keyed by its name, so
the synthesized JSON still shows every class in full, and a change to one class plans as a change to
`kubernetes_manifest.device_class["<name>"]` alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cdktf import TerraformIterator, TerraformStack

from themelio_gpu.constructs.naming import FIELD_MANAGER
from themelio_gpu.constructs.providers import Manifest, ManifestFieldManager
from themelio_gpu.constructs.shared_values import each_value_map, shared_map
from themelio_gpu.plan.fleet import DeviceClassSpec

API_VERSION = "resource.k8s.io/v1"


def device_class_manifest(spec: DeviceClassSpec) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
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


class DeviceClasses:
    def __init__(
        self, stack: TerraformStack, classes: Sequence[DeviceClassSpec], depends_on: Sequence[Any]
    ) -> None:
        each_class = TerraformIterator.from_map(shared_map({c.name: device_class_manifest(c) for c in classes}))
        self.manifest = Manifest(
            stack,
            "device_class",
            for_each=each_class,
            manifest=each_value_map(),
            field_manager=ManifestFieldManager(name=FIELD_MANAGER),
            depends_on=list(depends_on) or None,
        )
