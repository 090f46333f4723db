"""Loading only the provider bindings the stacks use, cheaply (themelio_gpu/bindings_loader.py, node_preload.js).

- the lazily loaded bindings synthesize exactly the bytes every speed-up off does (both in fresh
  processes);
- a bindings package that is not laid out as the loader assumes is a clear error, not a silent fallback;
- the bindings' argument checks still run;
- the node preload reaches the jsii kernel alone (never this process's environment, so never terraform,
  helm or an exec credential plugin), gives the kubernetes bindings' index of either engine the same
  exports, loaded on first use, and leaves SIGINT/SIGTERM/SIGHUP to Python;
- commands that do not synthesize never import cdktf or the bindings.
"""

from __future__ import annotations

import json
import os
import signal
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
    NODE_PRELOAD,
    BindingsLayoutError,
    kernel_environment,
    node_options_with_preload,
    register_assembly,
)
from themelio_gpu.engine import ENGINES, Bindings
from themelio_gpu.speedups import ENV as SPEEDUPS_ENV

KUBERNETES = ENGINES["cdktf"].kubernetes
NO_PROVIDER = ("fake", "example/fake", "0.0.0")

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
        # The same offerings again: the three stacks pass the same tokens (shared_values.py).
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


# Run in a fresh interpreter: reports how many kubernetes binding submodules Python imported, the NODE_OPTIONS of the jsii node processes (read from /proc
# while they still run) and this process's own NODE_OPTIONS afterwards. "full" turns every speed-up off.
SYNTH_SCRIPT = """
import json, os, sys
from pathlib import Path
from themelio_gpu.cli import synth_main
code = synth_main(["--catalog", sys.argv[2], "--stacks-dir", sys.argv[3], "--outdir", sys.argv[4], "--quiet"])
def node_options(pid):
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\\0")
        yield from (e[13:].decode() for e in environ if e.startswith(b"NODE_OPTIONS="))
        yield from node_options(child)
kubernetes = sorted(m for m in sys.modules if m.startswith("cdktf_cdktf_provider_kubernetes."))
report = {"code": code, "kubernetes_modules": len(kubernetes),
          "node_options": list(node_options(os.getpid())), "own": os.environ.get("NODE_OPTIONS")}
print(json.dumps(report))
"""


def _env_without_preload(*dropped: str) -> dict[str, str]:
    names = ("NODE_OPTIONS", SPEEDUPS_ENV, *dropped)
    return {k: v for k, v in os.environ.items() if k not in names}


def _synthesize(mode: str, catalog: Path, stacks: Path, out: Path) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", SYNTH_SCRIPT, mode, str(catalog), str(stacks), str(out)],
        cwd=ROOT,
        env={**_env_without_preload(), "NODE_OPTIONS": "--max-http-header-size=16384"}
        | ({SPEEDUPS_ENV: "all"} if mode == "full" else {}),
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

    # Each run took the path it is meant to test: all 109 submodules, or a handful of submodules and the
    # preload's lazy index.
    assert full["kubernetes_modules"] > 100
    assert lazy["kubernetes_modules"] < 20
    # jsii's relay and its kernel have the user's options and the preload; this process has the user's
    # options alone, as every other program it starts will.
    assert (len(lazy["node_options"]), len(full["node_options"])) == (2, 2)
    for report in (lazy, full):
        assert all(o.startswith("--max-http-header-size=16384 --require") for o in report["node_options"])
        assert all(str(NODE_PRELOAD) in options for options in report["node_options"])
        assert report["own"] == "--max-http-header-size=16384"

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
    yield Bindings("fakebindings", "fakebindings", "1.2.3", "@fake/bindings", NO_PROVIDER), package
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
    pinned = Bindings(bindings.package, bindings.distribution, "1.2.4", bindings.assembly, NO_PROVIDER)
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
        register_assembly(
            Bindings("not_installed_bindings", "not-installed-bindings", "1.0.0", "@x/y", NO_PROVIDER)
        )


def test_the_pinned_kubernetes_bindings_are_the_installed_ones() -> None:
    from importlib.metadata import version

    assert version(KUBERNETES.distribution) == KUBERNETES.version


# --- the bindings' argument checks ---------------------------------------------------------------------


