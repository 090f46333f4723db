"""HashiCorp's providers as the sandbox builds them from source: which build applies which pin, and their mirror.

tools.toml builds hashicorp/kubernetes and hashicorp/helm from their upstream source archives (the Go module
proxy serves no 2.x or 3.x release). A stack's pin is applied by the build of the same version; a pin whose
source could not be had (CDK Terrain's kubernetes 3.4.0 and helm 3.3.0) by the newest build of the same major
version, which an override file pins instead and every run says. A Terraform filesystem mirror holds each build
under its own version, for Terraform's and OpenTofu's registry addresses: nothing in it carries a version it is
not. `THEMELIO_SANDBOX_PROVIDERS=registry` leaves all of it out (Terraform installs the providers itself).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themelio_gpu import engine
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.tools import Tool, Toolbox, load_tools, registry_providers

REGISTRIES = ("registry.terraform.io", "registry.opentofu.org")


@dataclass(frozen=True)
class ProviderUse:
    """A provider the stack pins, and the build of HashiCorp's that applies it."""

    type: str
    pinned: str
    tool: Tool

    @property
    def built(self) -> str:
        return self.tool.version.removeprefix("v")

    @property
    def substituted(self) -> bool:
        return self.built != self.pinned


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.removeprefix("v").split("."))


def provider_uses(pins: dict[str, str], tools: dict[str, Tool]) -> list[ProviderUse]:
    """For each pinned provider, its build of the same version, else the newest build of the same major version;
    a pin no build can stand for is a SandboxError naming what tools.toml builds."""
    uses = []
    for type_, pinned in sorted(pins.items()):
        builds = sorted((t for t in tools.values() if t.provider == type_), key=lambda t: _release(t.version))
        exact = [t for t in builds if _release(t.version) == _release(pinned)]
        same_major = [t for t in builds if _release(t.version)[0] == _release(pinned)[0]]
        chosen = exact or same_major[-1:]
        if not chosen:
            have = ", ".join(t.version for t in builds) or "none"
            raise SandboxError(
                f"the stack pins hashicorp/{type_} {pinned}; the sandbox builds {have} of it (tools.toml): no "
                f"build of {_release(pinned)[0]}.x to apply it with"
            )
        uses.append(ProviderUse(type_, pinned, chosen[0]))
    return uses


def engine_pins() -> dict[str, str]:
    """The providers the selected engine's stacks pin ($THEMELIO_ENGINE), by type: known before any synthesis."""
    chosen = engine.selected()
    return {b.provider[0]: b.provider[2] for b in (chosen.kubernetes, chosen.helm)}


def provider_tools() -> set[str]:
    """The tools.toml names of the builds a deploy of the selected engine's stacks needs (none when Terraform
    installs the providers from the registry)."""
    return set() if registry_providers() else {u.tool.name for u in provider_uses(engine_pins(), load_tools())}


def stack_pins(stack: dict[str, Any]) -> dict[str, str]:
    """The hashicorp providers a synthesized stack pins, by type."""
    required = stack.get("terraform", {}).get("required_providers", {})
    return {
        name: str(entry["version"])
        for name, entry in required.items()
        if str(entry.get("source", "")).endswith(f"hashicorp/{name}")
    }


def describe_substitutes(uses: list[ProviderUse]) -> str:
    """One sentence: which pins are applied with another release (for `up` and every run), or ""."""
    swapped = [u for u in uses if u.substituted]
    if not swapped:
        return ""
    return (
        "the stack pins "
        + " and ".join(f"hashicorp/{u.type} {u.pinned}" for u in swapped)
        + ", whose sources could not be had: the sandbox applies it with HashiCorp's "
        + " and ".join(f"{u.type} {u.built}" for u in swapped)
        + " (built from source), through an override of required_providers"
    )


def required_providers_override(uses: list[ProviderUse]) -> dict[str, Any]:
    """The `terraform` block of an override file that pins the substitutes (Terraform merges required_providers
    of an override file entry by entry); {} when every pin has its own build."""
    swapped = {u.type: {"source": f"hashicorp/{u.type}", "version": u.built} for u in uses if u.substituted}
    return {"required_providers": swapped} if swapped else {}


def write_mirror(folder: Path, toolbox: Toolbox, uses: list[ProviderUse]) -> Path:
    """A filesystem mirror of the builds in `folder` and a CLI configuration that installs only from it (for
    these providers; others as Terraform would); returns the configuration file's path for TF_CLI_CONFIG_FILE."""
    for registry in REGISTRIES:
        for use in uses:
            target = folder / registry / "hashicorp" / use.type / use.built / "linux_amd64"
            target.mkdir(parents=True, exist_ok=True)
            link = target / f"terraform-provider-{use.type}_v{use.built}"
            if not link.exists():
                link.symlink_to(toolbox.binary(use.tool.name, f"terraform-provider-{use.type}"))
    patterns = json.dumps(sorted({f"{registry}/hashicorp/{use.type}" for registry in REGISTRIES for use in uses}))
    rc = folder / "terraformrc"
    rc.write_text(
        "provider_installation {\n"
        f'  filesystem_mirror {{\n    path    = "{folder}"\n    include = {patterns}\n  }}\n'
        f"  direct {{\n    exclude = {patterns}\n  }}\n}}\n"
    )
    return rc


def every_build(toolbox: Toolbox) -> list[ProviderUse]:
    """Each provider build of tools.toml, as the pin of its own version."""
    return [ProviderUse(t.provider, t.version.removeprefix("v"), t) for t in toolbox.tools.values() if t.provider]


def write_override(stack_folder: Path, tools: dict[str, Tool], name: str) -> None:
    """For a copy of a synthesized stack: the override file `name` pinning the build that stands for each pin
    without a build of its own (nothing when every pin has one)."""
    stack = json.loads((stack_folder / "cdk.tf.json").read_text(encoding="utf-8"))
    settings = required_providers_override(provider_uses(stack_pins(stack), tools))
    if settings:
        (stack_folder / name).write_text(json.dumps({"terraform": settings}, indent=2) + "\n")
