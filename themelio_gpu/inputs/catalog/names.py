"""A fork's own names: what the stacks call things in every cluster, from the catalog's `names:` setting.

Each default is this project's own name, so a catalog without the setting gives the same output as before it
existed. docs/names.md says where each name appears and what changing one does to a deployed fleet.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from themelio_gpu.inputs.problems import Problems
from themelio_gpu.k8s import names as k8s_names

DEFAULT_LABEL_DOMAIN = "gpu.themelio.io"
DEFAULT_FIELD_MANAGER = "themelio-gpu-stacks"
DEFAULT_NAMESPACE = "themelio-system"
DEFAULT_NAME_PREFIX = "themelio-gpu"
GENERIC_CLASS_NAME = "any-gpu"
"""The first label of the class the tool names itself: `any-gpu.<deviceClassSuffix>`."""

# Kubernetes reserves label and annotation prefixes in these domains (and their subdomains) for its own
# components; the kubelet refuses `--node-labels` there (except node.kubernetes.io and kubelet.kubernetes.io,
# still Kubernetes' own), and provisioned and Karpenter pools label their nodes with kubelet flags.
KUBERNETES_DOMAINS = ("kubernetes.io", "k8s.io")
# Karpenter's NodePool CRD refuses template labels whose domain ends in karpenter.sh.
KARPENTER_DOMAIN = "karpenter.sh"
# The NVIDIA DRA driver's classes are named in nvidia.com (gpu.nvidia.com, mig.nvidia.com, ...).
NVIDIA_DOMAIN = "nvidia.com"
# Namespaces every cluster has: the stack creates the catalog ConfigMap's namespace, which fails when it exists.
BUILT_IN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_POOL_LABEL_NAME = "pool"
# A DeviceClass name: a DNS subdomain of at most 63 characters (k8s_names.device_class_name).
_DEVICE_CLASS_MAX_LENGTH = 63


class Names(BaseModel):
    """The names the stacks give what they create. Every key is optional; its default is this project's."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    label_domain: str = Field(
        default=DEFAULT_LABEL_DOMAIN,
        alias="labelDomain",
        description="A DNS subdomain your organization owns: the node label <labelDomain>/pool and the "
        "DeviceClass annotation <labelDomain>/offering",
    )
    device_class_suffix: str | None = Field(
        default=None,
        alias="deviceClassSuffix",
        description="The class the tool names itself: any-gpu.<deviceClassSuffix> (where the GPU Operator "
        "manages the DRA driver). Default: labelDomain. Your offerings' deviceClass names are your own",
    )
    field_manager: str = Field(
        default=DEFAULT_FIELD_MANAGER,
        alias="fieldManager",
        description="The server-side apply field manager of node labels, taints and manifests, and the "
        "value of app.kubernetes.io/managed-by",
    )
    namespace: str = Field(
        default=DEFAULT_NAMESPACE, description="The default namespace of a cluster's catalogConfigMap"
    )
    name_prefix: str = Field(
        default=DEFAULT_NAME_PREFIX,
        alias="namePrefix",
        description="Object names: the ConfigMap <namePrefix>-catalog (catalogConfigMap's default name) and "
        "the ResourceQuota <namePrefix>-closed",
    )

    @property
    def class_suffix(self) -> str:
        return self.label_domain if self.device_class_suffix is None else self.device_class_suffix

    @property
    def pool_label(self) -> str:
        """The node label naming a node's pool (preflight and Kueue's reserved flavors select by it)."""
        return f"{self.label_domain}/{_POOL_LABEL_NAME}"

    @property
    def offering_annotation(self) -> str:
        """The annotation on each DeviceClass naming the offering it serves."""
        return f"{self.label_domain}/offering"

    @property
    def generic_gpu_class(self) -> str:
        """The class standing in for the chart's gpu.nvidia.com where the GPU Operator's maps no name."""
        return f"{GENERIC_CLASS_NAME}.{self.class_suffix}"

    @property
    def taint_field_manager(self) -> str:
        """The field manager of node taints, apart from the labels' one: under server-side apply, a manager's
        apply removes every field it applied before and leaves out, so one manager for a node's labels and
        its taints makes each apply erase the other's (hashicorp/terraform-provider-kubernetes#2247; seen on
        the sandbox's real API server, docs/sandbox.md)."""
        return f"{self.field_manager}-taints"

    @property
    def managed_by(self) -> dict[str, str]:
        """The `app.kubernetes.io/managed-by` label of everything the stacks create."""
        return {"app.kubernetes.io/managed-by": self.field_manager}

    @property
    def config_map_name(self) -> str:
        return f"{self.name_prefix}-catalog"

    @property
    def closed_quota_name(self) -> str:
        return f"{self.name_prefix}-closed"


