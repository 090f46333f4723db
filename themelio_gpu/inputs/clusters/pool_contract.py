"""The label and taint contract of a GPU node pool, computed in one place.

Everything that steers GPU work reads these labels: the catalog's default node selectors (and so the
gpuLabel allow-list), the GPU Operator (MIG Manager), the DRA kubelet plugin's node selector, Karpenter
NodePools and the kubelet flags of provisioned nodes. See docs/cluster-definitions.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from themelio_gpu.inputs.catalog.names import Names
from themelio_gpu.inputs.catalog.offerings import DEFAULT_TOLERATIONS
from themelio_gpu.inputs.catalog.products import (
    GpuProduct,
    default_mig_config_names,
    mig_config_for_profile,
    named_mig_layout,
)
from themelio_gpu.inputs.clusters.definition import NodePool
from themelio_gpu.inputs.problems import Bracketed, KeyPath
from themelio_gpu.k8s import names as k8s_names
from themelio_gpu.k8s.nvidia import DEFAULT_TAINT, DEPLOY_DEVICE_PLUGIN, DRA_KUBELET_PLUGIN, GPU, MIG_CONFIG
from themelio_gpu.k8s.scheduling import TAINT_EFFECTS, TaintSpec, untolerated

INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ACCELERATOR = "accelerator"
MIG_ENABLED = "mig_enabled"
MIG_PROFILE = "mig_profile"
# And the pool label, `<labelDomain>/pool` (`Names.pool_label`): the one key of the contract a fork names.
WELL_KNOWN_LABEL_KEYS = (
    INSTANCE_TYPE,
    GPU,
    ACCELERATOR,
    MIG_ENABLED,
    MIG_PROFILE,
    MIG_CONFIG,
    DRA_KUBELET_PLUGIN,
    DEPLOY_DEVICE_PLUGIN,
)


# What every offering tolerates unless the catalog says otherwise: the GPU taint, whatever its value.
_DEFAULT_TOLERATIONS = tuple(t.model_dump(exclude_none=True) for t in DEFAULT_TOLERATIONS)


@dataclass(frozen=True)
class PoolContract:
    name: str
    product: GpuProduct
    labels: Mapping[str, str]
    taints: tuple[TaintSpec, ...]
    mig_devices: Mapping[str, int] | None
    """MIG devices per GPU, or None when MIG is off (the pool publishes whole GPUs)."""
    gpus_per_node: int
    dra: bool
    pool_label: str
    """The label naming the pool on its nodes (`<labelDomain>/pool`): preflight finds the pool's nodes by it."""

    @property
    def owned_label_keys(self) -> tuple[str, ...]:
        """Every label key of the contract: this tool sets them, a pool's own `labels` cannot."""
        return (*WELL_KNOWN_LABEL_KEYS, self.pool_label)

    @property
    def kubelet_node_labels(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.labels.items())

    @property
    def kubelet_register_with_taints(self) -> str:
        return ",".join(str(t) for t in self.taints)

    @property
    def kubelet_args(self) -> tuple[str, ...]:
        """The kubelet flags that give a provisioned node the contract (no taint flag for an untainted pool)."""
        args = [f"--node-labels={self.kubelet_node_labels}"]
        if self.taints:
            args.append(f"--register-with-taints={self.kubelet_register_with_taints}")
        return tuple(args)

    @property
    def reservations(self) -> tuple[TaintSpec, ...]:
        """Its taints beyond the GPU taint: they keep every workload off the pool unless it tolerates them, so the
        pool is reserved (a catalog offering tolerates only `nvidia.com/gpu` with NoSchedule by default)."""
        return untolerated(_DEFAULT_TOLERATIONS, self.taints)

    def provides_whole(self) -> bool:
        return self.mig_devices is None

    def provides_mig(self, profile: str) -> bool:
        return self.mig_devices is not None and self.mig_devices.get(profile, 0) > 0

    def devices_per_node(self) -> Mapping[str, int]:
        """Allocatable units per node: `gpu` for whole GPUs, or one entry per MIG profile."""
        if self.mig_devices is None:
            return MappingProxyType({"gpu": self.gpus_per_node})
        return MappingProxyType({p: n * self.gpus_per_node for p, n in sorted(self.mig_devices.items())})


