"""`make sandbox-tools` on recipes of upstream source archives: the checksum checked before anything is unpacked,
one line per missing or altered archive, a failed build named with its log while the others still build, and
nothing half-built left in the cache. The archives here are tiny Go programs made by the test (Go builds them
offline in seconds); the real ones are in ../shared/sources."""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tests.requirements import binary
from themelio_gpu.sandbox import build
from themelio_gpu.sandbox.tools import Tool, go_version, load_tools

GOOD = 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("built from an archive") }\n'
BROKEN = "package main\n\nfunc main() { undefined() }\n"


def _archive(folder: Path, name: str, main_go: str) -> Path:
    """`git archive --prefix=<name>/` of a one-file module, as the real archives are laid out."""
    path = folder / f"{name}.tar.xz"
    with tarfile.open(path, "w:xz") as archive:
        for file, text in (("go.mod", f"module example.com/{name}\n\ngo 1.22\n"), ("main.go", main_go)):
            data = text.encode()
            info = tarfile.TarInfo(f"{name}/{file}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def _tool(name: str, archive: Path, **entry: Any) -> Tool:
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    entry = {"archive": archive.name, "sha256": digest, "version": "v1.0.0", "binaries": {name: "."}} | entry
    return Tool(
        name=name, module="", version="v1.0.0", binaries=dict(entry["binaries"]), archive=archive.name,
        sha256=entry["sha256"], provider=entry.get("provider", ""), entry=entry,
    )  # fmt: skip


@pytest.fixture
def archives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "sources"
    folder.mkdir()
    monkeypatch.setenv("THEMELIO_SOURCE_ARCHIVES", str(folder))
    monkeypatch.setenv("THEMELIO_TOOLS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("THEMELIO_SANDBOX_PROVIDERS", raising=False)
    return folder


def _use(monkeypatch: pytest.MonkeyPatch, *tools: Tool) -> None:
    monkeypatch.setattr(build, "load_tools", lambda: {t.name: t for t in tools})


def test_every_provider_the_stacks_pin_is_built_from_a_checksummed_upstream_archive() -> None:
    providers = [t for t in load_tools().values() if t.provider]
    assert {(t.provider, t.version) for t in providers} == {
        ("kubernetes", "v2.38.0"), ("kubernetes", "v3.2.1"), ("helm", "v3.1.1"), ("helm", "v3.1.2"),
    }  # fmt: skip
    for tool in providers:
        assert tool.archive == f"terraform-provider-{tool.provider}-{tool.version[1:]}.tar.xz"
        assert len(tool.sha256) == 64 and not tool.module
        assert tool.binaries == {f"terraform-provider-{tool.provider}": "."}
        assert f"main.Version={tool.version[1:]}" in tool.ldflags  # as the release workflow stamps it


def test_a_missing_archive_stops_the_build_with_one_line_naming_it_and_the_readme(
    archives: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    present = _archive(archives, "present", GOOD)
    gone = _archive(archives, "gone", GOOD)
    tools = (_tool("present", present), _tool("gone", gone, provider="kubernetes"))
    gone.unlink()
    _use(monkeypatch, *tools)
    assert build.build() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"no source archive {gone}" in err[0] and "../shared/sources/README.md" in err[0]
    assert "THEMELIO_SOURCE_ARCHIVES" in err[0] and "THEMELIO_SANDBOX_PROVIDERS=registry" in err[0]
    assert not tools[0].folder.exists()  # stopped before building anything


def test_an_archive_that_is_not_the_pinned_one_is_refused_before_it_is_unpacked(
    archives: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    archive = _archive(archives, "altered", GOOD)
    tool = _tool("altered", archive)
    _archive(archives, "altered", BROKEN)  # the same file name, other bytes
    _use(monkeypatch, tool)
    assert build.build() == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"{archive} has SHA-256" in line and f"tools.toml pins {tool.sha256}" in line
    assert not tool.folder.parent.exists() or not any(tool.folder.parent.iterdir())  # nothing in the cache


def test_a_failing_build_names_its_log_and_last_lines_and_the_others_still_build(
    archives: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    binary("go")
    good, bad = _tool("good", _archive(archives, "good", GOOD)), _tool("bad", _archive(archives, "bad", BROKEN))
    _use(monkeypatch, good, bad)
    assert build.build(jobs=2) == 1
    out, err = capsys.readouterr()
    assert "built good v1.0.0" in out and "bad v1.0.0 FAILED" in err
    log = good.folder.parent / ".logs" / "bad-v1.0.0.log"
    assert f"(log: {log})" in err and "undefined: undefined" in err  # the compiler's own line
    assert good.ready(go_version()) and not bad.folder.exists()
    assert sorted(p.name for p in good.folder.parent.iterdir()) == [".logs", "good-v1.0.0"]  # no scratch left
    assert (good.folder / "VERSION").read_text().startswith("good v1.0.0 (good.tar.xz)")


def test_with_the_registrys_providers_no_provider_is_built(
    archives: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("THEMELIO_SANDBOX_PROVIDERS", "registry")
    missing = _archive(archives, "terraform-provider-x", GOOD)
    tool = _tool("provider-x", missing, provider="x")
    missing.unlink()  # not needed: Terraform installs the providers
    _use(monkeypatch, tool)
    assert build.build() == 0
    assert "not building provider-x: THEMELIO_SANDBOX_PROVIDERS=registry" in capsys.readouterr().out


def test_a_folder_of_an_archive_is_copied_whole(archives: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary("go")
    archive = archives / "assets.tar.xz"
    source = archives.parent / "tree" / "assets"
    (source / "state-driver").mkdir(parents=True)
    (source / "state-driver" / "0400_configmap.yaml").write_text("kind: ConfigMap\n")
    (source.parent / "go.mod").write_text("module example.com/assets\n\ngo 1.22\n")
    (source.parent / "main.go").write_text(GOOD)
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(source.parent, arcname="assets-1.0.0")
    shutil.rmtree(source.parent)
    tool = _tool("assets", archive)
    tool = Tool(**{**tool.__dict__, "files": {"assets": "assets"}})
    _use(monkeypatch, tool)
    assert build.build() == 0
    assert (tool.folder / "assets" / "state-driver" / "0400_configmap.yaml").read_text() == "kind: ConfigMap\n"


def test_each_pin_is_applied_by_its_own_release_or_said_plainly_by_the_newest_of_its_major(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cdktf's pins are built as they are; CDK Terrain's (kubernetes 3.4.0, helm 3.3.0), whose sources could not be
    had, are applied with 3.2.1 and 3.1.2, and the override and every run say so. The mirror holds each build under
    its own version only."""
    from themelio_gpu.sandbox import providers
    from themelio_gpu.sandbox.errors import SandboxError
    from themelio_gpu.sandbox.tools import Toolbox

    tools = load_tools()
    exact = providers.provider_uses({"kubernetes": "2.38.0", "helm": "3.1.1"}, tools)
    assert [(u.type, u.built, u.substituted) for u in exact] == [
        ("helm", "3.1.1", False),
        ("kubernetes", "2.38.0", False),
    ]
    assert providers.describe_substitutes(exact) == ""
    terrain = providers.provider_uses({"kubernetes": "3.4.0", "helm": "3.3.0"}, tools)
    assert [(u.type, u.built, u.substituted) for u in terrain] == [
        ("helm", "3.1.2", True),
        ("kubernetes", "3.2.1", True),
    ]
    said = providers.describe_substitutes(terrain)
    assert (
        "hashicorp/helm 3.3.0 and hashicorp/kubernetes 3.4.0" in said and "helm 3.1.2 and kubernetes 3.2.1" in said
    )
    with pytest.raises(
        SandboxError, match=r"pins hashicorp/kubernetes 4\.0\.0; the sandbox builds v2\.38\.0, v3\.2\.1"
    ):
        providers.provider_uses({"kubernetes": "4.0.0"}, tools)

    mirror = tmp_path / "mirror"
    rc = providers.write_mirror(mirror, Toolbox(tools), terrain)
    assert f'path    = "{mirror}"' in rc.read_text()
    assert providers.required_providers_override(terrain) == {"required_providers": {
        "helm": {"source": "hashicorp/helm", "version": "3.1.2"},
        "kubernetes": {"source": "hashicorp/kubernetes", "version": "3.2.1"},
    }}  # fmt: skip
    assert providers.required_providers_override(exact) == {}
    held = sorted(str(p.relative_to(mirror)) for p in mirror.glob("*/hashicorp/*/*/linux_amd64/*"))
    assert held == sorted(
        f"{registry}/hashicorp/{t}/{v}/linux_amd64/terraform-provider-{t}_v{v}"
        for registry in providers.REGISTRIES for t, v in (("helm", "3.1.2"), ("kubernetes", "3.2.1"))
    )  # fmt: skip
    assert providers.stack_pins({"terraform": {"required_providers": {
        "kubernetes": {"source": "hashicorp/kubernetes", "version": "3.4.0"},
        "other": {"source": "example/other", "version": "1.0.0"},
    }}}) == {"kubernetes": "3.4.0"}  # fmt: skip


def test_a_shared_library_is_built_when_it_is_there_a_program_only_when_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Go writes a `-buildmode=c-shared` library without the execute bit (it is loaded, not run)."""
    monkeypatch.setenv("THEMELIO_TOOLS_CACHE", str(tmp_path))
    library = Tool(name="lib", module="", version="v1.0.0", binaries={"libx.so.1": "./x"}, buildmode="c-shared")
    program = Tool(name="prog", module="", version="v1.0.0", binaries={"prog": "./x"})
    for tool, file in ((library, "libx.so.1"), (program, "prog")):
        tool.folder.mkdir()
        (tool.folder / file).write_bytes(b"\x7fELF")
        (tool.folder / file).chmod(0o644)
    assert library.built() and library.missing() == []
    assert not program.built() and program.missing() == ["prog"]


def test_nvidias_code_is_built_from_checksummed_archives_with_what_each_image_holds() -> None:
    """The GPU Operator at each chart appVersion the stacks pin, with the folders its image copies to
    /opt/gpu-operator; the DRA driver's kubelet plugin with its version stamped (it panics unstamped); the mock
    NVML as the shared library its repository builds, and its profiles."""
    tools = load_tools()
    for name, version in (("gpu-operator-26.7", "v26.7.0"), ("gpu-operator-26.3", "v26.3.3")):
        operator = tools[name]
        assert operator.version == version and operator.archive == f"gpu-operator-{version[1:]}.tar.xz"
        assert operator.vendor and operator.binaries == {"gpu-operator": "./cmd/gpu-operator"}
        assert operator.files == {"opt/gpu-operator": "assets", "opt/gpu-operator/manifests": "manifests"}
        assert "internal/info.version={version}" in operator.ldflags
    plugin = tools["dra-driver-25.12"]
    assert plugin.vendor and plugin.cgo and "internal/info.version={version}" in plugin.ldflags
    mock = tools["mock-nvml"]
    assert (mock.cgo, mock.buildmode, mock.tags) == (True, "c-shared", "nopadding")
    assert mock.binaries == {"libnvidia-ml.so.550.163.01": "./pkg/gpu/mocknvml/bridge"}
    assert mock.files == {"profiles": "pkg/gpu/mocknvml/configs"}
    for tool in (tools["gpu-operator-26.7"], tools["gpu-operator-26.3"], plugin, mock):
        assert len(tool.sha256) == 64 and not tool.module


def test_a_fork_without_the_archives_is_told_in_one_line_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from themelio_gpu.sandbox.errors import MissingToolError
    from themelio_gpu.sandbox.tools import toolbox

    monkeypatch.setenv("THEMELIO_TOOLS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("THEMELIO_SOURCE_ARCHIVES", str(tmp_path / "no-such-folder"))
    with pytest.raises(MissingToolError) as raised:
        toolbox(("provider-kubernetes-2",))
    message = str(raised.value)
    assert "\n" not in message and "make sandbox-tools" in message
    assert f"{tmp_path / 'no-such-folder'} is not there: set THEMELIO_SOURCE_ARCHIVES" in message
    assert "THEMELIO_SANDBOX_PROVIDERS=registry" in message


def test_with_the_registrys_providers_the_sandbox_pins_and_mirrors_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from themelio_gpu.sandbox import providers

    monkeypatch.setenv("THEMELIO_ENGINE", "cdktn")
    assert providers.provider_tools() == {"provider-kubernetes-3", "provider-helm-3.1.2"}
    monkeypatch.setenv("THEMELIO_SANDBOX_PROVIDERS", "registry")
    assert providers.provider_tools() == set()
