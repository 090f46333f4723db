"""Loading only the provider bindings the stacks use, cheaply (themelio_gpu/bindings_loader.py, node_preload.js).

- the lazily loaded bindings, with memoized type hints and without token stack traces, synthesize exactly
  the bytes a full import without either does (both in fresh processes);
- a bindings package that is not laid out as the loader assumes is a clear error, not a silent fallback;
- the bindings' argument checks still run, with each signature's type hints resolved once;
- the node preload gives the kubernetes bindings' index the same exports, loaded on first use, and cdktf's
  tokens a placeholder creation stack unless THEMELIO_TOKEN_STACK_TRACES=1;
- commands that do not synthesize never import cdktf or the bindings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, write_fleet
from tests.conftest import ROOT
from tests.requirements import binary
from themelio_gpu import bindings_loader
from themelio_gpu.bindings_loader import (
    ARGUMENT_CHECKS_ENV,
    KUBERNETES,
    NODE_PRELOAD,
    TYPING_WITH_MEMOIZED_HINTS,
    Bindings,
    BindingsLayoutError,
    memoize_type_hints,
    memoized_type_hints,
    node_options_with_preload,
    register_assembly,
    skip_argument_checks,
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


# Run in a fresh interpreter: reports how many kubernetes binding submodules Python imported, whether cdktf's
# argument checks use the memoized type hints, and the NODE_OPTIONS of the jsii node processes (read from
# /proc while they still run). "full" is the bindings as shipped: the packages' own __init__ (so node starts
# without the preload) and typing's own get_type_hints.
SYNTH_SCRIPT = """
import json, os, sys, typing
from pathlib import Path
if sys.argv[1] == "full":
    import cdktf_cdktf_provider_kubernetes, cdktf_cdktf_provider_helm  # the packages' own __init__
    import themelio_gpu.bindings_loader
    themelio_gpu.bindings_loader.memoize_type_hints = lambda module: None
from themelio_gpu.cli import synth_main
code = synth_main(["--catalog", sys.argv[2], "--stacks-dir", sys.argv[3], "--outdir", sys.argv[4], "--quiet"])
def node_options(pid):
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\\0")
        yield from (e[13:].decode() for e in environ if e.startswith(b"NODE_OPTIONS="))
        yield from node_options(child)
kubernetes = sorted(m for m in sys.modules if m.startswith("cdktf_cdktf_provider_kubernetes."))
memoized = sys.modules["cdktf"]._private.typing is not typing
checked = sys.modules["cdktf"]._private.check_type.__name__ != "_unchecked"
report = {"code": code, "kubernetes_modules": len(kubernetes), "memoized": memoized, "checked": checked,
          "node_options": list(node_options(os.getpid()))}
