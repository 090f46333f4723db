"""Which CDK engine synthesizes the stacks: the one switch, THEMELIO_ENGINE (default `cdktf`).

- `cdktf`: cdktf 0.21.0 with the prebuilt bindings cdktf-cdktf-provider-kubernetes 12.1.1 and -helm 12.1.2;
  the stacks pin hashicorp/kubernetes 2.38.0 and hashicorp/helm 3.1.1. Archived upstream in December 2025.
- `cdktn`: CDK Terrain 0.24.0, the maintained fork, with cdktn-provider-kubernetes 17.1.0 and -helm 15.1.0;
  the stacks pin hashicorp/kubernetes 3.4.0 and hashicorp/helm 3.3.0 (docs/cdk-terrain.md).

Both are installed from the one lock; only the chosen one is imported (constructs/providers.py). Everything
here is plain data, so every command can read it without starting jsii.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

ENV = "THEMELIO_ENGINE"


class EngineSettingError(ValueError):
    """THEMELIO_ENGINE names no engine."""


class KernelStartError(RuntimeError):
    """jsii's node kernel did not start (node missing, refusing its options, crashing): nothing was written."""


@dataclass(frozen=True)
class Bindings:
    package: str
    """The Python package, e.g. cdktf_cdktf_provider_kubernetes."""
    distribution: str
    version: str
    """The pinned version (as in Pipfile.lock); the jsii assembly inside has the same version."""
    assembly: str
    """The jsii assembly (npm package) name."""
    provider: tuple[str, str, str]
    """The Terraform provider it wraps: local name, fully qualified source, exact version."""

    @property
    def tarball(self) -> str:
        return f"{self.assembly.rpartition('/')[2]}@{self.version}.jsii.tgz"


@dataclass(frozen=True)
class Engine:
    name: str
    core: str
    """The Python package of the engine's core library (App, TerraformStack, ...)."""
    distribution: str
    version: str
    kubernetes: Bindings
    helm: Bindings
    package_init_imports_everything: bool
    """The bindings packages' `__init__` imports every submodule (cdktf's prebuilt ones): bindings_loader
    registers their assemblies without it. CDK Terrain's import their submodules on first use themselves."""
    namespace_metadata_is_a_list: bool
    """kubernetes_namespace_v1's `metadata` is a list of one block (the 3.x provider, plugin framework)."""
    prepare_pass_may_be_skipped: bool
    """The preparing pass only looks for cross-stack references (cdktf 0.21); CDK Terrain's also validates
    provider functions and features, so it always runs."""
    creation_stacks_switch: str | None
    """The engine's own environment variable that stops tokens recording their creation stack, if it has one."""

    def describe(self) -> str:
        k, h = self.kubernetes, self.helm
        return (
            f"{self.name} {self.version} with {k.distribution} {k.version} ({k.provider[1]} {k.provider[2]}) and "
            f"{h.distribution} {h.version} ({h.provider[1]} {h.provider[2]})"
        )


ENGINES = {
    "cdktf": Engine(
        name="cdktf",
        core="cdktf",
        distribution="cdktf",
        version="0.21.0",
        kubernetes=Bindings(
            "cdktf_cdktf_provider_kubernetes",
            "cdktf-cdktf-provider-kubernetes",
            "12.1.1",
            "@cdktf/provider-kubernetes",
            ("kubernetes", "hashicorp/kubernetes", "2.38.0"),
        ),
        helm=Bindings(
            "cdktf_cdktf_provider_helm",
            "cdktf-cdktf-provider-helm",
            "12.1.2",
            "@cdktf/provider-helm",
            ("helm", "hashicorp/helm", "3.1.1"),
        ),
        package_init_imports_everything=True,
        namespace_metadata_is_a_list=False,
        prepare_pass_may_be_skipped=True,
        creation_stacks_switch=None,
    ),
    "cdktn": Engine(
        name="cdktn",
        core="cdktn",
        distribution="cdktn",
        version="0.24.0",
        kubernetes=Bindings(
            "cdktn_provider_kubernetes",
            "cdktn-provider-kubernetes",
            "17.1.0",
            "@cdktn/provider-kubernetes",
            ("kubernetes", "hashicorp/kubernetes", "3.4.0"),
        ),
        helm=Bindings(
            "cdktn_provider_helm",
            "cdktn-provider-helm",
            "15.1.0",
            "@cdktn/provider-helm",
            ("helm", "hashicorp/helm", "3.3.0"),
        ),
        package_init_imports_everything=False,
        namespace_metadata_is_a_list=True,
        prepare_pass_may_be_skipped=False,
        creation_stacks_switch="CDKTN_DISABLE_CREATION_STACK",
    ),
}
DEFAULT = "cdktf"


def selected(text: str | None = None) -> Engine:
    """The engine $THEMELIO_ENGINE (or `text`) names; unset or empty: cdktf."""
    value = (os.environ.get(ENV, "") if text is None else text).strip().lower() or DEFAULT
    engine = ENGINES.get(value)
    if engine is None:
        shown = os.environ.get(ENV, "") if text is None else text
        raise EngineSettingError(
            f"{ENV}: {shown!r} is not an engine; allowed: cdktf (the default: cdktf 0.21.0) or cdktn "
            "(CDK Terrain 0.24.0, see docs/cdk-terrain.md)"
        )
    return engine
