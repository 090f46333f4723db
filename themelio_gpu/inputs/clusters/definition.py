"""The shape of one cluster definition file (pydantic). Cross-file rules live in `fleet.py`."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import BeforeValidator, Field, field_validator, model_validator

from themelio_gpu.inputs.catalog.model import Strict
from themelio_gpu.inputs.clusters.releases import DraDriverRelease, DraManagedBy, GpuOperatorRelease
from themelio_gpu.inputs.secrets import LITERAL_CREDENTIAL_KEYS
from themelio_gpu.k8s.dra import EXTENDED_RESOURCE_GATE
from themelio_gpu.k8s.version import KubernetesVersion, parse_kubernetes_version


def _refuse_literal_credentials(data: Any) -> Any:
    """A kubeconfig user's credential keys (token, clientKey, ...) are refused with the way to do without."""
    if isinstance(data, dict):
        found = [key for key in LITERAL_CREDENTIAL_KEYS if key in data]
        if found:
            raise ValueError(
                f"{', '.join(found)}: tokens and other literal credentials are not accepted in a cluster definition "
                "(they would be written to cdktf.out and the Terraform state). Use access.kubeconfig (path and "
                "context), or access.api with an exec credential plugin that prints a token at run time, e.g. "
                "api: {host: https://..., clusterCaCertificate: ..., exec: {command: aws, args: [eks, get-token, "
                "--cluster-name, NAME]}}"
            )
    return data


class Component(StrEnum):
    kube_apiserver = "kube-apiserver"
    kube_scheduler = "kube-scheduler"
    kube_controller_manager = "kube-controller-manager"
    kubelet = "kubelet"


class FeatureGate(Strict):
    enabled: bool = True
    components: tuple[Component, ...] = Field(
        default=(), description="Where the gate is set; alpha gates must be on all four components"
    )


class FeatureGates(Strict):
    dra_extended_resource: FeatureGate | None = Field(default=None, alias=EXTENDED_RESOURCE_GATE)


class Kubeconfig(Strict):
    path: str = Field(description="Kubeconfig path on the machine running Terraform, e.g. ~/.kube/config")
    context: str

    WHY_REQUIRED: ClassVar[dict[str, str]] = {
        "context": "name this cluster's context in the kubeconfig (`kubectl config get-contexts` lists them). "
        "Without one, Terraform would use whichever context is current when it runs, which `kubectl config "
        "use-context` changes: this cluster's stack could then be applied to another cluster",
    }
    """Why a key must be given, where that is not plain: the message for a missing key says it."""

    _no_literal_credentials = model_validator(mode="before")(_refuse_literal_credentials)


class ExecPlugin(Strict):
    # What client-go (in both providers) runs: v1alpha1 was removed in Kubernetes 1.24's client libraries.
    api_version: Literal["client.authentication.k8s.io/v1beta1", "client.authentication.k8s.io/v1"] = Field(
        default="client.authentication.k8s.io/v1beta1", alias="apiVersion"
    )
    command: str
    args: tuple[str, ...] = ()
    # Credentials in args and env (by name or by value) are refused by inputs/secrets.py, like everywhere else.
    env: dict[str, str] = Field(default_factory=dict, description="Non-secret settings only, e.g. AWS_PROFILE")


class ApiAccess(Strict):
    host: str = Field(description="API server URL, e.g. https://api.gpu-east.example.com")
    cluster_ca_certificate: str = Field(alias="clusterCaCertificate", description="PEM (public, not a secret)")
    exec: ExecPlugin

    _no_literal_credentials = model_validator(mode="before")(_refuse_literal_credentials)

    @field_validator("cluster_ca_certificate")
    @classmethod
    def _pem(cls, value: str) -> str:
        if not value.strip().startswith("-----BEGIN CERTIFICATE-----"):
            raise ValueError("must be a PEM certificate starting with -----BEGIN CERTIFICATE-----")
        return value

    @field_validator("host")
    @classmethod
    def _https(cls, value: str) -> str:
        if not value.startswith("https://"):
            raise ValueError("must be an https:// URL")
        return value


class Access(Strict):
    """How Terraform reaches the cluster: a kubeconfig context, or an exec credential plugin."""

    kubeconfig: Kubeconfig | None = None
    api: ApiAccess | None = None

    _no_literal_credentials = model_validator(mode="before")(_refuse_literal_credentials)

    @model_validator(mode="after")
    def _exactly_one(self) -> Access:
        if (self.kubeconfig is None) == (self.api is None):
            raise ValueError("set exactly one of kubeconfig (path and context) or api (host, CA and exec plugin)")
        return self


