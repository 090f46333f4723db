"""Loading only the provider bindings the stacks use (themelio_gpu/bindings_loader.py, lazy_bindings.js).

- the lazily loaded bindings synthesize exactly the bytes a full import does (both in fresh processes);
- a bindings package that is not laid out as the loader assumes is a clear error, not a silent fallback;
- the node preload gives the kubernetes bindings' index the same exports, loaded on first use;
- commands that do not synthesize never import cdktf or the bindings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, write_fleet
from tests.conftest import ROOT
from tests.requirements import binary
from themelio_gpu import bindings_loader
from themelio_gpu.bindings_loader import (
    KUBERNETES,
    NODE_PRELOAD,
    Bindings,
    BindingsLayoutError,
    node_options_with_preload,
    register_assembly,
)

BINDING_PACKAGES = ("cdktf_cdktf_provider_kubernetes", "cdktf_cdktf_provider_helm")
# Modules a command that only reads YAML must not import: the jsii runtime starts node, the rest needs it.
SYNTHESIS_MODULES = ("jsii", "cdktf", "constructs", *BINDING_PACKAGES)


def _api_access() -> dict[str, Any]:
    return {
        "host": "https://api.example.com",
        "clusterCaCertificate": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        "exec": {"command": "aws", "args": ["eks", "get-token"], "env": {"AWS_PROFILE": "platform"}},
    }


def _fleet_using_every_binding_class(tmp_path: Path) -> tuple[Path, Path]:
    """Static and Karpenter pools, DeviceClasses, the catalog ConfigMap, kubeconfig and exec access."""
    karpenter_pool = {
        "name": "burst",
        "product": "a100-40gb",
        "instanceType": "p4d.24xlarge",
        "gpusPerNode": 8,
        "provisioning": {
            "karpenter": {
                "nodeClassRef": {"name": "gpu"},
                "instanceTypes": ["p4d.24xlarge"],
                "capacityTypes": ["on-demand"],
            }
        },
    }
    clusters = [
        cluster(name="static-one", catalogConfigMap={"namespace": "themelio-system"}),
        # The same offerings again: the second and third stacks pass the first one's values as tokens.
        cluster(name="static-two", catalogConfigMap={"namespace": "themelio-system"}),
        cluster(name="static-three", catalogConfigMap={"namespace": "themelio-system"}),
        cluster(
            name="cloud",
            access={"api": _api_access()},
            backend={"type": "s3", "bucket": "state", "region": "eu-central-1"},
            karpenter=True,
            offerings=["nvidia.com/a100"],
            nodePools=[karpenter_pool],
        ),
    ]
    return write_fleet(tmp_path, clusters)


# Run in a fresh interpreter: reports how many kubernetes binding submodules Python imported, and the
# NODE_OPTIONS of the jsii node processes (read from /proc while they still run).
SYNTH_SCRIPT = """
import json, os, sys
from pathlib import Path
if sys.argv[1] == "full":
    import cdktf_cdktf_provider_kubernetes, cdktf_cdktf_provider_helm  # the packages' own __init__
from themelio_gpu.cli import synth_main
code = synth_main(["--catalog", sys.argv[2], "--stacks-dir", sys.argv[3], "--outdir", sys.argv[4], "--quiet"])
def node_options(pid):
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\\0")
        yield from (e[13:].decode() for e in environ if e.startswith(b"NODE_OPTIONS="))
        yield from node_options(child)
