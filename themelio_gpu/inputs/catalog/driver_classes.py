"""The DeviceClasses that the NVIDIA DRA driver's installer creates itself, per installer.

Two installers exist. The DRA driver chart (`dra-driver-nvidia-gpu` 0.4.x, `nvidia-dra-driver-gpu` 25.12)
renders them from its templates; the GPU Operator (v26.7.0+) creates them from a GPUCluster, from its
`manifests/state-dra-driver/04*_deviceclass-*.yaml`. The names and selectors are the same; the difference
that matters here: the chart's `gpu.nvidia.com` advertises `nvidia.com/gpu` (on resource.k8s.io/v1), the
operator's advertises nothing, so in that mode a class of ours must map the name or nothing does.
"""

from __future__ import annotations

from dataclasses import dataclass

from themelio_gpu.inputs.catalog.selectors import CHART_CLASS_SELECTORS
from themelio_gpu.k8s.nvidia import (
    COMPUTE_DOMAIN_CHANNEL_CLASS,
    COMPUTE_DOMAIN_DAEMON_CLASS,
    GPU,
    GPU_CLASS,
    MIG_CLASS,
    VFIO_CLASS,
)

_COMPUTE_DOMAIN = "device.driver == 'compute-domain.nvidia.com' && device.attributes['compute-domain.nvidia.com']"


@dataclass(frozen=True)
class DriverClass:
    """A DeviceClass the installer creates: not ours, but it shares the cluster's class and resource names."""

    name: str
    extended_resource_name: str | None
    selector: str


def driver_device_classes(*, by_gpu_operator: bool, compute_domains: bool) -> tuple[DriverClass, ...]:
    """The classes the installer creates: the DRA chart (False) or the GPU Operator's GPUCluster (True)."""
    gpu_name = None if by_gpu_operator else GPU
    classes = [
        DriverClass(GPU_CLASS, gpu_name, CHART_CLASS_SELECTORS[GPU_CLASS]),
        DriverClass(MIG_CLASS, None, CHART_CLASS_SELECTORS[MIG_CLASS]),
        DriverClass(
            VFIO_CLASS,
            None,
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'",
        ),
    ]
    if compute_domains:
        classes += [
            DriverClass(COMPUTE_DOMAIN_DAEMON_CLASS, None, f"{_COMPUTE_DOMAIN}.type == 'daemon'"),
            DriverClass(
                COMPUTE_DOMAIN_CHANNEL_CLASS,
                None,
                f"{_COMPUTE_DOMAIN}.type == 'channel' && device.attributes['compute-domain.nvidia.com'].id == 0",
            ),
        ]
    return tuple(classes)