# --- State backends -------------------------------------------------------------------------------------


class LocalBackend(Strict):
    type: Literal["local"]
    path: str | None = Field(
        default=None,
        description="Relative to the stack's directory cdktf.out/stacks/<cluster>; "
        "default ../../../terraform.<cluster>.tfstate (the project root, where cdktf keeps it)",
    )

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith(("/", "~")) or re.match(r"^[A-Za-z]:[\\/]", value)):
            raise ValueError(
                "must be relative to the stack directory; an absolute path breaks reproducible output"
            )
        return value


class S3Backend(Strict):
    type: Literal["s3"]
    bucket: str
    key: str | None = Field(default=None, description="Default themelio-gpu/<cluster>.tfstate")
    region: str
    encrypt: bool = True
    use_lockfile: bool = Field(
        default=True, alias="useLockfile", description="S3-native locking (Terraform 1.10+)"
    )
    dynamodb_table: str | None = Field(default=None, alias="dynamodbTable", description="Legacy DynamoDB locking")
    profile: str | None = None
    kms_key_id: str | None = Field(default=None, alias="kmsKeyId")


class GcsBackend(Strict):
    type: Literal["gcs"]
    bucket: str
    prefix: str | None = Field(default=None, description="Default themelio-gpu/<cluster>; locking is built in")


class AzurermBackend(Strict):
    type: Literal["azurerm"]
    resource_group_name: str = Field(alias="resourceGroupName")
    storage_account_name: str = Field(alias="storageAccountName")
    container_name: str = Field(alias="containerName")
    key: str | None = Field(default=None, description="Default themelio-gpu/<cluster>.tfstate; blob lease locks")
    use_azuread_auth: bool = Field(default=True, alias="useAzureadAuth")


class KubernetesBackend(Strict):
    type: Literal["kubernetes"]
    secret_suffix: str | None = Field(default=None, alias="secretSuffix", description="Default: the cluster name")
    namespace: str = "default"
    config_path: str | None = Field(default=None, alias="configPath")
    config_context: str | None = Field(default=None, alias="configContext")
    in_cluster_config: bool = Field(default=False, alias="inClusterConfig")


class HttpBackend(Strict):
    type: Literal["http"]
    address: str
    lock_address: str | None = Field(default=None, alias="lockAddress", description="Default: address")
    unlock_address: str | None = Field(default=None, alias="unlockAddress", description="Default: address")
    lock_method: str = Field(default="LOCK", alias="lockMethod")
    unlock_method: str = Field(default="UNLOCK", alias="unlockMethod")

    @field_validator("address", "lock_address", "unlock_address")
    @classmethod
    def _no_userinfo(cls, value: str | None) -> str | None:
        # A password in the URL is refused as a credential (inputs/secrets.py); a user name alone, here.
        if value is not None and re.match(r"^[a-z]+://[^/:]*@", value):
            raise ValueError("must not embed credentials; set TF_HTTP_USERNAME and TF_HTTP_PASSWORD instead")
        return value


class CloudBackend(Strict):
    """HCP Terraform / Terraform Enterprise (`cloud` block); the token comes from `terraform login`."""

    type: Literal["cloud"]
    organization: str
    workspace: str | None = Field(default=None, description="Default themelio-gpu-<cluster>")
    hostname: str = "app.terraform.io"


class RemoteBackend(Strict):
    """The `remote` backend, for Terraform Enterprise versions and tools without the `cloud` block."""

    type: Literal["remote"]
    organization: str
    workspace: str | None = Field(default=None, description="Default themelio-gpu-<cluster>")
    hostname: str = "app.terraform.io"


Backend = Annotated[
    LocalBackend
    | S3Backend
    | GcsBackend
    | AzurermBackend
    | KubernetesBackend
    | HttpBackend
    | CloudBackend
    | RemoteBackend,
    Field(discriminator="type"),
]
SHARED_BACKENDS = tuple(
    get_args(member.model_fields["type"].annotation)[0]
    for member in get_args(get_args(Backend)[0])
    if member is not LocalBackend
)
"""The backends whose state outlives the machine that ran Terraform: what a pipeline needs."""


