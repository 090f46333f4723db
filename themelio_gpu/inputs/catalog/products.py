"""GPU products: the hardware facts every offering, selector, placement and node label is derived from.

Sources (see docs/facts-and-sources.md): NVML product names as the NVIDIA DRA driver publishes them in
the `productName` device attribute; the memory the driver publishes (capacity `memory`, the NVML total
that `nvidia-smi --query-gpu=memory.total` prints, less than the marketed size); compute capabilities
from NVIDIA's CUDA GPUs list; MIG profile tables and PCI device IDs from the GPU Operator's default
mig-parted config (v26.7.0; identical in v25.10.1 and v26.3.3). A test checks the MIG tables against that
file. A catalog can add products or correct these (`products:` in the catalog file); both are checked
by `product_problems`, the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from themelio_gpu.inputs.validation import did_you_mean
from themelio_gpu.k8s import names as k8s_names
from themelio_gpu.k8s.nvidia import mig_profile_resource_spelling


@dataclass(frozen=True)
class GpuProduct:
    key: str
    """Catalog name of the product, e.g. `a100-40gb`."""
    display_name: str
    product_names: tuple[str, ...]
    """NVML names (`nvidia-smi -L`), one per form factor, matched exactly by DeviceClass selectors."""
    memory_gib: float
    """Memory of one whole GPU as the driver publishes it (capacity `memory`), in GiB: below the marketed
    size (an H100 "80GB" publishes 81559Mi = 79.65 GiB). Capability placement compares with this."""
    architecture: str
    """The driver's `architecture` attribute (go-nvlib spelling: Ampere, Ada Lovelace, Hopper, Blackwell);
    empty when a catalog product does not say (it then meets no capability that tests it)."""
    compute_capability: str
    """The driver's `cudaComputeCapability`, as major.minor (`9.0`); empty when unknown, as above."""
    pci_device_ids: tuple[str, ...]
    """PCI device IDs as mig-parted's device-filter spells them (`0x20B010DE`)."""
    mig_profiles: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """MIG profile -> maximum instances of that profile on one GPU (empty: no MIG)."""
    mig_layouts: Mapping[str, Mapping[str, int]] = field(default_factory=lambda: MappingProxyType({}))
    """Named MIG Manager configs beyond `all-<profile>` (`all-balanced`, or a custom one): MIG devices per GPU."""
    accelerator_label: str = ""
    """Value of the `accelerator` node label; defaults to `nvidia-<key>`."""

    @property
    def supports_mig(self) -> bool:
        return bool(self.mig_profiles)

    @property
    def accelerator(self) -> str:
        return self.accelerator_label or f"nvidia-{self.key}"

    @property
    def mig_balanced(self) -> Mapping[str, int]:
        """The `all-balanced` MIG Manager layout for this product (empty when it has none)."""
        return self.mig_layouts.get("all-balanced", MappingProxyType({}))


