"""Which mock NVML profile stands for a catalog product's GPUs, and the profile file one node's NVML reads.

NVIDIA's mock NVML (tools.toml `mock-nvml`, NVIDIA/k8s-test-infra pkg/gpu/mocknvml) is configured by YAML
profiles of real hardware (`configs/mock-nvml-config-<name>.yaml`); NVIDIA's own e2e suites run the DRA driver
on it. A product whose NVML name one of them serves runs on that profile as NVIDIA wrote it. Any other product
gets a profile of this project's, derived from the nearest NVIDIA profile (the same architecture, preferring the
same MIG capability) with the catalog's facts in place of the hardware's: its NVML name, architecture, compute
capability, memory and PCI device ID. Such a device publishes what the catalog says, not what hardware would:
`derived_from` names the profile so that every report can say so.

Per node, the profile gets the pool's GPU count (`system.num_devices`), UUIDs of its own (NVIDIA's profiles list
one fixed set, which every node of a profile would otherwise share), and the driver the node has installed
(`NVML_DRIVER_VERSION`: the installed driver is the node's, not the hardware's; NVIDIA's profiles say 550 to 580,
below what a GPUCluster or a catalog's `minDriverVersion` may require). Nothing else changes.

MIG pools keep the sandbox's own slices (nodes.py): the mock has no MIG devices ("mock devices are not MIG
devices", its bridge), and a product the catalog gives no architecture has no nearest profile.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from themelio_gpu.inputs.catalog.products import GpuProduct
from themelio_gpu.inputs.clusters.pool_contract import PoolContract

NVML_DRIVER_VERSION = "580.105.08"
"""The NVIDIA driver every simulated node has installed, as NVML reports it (`nvmlSystemGetDriverVersion`); the
driver publishes it as `driverVersion` 580.105.8, and the sandbox's own slices (MIG pools) say the same."""
NVML_CUDA_VERSION = "13.0"
"""The CUDA version that driver supports (`cudaDriverVersion` 13.0.0)."""


@dataclass(frozen=True)
class NvidiaProfile:
    """One profile of the mock: its file's short name, the NVML name it serves, its architecture as the mock
    spells it, and whether the hardware has MIG (the mock serves none either way)."""

    name: str
    product_name: str
    architecture: str
    mig: bool

    @property
    def file(self) -> str:
        return f"mock-nvml-config-{self.name}.yaml"


NVIDIA_PROFILES = (
    NvidiaProfile("a100", "NVIDIA A100-SXM4-40GB", "ampere", True),
    NvidiaProfile("h100", "NVIDIA H100 80GB HBM3", "hopper", True),
    NvidiaProfile("b200", "NVIDIA B200", "blackwell", True),
    NvidiaProfile("l40s", "NVIDIA L40S", "ada_lovelace", False),
    NvidiaProfile("t4", "NVIDIA T4", "turing", False),
)
"""The mock's single-GPU-node profiles at the pinned commit (a test reads each file's `device_defaults`); its
GB200 and GB300 profiles model Grace-Blackwell superchips with NVLink fabric, no base for another product."""


@dataclass(frozen=True)
class Profile:
    """The profile a product's GPUs run on: NVIDIA's own, or one derived from it (`derived`)."""

    base: NvidiaProfile
    product: GpuProduct
    derived: bool

    @property
    def describe(self) -> str:
        if not self.derived:
            return f"NVIDIA's {self.base.name} profile"
        return f"this project's profile for {self.product.key}, derived from NVIDIA's {self.base.name}"


def mock_architecture(architecture: str) -> str:
    """The catalog's (the driver's) spelling, `Ada Lovelace`, as the mock's profiles spell it: `ada_lovelace`."""
    return architecture.lower().replace(" ", "_")


def profile_for(product: GpuProduct) -> Profile | None:
    """NVIDIA's profile serving the product's first NVML name, else the nearest one to derive from; None when
    the catalog gives the product no architecture."""
    for base in NVIDIA_PROFILES:
        if base.product_name == product.product_names[0]:
            return Profile(base, product, derived=False)
    if not product.architecture:
        return None
    architecture = mock_architecture(product.architecture)
    candidates = [b for b in NVIDIA_PROFILES if b.architecture == architecture] or list(NVIDIA_PROFILES)
    candidates.sort(key=lambda b: b.mig != product.supports_mig)  # stable: the table's order breaks ties
    return Profile(candidates[0], product, derived=True)


def driver_publishes(pool: PoolContract) -> bool:
    """Whether the DRA driver's kubelet plugin publishes this pool's GPUs (on the mock): a DRA pool of whole
    GPUs whose product has a profile."""
    return pool.dra and pool.mig_devices is None and profile_for(pool.product) is not None


def _uuid(node: str, index: int) -> str:
    digest = hashlib.sha256(f"mock-nvml/{node}/{index}".encode()).digest()[:16]
    return "GPU-" + str(uuid.UUID(bytes=digest, version=5))


def node_profile(profile: Profile, profiles: Path, node: str, gpus: int) -> dict[str, Any]:
    """The profile one node's NVML reads: NVIDIA's file from `profiles` (the built mock's folder), with the
    catalog's facts when derived, the node's GPU count and UUIDs of its own."""
    document: dict[str, Any] = yaml.safe_load((profiles / profile.base.file).read_text())
    if profile.derived:
        _apply_product(document["device_defaults"], profile.product)
    major, minor = NVML_CUDA_VERSION.split(".")
    document.setdefault("system", {}).update(
        num_devices=gpus,
        driver_version=NVML_DRIVER_VERSION,
        nvml_version=f"{major}.{NVML_DRIVER_VERSION}",
        cuda_version=NVML_CUDA_VERSION,
        cuda_version_major=int(major),
        cuda_version_minor=int(minor),
    )
    listed = {entry.get("index"): entry for entry in document.get("devices") or []}
    document["devices"] = [
        {**listed.get(index, {"index": index, "minor_number": index}), "uuid": _uuid(node, index)}
        for index in range(gpus)
    ]
    return document


def _apply_product(defaults: dict[str, Any], product: GpuProduct) -> None:
    """The catalog's facts in place of the base hardware's, in the mock's own keys."""
    defaults["name"] = product.product_names[0]
    defaults["architecture"] = mock_architecture(product.architecture)
    if product.compute_capability:
        major, minor = product.compute_capability.split(".")
        defaults["compute_capability"] = {"major": int(major), "minor": int(minor)}
    memory = defaults.setdefault("memory", {})
    total = round(product.memory_gib * 1024) * 1024 * 1024
    reserved = min(int(memory.get("reserved_bytes") or 0), total)
    memory.update(total_bytes=total, reserved_bytes=reserved, free_bytes=total - reserved, used_bytes=0)
    if product.pci_device_ids:
        defaults.setdefault("pci", {})["device_id"] = int(product.pci_device_ids[0], 16)