# --- GPU node pools ----------------------------------------------------------------------------------------


class Taint(Strict):
    key: str
    value: str = ""
    effect: str = Field(description="NoSchedule, PreferNoSchedule or NoExecute")


_KUBECTL_TAINT = re.compile(r"(?P<key>[^=:\s]+)(?:=(?P<value>[^:\s]*))?:(?P<effect>[^:\s]+)")


def _taint_from_kubectl_form(data: Any) -> Any:
    """A taint written as kubectl writes it, `key=value:Effect` or `key:Effect`, is the mapping it stands for."""
    if not isinstance(data, str):
        return data
    match = _KUBECTL_TAINT.fullmatch(data.strip())
    if match is None:
        raise ValueError(
            f"{data!r} is not a taint: write key=value:Effect as kubectl does (e.g. nvidia.com/gpu=present:NoSchedule), "
            "key:Effect, or a mapping {key: ..., value: ..., effect: ...}"
        )
    return {"key": match["key"], "value": match["value"] or "", "effect": match["effect"]}


TaintEntry = Annotated[Taint, BeforeValidator(_taint_from_kubectl_form, json_schema_input_type=Taint | str)]


class MigCreatedBy(StrEnum):
    mig_manager = "mig-manager"
    """The GPU Operator's MIG Manager creates the layout from the pool's nvidia.com/mig.config label."""
    external = "external"
    """Something outside this stack creates the MIG devices (mig-parted at boot, the provider's image)."""


class MigLayout(Strict):
    """MIG mode of a pool: one profile on every GPU, or a named MIG Manager config."""

    profile: str | None = Field(default=None, description="Fill every GPU with this profile, e.g. 1g.5gb")
    config: str | None = Field(default=None, description="A MIG Manager config name, e.g. all-balanced")
    provides: dict[str, int] | None = Field(
        default=None, description="Only for a custom config: the MIG devices it creates on each GPU"
    )
    created_by: MigCreatedBy = Field(
        default=MigCreatedBy.mig_manager,
        alias="createdBy",
        description="mig-manager (default), or external: the nodes' MIG devices already exist, created "
        "outside this stack (required with draDriver.managedBy: gpu-operator, which has no MIG Manager)",
    )

    @model_validator(mode="after")
    def _one(self) -> MigLayout:
        if (self.profile is None) == (self.config is None):
            raise ValueError("set exactly one of profile or config")
        if self.provides is not None and self.config is None:
            raise ValueError("provides describes a custom config; it cannot go with profile")
        return self


class StaticNodes(Strict):
    nodes: tuple[str, ...] = Field(min_length=1, description="Names of the existing nodes in this pool")


class ProvisionedNodes(Strict):
    """Nodes created elsewhere (cloud node group, Ansible, cloud-init): the stack outputs the contract."""


class KarpenterNodeClassRef(Strict):
    group: str = "karpenter.k8s.aws"
    kind: str = "EC2NodeClass"
    name: str


class KarpenterNodes(Strict):
    node_class_ref: KarpenterNodeClassRef = Field(alias="nodeClassRef")
    instance_types: tuple[str, ...] = Field(alias="instanceTypes", min_length=1)
    capacity_types: tuple[Literal["on-demand", "spot", "reserved"], ...] = Field(
        default=("on-demand",), alias="capacityTypes"
    )
    max_gpus: int | None = Field(
        default=None, alias="maxGpus", gt=0, description="NodePool limit on nvidia.com/gpu"
    )


class Provisioning(Strict):
    static: StaticNodes | None = None
    provisioned: ProvisionedNodes | None = None
    karpenter: KarpenterNodes | None = None

    @model_validator(mode="after")
    def _one(self) -> Provisioning:
        if sum(x is not None for x in (self.static, self.provisioned, self.karpenter)) != 1:
            raise ValueError("set exactly one of static (known node names), provisioned or karpenter")
        return self


