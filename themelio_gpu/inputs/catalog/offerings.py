"""One catalog offering resolved: its fields checked, who serves it, its class, selector and device kinds.

Apart from the loading (loading.py) because an offering's rules are its own (names, servedBy, deviceClass,
product or capability, constraints, placement, aliases); the catalog-wide ones (uniqueness, overlaps) are
there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from themelio_gpu.inputs.catalog.capability import DeviceKind, ResolvedCapability, whole_gpu_kinds
from themelio_gpu.inputs.catalog.catalog import ResolvedAlias, ResolvedOffering
from themelio_gpu.inputs.catalog.model import Capability, Lifecycle, Offering, ServedBy, Toleration
from themelio_gpu.inputs.catalog.names import Names
from themelio_gpu.inputs.catalog.products import (
    DRIVER_ARCHITECTURES,
    GpuProduct,
    canonical_mig_profile,
    unknown_product_message,
)
from themelio_gpu.inputs.catalog.selectors import capability_selector, gpu_selector
from themelio_gpu.inputs.problems import KeyPath, Problems
from themelio_gpu.k8s import names as k8s_names
from themelio_gpu.k8s.nvidia import CHART_DEVICE_CLASSES, GPU, GPU_CLASS

_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$")
_SEMVER_LOOSE = re.compile(r"^v?\d+(\.\d+){0,2}([-+][0-9A-Za-z.-]+)?$")
_WALDUR_COMPONENT = re.compile(r"^[a-z][a-z0-9_]*$")


def default_node_selector(product: GpuProduct | None, mig: bool) -> dict[str, str]:
    """The pool labels that steer a workload to this offering (see GpuNodePool's label contract)."""
    selector = {GPU: "true", "mig_enabled": "true" if mig else "false"}
    if product is not None:
        selector["accelerator"] = product.accelerator
    return dict(sorted(selector.items()))


DEFAULT_TOLERATIONS = (Toleration(key=GPU, operator="Exists", effect="NoSchedule"),)


def _served_by(name: str, given: ServedBy | None, file: str, where: KeyPath, problems: Problems) -> ServedBy:
    if name == GPU and given is None:
        problems.add(
            file,
            where,
            f"say how {GPU} is served: the DRA driver chart's class {GPU_CLASS} already "
            f"advertises it (chart 25.12.0 and later). Set servedBy: dra-driver-chart to use it, or "
            "servedBy: catalog for a class of this catalog, which only clusters whose GPU Operator manages the "
            "DRA driver (draDriver.managedBy: gpu-operator) can serve: elsewhere the chart's class maps it too",
        )
    served_by = given or ServedBy.catalog
    if served_by is ServedBy.dra_driver_chart and name != GPU:
        problems.add(
            file,
            (*where, "servedBy"),
            f"the DRA driver chart serves only {GPU}; {name} needs servedBy: catalog",
        )
    return served_by


def _device_class(
    name: str, given: str | None, served_by: ServedBy, file: str, where: KeyPath, problems: Problems, names: Names
) -> str:
    if served_by is ServedBy.dra_driver_chart:
        if given not in (None, GPU_CLASS):
            problems.add(file, (*where, "deviceClass"), f"a chart-served name uses the chart's class {GPU_CLASS}")
        return GPU_CLASS
    if given is None:
        problems.add(file, (*where, "deviceClass"), "required key is missing")
        return ""
    for message in k8s_names.device_class_name(given):
        problems.add(file, (*where, "deviceClass"), message)
    if given in CHART_DEVICE_CLASSES:
        problems.add(
            file,
            (*where, "deviceClass"),
            f"{given} is created by the NVIDIA DRA driver chart itself; choose another name "
            f"(for example <product>.{names.class_suffix})",
        )
    if given == names.generic_gpu_class:
        problems.add(
            file,
            (*where, "deviceClass"),
            f"{given} is the class this tool creates for {GPU} where the GPU Operator manages "
            "the DRA driver (its gpu.nvidia.com maps no name); choose another name",
        )
    return given


def resolve_offering(
    name: str,
    offering: Offering,
    file: str,
    problems: Problems,
    products: Mapping[str, GpuProduct],
    names: Names,
) -> ResolvedOffering | None:
    where = ("offerings", name)
    count = len(problems)
    for message in k8s_names.extended_resource_name(name):
        problems.add(file, where, message)
    served_by = _served_by(name, offering.served_by, file, where, problems)
    device_class = _device_class(name, offering.device_class, served_by, file, where, problems, names)

    capability: ResolvedCapability | None = None
    if offering.capability is not None:
        capability = _resolve_capability(name, offering, served_by, file, problems, products)
    elif offering.overlaps is not None:
        problems.add(
            file,
            (*where, "overlaps"),
            "only a capability offering declares overlaps (a product offering takes one product)",
        )

    product: GpuProduct | None = None
    mig_profile = canonical_mig_profile(offering.mig_profile) if offering.mig_profile is not None else None
    if offering.capability is not None:
        pass  # checked with the capability
    elif offering.product is None:
        if served_by is not ServedBy.dra_driver_chart:
            problems.add(
                file,
                (*where, "product"),
                f"required: one of {', '.join(products)}, or a capability: instead (minMemory, architectures, ...)",
            )
    elif offering.product not in products:
        problems.add(file, (*where, "product"), unknown_product_message(offering.product, products))
    else:
        product = products[offering.product]
        if served_by is ServedBy.dra_driver_chart:
            problems.add(
                file,
                (*where, "product"),
                f"the chart's class {GPU_CLASS} selects every whole GPU; a product cannot narrow it. "
                "Use servedBy: catalog for a product-specific class",
            )

    if mig_profile is not None:
        if served_by is ServedBy.dra_driver_chart:
            problems.add(file, (*where, "migProfile"), "the chart's class serves whole GPUs only")
        elif product is not None and not product.supports_mig:
            problems.add(file, (*where, "migProfile"), f"{product.display_name} has no MIG support")
        elif product is not None and mig_profile not in product.mig_profiles:
            problems.add(
                file,
                (*where, "migProfile"),
                f"{product.display_name} has no MIG profile {offering.mig_profile!r}; "
                f"valid: {', '.join(product.mig_profiles)}",
            )

    constraints = offering.constraints
    if constraints.min_memory is not None and not _QUANTITY.match(constraints.min_memory):
        problems.add(
            file, (*where, "constraints", "minMemory"), f"{constraints.min_memory!r} is not a quantity like 40Gi"
        )
    if constraints.min_driver_version is not None and not _SEMVER_LOOSE.match(constraints.min_driver_version):
        problems.add(
            file,
            (*where, "constraints", "minDriverVersion"),
            f"{constraints.min_driver_version!r} is not a version like 570.86.15",
        )
    if served_by is ServedBy.dra_driver_chart and (constraints.min_memory or constraints.min_driver_version):
        problems.add(file, (*where, "constraints"), "a chart-served name cannot carry selector constraints")

    if not _WALDUR_COMPONENT.match(offering.quota.waldur_component):
        problems.add(
            file,
            (*where, "quota", "waldurComponent"),
            f"{offering.quota.waldur_component!r} must be lower-case letters, digits and '_', starting with a letter",
        )
    if offering.lifecycle is Lifecycle.active and offering.replaced_by:
        problems.add(file, (*where, "replacedBy"), "only a deprecated offering can be replaced")

    node_selector = offering.placement.node_selector
    if node_selector is None:
        mig = capability.device_type == "mig" if capability is not None else mig_profile is not None
        node_selector = default_node_selector(product, mig)
    for key, value in node_selector.items():
        for message in k8s_names.qualified_name(key) + k8s_names.label_value(value):
            problems.add(file, (*where, "placement", "nodeSelector"), message)

    aliases = []
    for index, alias in enumerate(offering.aliases):
        alias_where = (*where, "aliases", index)
        for message in k8s_names.extended_resource_name(alias.name):
            problems.add(file, (*alias_where, "name"), message)
        alias_served_by = _served_by(alias.name, alias.served_by, file, alias_where, problems)
        if alias_served_by is ServedBy.catalog and served_by is ServedBy.dra_driver_chart:
            problems.add(file, alias_where, "an alias of a chart-served offering cannot have a class of its own")
        alias_class = _device_class(
            alias.name, alias.device_class, alias_served_by, file, alias_where, problems, names
        )
        aliases.append(ResolvedAlias(alias.name, alias_class, alias_served_by))

    if len(problems) > count:
        return None
    if capability is not None:
        product_names = [n for key in capability.products for n in products[key].product_names]
        selector = capability_selector(capability, product_names)
        takes = capability.kinds(products.values())
    else:
        selector = gpu_selector(product, mig_profile, constraints.min_memory, constraints.min_driver_version)
        # Without a product it is the chart's gpu.nvidia.com: any whole GPU.
        takes = (DeviceKind(product.key, mig_profile),) if product is not None else whole_gpu_kinds(products)
    return ResolvedOffering(
        name=name,
        device_class=device_class,
        served_by=served_by,
        product=product,
        mig_profile=mig_profile,
        display_name=offering.display_name,
        description=offering.description,
        waldur_component=offering.quota.waldur_component,
        unit=offering.quota.unit,
        kubeflow_ui_name=offering.kubeflow.ui_name if offering.kubeflow else None,
        node_selector=MappingProxyType(dict(sorted(node_selector.items()))),
        tolerations=offering.placement.tolerations
        if offering.placement.tolerations is not None
        else DEFAULT_TOLERATIONS,
        lifecycle=offering.lifecycle,
        replaced_by=offering.replaced_by,
        aliases=tuple(aliases),
        selector=selector,
        constraints=constraints,
        capability=capability,
        takes=takes,
        overlaps_allowed=offering.overlaps == "allowed",
    )


def _resolve_capability(
    name: str,
    offering: Offering,
    served_by: ServedBy,
    file: str,
    problems: Problems,
    products: Mapping[str, GpuProduct],
) -> ResolvedCapability | None:
    """The checked capability; every problem names the file, line and key, and what is allowed."""
    assert offering.capability is not None
    spec: Capability = offering.capability
    count = len(problems)

    def problem(key: str | None, message: str) -> None:
        path: tuple[str | int, ...] = ("offerings", name, "capability", *((key,) if key else ()))
        problems.add(file, path, message)

    if offering.product is not None:
        problem(None, "set product (one product) or capability (every product meeting it), not both")
    if offering.mig_profile is not None:
        problem(None, "migProfile belongs to a product offering; a capability selects MIG devices with type: mig")
    if offering.constraints.min_memory or offering.constraints.min_driver_version:
        problem(None, "a capability offering has no constraints: put minMemory and minDriverVersion in capability")
    if served_by is ServedBy.dra_driver_chart:
        problem(
            None,
            f"the chart's class {GPU_CLASS} selects every whole GPU; a capability needs servedBy: catalog",
        )
    criteria = ("minMemory", "architectures", "minComputeCapability", "minDriverVersion", "products")
    if all(
        getattr(spec, f) is None
        for f in ("min_memory", "architectures", "min_compute_capability", "min_driver_version", "products")
    ):
        problem(
            None, f"name at least one of {', '.join(criteria)} (type alone selects every device of the driver)"
        )
    if spec.min_memory is not None and (not _QUANTITY.match(spec.min_memory) or spec.min_memory.startswith("-")):
        problem(
            "minMemory",
            f"{spec.min_memory!r} is not a quantity like 48Gi (binary Ki, Mi, Gi, Ti or decimal k, M, G, T)",
        )
    if spec.architectures is not None:
        if not spec.architectures:
            problem("architectures", f"list at least one of {', '.join(DRIVER_ARCHITECTURES)}")
        for index, architecture in enumerate(spec.architectures):
            if architecture not in DRIVER_ARCHITECTURES:
                problems.add(
                    file,
                    ("offerings", name, "capability", "architectures", index),
                    f"{architecture!r} is not an architecture the driver publishes; allowed (as it spells them): "
                    f"{', '.join(DRIVER_ARCHITECTURES)}",
                )
    for key, value, example in (
        ("minComputeCapability", spec.min_compute_capability, "8.0"),
        ("minDriverVersion", spec.min_driver_version, "570.86.15"),
    ):
        if value is not None and not _SEMVER_LOOSE.match(value):
            problem(key, f"{value!r} is not a version like {example}")
    if spec.products is not None:
        if not spec.products:
            problem("products", f"list at least one of {', '.join(products)}")
        for index, key in enumerate(spec.products):
            if key not in products:
                problems.add(
                    file,
                    ("offerings", name, "capability", "products", index),
                    unknown_product_message(key, products),
                )
    if len(problems) > count:
        return None
    capability = ResolvedCapability(
        device_type=spec.type,
        min_memory=spec.min_memory,
        architectures=spec.architectures or (),
        min_compute_capability=spec.min_compute_capability,
        min_driver_version=spec.min_driver_version,
        products=tuple(dict.fromkeys(spec.products or ())),
    )
    if capability.products and not capability.kinds(products.values()):
        # Without `products` a capability may be meant for hardware the table does not know yet: coverage and
        # `trial` judge it on real pools and devices. Naming products that cannot meet it is a contradiction.
        problem(
            None,
            f"none of the products it names meets it ({capability.describe()}): the class would select nothing",
        )
        return None
    return capability
