"""Loading only the parts of the provider bindings the stacks use, in Python and in jsii's node process.

`import cdktf_cdktf_provider_kubernetes` runs a package `__init__` that imports all of its 109 submodules
(about 4 s of typeguard-checked classes) while the stacks use six; and loading its jsii assembly makes
node require all 84 MB of the package's JavaScript (about 0.7 s). Both are avoided here:
- Python: `register_assembly` registers the assembly as that `__init__` does, through the package's
  `_jsii` module (which calls `jsii.JSIIAssembly.load`), without running the `__init__`; providers.py then
  imports only the submodules it names.
- node: `preload_into_node` adds node_preload.js to NODE_OPTIONS before jsii starts node (themelio_gpu's
  `__init__` calls it, ahead of any cdktf import); it turns the package's index of `require`s into getters
  (and stops cdktf capturing a stack trace for every token it creates, see node_preload.js).
Then the per-call cost: `memoize_type_hints` gives a loaded bindings module a `typing` whose
`get_type_hints` resolves each type-checking stub once (see there).
The bindings are pinned and archived upstream, so this layout will not move under us; a different installed
version or layout stops with `BindingsLayoutError` (or a node error naming node_preload.js) instead of
guessing. tests/test_provider_loading.py checks that the output is byte-identical to a full import.
It sits beside cli.py, not in constructs/: every command runs it, and it imports nothing but the stdlib.
"""

from __future__ import annotations

import functools
import os
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

NODE_PRELOAD = Path(__file__).with_name("node_preload.js")


class BindingsLayoutError(RuntimeError):
    """The installed provider bindings are not the pinned version, laid out the way this module relies on."""


@dataclass(frozen=True)
class Bindings:
    package: str
    """The Python package, e.g. cdktf_cdktf_provider_kubernetes."""
    distribution: str
    version: str
    """The pinned version (as in Pipfile.lock); the jsii assembly inside has the same version."""
    assembly: str
    """The jsii assembly (npm package) name."""

    @property
    def tarball(self) -> str:
        return f"{self.assembly.rpartition('/')[2]}@{self.version}.jsii.tgz"


KUBERNETES = Bindings(
    "cdktf_cdktf_provider_kubernetes", "cdktf-cdktf-provider-kubernetes", "12.1.1", "@cdktf/provider-kubernetes"
)
HELM = Bindings("cdktf_cdktf_provider_helm", "cdktf-cdktf-provider-helm", "12.1.2", "@cdktf/provider-helm")


def layout_error(bindings: Bindings, problem: str) -> BindingsLayoutError:
    return BindingsLayoutError(
        f"{bindings.distribution}: {problem}. themelio_gpu/bindings_loader.py loads "
        f"{bindings.package} {bindings.version} without running its __init__ (which imports every submodule): "
        f"it registers the jsii assembly through {bindings.package}._jsii (the file _jsii/{bindings.tarball}) "
        "and providers.py imports only the submodules the stacks use. Check that the installed package has "
        "that layout and that tests/test_provider_loading.py passes, then update the pinned version there."
    )