kubernetes = sorted(m for m in sys.modules if m.startswith("cdktf_cdktf_provider_kubernetes."))
report = {"code": code, "kubernetes_modules": len(kubernetes), "node_options": list(node_options(os.getpid()))}
print(json.dumps(report))
"""


def _env_without_preload() -> dict[str, str]:
    # Importing themelio_gpu put the preload in this process's NODE_OPTIONS; children choose for themselves.
    return {k: v for k, v in os.environ.items() if k != "NODE_OPTIONS"}


def _synthesize(mode: str, catalog: Path, stacks: Path, out: Path) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", SYNTH_SCRIPT, mode, str(catalog), str(stacks), str(out)],
        cwd=ROOT,
        env=_env_without_preload(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return report


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_lazily_loaded_bindings_synthesize_the_same_bytes_as_a_full_import(tmp_path: Path) -> None:
    catalog, stacks = _fleet_using_every_binding_class(tmp_path)
    lazy = _synthesize("lazy", catalog, stacks, tmp_path / "lazy")
    full = _synthesize("full", catalog, stacks, tmp_path / "full")

    # Each run took the path it is meant to test: all 109 submodules and node's full index, or a handful.
    assert full["kubernetes_modules"] > 100
    assert full["node_options"] == []
    assert lazy["kubernetes_modules"] < 20
    assert len(lazy["node_options"]) == 2  # jsii's runtime and the kernel process it starts
    assert all(str(NODE_PRELOAD) in options for options in lazy["node_options"])

    lazy_files, full_files = _files(tmp_path / "lazy"), _files(tmp_path / "full")
    assert sorted(lazy_files) == sorted(full_files)
    assert len([f for f in lazy_files if f.endswith("cdk.tf.json")]) == 4
    for name, content in full_files.items():
        assert lazy_files[name] == content, name


# --- the Python side's layout checks, on a stand-in package whose __init__ must never run ---------------


@pytest.fixture
def fake_bindings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Bindings, Path]]:
    """A package `fakebindings` 1.2.3 on sys.path: its __init__ raises, `_jsii` registers a stand-in."""
    package = tmp_path / "fakebindings"
    (package / "_jsii").mkdir(parents=True)
    (package / "__init__.py").write_text("raise RuntimeError('the package __init__ ran')\n")
    (package / "_jsii" / "__init__.py").write_text(
        "from types import SimpleNamespace\n"
        "__jsii_assembly__ = SimpleNamespace(name='@fake/bindings', version='1.2.3')\n"
    )
    (package / "_jsii" / "bindings@1.2.3.jsii.tgz").write_bytes(b"")
    (package / "widgets").mkdir()  # a submodule, laid out as the bindings' are
    (package / "widgets" / "__init__.py").write_text("from .._jsii import __jsii_assembly__ as ASSEMBLY\n")
    dist_info = tmp_path / "fakebindings-1.2.3.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakebindings\nVersion: 1.2.3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield Bindings("fakebindings", "fakebindings", "1.2.3", "@fake/bindings"), package
    for name in [m for m in sys.modules if m == "fakebindings" or m.startswith("fakebindings.")]:
        del sys.modules[name]


def test_registers_the_assembly_without_running_the_package_init(fake_bindings: tuple[Bindings, Path]) -> None:
    bindings, _ = fake_bindings
    register_assembly(bindings)
    from fakebindings import widgets  # type: ignore[import-not-found]  # the stand-in package

    assert widgets.ASSEMBLY.name == "@fake/bindings"
    register_assembly(bindings)  # registered once: a second call changes nothing


def test_another_installed_version_is_a_clear_error(fake_bindings: tuple[Bindings, Path]) -> None:
    bindings, _ = fake_bindings
    pinned = Bindings(bindings.package, bindings.distribution, "1.2.4", bindings.assembly)
    with pytest.raises(BindingsLayoutError) as error:
        register_assembly(pinned)
    message = str(error.value)
    assert message.startswith("fakebindings: version 1.2.3 is installed, the loader is written for 1.2.4.")
    assert "without running its __init__" in message and "tests/test_provider_loading.py" in message
    assert "fakebindings" not in sys.modules  # nothing half-registered


def test_a_missing_assembly_tarball_is_a_clear_error(fake_bindings: tuple[Bindings, Path]) -> None:
    bindings, package = fake_bindings
    (package / "_jsii" / "bindings@1.2.3.jsii.tgz").unlink()
    with pytest.raises(BindingsLayoutError, match=r"no single package folder holding _jsii/bindings@1\.2\.3"):
        register_assembly(bindings)
    assert "fakebindings" not in sys.modules


def test_a_jsii_module_that_loads_another_assembly_is_a_clear_error(fake_bindings: tuple[Bindings, Path]) -> None:
    bindings, package = fake_bindings
    (package / "_jsii" / "__init__.py").write_text("__jsii_assembly__ = None\n")
    with pytest.raises(BindingsLayoutError, match=r"fakebindings\._jsii did not load the assembly @fake/bindings"):
        register_assembly(bindings)


def test_a_package_that_is_not_installed_is_a_clear_error() -> None:
    with pytest.raises(BindingsLayoutError, match=r"^not-installed-bindings: not installed"):
        register_assembly(Bindings("not_installed_bindings", "not-installed-bindings", "1.0.0", "@x/y"))


def test_the_pinned_kubernetes_bindings_are_the_installed_ones() -> None:
    from importlib.metadata import version

    assert version(KUBERNETES.distribution) == KUBERNETES.version


# --- NODE_OPTIONS --------------------------------------------------------------------------------------


def test_node_options_keep_the_users_own_and_add_the_preload_once() -> None:
    once = node_options_with_preload("--max-http-header-size=16384")
    assert once == f'--max-http-header-size=16384 --require "{NODE_PRELOAD}"'
    assert node_options_with_preload(once) == once
    assert node_options_with_preload(None) == f'--require "{NODE_PRELOAD}"'


def test_node_options_quote_a_path_with_spaces_and_quotes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bindings_loader, "NODE_PRELOAD", Path('/opt/my "apps"/lazy_bindings.js'))
    assert node_options_with_preload("") == '--require "/opt/my \\"apps\\"/lazy_bindings.js"'


# --- the node preload, on the real index.js of the pinned kubernetes bindings ----------------------------

NODE_CHECK = """
const path = require("path");
const index = path.join(process.argv[1], "node_modules", "@cdktf", "provider-kubernetes", "lib", "index.js");
globalThis.loaded = [];
const exports_ = require(index);
const before = [...globalThis.loaded];
const keys = Object.keys(exports_);
const labels = exports_.labels;
console.log(JSON.stringify({ before, keys, labels: labels.name, after: globalThis.loaded, again: exports_.labels === labels }));
"""


@pytest.fixture(scope="module")
def kubernetes_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """node_modules with the bindings' real lib/index.js; each submodule a stub recording that it loaded."""
    import cdktf_cdktf_provider_kubernetes._jsii as jsii_module

    tarball = Path(jsii_module.__file__).parent / KUBERNETES.tarball
    root = tmp_path_factory.mktemp("node")
    lib = root / "node_modules" / "@cdktf" / "provider-kubernetes" / "lib"
    lib.mkdir(parents=True)
    with tarfile.open(tarball) as archive:
        member = archive.extractfile("package/lib/index.js")
        assert member is not None
        index = member.read().decode()
    (lib / "index.js").write_text(index)
    names = [line.split('require("./')[1].split('"')[0] for line in index.splitlines() if "require(" in line]
    for name in names:
        (lib / name).mkdir()
        (lib / name / "index.js").write_text(f"globalThis.loaded.push({name!r}); exports.name = {name!r};\n")
    return root, names


