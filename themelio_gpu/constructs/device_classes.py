"""DRA DeviceClasses advertising the catalog's extended resource names (ADR-0023 option B).

One `kubernetes_manifest` with for_each over the classes: each class is a map entry keyed by its name, so
the synthesized JSON still shows every class in full, and a change to one class plans as a change to
`kubernetes_manifest.device_class["<name>"]` alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from themelio_gpu.constructs.literal import literal
from themelio_gpu.constructs.providers import Manifest, ManifestFieldManager, TerraformIterator, TerraformStack
from themelio_gpu.constructs.shared_values import each_value_map, shared_map
from themelio_gpu.inputs.catalog.names import Names
from themelio_gpu.plan.manifests import device_class_manifest
from themelio_gpu.plan.model import DeviceClassSpec


class DeviceClasses:
    def __init__(
        self, stack: TerraformStack, classes: Sequence[DeviceClassSpec], names: Names, depends_on: Sequence[Any]
    ) -> None:
        # The selector and annotation carry catalog text: literal() keeps it out of Terraform's templates.
        each_class = TerraformIterator.from_map(
            shared_map({c.name: device_class_manifest(c, names) for c in classes}, literal)
        )
        self.manifest = Manifest(
            stack,
            "device_class",
            for_each=each_class,
            manifest=each_value_map(),
            # The stack owns its classes whole: a hand edit (`kubectl replace`, `kubectl edit`) takes fields over
            # under another manager, and only a forced apply puts them back (docs/day-two.md, drift).
            field_manager=ManifestFieldManager(name=names.field_manager, force_conflicts=True),
            depends_on=list(depends_on) or None,
        )