def _table(*pairs: tuple[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(pairs))


def _layouts(**layouts: Mapping[str, int]) -> Mapping[str, Mapping[str, int]]:
    return MappingProxyType({name.replace("_", "-"): layout for name, layout in layouts.items()})


def _mib(mebibytes: int) -> float:
    """A published memory size in MiB (what nvidia-smi prints), as GiB; exact in binary floating point."""
    return mebibytes / 1024


_A100_80_CLASS_PROFILES = _table(
    ("1g.10gb", 7),
    ("1g.10gb+me", 1),
    ("1g.20gb", 4),
    ("2g.20gb", 3),
    ("3g.40gb", 2),
    ("4g.40gb", 1),
    ("7g.80gb", 1),
)
_A100_80_CLASS_LAYOUTS = _layouts(all_balanced=_table(("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)))

PRODUCTS: Mapping[str, GpuProduct] = MappingProxyType(
    {
        p.key: p
        for p in (
            GpuProduct(
                key="a10g",
                display_name="NVIDIA A10G 24GB",
                product_names=("NVIDIA A10G",),
                memory_gib=_mib(23028),
                architecture="Ampere",
                compute_capability="8.6",
                pci_device_ids=("0x223710DE",),
            ),
            GpuProduct(
                key="l4",
                display_name="NVIDIA L4 24GB",
                product_names=("NVIDIA L4",),
                memory_gib=_mib(23034),
                architecture="Ada Lovelace",
                compute_capability="8.9",
                pci_device_ids=("0x27B810DE",),
            ),
            GpuProduct(
                key="l40s",
                display_name="NVIDIA L40S 48GB",
                product_names=("NVIDIA L40S",),
                # 45 GiB: an L40S does not meet a 48Gi memory requirement.
                memory_gib=_mib(46068),
                architecture="Ada Lovelace",
                compute_capability="8.9",
                pci_device_ids=("0x26B910DE",),
            ),
            GpuProduct(
                key="a30",
                display_name="NVIDIA A30 24GB",
                product_names=("NVIDIA A30",),
                memory_gib=24,  # HBM2 Ampere parts publish their full size (A100: 40960Mi, 81920Mi); unverified
                architecture="Ampere",
                compute_capability="8.0",
                pci_device_ids=("0x20B710DE",),
                mig_profiles=_table(
                    ("1g.6gb", 4), ("1g.6gb+me", 1), ("2g.12gb", 2), ("2g.12gb+me", 1), ("4g.24gb", 1)
                ),
                mig_layouts=_layouts(all_balanced=_table(("1g.6gb", 2), ("2g.12gb", 1))),
            ),
            GpuProduct(
                key="a100-40gb",
                display_name="NVIDIA A100 40GB",
                product_names=("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"),
                memory_gib=_mib(40960),
                architecture="Ampere",
                compute_capability="8.0",
                # 0x20F1 is the A100-PCIE-40GB in the driver's supported-GPU list; mig-parted filters all three.
                pci_device_ids=("0x20B010DE", "0x20B110DE", "0x20F110DE"),
                mig_profiles=_table(
                    ("1g.5gb", 7),
                    ("1g.5gb+me", 1),
                    ("1g.10gb", 4),
                    ("2g.10gb", 3),
                    ("3g.20gb", 2),
                    ("4g.20gb", 1),
                    ("7g.40gb", 1),
                ),
                mig_layouts=_layouts(all_balanced=_table(("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1))),
                # The label Themelio's nodes already carry (ADR-0023); kept so existing selectors still match.
                accelerator_label="nvidia-a100",
            ),
            GpuProduct(
                key="a100-80gb",
                display_name="NVIDIA A100 80GB",
                product_names=("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"),
                memory_gib=_mib(81920),
                architecture="Ampere",
                compute_capability="8.0",
                pci_device_ids=("0x20B210DE", "0x20B510DE"),
                mig_profiles=_A100_80_CLASS_PROFILES,
                mig_layouts=_A100_80_CLASS_LAYOUTS,
            ),
            GpuProduct(
                key="h100-80gb",
                display_name="NVIDIA H100 80GB HBM3",
                product_names=("NVIDIA H100 80GB HBM3",),
                memory_gib=_mib(81559),
                architecture="Hopper",
                compute_capability="9.0",
                pci_device_ids=("0x233010DE",),
                mig_profiles=_A100_80_CLASS_PROFILES,
                mig_layouts=_A100_80_CLASS_LAYOUTS,
            ),
            GpuProduct(
                key="h100-nvl",
                display_name="NVIDIA H100 NVL 94GB",
                product_names=("NVIDIA H100 NVL",),
                memory_gib=_mib(95830),
                architecture="Hopper",
                compute_capability="9.0",
                pci_device_ids=("0x232110DE",),
                mig_profiles=_table(
                    ("1g.12gb", 7),
                    ("1g.12gb+me", 1),
                    ("1g.24gb", 4),
                    ("2g.24gb", 3),
                    ("3g.47gb", 2),
                    ("4g.47gb", 1),
                    ("7g.94gb", 1),
                ),
                mig_layouts=_layouts(all_balanced=_table(("1g.12gb", 2), ("2g.24gb", 1), ("3g.47gb", 1))),
            ),
            GpuProduct(
                key="h200-141gb",
                display_name="NVIDIA H200 141GB",
                product_names=("NVIDIA H200",),
                memory_gib=_mib(143771),
                architecture="Hopper",
                compute_capability="9.0",
                pci_device_ids=("0x233510DE",),
                mig_profiles=_table(
                    ("1g.18gb", 7),
                    ("1g.18gb+me", 1),
                    ("1g.35gb", 4),
                    ("2g.35gb", 3),
                    ("3g.71gb", 2),
                    ("4g.71gb", 1),
                    ("7g.141gb", 1),
                ),
                mig_layouts=_layouts(all_balanced=_table(("1g.18gb", 2), ("2g.35gb", 1), ("3g.71gb", 1))),
            ),
            GpuProduct(
                key="b200",
                display_name="NVIDIA B200 180GB",
                product_names=("NVIDIA B200",),
                memory_gib=_mib(183359),
                architecture="Blackwell",
                compute_capability="10.0",
                pci_device_ids=("0x290110DE",),
                mig_profiles=_table(
                    ("1g.23gb", 7),
                    ("1g.23gb+me", 1),
                    ("1g.45gb", 4),
                    ("2g.45gb", 3),
                    ("3g.90gb", 2),
                    ("4g.90gb", 1),
                    ("7g.180gb", 1),
                ),
                mig_layouts=_layouts(all_balanced=_table(("1g.23gb", 2), ("2g.45gb", 1), ("3g.90gb", 1))),
            ),
        )
    }
)


def unknown_product_message(key: str, products: Mapping[str, GpuProduct] = PRODUCTS) -> str:
    guess = did_you_mean(key, products)
    hint = f" (did you mean {guess}?)" if guess else ""
    return f"unknown product {key!r}{hint}; known: {', '.join(products)} (or declare it under products:)"


def mig_config_for_profile(profile: str) -> str:
    """The MIG Manager's default config that fills every GPU with one profile: `all-1g.10gb.me`."""
    return "all-" + mig_profile_resource_spelling(profile)


def named_mig_layout(product: GpuProduct, config: str) -> Mapping[str, int] | None:
    """MIG devices per GPU for a named MIG Manager config, or None if unknown for the product."""
    if config in product.mig_layouts:
        return product.mig_layouts[config]
    if config == "all-enabled":
        return MappingProxyType({})  # MIG on with no instances: the GPU publishes nothing.
    for profile, count in product.mig_profiles.items():
        if mig_config_for_profile(profile) == config:
            return MappingProxyType({profile: count})
    return None


def default_mig_config_names(product: GpuProduct) -> tuple[str, ...]:
    if not product.supports_mig:
        return ()
    names = ["all-disabled", "all-enabled", *product.mig_layouts]
    names.extend(mig_config_for_profile(p) for p in product.mig_profiles)
    return tuple(dict.fromkeys(names))


# --- MIG profile names and the rules a product's MIG table follows ----------------------------------------

# A GPU instance profile as the driver publishes it: `<slices>g.<GB>gb`, optionally +me (media extensions),
# +gfx (graphics), +me.all or -me (Blackwell RTX PRO). mig-parted config names spell `+` as `.`.
_PROFILE = re.compile(r"^([1-7])g\.([1-9][0-9]*)gb(\+me|\+gfx|\+me\.all|-me)?$")
_DOT_SUFFIXES = ((".me.all", "+me.all"), (".gfx", "+gfx"), (".me", "+me"))
PROFILE_SYNTAX = "<compute slices 1-7>g.<memory GB>gb, optionally +me, +gfx, +me.all or -me (e.g. 1g.10gb+me)"
# The driver's `architecture` values: go-nvlib's GetArchitectureAsString (kubernetes-sigs/dra-driver-nvidia-gpu).
DRIVER_ARCHITECTURES = (
    "Kepler",
    "Maxwell",
    "Pascal",
    "Volta",
    "Turing",
    "Ampere",
    "Ada Lovelace",
    "Hopper",
    "Blackwell",
)
MAX_COMPUTE_SLICES = 7
MEMORY_SLICES = 8
_PCI_ID = re.compile(r"^0x[0-9A-F]{4}10DE$")
_VERSION = re.compile(r"^[0-9]+\.[0-9]+$")


@dataclass(frozen=True)
class MigProfileShape:
    compute_slices: int
    memory_gb: int


def canonical_mig_profile(text: str) -> str:
    """The driver's spelling of a profile: `1g.10gb.me` (config/resource-name spelling) -> `1g.10gb+me`."""
    for dotted, plus in _DOT_SUFFIXES:
        if text.endswith(dotted) and _PROFILE.match(text[: -len(dotted)] + plus):
            return text[: -len(dotted)] + plus
    return text


def mig_profile_shape(profile: str) -> MigProfileShape | None:
    match = _PROFILE.match(profile)
    if match is None:
        return None
    return MigProfileShape(int(match.group(1)), int(match.group(2)))


def _memory_slices(shape: MigProfileShape, gpu_gb: float) -> int:
    """Memory slices (of 8) a profile takes: its size over the GPU's, rounded (1g.10gb is 2 on a 40GB A100)."""
    return max(1, round(shape.memory_gb * MEMORY_SLICES / gpu_gb))


Path = tuple[str, ...]
"""Where in a product entry a problem is: ("migLayouts", "all-balanced", "1g.5gb")."""


def _layout_problems(
    name: str,
    layout: Mapping[str, int],
    product: GpuProduct,
    shapes: Mapping[str, MigProfileShape],
    compute_capacity: int,
    gpu_gb: float,
) -> list[tuple[Path, str]]:
    where: Path = ("migLayouts", name)
    problems: list[tuple[Path, str]] = []
    if not layout:
        return [(where, "a layout needs at least one profile: count (MIG on with no devices serves nothing)")]
    compute = memory = 0
    for profile, count in layout.items():
        if profile not in product.mig_profiles:
            problems.append(
                (
                    (*where, profile),
                    f"no MIG profile {profile!r} in migProfiles ({', '.join(product.mig_profiles)})",
                )
            )
            continue
        if count < 1 or count > product.mig_profiles[profile]:
            problems.append(
                (
                    (*where, profile),
                    f"{count} instances: allowed 1 to {product.mig_profiles[profile]} (migProfiles[{profile}])",
                )
            )
            continue
        compute += shapes[profile].compute_slices * count
        memory += _memory_slices(shapes[profile], gpu_gb) * count
    if compute > compute_capacity:
        problems.append((where, f"needs {compute} compute slices; the GPU has {compute_capacity}"))
    if memory > MEMORY_SLICES:
        problems.append(
            (where, f"needs {memory} of {MEMORY_SLICES} memory slices; the layout does not fit one GPU")
        )
    return problems


def product_problems(product: GpuProduct) -> list[tuple[Path, str]]:
    """Every rule a product breaks, as (key path, message); the built-in table and catalog products alike."""
    problems: list[tuple[Path, str]] = []
    for message in k8s_names.dns1123_label(product.key):
        problems.append(((), f"product key: {message}"))
    for message in k8s_names.label_value(product.accelerator):
        problems.append(((), f"the node label accelerator={product.accelerator}: {message}; use a shorter key"))
    if not product.display_name.strip():
        problems.append((("displayName",), "must not be empty"))
    if not product.product_names or any(not n.strip() for n in product.product_names):
        problems.append(
            (("productNames",), "list the NVML names the driver publishes (nvidia-smi -L), none empty")
        )
    if len(set(product.product_names)) != len(product.product_names):
        problems.append((("productNames",), "a name is listed twice"))
    if not product.memory_gib > 0:
        problems.append((("memoryGiB",), "must be a positive number of GiB"))
    if product.architecture and product.architecture not in DRIVER_ARCHITECTURES:
        problems.append(
            (
                ("architecture",),
                f"{product.architecture!r} is not an architecture the driver publishes: {', '.join(DRIVER_ARCHITECTURES)}",
            )
        )
    if product.compute_capability and not _VERSION.match(product.compute_capability):
        problems.append(
            (
                ("computeCapability",),
                f"{product.compute_capability!r} is not major.minor like 9.0 (quote it in YAML)",
            )
        )
    for pci_id in product.pci_device_ids:
        if not _PCI_ID.match(pci_id):
            problems.append(
                (("pciDeviceIds",), f"{pci_id!r} is not a PCI device ID like 0x233010DE (device, then 10DE)")
            )
    if len(set(product.pci_device_ids)) != len(product.pci_device_ids):
        problems.append((("pciDeviceIds",), "an ID is listed twice"))

    shapes: dict[str, MigProfileShape] = {}
    for profile, count in product.mig_profiles.items():
        shape = mig_profile_shape(profile)
        if shape is None:
            problems.append(
                (("migProfiles", profile), f"{profile!r} is not a MIG profile; allowed: {PROFILE_SYNTAX}")
            )
            continue
        shapes[profile] = shape
        if count < 1 or count * shape.compute_slices > MAX_COMPUTE_SLICES:
            problems.append(
                (
                    ("migProfiles", profile),
                    f"{count} instances of a {shape.compute_slices}-slice profile: allowed 1 to "
                    f"{MAX_COMPUTE_SLICES // shape.compute_slices} ({MAX_COMPUTE_SLICES} compute slices per GPU)",
                )
            )
    if len(shapes) < len(product.mig_profiles) or not product.memory_gib > 0:
        return problems  # the size checks below need every profile's shape and the GPU's memory
    # The GPU's size: its largest profile (7g.80gb) or its published memory, whichever is larger.
    gpu_gb = max([product.memory_gib, *(s.memory_gb for s in shapes.values())])
    for profile, shape in shapes.items():
        if shape.memory_gb > product.memory_gib * 1.1:
            problems.append(
                (
                    ("migProfiles", profile),
                    f"{shape.memory_gb} GB is more than this {product.memory_gib:g} GiB GPU has",
                )
            )
        elif _memory_slices(shape, gpu_gb) * product.mig_profiles[profile] > MEMORY_SLICES:
            problems.append(
                (
                    ("migProfiles", profile),
                    f"{product.mig_profiles[profile]} instances of {profile} need more than the GPU's "
                    f"{MEMORY_SLICES} memory slices",
                )
            )
    # Compute capacity: the most slices any one profile fills (7 on A100/H100, 4 on A30 and RTX PRO 6000).
    capacity = max((s.compute_slices * product.mig_profiles[p] for p, s in shapes.items()), default=0)
    if product.mig_layouts and not product.mig_profiles:
        problems.append((("migLayouts",), "a product without migProfiles has no MIG layouts"))
    for name, layout in product.mig_layouts.items():
        for message in k8s_names.label_value(name):
            problems.append((("migLayouts", name), f"the nvidia.com/mig.config label: {message}"))
        if name in ("all-disabled", "all-enabled") or any(name == mig_config_for_profile(p) for p in shapes):
            problems.append((("migLayouts", name), f"{name} is a MIG Manager default config; choose another name"))
            continue
        if product.mig_profiles:
            problems.extend(_layout_problems(name, layout, product, shapes, capacity, gpu_gb))
    return problems


def table_clashes(products: Mapping[str, GpuProduct]) -> list[tuple[str, str, str, str]]:
    """Facts two products share, as (product, other product, key, value): a name or PCI ID identifies one."""
    clashes: list[tuple[str, str, str, str]] = []
    seen: dict[tuple[str, str], str] = {}
    for product in products.values():
        facts = [("productNames", n) for n in product.product_names]
        facts += [("pciDeviceIds", i) for i in product.pci_device_ids]
        for fact in facts:
            owner = seen.setdefault(fact, product.key)
            if owner != product.key:
                clashes.append((product.key, owner, *fact))
    return clashes