def pool_contract(
    pool: NodePool,
    product: GpuProduct,
    device_plugin_in_cluster: bool,
    problems: list[tuple[KeyPath, str]],
    names: Names,
    *,
    mig_manager: bool = True,
) -> PoolContract:
    """The pool's contract; problems are appended as (field, message).

    `mig_manager` is False where the cluster can run no MIG Manager (the GPU Operator's GPUCluster): then no
    pool gets the MIG Manager's config label, which nothing would read.
    """
    mig_devices: Mapping[str, int] | None = None
    mig_config: str | None = None
    mig_profile_label: str | None = None
    if pool.mig is not None:
        if not product.supports_mig:
            problems.append((("mig",), f"{product.display_name} has no MIG support; remove mig for this pool"))
        elif pool.mig.profile is not None:
            if pool.mig.profile not in product.mig_profiles:
                problems.append(
                    (
                        ("mig", "profile"),
                        f"{product.display_name} has no MIG profile {pool.mig.profile!r}; "
                        f"valid: {', '.join(product.mig_profiles)}",
                    )
                )
            else:
                mig_devices = MappingProxyType({pool.mig.profile: product.mig_profiles[pool.mig.profile]})
                mig_config = mig_config_for_profile(pool.mig.profile)
                mig_profile_label = pool.mig.profile.replace("+", ".")
        elif pool.mig.config is not None:
            mig_config = mig_profile_label = pool.mig.config
            if pool.mig.provides is not None:
                unknown = sorted(set(pool.mig.provides) - set(product.mig_profiles))
                if unknown:
                    problems.append(
                        (("mig", "provides"), f"{product.display_name} has no MIG profile {', '.join(unknown)}")
                    )
                mig_devices = MappingProxyType(dict(sorted(pool.mig.provides.items())))
            else:
                mig_devices = named_mig_layout(product, pool.mig.config)
                if mig_devices is None:
                    valid = [
                        n for n in default_mig_config_names(product) if n not in ("all-disabled", "all-enabled")
                    ]
                    problems.append(
                        (
                            ("mig", "config"),
                            f"{pool.mig.config!r} is not a default MIG Manager config for {product.display_name}"
                            f" (valid: {', '.join(valid)}); for a custom config also say what it provides",
                        )
                    )
                elif not mig_devices:
                    problems.append(
                        (("mig", "config"), "all-enabled creates no MIG devices: the pool would serve nothing")
                    )

    labels: dict[str, str] = {
        GPU: "true",
        ACCELERATOR: product.accelerator,
        MIG_ENABLED: "true" if pool.mig is not None else "false",
        names.pool_label: pool.name,
    }
    if pool.instance_type is not None:
        if pool.provisioning.karpenter is not None:
            problems.append(
                (
                    ("instanceType",),
                    f"pool {pool.name}: Karpenter writes {INSTANCE_TYPE} on every node it launches, from the "
                    "instance type it chose among provisioning.karpenter.instanceTypes; a value of our own would "
                    "be one more requirement (Karpenter layers template labels onto them) that no instance type "
                    "meets: remove instanceType",
                )
            )
        else:
            # A well-known label the kubelet and cloud controllers set on cloud nodes: only where the pool says so.
            labels[INSTANCE_TYPE] = pool.instance_type
    if mig_profile_label is not None:
        labels[MIG_PROFILE] = mig_profile_label
    if product.supports_mig and mig_manager:
        # Explicit all-disabled keeps MIG Manager from acting on a leftover config label.
        labels[MIG_CONFIG] = mig_config or "all-disabled"
    if pool.dra:
        labels[DRA_KUBELET_PLUGIN] = "true"
        if device_plugin_in_cluster:
            # The same resource name must never come from a device plugin and DRA on one node.
            labels[DEPLOY_DEVICE_PLUGIN] = "false"
    for key, value in pool.labels.items():
        if key in labels or key in WELL_KNOWN_LABEL_KEYS:
            problems.append(
                (("labels", Bracketed(key)), f"{key} is part of the label contract this tool sets; remove it")
            )
            continue
        for message in k8s_names.qualified_name(key):
            problems.append((("labels", Bracketed(key)), message))
        labels[key] = value
    for key, value in labels.items():
        for message in k8s_names.label_value(value):
            field: KeyPath = {INSTANCE_TYPE: ("instanceType",), names.pool_label: ("name",)}.get(
                key, ("labels", Bracketed(key))
            )
            problems.append((field, f"{key}: {message}"))

    taints: list[TaintSpec] = []
    given = pool.taints if pool.taints is not None else ()
    first_with_key: dict[str, int] = {}
    for index, taint in enumerate(given):
        for message in k8s_names.qualified_name(taint.key) + k8s_names.label_value(taint.value):
            problems.append((("taints", index), message))
        if taint.effect not in TAINT_EFFECTS:
            problems.append(
                (
                    ("taints", index, "effect"),
                    f"{taint.effect!r} is not a taint effect; use one of {', '.join(TAINT_EFFECTS)}",
                )
            )
        spec = TaintSpec(taint.key, taint.value, taint.effect)
        if taint.key in first_with_key:
            # Stricter than Kubernetes (unique key and effect): the provider checks keys alone, and the
            # same contract goes to static nodes, Karpenter and kubelet flags alike.
            earlier = first_with_key[taint.key]
            problems.append(
                (
                    ("taints", index),
                    f"pool {pool.name}: taint {spec} has the key of taints[{earlier}] {taints[earlier]}; a node's "
                    "taint keys must be unique (the kubernetes provider's kubernetes_node_taint refuses them at "
                    "plan time): keep one taint per key",
                )
            )
        first_with_key.setdefault(taint.key, index)
        taints.append(spec)
    if pool.taints is None:
        taints.append(TaintSpec(*DEFAULT_TAINT))

    return PoolContract(
        name=pool.name,
        product=product,
        labels=MappingProxyType(dict(sorted(labels.items()))),
        taints=tuple(taints),
        mig_devices=mig_devices,
        gpus_per_node=pool.gpus_per_node,
        dra=pool.dra,
        pool_label=names.pool_label,
    )
