"""GPU products: the hardware facts every offering, selector and node label is derived from.

Sources (see README "Facts and sources"): NVML product names as the NVIDIA DRA driver publishes them in
the `productName` device attribute, and MIG profile tables from the GPU Operator's default mig-parted
config (v26.7.0; identical in v25.10.1 and v26.3.3). A test checks the MIG tables against that file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True)
class GpuProduct:
    key: str
    """Catalog name of the product, e.g. `a100-40gb`."""
    display_name: str
    product_names: tuple[str, ...]
    """NVML names (`nvidia-smi -L`), one per form factor, matched exactly by DeviceClass selectors."""
    memory_gib: int
    architecture: str
    pci_device_ids: tuple[str, ...]
    """PCI device IDs as mig-parted's device-filter spells them (`0x20B010DE`)."""
    mig_profiles: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """MIG profile -> maximum instances of that profile on one GPU (empty: no MIG)."""
    mig_balanced: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    """The `all-balanced` MIG Manager layout for this product."""
    accelerator_label: str = ""
    """Value of the `accelerator` node label; defaults to `nvidia-<key>`."""

    @property
    def supports_mig(self) -> bool:
        return bool(self.mig_profiles)

    @property
    def accelerator(self) -> str:
        return self.accelerator_label or f"nvidia-{self.key}"


def _table(*pairs: tuple[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(pairs))


_A100_80_CLASS_PROFILES = _table(
    ("1g.10gb", 7),
    ("1g.10gb+me", 1),
    ("1g.20gb", 4),
    ("2g.20gb", 3),
    ("3g.40gb", 2),
    ("4g.40gb", 1),
    ("7g.80gb", 1),
)
_A100_80_CLASS_BALANCED = _table(("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1))

PRODUCTS: Mapping[str, GpuProduct] = MappingProxyType(
    {
        p.key: p
        for p in (
            GpuProduct(
                key="a10g",
                display_name="NVIDIA A10G 24GB",
                product_names=("NVIDIA A10G",),
                memory_gib=24,
                architecture="Ampere",
                pci_device_ids=("0x223710DE",),
            ),
            GpuProduct(
                key="l4",
                display_name="NVIDIA L4 24GB",
                product_names=("NVIDIA L4",),
                memory_gib=24,
                architecture="Ada Lovelace",
                pci_device_ids=("0x27B810DE",),
            ),
            GpuProduct(
                key="l40s",
                display_name="NVIDIA L40S 48GB",
                product_names=("NVIDIA L40S",),
                memory_gib=48,
                architecture="Ada Lovelace",
                pci_device_ids=("0x26B910DE",),
            ),
            GpuProduct(
                key="a30",
                display_name="NVIDIA A30 24GB",
                product_names=("NVIDIA A30",),
                memory_gib=24,
                architecture="Ampere",
                pci_device_ids=("0x20B710DE",),
                mig_profiles=_table(
                    ("1g.6gb", 4), ("1g.6gb+me", 1), ("2g.12gb", 2), ("2g.12gb+me", 1), ("4g.24gb", 1)
                ),
                mig_balanced=_table(("1g.6gb", 2), ("2g.12gb", 1)),
            ),
            GpuProduct(
                key="a100-40gb",
                display_name="NVIDIA A100 40GB",
                product_names=("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"),
                memory_gib=40,
                architecture="Ampere",
                pci_device_ids=("0x20B010DE", "0x20B110DE"),
                mig_profiles=_table(
                    ("1g.5gb", 7),
                    ("1g.5gb+me", 1),
                    ("1g.10gb", 4),
                    ("2g.10gb", 3),
                    ("3g.20gb", 2),
                    ("4g.20gb", 1),
                    ("7g.40gb", 1),
                ),
                mig_balanced=_table(("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)),
                # The label Themelio's nodes already carry (ADR-0023); kept so existing selectors still match.
                accelerator_label="nvidia-a100",
            ),
            GpuProduct(
                key="a100-80gb",
                display_name="NVIDIA A100 80GB",
                product_names=("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"),
                memory_gib=80,
                architecture="Ampere",
                pci_device_ids=("0x20B210DE", "0x20B510DE"),
                mig_profiles=_A100_80_CLASS_PROFILES,
                mig_balanced=_A100_80_CLASS_BALANCED,
            ),
            GpuProduct(
                key="h100-80gb",
                display_name="NVIDIA H100 80GB HBM3",
                product_names=("NVIDIA H100 80GB HBM3",),
                memory_gib=80,
                architecture="Hopper",
                pci_device_ids=("0x233010DE",),
                mig_profiles=_A100_80_CLASS_PROFILES,
                mig_balanced=_A100_80_CLASS_BALANCED,
            ),
            GpuProduct(
                key="h200-141gb",
                display_name="NVIDIA H200 141GB",
                product_names=("NVIDIA H200",),
                memory_gib=141,
                architecture="Hopper",
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
                mig_balanced=_table(("1g.18gb", 2), ("2g.35gb", 1), ("3g.71gb", 1)),
            ),
        )
    }
)


def unknown_product_message(key: str) -> str:
    return f"unknown product {key!r}; known: {', '.join(PRODUCTS)}"


def mig_profile_resource_spelling(profile: str) -> str:
    """How the device plugin spells a MIG profile in a resource name: `1g.10gb+me` -> `1g.10gb.me`."""
    return profile.replace("+", ".")


def mig_config_for_profile(profile: str) -> str:
    """The MIG Manager's default config that fills every GPU with one profile: `all-1g.10gb.me`."""
    return "all-" + mig_profile_resource_spelling(profile)


def named_mig_layout(product: GpuProduct, config: str) -> Mapping[str, int] | None:
    """MIG devices per GPU for a named default MIG Manager config, or None if unknown for the product."""
    if config == "all-balanced":
        return product.mig_balanced or None
    if config == "all-enabled":
        return MappingProxyType({})  # MIG on with no instances: the GPU publishes nothing.
    for profile, count in product.mig_profiles.items():
        if mig_config_for_profile(profile) == config:
            return MappingProxyType({profile: count})
    return None


def default_mig_config_names(product: GpuProduct) -> tuple[str, ...]:
    if not product.supports_mig:
        return ()
    names = ["all-disabled", "all-enabled", "all-balanced"]
    names.extend(mig_config_for_profile(p) for p in product.mig_profiles)
    return tuple(names)
