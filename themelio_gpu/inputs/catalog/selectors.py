"""CEL selectors for generated DeviceClasses.

One expression per class, joined with `&&` and guarded by the driver test first: in Kubernetes an
attribute lookup that finds no key is a runtime error that aborts the whole allocation, and `&&`
absorbs that error only when an earlier term is already false.
"""

from __future__ import annotations

from themelio_gpu.inputs.catalog.products import GpuProduct

DRIVER = "gpu.nvidia.com"
_ATTRS = f"device.attributes['{DRIVER}']"
_CAPACITY = f"device.capacity['{DRIVER}']"


def _cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def gpu_selector(
    product: GpuProduct | None,
    mig_profile: str | None,
    min_memory: str | None = None,
    min_driver_version: str | None = None,
) -> str:
    terms = [f"device.driver == {_cel_string(DRIVER)}"]
    terms.append(f"{_ATTRS}.type == {_cel_string('mig' if mig_profile else 'gpu')}")
    if product is not None:
        names = product.product_names
        if len(names) == 1:
            terms.append(f"{_ATTRS}.productName == {_cel_string(names[0])}")
        else:
            terms.append(f"{_ATTRS}.productName in [{', '.join(_cel_string(n) for n in names)}]")
    if mig_profile:
        # The profile alone is ambiguous: 1g.10gb is a different slice on A100-40GB than on 80GB parts.
        terms.append(f"{_ATTRS}.profile == {_cel_string(mig_profile)}")
    if min_memory:
        terms.append(f"{_CAPACITY}.memory.compareTo(quantity({_cel_string(min_memory)})) >= 0")
    if min_driver_version:
        terms.append(f"{_ATTRS}.driverVersion.compareTo(semver({_cel_string(min_driver_version)}, true)) >= 0")
    return " && ".join(terms)


# The DRA driver chart's GPU classes, verbatim from its templates (chart 0.4.1), for the match engine.
CHART_CLASS_SELECTORS = {
    "gpu.nvidia.com": f"device.driver == '{DRIVER}' && {_ATTRS}.type == 'gpu'",
    "mig.nvidia.com": f"device.driver == '{DRIVER}' && {_ATTRS}.type == 'mig'",
}
