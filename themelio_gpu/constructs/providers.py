# mypy: implicit-reexport
# ruff: noqa: E402, F401
"""The one module that imports the engine (cdktf), the `constructs` library and the provider bindings.

cdktf 0.21 and these bindings were archived upstream in December 2025: keeping every import here makes a
move to locally generated bindings (`cdktf provider add hashicorp/kubernetes --force-local`) or to the CDK
Terrain fork a change in one file. Every other module takes cdktf's classes from here, so the jsii kernel
starts here, with its own environment (bindings_loader.kernel_environment). The versions are the providers
the pinned bindings were built from.

The bindings packages' `__init__` (which imports every submodule) is not run: bindings_loader.py registers
their jsii assemblies first. To use another binding class, add it to the imports below: one line (its
module then gets the memoized type hints at the end too).
"""

from __future__ import annotations

import sys

from themelio_gpu.bindings_loader import (
    HELM,
    KUBERNETES,
    kernel_environment,
    memoize_type_hints,
    register_assembly,
)
from themelio_gpu.kernel_channel import use_direct_channel
from themelio_gpu.speedups import Speedup, enabled

# The first assembly load (constructs') starts jsii's node kernel: here, without jsii's relay in between
# (kernel_channel.py) and with the preload in its environment.
use_direct_channel()
with kernel_environment():
    import cdktf
    from cdktf import (
        App,
        AzurermBackend,
        CloudBackend,
        GcsBackend,
        HttpBackend,
        LocalBackend,
        NamedCloudWorkspace,
        NamedRemoteWorkspace,
        RemoteBackend,
        S3Backend,
        TerraformBackend,
        TerraformIterator,
        TerraformRemoteState,
        TerraformStack,
        Token,
        Tokenization,
    )

    import constructs
    from constructs import Construct

# Fully qualified sources: the bindings emit bare `kubernetes`/`helm`, which OpenTofu resolves against its
# own registry namespace rather than HashiCorp's.
KUBERNETES_PROVIDER = ("kubernetes", "hashicorp/kubernetes", "2.38.0")
HELM_PROVIDER = ("helm", "hashicorp/helm", "3.1.1")

if enabled(Speedup.LAZY_BINDINGS):
    register_assembly(KUBERNETES)
    register_assembly(HELM)

# The binding classes, imported after their assemblies are registered. Every name imported in this module
# is its export (the `mypy: implicit-reexport` line at the top).
from cdktf_cdktf_provider_helm.provider import HelmProvider, HelmProviderKubernetes, HelmProviderKubernetesExec
from cdktf_cdktf_provider_helm.release import Release
from cdktf_cdktf_provider_kubernetes.config_map_v1 import ConfigMapV1, ConfigMapV1Metadata
from cdktf_cdktf_provider_kubernetes.labels import Labels, LabelsMetadata
from cdktf_cdktf_provider_kubernetes.manifest import Manifest, ManifestFieldManager
from cdktf_cdktf_provider_kubernetes.namespace_v1 import NamespaceV1, NamespaceV1Metadata
from cdktf_cdktf_provider_kubernetes.node_taint import NodeTaint, NodeTaintMetadata, NodeTaintTaint
from cdktf_cdktf_provider_kubernetes.provider import KubernetesProvider, KubernetesProviderExec

# The bindings' argument checks resolve their type hints once per signature (bindings_loader.py): in cdktf,
# constructs and every binding submodule imported above.
_BINDING_MODULES = sorted(
    {
        value.__module__
        for value in list(globals().values())
        if isinstance(value, type) and value.__module__.partition(".")[0] in (KUBERNETES.package, HELM.package)
    }
)
if enabled(Speedup.TYPE_HINT_MEMO):
    for _module in (cdktf, constructs, *(sys.modules[name] for name in _BINDING_MODULES)):
        memoize_type_hints(_module)