class NodePool(Strict):
    name: str
    product: str = Field(description="Key of the GPU product table, e.g. a100-40gb")
    instance_type: str | None = Field(
        default=None,
        alias="instanceType",
        description="node.kubernetes.io/instance-type, e.g. gpu (ADR-0023). Omit where the cloud's kubelet and "
        "controllers set it; refused on Karpenter pools (Karpenter sets it from provisioning.karpenter.instanceTypes)",
    )
    gpus_per_node: int = Field(alias="gpusPerNode", gt=0, le=16)
    mig: MigLayout | None = Field(default=None, description="Omit for whole GPUs (MIG disabled)")
    dra: bool = Field(default=True, description="Allocate through the NVIDIA DRA driver (else the device plugin)")
    taints: tuple[TaintEntry, ...] | None = Field(
        default=None,
        description="Default: nvidia.com/gpu=present:NoSchedule. Each a mapping (key, value, effect) or kubectl's "
        "key=value:Effect",
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Extra labels of this pool")
    provisioning: Provisioning
    renamed_from: str | None = Field(
        default=None,
        alias="renamedFrom",
        description="The pool's previous name: the stack emits Terraform moved blocks, so the rename updates "
        "the nodes' labels and taints in place instead of removing and applying them again",
    )


class KueueQueue(Strict):
    """A Kueue ClusterQueue that admits work to reserved pools, for the namespaces named here only."""

    name: str = Field(description="The ClusterQueue's name, and the LocalQueue's in each namespace (not gpus)")
    pools: tuple[str, ...] = Field(
        min_length=1, description="Reserved pools (a taint beyond nvidia.com/gpu) it admits to, in the order tried"
    )
    namespaces: tuple[str, ...] = Field(min_length=1, description="The namespaces that may submit to it")


class KueueSettings(Strict):
    queues: tuple[KueueQueue, ...] = Field(
        default=(),
        description="Queues granting reserved pools to named namespaces; every other GPU pool is in the queue gpus",
    )


class CatalogConfigMap(Strict):
    namespace: str | None = Field(
        default=None,
        description="Created by the stack: a namespace of its own. Default: the catalog's names.namespace "
        "(themelio-system)",
    )
    name: str | None = Field(
        default=None, description="Default: <namePrefix>-catalog, from the catalog's names (themelio-gpu-catalog)"
    )


class ClusterDefinition(Strict):
    schema_ref: str | None = Field(default=None, alias="$schema")
    name: str = Field(description="Cluster and stack name: what `cdktf deploy <name>` takes")
    kubernetes_version: str = Field(
        alias="kubernetesVersion", description="Control plane version, e.g. 1.34 or 1.34.2 (kubectl's v1.34.2 too)"
    )
    feature_gates: FeatureGates = Field(default=FeatureGates(), alias="featureGates")
    access: Access
    backend: Backend
    offerings: tuple[str, ...] = Field(min_length=1, description="Catalog names this cluster serves")
    serve_migration_aliases: bool = Field(
        default=True, alias="serveMigrationAliases", description="Set false once the cluster's migration is done"
    )
    host_driver: bool = Field(
        default=False, alias="hostDriver", description="Nodes have a preinstalled NVIDIA driver and toolkit"
    )
    karpenter: bool = Field(default=False, description="Karpenter (karpenter.sh/v1) is installed")
    node_pools: tuple[NodePool, ...] = Field(alias="nodePools", min_length=1)
    gpu_operator: GpuOperatorRelease = Field(default=GpuOperatorRelease(), alias="gpuOperator")
    dra_driver: DraDriverRelease = Field(default=DraDriverRelease(), alias="draDriver")
    kueue: KueueSettings = Field(
        default=KueueSettings(), description="Kueue queues for reserved pools (catalog export's kueue.yaml)"
    )
    catalog_config_map: CatalogConfigMap | None = Field(
        default=None, alias="catalogConfigMap", description="Also publish the catalog outputs as a ConfigMap"
    )

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not re.fullmatch(r"v?1\.\d{1,2}(\.\d+)?", value):
            raise ValueError(f"{value!r} is not a Kubernetes version like 1.34 or 1.34.2 (or kubectl's v1.34.2)")
        return value.removeprefix("v")

    @property
    def minor_version(self) -> int:
        return self.version.minor

    @property
    def patch_version(self) -> int | None:
        """The patch release when the definition states one (`1.34.2`), else None (`1.34`)."""
        return self.version.patch

    @property
    def version(self) -> KubernetesVersion:
        parsed = parse_kubernetes_version(self.kubernetes_version)
        assert parsed is not None  # the validator accepted it
        return parsed

    @property
    def dra_by_gpu_operator(self) -> bool:
        """The GPU Operator's GPUCluster manages the DRA driver (no ClusterPolicy, no DRA driver release)."""
        return self.dra_driver.managed_by is DraManagedBy.gpu_operator