def register_assembly(bindings: Bindings) -> None:
    """Register the bindings' jsii assembly without running the package's `__init__`."""
    if bindings.package in sys.modules:
        return  # imported already: in full by someone else, or registered by an earlier call
    import importlib.metadata
    import importlib.util

    try:
        installed = importlib.metadata.version(bindings.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise layout_error(bindings, "not installed") from None
    if installed != bindings.version:
        raise layout_error(
            bindings, f"version {installed} is installed, the loader is written for {bindings.version}"
        )
    spec = importlib.util.find_spec(bindings.package)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if spec is None or len(folders) != 1 or not (Path(folders[0]) / "_jsii" / bindings.tarball).is_file():
        raise layout_error(bindings, f"no single package folder holding _jsii/{bindings.tarball}")
    # The package module, created from its spec but not executed: its submodules import as usual.
    sys.modules[bindings.package] = importlib.util.module_from_spec(spec)
    try:
        jsii_module = importlib.import_module(f"{bindings.package}._jsii")
    except BaseException:
        del sys.modules[bindings.package]
        raise
    loaded = getattr(jsii_module, "__jsii_assembly__", None)
    if (getattr(loaded, "name", None), getattr(loaded, "version", None)) != (bindings.assembly, bindings.version):
        raise layout_error(bindings, f"{bindings.package}._jsii did not load the assembly {bindings.assembly}")


def node_options_with_preload(node_options: str | None) -> str:
    """NODE_OPTIONS with `--require <node_preload.js>` added once (the user's own options kept)."""
    quoted = '"' + str(NODE_PRELOAD).replace("\\", "\\\\").replace('"', '\\"') + '"'
    option = f"--require {quoted}"
    current = (node_options or "").strip()
    if option in current:
        return current
    return f"{current} {option}".strip()


def preload_into_node() -> None:
    """Make the jsii node process load node_preload.js; only has an effect before jsii starts node."""
    os.environ["NODE_OPTIONS"] = node_options_with_preload(os.environ.get("NODE_OPTIONS"))


# --- the bindings' argument checks -----------------------------------------------------------------------


@functools.cache
def memoized_type_hints(stub: Callable[..., typing.Any]) -> dict[str, typing.Any]:
    """`typing.get_type_hints(stub)`, resolved once per stub (the result is shared: read it only)."""
    return typing.get_type_hints(stub)


class TypingWithMemoizedHints(types.ModuleType):
    """`typing`, except that `get_type_hints(stub)` resolves each stub once; all else is the real module's.

    Every generated method, constructor and struct of these bindings runs `if __debug__: type_hints =
    typing.get_type_hints(_typecheckingstub__<hash>)` and then `check_type(...)` per argument, and
    get_type_hints walks (and rebuilds) the stub's annotations on every call: about 3 ms of CPU per cluster.
    A stub's annotations are fixed once its module is loaded, so one resolution per stub gives the same
    hints; the checks themselves still run on every call. Newer generated code does the same through jsii's
    runtime (`jsii._type_checking.cached_type_hints`, aws/jsii#5165, #5177); the archived bindings will never
    be regenerated, and this module imports no jsii (every command loads it), hence this small copy.
    """

    def __init__(self) -> None:
        super().__init__("typing", self.__doc__)
        # typing's own names, copied: the bindings read `typing.cast`, `typing.Optional`, ... about 800
        # times per cluster, and a miss that falls through to __getattr__ costs about as much as the memo
        # saves. They are the same objects (typing never rebinds them).
        vars(self).update({name: value for name, value in vars(typing).items() if not name.startswith("__")})
        # Only the generated `get_type_hints(stub)` calls read it (no globalns, localns or include_extras).
        self.get_type_hints = memoized_type_hints

    def __getattr__(self, name: str) -> object:
        return getattr(typing, name)  # anything else (the module's dunders), from typing itself

    def __repr__(self) -> str:
        return f"<typing, with get_type_hints memoized by {__name__}>"


TYPING_WITH_MEMOIZED_HINTS = TypingWithMemoizedHints()
"""The one proxy every bindings module shares."""


def _namespace(module: types.ModuleType) -> types.ModuleType:
    """The globals of a loaded jsii bindings module's functions."""
    # jsii-generated modules end with `publication.publish()`: the module imported by that name is then a
    # facade holding only `__all__`, and the module's own namespace (its functions' globals) `_private`.
    private = vars(module).get("_private")
    return private if isinstance(private, types.ModuleType) else module


def memoize_type_hints(module: types.ModuleType) -> None:
    """Make the loaded jsii bindings module use TYPING_WITH_MEMOIZED_HINTS as its global `typing`."""
    namespace = _namespace(module)
    current = vars(namespace).get("typing")
    proxy = TYPING_WITH_MEMOIZED_HINTS
    if current is proxy:
        return
    if current is not typing:
        found = "no global `typing`" if current is None else f"`typing` is {current!r}, not the typing module"
        raise BindingsLayoutError(
            f"{namespace.__name__}: {found}. themelio_gpu/bindings_loader.py (memoize_type_hints) replaces the "
            "module-global `typing` of jsii-generated bindings, whose argument checks call "
            "typing.get_type_hints; check that the module is such a binding and that "
            "tests/test_provider_loading.py passes"
        )
    namespace.typing = proxy  # type: ignore[attr-defined]  # the global the module's functions read


ARGUMENT_CHECKS_ENV = "THEMELIO_BINDING_CHECKS"
"""`1`: keep the bindings' typeguard argument checks (the test suite does, see tests/conftest.py)."""


def argument_checks_wanted() -> bool:
    return os.environ.get(ARGUMENT_CHECKS_ENV, "").strip() == "1"


def _unchecked(argname: str, value: object, expected_type: typing.Any) -> None:
    """The bindings' `check_type`, skipped (see skip_argument_checks)."""


def skip_argument_checks(module: types.ModuleType) -> None:
    """Make the loaded jsii bindings module skip its typeguard argument checks, as `python -O` would.

    Every generated method, constructor and struct checks each argument with typeguard before jsii sends it
    to node (`if __debug__: ... check_type(argname=..., value=..., expected_type=...)`): about 100,000
    checks, 2.5 ms of CPU per cluster, a fifth of synthesis's Python time. They duplicate two checks that
    stay: mypy --strict checks these calls against the bindings' types, and the jsii kernel checks every
    value it receives against the assembly's types (a wrong one is a RuntimeError naming the parameter).
    The test suite keeps them (THEMELIO_BINDING_CHECKS=1); the bytes synthesized are the same either way
    (tests/test_provider_loading.py).
    """
    namespace = _namespace(module)
    current = vars(namespace).get("check_type")
    if current is _unchecked:
        return
    code = getattr(current, "__code__", None)
    if code is None or code.co_varnames[:3] != ("argname", "value", "expected_type"):
        raise BindingsLayoutError(
            f"{namespace.__name__}: no `check_type(argname, value, expected_type)` global. "
            "themelio_gpu/bindings_loader.py (skip_argument_checks) replaces the typeguard check that "
            "jsii-generated bindings call for every argument; check that the module is such a binding and "
            f"that tests/test_provider_loading.py passes (or set {ARGUMENT_CHECKS_ENV}=1)"
        )
    namespace.check_type = _unchecked  # type: ignore[attr-defined]  # the global the module's functions read
