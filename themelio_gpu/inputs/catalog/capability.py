"""Capability offerings: which known devices meet a capability, decided from the product table.

The DeviceClass selector (selectors.py) tests the same facts on each device the driver publishes:
`capacity.memory`, `architecture`, `cudaComputeCapability`, `driverVersion`, `productName`, `type`.
Here the product table stands in for the device, so placement and overlaps follow the selector:
- whole GPUs: the product's published memory (`memoryGiB`), architecture and compute capability;
- MIG devices: the product's architecture and compute capability, and the profile's memory. The table
  knows a profile's memory only from its name (`1g.24gb`), which is an upper bound: devices publish less
  (an H100 NVL 1g.12gb publishes 10.75 GiB) and the amount changes with the driver. A profile counts when
  its name reaches `minMemory`: it may serve; `trial` on the cluster's ResourceSlices says whether it does.
- the driver version is a fact of each node, not of a product: no product is excluded by it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from themelio_gpu.inputs.catalog.products import GpuProduct, mig_profile_shape
from themelio_gpu.k8s.quantity import parse_quantity
from themelio_gpu.k8s.semver import parse_semver

GIB = Decimal(2**30)


@dataclass(frozen=True, order=True)
class DeviceKind:
    """One kind of device the driver publishes: a product's whole GPU (profile None) or one MIG profile."""

    product: str
    mig_profile: str | None = None

    @property
    def sort_key(self) -> tuple[str, str]:
        return (self.product, self.mig_profile or "")

    def __str__(self) -> str:
        return f"{self.product} MIG {self.mig_profile}" if self.mig_profile else f"whole {self.product}"


@dataclass(frozen=True)
class ResolvedCapability:
    device_type: Literal["gpu", "mig"]
    min_memory: str | None
    architectures: tuple[str, ...]
    """Empty: any architecture."""
    min_compute_capability: str | None
    min_driver_version: str | None
    products: tuple[str, ...]
    """Empty: any product."""

    @property
    def min_memory_bytes(self) -> Decimal | None:
        if self.min_memory is None:
            return None
        return parse_quantity(self.min_memory).value

    def describe(self) -> str:
        """`whole GPUs with >= 48Gi, Hopper or Blackwell, compute capability >= 9.0`."""
        parts = ["MIG devices" if self.device_type == "mig" else "whole GPUs"]
        if self.products:
            parts.append("of " + ", ".join(self.products))
        if self.min_memory:
            parts.append(f"with >= {self.min_memory}")
        if self.architectures:
            parts.append(" or ".join(self.architectures))
        if self.min_compute_capability:
            parts.append(f"compute capability >= {self.min_compute_capability}")
        if self.min_driver_version:
            parts.append(f"driver >= {self.min_driver_version}")
        return ", ".join(parts)

    def product_misses(self, product: GpuProduct) -> list[str]:
        """Why `product`'s devices cannot meet the capability (empty: they can), memory aside for MIG."""
        misses = []
        if self.products and product.key not in self.products:
            misses.append(f"{product.key} is not one of {', '.join(self.products)}")
        if self.architectures and product.architecture not in self.architectures:
            have = product.architecture or f"unknown (products.{product.key}.architecture)"
            misses.append(f"architecture {have} is not {' or '.join(self.architectures)}")
        if self.min_compute_capability is not None:
            if not product.compute_capability:
                misses.append(f"compute capability unknown (products.{product.key}.computeCapability)")
            elif (
                parse_semver(product.compute_capability, normalize=True).compare(
                    parse_semver(self.min_compute_capability, normalize=True)
                )
                < 0
            ):
                misses.append(f"compute capability {product.compute_capability} < {self.min_compute_capability}")
        minimum = self.min_memory_bytes
        if self.device_type == "gpu" and minimum is not None and Decimal(product.memory_gib) * GIB < minimum:
            misses.append(f"it publishes {product.memory_gib:.4g} GiB, below {self.min_memory}")
        if self.device_type == "mig" and not product.supports_mig:
            misses.append(f"{product.display_name} has no MIG")
        return misses

    def profile_may_meet(self, profile: str) -> bool:
        """Whether a MIG profile's memory may reach minMemory: its name's size, read as GiB, is the most it
        publishes (H100 1g.10gb: 9.75 GiB; B200 1g.45gb: 44.25 GiB; in every `nvidia-smi mig -lgip` seen)."""
        minimum = self.min_memory_bytes
        shape = mig_profile_shape(profile)
        return minimum is None or (shape is not None and Decimal(shape.memory_gb) * GIB >= minimum)

    def kinds(self, products: Iterable[GpuProduct]) -> tuple[DeviceKind, ...]:
        """The known device kinds this capability can take."""
        found: list[DeviceKind] = []
        for product in products:
            if self.product_misses(product):
                continue
            if self.device_type == "gpu":
                found.append(DeviceKind(product.key))
            else:
                found.extend(DeviceKind(product.key, p) for p in product.mig_profiles if self.profile_may_meet(p))
        return tuple(sorted(found))


def whole_gpu_kinds(products: Mapping[str, GpuProduct]) -> tuple[DeviceKind, ...]:
    """Every known whole GPU: what the generic `nvidia.com/gpu` (the chart's `gpu.nvidia.com`) can take."""
    return tuple(sorted(DeviceKind(key) for key in products))
