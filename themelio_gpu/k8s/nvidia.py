"""NVIDIA's names, each with one constant: what the device plugin advertises, what the DRA driver publishes and
its chart creates, and the node labels the GPU Operator reads and writes.

Followed upstream: NVIDIA/k8s-device-plugin (`nvidia.com/gpu`, the mixed MIG strategy's
`nvidia.com/mig-<profile>`), NVIDIA/k8s-dra-driver-gpu (driver `gpu.nvidia.com`, the chart's
`templates/deviceclass-*.yaml`), NVIDIA/gpu-operator (`nvidia.com/gpu.deploy.*`, `nvidia.com/mig.config`,
gpu-feature-discovery's `nvidia.com/gpu.present`, `nvidia.com/gpu.product`, `nvidia.com/mig.capable`).
"""

from __future__ import annotations

from themelio_gpu.k8s.version import KubernetesVersion

GPU = "nvidia.com/gpu"
"""The device plugin's whole-GPU resource name, which the DRA driver chart (>= 25.12.0) maps to its
gpu.nvidia.com class; by NVIDIA's convention also the key of the taint GPU nodes carry and of the label
(`=true`) that marks a GPU node in this tool's pool contract."""
DEFAULT_TAINT = (GPU, "present", "NoSchedule")
"""(key, value, effect) of the taint a GPU pool carries unless it says otherwise."""
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
"""The toleration of the GPU taint, whatever its value (the GPU Operator chart's default for its operands)."""


def mig_profile_resource_spelling(profile: str) -> str:
    """How the device plugin spells a MIG profile in a resource name: `1g.10gb+me` -> `1g.10gb.me`."""
    return profile.replace("+", ".")


def mig_resource(profile: str) -> str:
    """The device plugin's resource name for one MIG profile under the mixed strategy."""
    return f"nvidia.com/mig-{mig_profile_resource_spelling(profile)}"


def device_plugin_resource(mig_profile: str | None) -> str:
    """What the device plugin advertises for a whole GPU (None) or one MIG profile."""
    return GPU if mig_profile is None else mig_resource(mig_profile)


DRA_DRIVER = "gpu.nvidia.com"
"""The DRA driver's name: its ResourceSlices' `driver`, its attributes' and capacities' domain."""
GPU_CLASS = "gpu.nvidia.com"
"""The chart's whole-GPU DeviceClass (named after the driver)."""
MIG_CLASS = "mig.nvidia.com"
VFIO_CLASS = "vfio.gpu.nvidia.com"
COMPUTE_DOMAIN_DAEMON_CLASS = "compute-domain-daemon.nvidia.com"
COMPUTE_DOMAIN_CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
CHART_DEVICE_CLASSES = (
    GPU_CLASS,
    MIG_CLASS,
    VFIO_CLASS,
    COMPUTE_DOMAIN_DAEMON_CLASS,
    COMPUTE_DOMAIN_CHANNEL_CLASS,
)
"""The DRA driver chart's own DeviceClasses (charts 0.4.1 and 25.12.0 render the same five), which the GPU
Operator's GPUCluster creates too."""

# Node labels.
GPU_PRESENT = "nvidia.com/gpu.present"
"""Set by the GPU Operator on nodes where NFD found an NVIDIA GPU: its operands select it."""
GPU_PRODUCT = "nvidia.com/gpu.product"
GPU_COUNT = "nvidia.com/gpu.count"
MIG_CAPABLE = "nvidia.com/mig.capable"
MIG_CONFIG = "nvidia.com/mig.config"
"""The MIG Manager's layout for a node (a name of its config file)."""
DRA_KUBELET_PLUGIN = "nvidia.com/dra-kubelet-plugin"
DEPLOY = "nvidia.com/gpu.deploy."
"""The prefix of the GPU Operator's per-operand deploy labels."""
DEPLOY_OPERANDS = DEPLOY + "operands"
DEPLOY_DEVICE_PLUGIN = DEPLOY + "device-plugin"
DEPLOY_MIG_MANAGER = DEPLOY + "mig-manager"
DEPLOY_CLIENT = DEPLOY + "client"
"""Set by GPU Operator v26.7.0+ on every GPU node; GPU clients that select it are restarted on driver
upgrades and MIG changes (NVIDIA/gpu-operator PR #2607, controllers/state_manager.go)."""
DRIVER_OWNER = "nvidia.com/gpu-operator.driver.owner"

GPU_CLUSTER_MIN_KUBERNETES = KubernetesVersion(1, 34, 2)
"""The oldest Kubernetes the GPU Operator's GPUCluster supports (NVIDIA's prerequisite for it)."""


def gpu_cluster_supports(version: KubernetesVersion) -> bool | None:
    """Whether the GPUCluster runs on `version`; None when only its patch release would tell (`1.34`)."""
    least = GPU_CLUSTER_MIN_KUBERNETES
    if version.release != least.release:
        return version.release > least.release
    if version.patch is None:
        return None
    return version.patch >= (least.patch or 0)


def driver_major(version: str) -> int | None:
    """The major release of an NVIDIA driver version (`580.65.06` -> 580); None if it states none."""
    head, dot, _ = version.partition(".")
    return int(head) if dot and head.isdigit() else None