DEFAULT_NAMES = Names()


def _in_domain(domain: str, owner: str) -> bool:
    return domain == owner or domain.endswith(f".{owner}")


def _check_class_suffix(names: Names, file: str, problems: Problems) -> None:
    suffix = names.class_suffix
    where = ("names", "deviceClassSuffix" if names.device_class_suffix is not None else "labelDomain")
    limit = _DEVICE_CLASS_MAX_LENGTH - len(GENERIC_CLASS_NAME) - 1
    found = k8s_names.dns1123_subdomain(suffix, max_length=limit)
    for message in found:
        problems.add(
            file,
            where,
            f"ends the DeviceClass name {names.generic_gpu_class}, a DNS subdomain of at most "
            f"{_DEVICE_CLASS_MAX_LENGTH} characters: {message}",
        )
    if not found and _in_domain(suffix, NVIDIA_DOMAIN):
        problems.add(
            file,
            where,
            f"{suffix}: the NVIDIA DRA driver names its own classes in {NVIDIA_DOMAIN} (gpu.nvidia.com, "
            "mig.nvidia.com, ...), and a class of this tool there could collide with one a chart adds. Choose "
            "a domain your organization owns, e.g. gpu.example.com",
        )


def check_names(names: Names, file: str, problems: Problems) -> None:
    """Each name as Kubernetes checks what it becomes part of, and the domains that belong to others."""
    where = ("names",)
    domain = names.label_domain
    # The label domain is the prefix of a label key: a DNS subdomain of at most 253 characters.
    before = len(problems)
    for message in k8s_names.dns1123_subdomain(domain):
        problems.add(file, (*where, "labelDomain"), f"is the prefix of the label {names.pool_label}: {message}")
    owner = next((d for d in KUBERNETES_DOMAINS if _in_domain(domain, d)), None)
    if len(problems) == before and owner is not None:
        problems.add(
            file,
            (*where, "labelDomain"),
            f"{domain}: Kubernetes reserves {owner} and its subdomains for its own components' labels and "
            "annotations (and the kubelet refuses --node-labels there, which provisioned and Karpenter pools "
            "use). Choose a domain your organization owns, e.g. gpu.example.com",
        )
    elif len(problems) == before and domain.endswith(KARPENTER_DOMAIN):
        problems.add(
            file,
            (*where, "labelDomain"),
            f"{domain} ends in {KARPENTER_DOMAIN}: Karpenter's NodePool refuses template labels there, and "
            "Karpenter pools carry the pool label. Choose a domain your organization owns, e.g. gpu.example.com",
        )
    # A class suffix taken from a label domain reported above would only repeat its problem.
    if names.device_class_suffix is not None or len(problems) == before:
        _check_class_suffix(names, file, problems)

    # The field manager is also the managed-by label's value, which is stricter than the API server's rule
    # for field managers (at most 128 printable characters, apimachinery ValidateFieldManager).
    manager = names.field_manager
    if not manager:
        problems.add(
            file, (*where, "fieldManager"), "must not be empty: server-side apply requires a field manager"
        )
    for message in k8s_names.label_value(manager):
        problems.add(
            file,
            (*where, "fieldManager"),
            f"is also the value of the label app.kubernetes.io/managed-by: {message}",
        )

    namespace = names.namespace
    for message in k8s_names.dns1123_label(namespace):
        problems.add(file, (*where, "namespace"), f"a namespace name is a DNS-1123 label: {message}")
    if namespace in BUILT_IN_NAMESPACES:
        problems.add(
            file,
            (*where, "namespace"),
            f"{namespace} exists in every cluster, and the stack creates the catalog ConfigMap's namespace "
            "(kubernetes_namespace_v1 fails when it exists): choose one of its own, e.g. gpu-system",
        )

    # Both object names are DNS subdomains; the longer one (`-catalog`) fails whenever the other does.
    for message in k8s_names.dns1123_subdomain(names.config_map_name):
        problems.add(
            file,
            (*where, "namePrefix"),
            f"makes the object names {names.config_map_name} and {names.closed_quota_name}: {message}",
        )
