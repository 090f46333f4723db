"""CEL selectors for generated DeviceClasses.

One expression per class, joined with `&&` and guarded by the driver test first: in Kubernetes an
attribute lookup that finds no key is a runtime error that aborts the whole allocation, and `&&`
absorbs that error only when an earlier term is already false. `type` comes next, so a device of
another type (a `vfio` device has no `memory` capacity) is out before any capacity is read.
"""

from __future__ import annotations

from collections.abc import Sequence

from themelio_gpu.inputs.catalog.capability import ResolvedCapability
from themelio_gpu.inputs.catalog.products import GpuProduct
from themelio_gpu.k8s.nvidia import DRA_DRIVER, GPU_CLASS, MIG_CLASS

_ATTRS = f"device.attributes['{DRA_DRIVER}']"
_CAPACITY = f"device.capacity['{DRA_DRIVER}']"


def _cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _one_of(attribute: str, values: Sequence[str]) -> str:
    if len(values) == 1:
        return f"{_ATTRS}.{attribute} == {_cel_string(values[0])}"
    return f"{_ATTRS}.{attribute} in [{', '.join(_cel_string(v) for v in values)}]"


def _at_least_memory(quantity: str) -> str:
    return f"{_CAPACITY}.memory.compareTo(quantity({_cel_string(quantity)})) >= 0"


def _at_least_version(attribute: str, version: str) -> str:
    # Version attributes compare only with semver(): `==` against a string is a runtime error.
    return f"{_ATTRS}.{attribute}.compareTo(semver({_cel_string(version)}, true)) >= 0"


def _head(device_type: str) -> list[str]:
    return [f"device.driver == {_cel_string(DRA_DRIVER)}", f"{_ATTRS}.type == {_cel_string(device_type)}"]


def gpu_selector(
    product: GpuProduct | None,
    mig_profile: str | None,
    min_memory: str | None = None,
    min_driver_version: str | None = None,
) -> str:
    terms = _head("mig" if mig_profile else "gpu")
    if product is not None:
        terms.append(_one_of("productName", product.product_names))
    if mig_profile:
        # The profile alone is ambiguous: 1g.10gb is a different slice on A100-40GB than on 80GB parts.
        terms.append(f"{_ATTRS}.profile == {_cel_string(mig_profile)}")
    if min_memory:
        terms.append(_at_least_memory(min_memory))
    if min_driver_version:
        terms.append(_at_least_version("driverVersion", min_driver_version))
    return " && ".join(terms)


def capability_selector(capability: ResolvedCapability, product_names: Sequence[str]) -> str:
    """Every device meeting the capability; `product_names` are the NVML names of its `products`."""
    terms = _head(capability.device_type)
    if product_names:
        terms.append(_one_of("productName", product_names))
    if capability.architectures:
        terms.append(_one_of("architecture", capability.architectures))
    if capability.min_compute_capability:
        terms.append(_at_least_version("cudaComputeCapability", capability.min_compute_capability))
    if capability.min_driver_version:
        terms.append(_at_least_version("driverVersion", capability.min_driver_version))
    if capability.min_memory:
        terms.append(_at_least_memory(capability.min_memory))
    return " && ".join(terms)


# The DRA driver chart's GPU classes, verbatim from its templates (chart 0.4.1), for the match engine.
CHART_CLASS_SELECTORS = {
    GPU_CLASS: f"device.driver == '{DRA_DRIVER}' && {_ATTRS}.type == 'gpu'",
    MIG_CLASS: f"device.driver == '{DRA_DRIVER}' && {_ATTRS}.type == 'mig'",
}
