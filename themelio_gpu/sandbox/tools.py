"""The sandbox's tools: which (tools.toml, the one file of versions), where they are, and whether they are built.

Each tool is built from its Go module, or from an upstream source archive the module proxy does not serve, into
`<cache>/<tool>-<version>/`, with a `.recipe` file holding the digest of what it was built from (its tools.toml
entry, with an archive's SHA-256, and the Go version). A folder whose recipe matches and that holds every binary
is ready; anything else is built again (`build.py`). The cache is outside the clone, so every checkout shares it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from themelio_gpu.sandbox.errors import MissingToolError

TOOLS_FILE = Path(__file__).with_name("tools.toml")
CACHE_ENV = "THEMELIO_TOOLS_CACHE"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
BUILD_TARGET = "make sandbox-tools"
ARCHIVES_ENV = "THEMELIO_SOURCE_ARCHIVES"
ARCHIVES_README = "../shared/sources/README.md"


def cache_root() -> Path:
    """$THEMELIO_TOOLS_CACHE, else $XDG_CACHE_HOME/themelio-gpu/tools, else ~/.cache/themelio-gpu/tools."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "themelio-gpu" / "tools"


PROVIDERS_ENV = "THEMELIO_SANDBOX_PROVIDERS"
"""`registry`: Terraform installs the providers as it does for you (the registry, or your own mirror in
TF_CLI_CONFIG_FILE); the sandbox then builds and needs no provider of its own."""


def registry_providers() -> bool:
    return os.environ.get(PROVIDERS_ENV) == "registry"


def archives_folder() -> Path:
    """$THEMELIO_SOURCE_ARCHIVES, else ../shared/sources beside the project: the upstream source archives of the
    tools the Go module proxy does not serve (each archive's SHA-256 is pinned in tools.toml)."""
    given = os.environ.get(ARCHIVES_ENV)
    return Path(given).expanduser() if given else PROJECT_ROOT.parent / "shared" / "sources"


@dataclass(frozen=True)
class Tool:
    """One entry of tools.toml."""

    name: str
    module: str
    version: str
    binaries: dict[str, str]
    files: dict[str, str] = field(default_factory=dict)
    ldflags: str = ""
    tags: str = ""
    replace: tuple[str, ...] = ()
    staging: str = ""
    archive: str = ""
    """An upstream source archive's file name (in archives_folder()), built inside its unpacked tree."""
    sha256: str = ""
    vendor: bool = False
    """Build with `-mod=vendor` (the archive holds its dependencies)."""
    cgo: bool = False
    buildmode: str = ""
    provider: str = ""
    """For a Terraform provider: its type (`kubernetes`, `helm`); the sandbox's provider mirror holds it under
    its version."""
    entry: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """The tools.toml entry as written: what the build recipe's digest covers."""

    @property
    def folder(self) -> Path:
        return cache_root() / f"{self.name}-{self.version}"

    @property
    def archive_path(self) -> Path:
        return archives_folder() / self.archive

    def path(self, binary: str) -> Path:
        return self.folder / binary

    def recipe(self, go_version: str) -> str:
        """What the build depends on, as one digest: the entry as tools.toml pins it (an archive's SHA-256
        included) and the Go toolchain."""
        digest = hashlib.sha256()
        digest.update(json.dumps({"entry": self.entry, "go": go_version}, sort_keys=True).encode())
        return digest.hexdigest()

    def ready(self, go_version: str) -> bool:
        stamp = self.folder / ".recipe"
        return stamp.is_file() and stamp.read_text().strip() == self.recipe(go_version) and self.built()

    def built(self) -> bool:
        """Every binary is there and executable, and every file (or folder) is there."""
        return not self.missing()

    def missing(self) -> list[str]:
        """What is not there: a program not executable, a file or folder absent (a shared library, built with
        `buildmode = "c-shared"`, is loaded, not run: Go writes it without the execute bit)."""
        library = self.buildmode == "c-shared"
        return [
            b
            for b in self.binaries
            if not (self.path(b).is_file() if library else os.access(self.path(b), os.X_OK))
        ] + [f for f in self.files if not self.path(f).exists()]


def load_tools(file: Path = TOOLS_FILE) -> dict[str, Tool]:
    with file.open("rb") as stream:
        table = tomllib.load(stream)
    tools = {}
    for name, entry in table.items():
        tools[name] = Tool(
            name=name,
            module=entry.get("module", ""),
            version=entry["version"],
            binaries=dict(entry.get("binaries", {})),
            files=dict(entry.get("files", {})),
            ldflags=" ".join(entry.get("ldflags", "").replace("\\\n", " ").split()),
            tags=entry.get("tags", ""),
            replace=tuple(entry.get("replace", ())),
            staging=entry.get("staging", ""),
            archive=entry.get("archive", ""),
            sha256=entry.get("sha256", ""),
            vendor=bool(entry.get("vendor", False)),
            cgo=bool(entry.get("cgo", False)),
            buildmode=entry.get("buildmode", ""),
            provider=entry.get("provider", ""),
            entry=entry,
        )
    return tools


def go_version() -> str:
    """The Go toolchain's version (part of every recipe: another Go builds other binaries)."""
    from themelio_gpu import interrupts

    go = shutil.which("go")
    if go is None:
        return ""
    result = interrupts.run([go, "env", "GOVERSION"])
    return result.stdout.strip()


@dataclass(frozen=True)
class Toolbox:
    """The paths of every built tool, after checking each is ready."""

    tools: dict[str, Tool]

    def binary(self, tool: str, binary: str | None = None) -> Path:
        return self.tools[tool].path(binary or tool)


def toolbox(needed: tuple[str, ...] | None = None) -> Toolbox:
    """The built tools, or MissingToolError naming each that is not built and the target that builds it.

    Readiness is the binaries being there: the recipe check (which needs Go) is the builder's, so a machine
    with the tools and no Go can still run the sandbox.
    """
    tools = load_tools()
    unbuilt = [t for name, t in tools.items() if (needed is None or name in needed) and not t.built()]
    if unbuilt:
        missing = "; ".join(f"{tool.name} {tool.version} ({', '.join(tool.missing())})" for tool in unbuilt)
        archives = ""
        if any(t.archive for t in unbuilt) and not archives_folder().is_dir():
            archives = (
                f"; some are built from upstream source archives, and {archives_folder()} is not there: set "
                f"{ARCHIVES_ENV} to a folder holding them ({ARCHIVES_README})"
                + (f", or {PROVIDERS_ENV}=registry where Terraform reaches its registry" if any(
                    t.provider for t in unbuilt) else "")
            )  # fmt: skip
        raise MissingToolError(
            f"not built: {missing} in {cache_root()}; run `{BUILD_TARGET}` (builds them from their Go modules and "
            f"source archives, 20 to 40 minutes the first time on 2 CPUs; docs/sandbox.md){archives}"
        )
    return Toolbox(tools)
