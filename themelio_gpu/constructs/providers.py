"""The one module that imports the prebuilt provider bindings.

cdktf 0.21 and these bindings were archived upstream in December 2025: keeping every import here makes a
move to locally generated bindings (`cdktf provider add hashicorp/kubernetes --force-local`) or to the CDK
Terrain fork a change in one file. The versions are the providers the pinned bindings were built from.
"""

from __future__ import annotations

from cdktf_cdktf_provider_helm.provider import (
    HelmProvider,
    HelmProviderKubernetes,
    HelmProviderKubernetesExec,
)
from cdktf_cdktf_provider_helm.release import Release
from cdktf_cdktf_provider_kubernetes.config_map_v1 import ConfigMapV1, ConfigMapV1Metadata
from cdktf_cdktf_provider_kubernetes.labels import Labels, LabelsMetadata
from cdktf_cdktf_provider_kubernetes.manifest import Manifest, ManifestFieldManager
from cdktf_cdktf_provider_kubernetes.namespace_v1 import NamespaceV1, NamespaceV1Metadata
from cdktf_cdktf_provider_kubernetes.node_taint import NodeTaint, NodeTaintMetadata, NodeTaintTaint
from cdktf_cdktf_provider_kubernetes.provider import KubernetesProvider, KubernetesProviderExec

# Fully qualified sources: the bindings emit bare `kubernetes`/`helm`, which OpenTofu resolves against its
# own registry namespace rather than HashiCorp's.
KUBERNETES_PROVIDER = ("kubernetes", "hashicorp/kubernetes", "2.38.0")
HELM_PROVIDER = ("helm", "hashicorp/helm", "3.1.1")

__all__ = [
    "HELM_PROVIDER",
    "KUBERNETES_PROVIDER",
    "ConfigMapV1",
    "ConfigMapV1Metadata",
    "HelmProvider",
    "HelmProviderKubernetes",
    "HelmProviderKubernetesExec",
    "KubernetesProvider",
    "KubernetesProviderExec",
    "Labels",
    "LabelsMetadata",
    "Manifest",
    "ManifestFieldManager",
    "NamespaceV1",
    "NamespaceV1Metadata",
    "NodeTaint",
    "NodeTaintMetadata",
    "NodeTaintTaint",
    "Release",
]