def test_a_binding_called_with_a_wrong_argument_type_still_raises_type_error() -> None:
    import cdktf

    from themelio_gpu.constructs.providers import NamespaceV1Metadata

    with pytest.raises(TypeError, match=r"type of argument name must be one of \(str, NoneType\); got int"):
        NamespaceV1Metadata(name=42)  # type: ignore[arg-type]  # the wrong type this test is about
    with pytest.raises(TypeError, match=r"type of argument separator must be str; got int"):
        cdktf.Fn.join(42, ["a"])  # type: ignore[arg-type]
    assert NamespaceV1Metadata(name="gpu").name == "gpu"


# --- NODE_OPTIONS --------------------------------------------------------------------------------------


def test_node_options_keep_the_users_own_and_add_the_preload_once() -> None:
    once = node_options_with_preload("--max-http-header-size=16384")
    assert once == f'--max-http-header-size=16384 --require "{NODE_PRELOAD}"'
    assert node_options_with_preload(once) == once
    assert node_options_with_preload(None) == f'--require "{NODE_PRELOAD}"'


def test_node_options_quote_a_path_with_spaces_and_quotes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bindings_loader, "NODE_PRELOAD", Path('/opt/my "apps"/node_preload.js'))
    assert node_options_with_preload("") == '--require "/opt/my \\"apps\\"/node_preload.js"'


def test_the_kernel_environment_is_set_only_while_the_kernel_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_OPTIONS", "--max-http-header-size=16384")
    monkeypatch.delenv("CDKTN_DISABLE_CREATION_STACK", raising=False)
    with kernel_environment({"CDKTN_DISABLE_CREATION_STACK": "1"}):
        assert os.environ["NODE_OPTIONS"] == f'--max-http-header-size=16384 --require "{NODE_PRELOAD}"'
        assert os.environ["CDKTN_DISABLE_CREATION_STACK"] == "1"
    assert os.environ["NODE_OPTIONS"] == "--max-http-header-size=16384"
    assert "CDKTN_DISABLE_CREATION_STACK" not in os.environ
    monkeypatch.delenv("NODE_OPTIONS")
    with pytest.raises(RuntimeError), kernel_environment():
        raise RuntimeError("the kernel failed to start")
    assert "NODE_OPTIONS" not in os.environ  # restored on failure too


def test_programs_started_after_synthesis_do_not_get_the_preload(synthesized: Path) -> None:
    # The session's synthesis (conftest) started the kernel in this process; a child started now sees
    # this process's environment, as terraform, helm and exec credential plugins would.
    assert "cdktf" in sys.modules
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ.get('NODE_OPTIONS', ''))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(NODE_PRELOAD) not in child.stdout
    assert str(NODE_PRELOAD) not in os.environ.get("NODE_OPTIONS", "")


# --- the node preload, on the real index.js of each engine's pinned kubernetes bindings -----------------

NODE_CHECK = """
const path = require("path");
const index = path.join(process.argv[1], "node_modules", process.argv[2], "provider-kubernetes", "lib", "index.js");
globalThis.loaded = [];
const exports_ = require(index);
const before = [...globalThis.loaded];
const keys = Object.keys(exports_);
const labels = exports_.labels;
console.log(JSON.stringify({ before, keys, labels: labels.name, after: globalThis.loaded, again: exports_.labels === labels }));
"""
# Per engine: its bindings package, and the scope its assembly is published under.
ENGINE_BINDINGS = {
    "cdktf": ("cdktf_cdktf_provider_kubernetes", "@cdktf"),
    "cdktn": ("cdktn_provider_kubernetes", "@cdktn"),
}


def _real_index(engine: str) -> str:
    package, _ = ENGINE_BINDINGS[engine]
    import importlib.util

    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations))) / "_jsii"
    (tarball,) = folder.glob("*.jsii.tgz")
    with tarfile.open(tarball) as archive:
        member = archive.extractfile("package/lib/index.js")
        assert member is not None
        return member.read().decode()


def _index_tree(root: Path, engine: str, index: str) -> list[str]:
    """node_modules with `index` as the bindings' lib/index.js; each submodule a stub recording its loading."""
    lib = root / "node_modules" / ENGINE_BINDINGS[engine][1] / "provider-kubernetes" / "lib"
    lib.mkdir(parents=True)
    (lib / "index.js").write_text(index)
    names = [line.split('require("./')[1].split('"')[0] for line in index.splitlines() if "require(" in line]
    for name in names:
        stub = lib / name / "index.js" if not name.endswith("/index") else lib / f"{name}.js"
        stub.parent.mkdir(parents=True, exist_ok=True)
        # Compiled TypeScript marks its exports an ES module; __importStar (CDK Terrain's index) relies on it.
        stub.write_text(
            f'Object.defineProperty(exports, "__esModule", {{ value: true }});\n'
            f"globalThis.loaded.push({name!r}); exports.name = {name!r};\n"
        )
    return names