print(json.dumps(report))
"""


def _env_without_preload(*dropped: str) -> dict[str, str]:
    # Importing themelio_gpu put the preload in this process's NODE_OPTIONS; children choose for themselves
    # (and record token stacks only when a test asks).
    names = ("NODE_OPTIONS", "THEMELIO_TOKEN_STACK_TRACES", *dropped)
    return {k: v for k, v in os.environ.items() if k not in names}


def _synthesize(mode: str, catalog: Path, stacks: Path, out: Path) -> dict[str, Any]:
    # "lazy" runs as users run it: without the argument checks the test suite keeps (conftest.py).
    dropped = (ARGUMENT_CHECKS_ENV,) if mode == "lazy" else ()
    result = subprocess.run(
        [sys.executable, "-c", SYNTH_SCRIPT, mode, str(catalog), str(stacks), str(out)],
        cwd=ROOT,
        env={**_env_without_preload(*dropped), **({ARGUMENT_CHECKS_ENV: "1"} if mode == "full" else {})},
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

    # Each run took the path it is meant to test: all 109 submodules, node's full index (and its token
    # stack traces) and typing's get_type_hints, or a handful of submodules, the preload and the memo.
    assert full["kubernetes_modules"] > 100
    assert full["node_options"] == []
    assert full["memoized"] is False
    assert full["checked"] is True
    assert lazy["kubernetes_modules"] < 20
    assert lazy["memoized"] is True
    assert lazy["checked"] is False
    assert len(lazy["node_options"]) == 1  # the kernel, started without jsii's relay (kernel_channel.py)
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


# --- the bindings' argument checks, with memoized type hints --------------------------------------------


def _binding_namespaces() -> dict[str, types.ModuleType]:
    """The namespaces (publication's `_private`) of cdktf, constructs and each binding module providers uses."""
    from themelio_gpu.constructs import providers

    names = {"cdktf", "constructs"}
    names |= {
        v.__module__ for v in vars(providers).values() if isinstance(v, type) and "_provider_" in v.__module__
    }
    assert len(names) == 10  # cdktf, constructs and the eight submodules providers.py imports from
    return {name: sys.modules[name]._private for name in sorted(names)}


def test_every_binding_module_providers_uses_gets_the_memoized_type_hints() -> None:
    for name, namespace in _binding_namespaces().items():
        assert vars(namespace)["typing"] is TYPING_WITH_MEMOIZED_HINTS, name


def test_a_binding_called_with_a_wrong_argument_type_still_raises_type_error() -> None:
    import cdktf

    from themelio_gpu.constructs.providers import NamespaceV1Metadata

    with pytest.raises(TypeError, match=r"type of argument name must be one of \(str, NoneType\); got int"):
        NamespaceV1Metadata(name=42)  # type: ignore[arg-type]  # the wrong type this test is about
    with pytest.raises(TypeError, match=r"type of argument separator must be str; got int"):
        cdktf.Fn.join(42, ["a"])  # type: ignore[arg-type]
    assert NamespaceV1Metadata(name="gpu").name == "gpu"


def test_the_memo_gives_every_stub_the_hints_typing_gives() -> None:
    memo = TYPING_WITH_MEMOIZED_HINTS
    assert memo.get_type_hints is memoized_type_hints
    stubs = [
        value
        for namespace in _binding_namespaces().values()
        for key, value in vars(namespace).items()
        if key.startswith("_typecheckingstub__")
    ]
    assert len(stubs) > 800
    for stub in stubs:
        assert memo.get_type_hints(stub) == typing.get_type_hints(stub), stub.__qualname__
        assert memo.get_type_hints(stub) is memo.get_type_hints(stub)
    # Everything else is the real typing module's.
    names = [name for name in dir(typing) if not name.startswith("__") and name != "get_type_hints"]
    assert "cast" in names and "Optional" in names
    assert [name for name in names if getattr(memo, name) is not getattr(typing, name)] == []
    assert memo.__file__ == typing.__file__


def _counting_get_type_hints(monkeypatch: pytest.MonkeyPatch, module_prefix: str) -> list[object]:
    """Replace typing.get_type_hints with one recording each call for an object of the given module."""
    calls: list[object] = []
    real = typing.get_type_hints

    def counting(obj: Callable[..., object], *args: Any, **kwargs: Any) -> dict[str, Any]:
        if getattr(obj, "__module__", "").startswith(module_prefix):
            calls.append(obj)
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(typing, "get_type_hints", counting)
    return calls


def test_type_hints_are_resolved_once_per_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    from themelio_gpu.constructs.providers import NamespaceV1Metadata

    calls = _counting_get_type_hints(monkeypatch, "cdktf_cdktf_provider_kubernetes.namespace_v1")
    for name in ("a", "b", "c"):
        NamespaceV1Metadata(name=name)
    assert len(calls) <= 1  # none if an earlier test resolved it already; typing's own would be three

    def stub(scope: str, count: int | None = None) -> None: ...

    calls = _counting_get_type_hints(monkeypatch, __name__)
    memo = TYPING_WITH_MEMOIZED_HINTS
    assert [memo.get_type_hints(stub) for _ in range(3)] == [
        {"scope": str, "count": int | None, "return": type(None)}
    ] * 3
    assert calls == [stub]


def test_memoizing_a_module_twice_changes_nothing() -> None:
    import cdktf

    memoize_type_hints(cdktf)
    assert vars(vars(cdktf)["_private"])["typing"] is TYPING_WITH_MEMOIZED_HINTS


def test_a_module_without_typing_is_a_clear_error() -> None:
    with pytest.raises(BindingsLayoutError, match=r"^not_a_binding: no global `typing`\. .*memoize_type_hints"):
        memoize_type_hints(types.ModuleType("not_a_binding"))


def test_a_module_whose_typing_is_another_module_is_a_clear_error() -> None:
    module = types.ModuleType("other_typing")
    module.typing = types.ModuleType("typing")  # type: ignore[attr-defined]
    with pytest.raises(BindingsLayoutError, match=r"^other_typing: `typing` is <module 'typing'>, not the typing"):
        memoize_type_hints(module)


def test_the_published_modules_namespace_is_the_one_memoized() -> None:
    public, private = types.ModuleType("published"), types.ModuleType("published")
    private.typing = typing  # type: ignore[attr-defined]
    public._private = private  # type: ignore[attr-defined]
    memoize_type_hints(public)
    assert vars(private)["typing"] is TYPING_WITH_MEMOIZED_HINTS
    assert "typing" not in vars(public)


_WRONG_ARGUMENT = """
import sys
from cdktf import App, TerraformStack
from themelio_gpu.constructs.providers import Labels, LabelsMetadata
stack = TerraformStack(App(outdir=sys.argv[1]), "s")
try:
    Labels(stack, "labels", api_version="v1", kind="Node", metadata=LabelsMetadata(name="n"), labels=42)
except Exception as error:
    print(type(error).__name__, str(error).splitlines()[0])
"""


@pytest.mark.parametrize(
    ("checks", "error"),
    [
        ("1", "TypeError type of argument labels must be collections.abc.Mapping; got int instead"),
        # Skipped, as users run synthesis: jsii's kernel refuses the value itself.
        (
            "",
            "RuntimeError Passed to parameter config of new @cdktf/provider-kubernetes.labels.Labels: "
            "Unable to deserialize value as @cdktf/provider-kubernetes.labels.LabelsConfig",
        ),
    ],
)
def test_a_wrongly_typed_argument_is_refused_with_or_without_the_checks(
    checks: str, error: str, tmp_path: Path
) -> None:
    env = {**_env_without_preload(ARGUMENT_CHECKS_ENV), **({ARGUMENT_CHECKS_ENV: checks} if checks else {})}
    result = subprocess.run(
        [sys.executable, "-c", _WRONG_ARGUMENT, str(tmp_path / "out")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == error


def test_skipping_the_checks_of_a_module_without_them_is_a_clear_error() -> None:
    with pytest.raises(BindingsLayoutError, match=r"^not_a_binding: no `check_type\(argname, value, expected_"):
        skip_argument_checks(types.ModuleType("not_a_binding"))
    published, private = types.ModuleType("published"), types.ModuleType("published")

    def check_type(argname: str, value: object, expected_type: Any) -> None:
        raise TypeError(argname)

    private.check_type = check_type  # type: ignore[attr-defined]
    published._private = private  # type: ignore[attr-defined]
    skip_argument_checks(published)
    skip_argument_checks(published)  # twice: changes nothing
    assert vars(private)["check_type"] is not check_type
    vars(private)["check_type"]("argument scope", 42, str)  # no longer raises
    assert "check_type" not in vars(published)


# --- NODE_OPTIONS --------------------------------------------------------------------------------------


def test_node_options_keep_the_users_own_and_add_the_preload_once() -> None:
    once = node_options_with_preload("--max-http-header-size=16384")
    assert once == f'--max-http-header-size=16384 --require "{NODE_PRELOAD}"'
    assert node_options_with_preload(once) == once
    assert node_options_with_preload(None) == f'--require "{NODE_PRELOAD}"'


def test_node_options_quote_a_path_with_spaces_and_quotes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bindings_loader, "NODE_PRELOAD", Path('/opt/my "apps"/node_preload.js'))
    assert node_options_with_preload("") == '--require "/opt/my \\"apps\\"/node_preload.js"'


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
    assert "node_preload.js only knows a generated index" in result.stderr


def test_preload_leaves_other_files_alone(tmp_path: Path) -> None:
    (tmp_path / "index.js").write_text("exports.answer = 42;\n")
    script = f"console.log(require({json.dumps(str(tmp_path / 'index.js'))}).answer)"
    result = _run_node("--require", str(NODE_PRELOAD), "-e", script)
    assert (result.returncode, result.stdout.strip()) == (0, "42"), result.stderr


# --- the node preload, on the real stack-trace.js of cdktf 0.21.0 -----------------------------------------

STACK_TRACE_CHECK = """
const path = require("path");
const file = path.join(process.argv[1], "node_modules", "cdktf", "lib", "tokens", "private", "stack-trace.js");
console.log(JSON.stringify(require(file).captureStackTrace()));
"""
NOT_RECORDED = (
    "(token creation stacks are not recorded: set THEMELIO_TOKEN_STACK_TRACES=1 to record them, "
    "see themelio_gpu/node_preload.js)"
)


@pytest.fixture(scope="module")
def cdktf_stack_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """node_modules with cdktf's real lib/tokens/private/stack-trace.js, from the assembly jsii loads."""
    import cdktf._jsii as jsii_module

    root = tmp_path_factory.mktemp("cdktf")
    private = root / "node_modules" / "cdktf" / "lib" / "tokens" / "private"
    private.mkdir(parents=True)
    with tarfile.open(Path(jsii_module.__file__).parent / "cdktf@0.21.0.jsii.tgz") as archive:
        member = archive.extractfile("package/lib/tokens/private/stack-trace.js")
        assert member is not None
        (private / "stack-trace.js").write_bytes(member.read())
    return root


def _stack_trace(root: Path, preload: bool, **env: str) -> list[str]:
    command = [binary("node"), *(["--require", str(NODE_PRELOAD)] if preload else []), "-e", STACK_TRACE_CHECK]
    result = subprocess.run(
        [*command, str(root)], env=_env_without_preload() | env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    stack: list[str] = json.loads(result.stdout)
    return stack


def test_preload_replaces_cdktfs_token_stack_traces_with_a_placeholder(cdktf_stack_trace: Path) -> None:
    assert _stack_trace(cdktf_stack_trace, preload=True) == [NOT_RECORDED]
    assert _stack_trace(cdktf_stack_trace, preload=True, THEMELIO_TOKEN_STACK_TRACES="0") == [NOT_RECORDED]


@pytest.mark.parametrize("preload", [False, True], ids=["without preload", "THEMELIO_TOKEN_STACK_TRACES=1"])
def test_token_stack_traces_are_recorded_without_the_preload_or_when_asked(
    cdktf_stack_trace: Path, preload: bool
) -> None:
    stack = _stack_trace(cdktf_stack_trace, preload=preload, THEMELIO_TOKEN_STACK_TRACES="1")
    assert len(stack) > 1 and NOT_RECORDED not in stack
    assert any("[eval]" in frame for frame in stack)  # the caller: the -e script


def test_preload_rejects_a_stack_trace_module_it_does_not_know(cdktf_stack_trace: Path, tmp_path: Path) -> None:
    relative = Path("node_modules", "cdktf", "lib", "tokens", "private", "stack-trace.js")
    (tmp_path / relative).parent.mkdir(parents=True)
    content = (cdktf_stack_trace / relative).read_text()
    # The file ends in a source map comment without a newline.
    (tmp_path / relative).write_text(content + "\nexports.captureStackTraceLimit = 10;\n")
    result = _run_node("--require", str(NODE_PRELOAD), "-e", STACK_TRACE_CHECK, str(tmp_path))
    assert result.returncode != 0
    assert f'{tmp_path / relative}: exports ["captureStackTrace","captureStackTraceLimit"]' in result.stderr
    assert "node_preload.js only knows cdktf 0.21.0's stack-trace.js" in result.stderr


TOKEN_SCRIPT = """
import json
import themelio_gpu  # the node preload, before cdktf starts node
import cdktf
print(json.dumps(cdktf.Token.as_any("value").creation_stack))
"""


@pytest.mark.parametrize("recorded", [False, True], ids=["default", "THEMELIO_TOKEN_STACK_TRACES=1"])
def test_a_cdktf_tokens_creation_stack_in_the_app(recorded: bool) -> None:
    env = _env_without_preload() | ({"THEMELIO_TOKEN_STACK_TRACES": "1"} if recorded else {})
    result = subprocess.run(
        [sys.executable, "-c", TOKEN_SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    stack = json.loads(result.stdout.splitlines()[-1])
    if recorded:
        assert (
            stack[0].startswith("new Intrinsic (")
            and "node_modules/cdktf/lib/tokens/private/intrinsic.js" in stack[0]
        )
    else:
        assert stack == [NOT_RECORDED]


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