def _run_node(*args: str) -> subprocess.CompletedProcess[str]:
    command = [binary("node"), *args]
    return subprocess.run(command, env=_env_without_preload(), capture_output=True, text=True, check=False)


def _node(root: Path, preload: bool) -> dict[str, Any]:
    result = _run_node(*(["--require", str(NODE_PRELOAD)] if preload else []), "-e", NODE_CHECK, str(root))
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_preload_loads_a_submodule_on_first_use_with_the_same_exports(
    kubernetes_index: tuple[Path, list[str]],
) -> None:
    root, names = kubernetes_index
    assert len(names) == 109
    full, lazy = _node(root, preload=False), _node(root, preload=True)
    assert full["before"] == names  # without the preload, node requires every submodule up front
    assert lazy["keys"] == full["keys"]
    assert lazy["before"] == []
    assert lazy["labels"] == "labels"
    assert lazy["after"] == ["labels"]
    assert lazy["again"] is True


def test_preload_rejects_an_index_it_does_not_know(
    kubernetes_index: tuple[Path, list[str]], tmp_path: Path
) -> None:
    source, _ = kubernetes_index
    lib = tmp_path / "node_modules" / "@cdktf" / "provider-kubernetes" / "lib"
    lib.mkdir(parents=True)
    index = (source / "node_modules" / "@cdktf" / "provider-kubernetes" / "lib" / "index.js").read_text()
    (lib / "index.js").write_text(index.replace("// generated by cdktf get", "exports.extra = compute();"))
    result = _run_node("--require", str(NODE_PRELOAD), "-e", NODE_CHECK, str(tmp_path))
    assert result.returncode != 0
    assert 'unexpected line "exports.extra = compute();"' in result.stderr
    assert "lazy_bindings.js only knows a generated index" in result.stderr