@pytest.fixture(scope="module", params=sorted(ENGINE_BINDINGS))
def kubernetes_index(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path, list[str]]:
    engine: str = request.param
    root = tmp_path_factory.mktemp(f"node-{engine}")
    return engine, root, _index_tree(root, engine, _real_index(engine))


def _run_node(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [binary("node"), "--preserve-symlinks", *args]
    environment = _env_without_preload() | (env or {})
    return subprocess.run(command, env=environment, capture_output=True, text=True, check=False)


def _node(root: Path, engine: str, preload: bool, env: dict[str, str] | None = None) -> dict[str, Any]:
    options = ["--require", str(NODE_PRELOAD)] if preload else []
    result = _run_node(*options, "-e", NODE_CHECK, str(root), ENGINE_BINDINGS[engine][1], env=env)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_preload_loads_a_submodule_on_first_use_with_the_same_exports(
    kubernetes_index: tuple[str, Path, list[str]],
) -> None:
    engine, root, names = kubernetes_index
    assert len(names) == {"cdktf": 109, "cdktn": 112}[engine]
    full, lazy = _node(root, engine, preload=False), _node(root, engine, preload=True)
    assert full["before"] == names  # without the preload, node requires every submodule up front
    assert lazy["keys"] == full["keys"]
    assert lazy["before"] == []
    labels = next(name for name in names if name.split("/")[0] == "labels")  # labels, or labels/index
    assert lazy["labels"] == labels
    assert lazy["after"] == [labels]
    assert lazy["again"] is True
    # Switched off, the preload leaves the index as it is.
    off = _node(root, engine, preload=True, env={SPEEDUPS_ENV: "shared-values,lazy-index"})
    assert off["before"] == names


def test_preload_rejects_an_index_it_does_not_know(
    kubernetes_index: tuple[str, Path, list[str]], tmp_path: Path
) -> None:
    engine, _, _ = kubernetes_index
    changed = _real_index(engine).replace(f"// generated by {engine} get", "exports.extra = compute();")
    _index_tree(tmp_path, engine, changed)
    result = _run_node("--require", str(NODE_PRELOAD), "-e", NODE_CHECK, str(tmp_path), ENGINE_BINDINGS[engine][1])
    assert result.returncode != 0
    assert 'unexpected line "exports.extra = compute();"' in result.stderr
    assert "node_preload.js only knows the generated index of the pinned bindings" in result.stderr


def test_preload_rejects_cdk_terrains_index_with_other_helpers(tmp_path: Path) -> None:
    changed = _real_index("cdktn").replace("if (k2 === undefined) k2 = k;", "k2 = k2 ?? k;", 1)
    _index_tree(tmp_path, "cdktn", changed)
    result = _run_node("--require", str(NODE_PRELOAD), "-e", NODE_CHECK, str(tmp_path), "@cdktn")
    assert result.returncode != 0
    assert "its header is not the one of the pinned version" in result.stderr


def test_preload_leaves_other_files_alone(tmp_path: Path) -> None:
    (tmp_path / "index.js").write_text("exports.answer = 42;\n")
    script = f"console.log(require({json.dumps(str(tmp_path / 'index.js'))}).answer)"
    result = _run_node("--require", str(NODE_PRELOAD), "-e", script)
    assert (result.returncode, result.stdout.strip()) == (0, "42"), result.stderr


SURVIVOR = """
process.stdin.on("end", () => { console.log("stdin closed"); process.exit(0); });
process.stdin.resume();
console.log("ready");
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_the_kernel_leaves_signals_to_python_and_ends_with_its_stdin(signum: signal.Signals) -> None:
    process = subprocess.Popen(
        [binary("node"), "--require", str(NODE_PRELOAD), "-e", SURVIVOR],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=_env_without_preload(),
        text=True,
    )
    assert process.stdout is not None and process.stdin is not None
    assert process.stdout.readline().strip() == "ready"
    process.send_signal(signum)
    assert process.poll() is None
    process.stdin.close()  # what the death of the Python process does
    assert process.stdout.readline().strip() == "stdin closed"
    assert process.wait(timeout=10) == 0


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
    assert code == 0  # the report: the MIG offering is not on this whole-GPU node, which is no problem
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
