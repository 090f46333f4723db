# mypy: implicit-reexport
# ruff: noqa: F401
"""The one module that imports the engine (cdktf or CDK Terrain), `constructs` and the provider bindings.

Which engine: themelio_gpu/engine.py (THEMELIO_ENGINE). Every other module takes the engine's classes from
here, so the jsii kernel starts here, with its own environment (bindings_loader.kernel_environment). The
classes are typed as cdktf's (the names and signatures are the same in CDK Terrain, which renamed only the
packages); `_IMPORTS` below says where each comes from, and tests/test_engines.py checks that the typed
imports and `_IMPORTS` name the same classes.

cdktf's prebuilt bindings packages' `__init__` (which imports every submodule) is not run:
bindings_loader.py registers their jsii assemblies first. To use another binding class, add it to the
typed imports and to `_IMPORTS`: one line each.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

from themelio_gpu.bindings_loader import kernel_environment, register_assembly
from themelio_gpu.engine import KernelStartError, selected
from themelio_gpu.speedups import Speedup, enabled

ENGINE = selected()

# Where each class comes from: the engine's core library, or a submodule of a bindings package.
_IMPORTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("core", ""): (
        "App",
        "AssetType",
        "AzurermBackend",
        "CloudBackend",
        "GcsBackend",
        "HttpBackend",
        "LocalBackend",
        "NamedCloudWorkspace",
        "NamedRemoteWorkspace",
        "RemoteBackend",
        "S3Backend",
        "TerraformAsset",
        "TerraformBackend",
        "TerraformIterator",
        "TerraformRemoteState",
        "TerraformStack",
        "Token",
        "Tokenization",
    ),
    ("helm", "provider"): ("HelmProvider", "HelmProviderKubernetes", "HelmProviderKubernetesExec"),
    ("helm", "release"): ("Release",),
    ("kubernetes", "config_map_v1"): ("ConfigMapV1", "ConfigMapV1Metadata"),
    ("kubernetes", "labels"): ("Labels", "LabelsMetadata"),
    ("kubernetes", "manifest"): ("Manifest", "ManifestFieldManager"),
    ("kubernetes", "namespace_v1"): ("NamespaceV1", "NamespaceV1Metadata"),
    ("kubernetes", "node_taint"): ("NodeTaint", "NodeTaintMetadata", "NodeTaintTaint"),
    ("kubernetes", "provider"): ("KubernetesProvider", "KubernetesProviderExec"),
}

if TYPE_CHECKING:
    from cdktf import (
        App,
        AssetType,
        AzurermBackend,
        CloudBackend,
        GcsBackend,
        HttpBackend,
        LocalBackend,
        NamedCloudWorkspace,
        NamedRemoteWorkspace,
        RemoteBackend,
        S3Backend,
        TerraformAsset,
        TerraformBackend,
        TerraformIterator,
        TerraformRemoteState,
        TerraformStack,
        Token,
        Tokenization,
    )
    from cdktf_cdktf_provider_helm.provider import HelmProvider, HelmProviderKubernetes, HelmProviderKubernetesExec
    from cdktf_cdktf_provider_helm.release import Release
    from cdktf_cdktf_provider_kubernetes.config_map_v1 import ConfigMapV1, ConfigMapV1Metadata
    from cdktf_cdktf_provider_kubernetes.labels import Labels, LabelsMetadata
    from cdktf_cdktf_provider_kubernetes.manifest import Manifest, ManifestFieldManager
    from cdktf_cdktf_provider_kubernetes.namespace_v1 import NamespaceV1, NamespaceV1Metadata
    from cdktf_cdktf_provider_kubernetes.node_taint import NodeTaint, NodeTaintMetadata, NodeTaintTaint
    from cdktf_cdktf_provider_kubernetes.provider import KubernetesProvider, KubernetesProviderExec


def _silence_jsii_after_a_kernel_that_never_started(unraisable: sys.UnraisableHookArgs) -> None:
    # jsii's exit handler and finalizer clean up after a relay that died at start (a broken pipe) or never
    # started (node missing: no process to stop), at interpreter exit, after our message. Errors from
    # anything but jsii go to Python's own hook.
    if not getattr(unraisable.object, "__module__", "").startswith("jsii."):
        sys.__unraisablehook__(unraisable)


# The first assembly load (constructs') starts jsii's node kernel (jsii's relay, bin/jsii-runtime.js, which
# starts the kernel itself): here, with the preload, and the engine's own switches, in its environment alone.
_switches: dict[str, str] = {}
if ENGINE.creation_stacks_switch and enabled(Speedup.NO_CREATION_STACKS):
    _switches[ENGINE.creation_stacks_switch] = "1"
with kernel_environment(_switches):
    try:
        import constructs
    except (ValueError, OSError, RuntimeError) as error:  # the kernel's first answer never came
        sys.unraisablehook = _silence_jsii_after_a_kernel_that_never_started
        raise KernelStartError(
            f"jsii's node kernel did not start ({type(error).__name__}: {error}); node's own message, if it "
            "gave one, is above (a NODE_OPTIONS value node refuses, node missing from PATH, ...)"
        ) from None
    from constructs import Construct

    _core = importlib.import_module(ENGINE.core)  # the engine the types above describe

# Fully qualified sources: the bindings emit bare `kubernetes`/`helm`, which OpenTofu resolves against its
# own registry namespace rather than HashiCorp's.
KUBERNETES_PROVIDER = ENGINE.kubernetes.provider
HELM_PROVIDER = ENGINE.helm.provider

if ENGINE.package_init_imports_everything and enabled(Speedup.LAZY_BINDINGS):
    register_assembly(ENGINE.kubernetes)
    register_assembly(ENGINE.helm)

# The classes, from the engine's modules (the bindings' submodules imported after their assemblies are
# registered). Every name bound in this module is its export (the `mypy: implicit-reexport` line at the top).
for (source, submodule), _names in _IMPORTS.items():
    if source == "core":
        _module = _core
    else:
        package = (ENGINE.kubernetes if source == "kubernetes" else ENGINE.helm).package
        _module = importlib.import_module(f"{package}.{submodule}")
    globals().update({name: getattr(_module, name) for name in _names})