def test_preload_leaves_other_files_alone(tmp_path: Path) -> None:
    (tmp_path / "index.js").write_text("exports.answer = 42;\n")
    script = f"console.log(require({json.dumps(str(tmp_path / 'index.js'))}).answer)"
    result = _run_node("--require", str(NODE_PRELOAD), "-e", script)
    assert (result.returncode, result.stdout.strip()) == (0, "42"), result.stderr


# --- commands that do not synthesize --------------------------------------------------------------------

COMMAND_SCRIPT = """
import json, sys
from themelio_gpu.cli import main
code = main(json.loads(sys.argv[1]))
print(json.dumps({"code": code, "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def _run_command(argv: list[str]) -> tuple[int, set[str]]:
    result = subprocess.run(
        [sys.executable, "-c", COMMAND_SCRIPT, json.dumps(argv)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    report = json.loads(result.stdout.splitlines()[-1])
    return report["code"], set(report["modules"])


@pytest.fixture(scope="module")
def small_fleet(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    catalog, stacks = write_fleet(tmp_path_factory.mktemp("fleet"), [cluster(name="one")])
    return ["--catalog", str(catalog), "--stacks-dir", str(stacks)]


@pytest.mark.parametrize(
    "command",
    [
        ["validate"],
        ["catalog", "validate"],
        ["catalog", "show"],
        ["catalog", "quota", "--cluster", "one", "--namespace", "team-a", "nvidia.com/a100=2"],
    ],
    ids=" ".join,
)
def test_commands_that_read_yaml_never_import_the_bindings(command: list[str], small_fleet: list[str]) -> None:
    code, modules = _run_command([*command, *small_fleet])
    assert code == 0
    assert not modules & set(SYNTHESIS_MODULES)


def test_catalog_export_never_imports_the_bindings(small_fleet: list[str], tmp_path: Path) -> None:
    code, modules = _run_command(["catalog", "export", *small_fleet, "--out", str(tmp_path / "out")])
    assert code == 0
    assert not modules & set(SYNTHESIS_MODULES)


def test_match_never_imports_the_bindings(small_fleet: list[str]) -> None:
    slices = ROOT / "tests" / "fixtures" / "resourceslices" / "a100-40gb-node.yaml"
    code, modules = _run_command(["match", *small_fleet, "--slices", str(slices), "--cluster", "one"])
    assert code == 1  # the MIG offering finds no device on this whole-GPU node: a report, not a crash
    assert not modules & set(SYNTHESIS_MODULES)


def test_check_reports_bad_input_before_importing_the_bindings(tmp_path: Path) -> None:
    catalog, stacks = write_fleet(tmp_path, [cluster(name="bad", offerings=["nvidia.com/nope"])])
    code, modules = _run_command(["check", "--catalog", str(catalog), "--stacks-dir", str(stacks)])
    assert code == 2
    assert not modules & set(SYNTHESIS_MODULES)


def test_the_synthesis_modules_list_names_what_synthesis_imports(tmp_path: Path, small_fleet: list[str]) -> None:
    # Guards the tests above against checking for names that are never imported at all.
    code, modules = _run_command(["synth", *small_fleet, "--outdir", str(tmp_path / "out"), "--quiet"])
    assert code == 0
    assert set(SYNTHESIS_MODULES) <= modules
