"""Loading only the parts of the provider bindings the stacks use, in Python and in jsii's node process.

`import cdktf_cdktf_provider_kubernetes` runs a package `__init__` that imports all of its 109 submodules
(about 4 s of classes) while the stacks use six; and loading its jsii assembly makes node require all 84 MB
of the package's JavaScript (about 0.7 s). Both are avoided here:
- Python (cdktf's prebuilt bindings; CDK Terrain's import their submodules on first use themselves):
  `register_assembly` registers the assembly as that `__init__` does, through the package's `_jsii` module
  (which calls `jsii.JSIIAssembly.load`), without running the `__init__`; providers.py then imports only
  the submodules it names.
- node: `kernel_environment` gives the jsii kernel, and only it, `--require node_preload.js` in
  NODE_OPTIONS while providers.py starts it; the preload turns the package's index of `require`s into
  getters. Nothing else this tool starts (terraform, helm, exec credential plugins) sees that option.
These rely on the bindings' layout, which is why the versions are pinned exactly (Pipfile) and checked
here: a different installed version or layout stops with `BindingsLayoutError` (or a node error naming
node_preload.js) instead of guessing. tests/test_provider_loading.py checks that the output is
byte-identical to a full import; `THEMELIO_SPEEDUPS_OFF` turns each part off (speedups.py).
It imports nothing but the stdlib: every command may load it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from themelio_gpu.engine import Bindings

NODE_PRELOAD = Path(__file__).with_name("node_preload.js")


class BindingsLayoutError(RuntimeError):
    """The installed provider bindings are not the pinned version, laid out the way this module relies on."""


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


@contextmanager
def kernel_environment(extra: Mapping[str, str] | None = None) -> Iterator[None]:
    """The environment the jsii kernel starts with, only while the block runs (it starts on the first
    assembly load): NODE_OPTIONS with the preload, and `extra`. The process's own environment is restored
    after, so no other program this tool starts inherits them."""
    wanted = {"NODE_OPTIONS": node_options_with_preload(os.environ.get("NODE_OPTIONS")), **(extra or {})}
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
