"""The speed-ups of synthesis that stay, and the one switch that turns any of them off.

Each one is measured by `make bench` (its ablation table switches each off alone) and synthesizes the same
bytes as without it (tests/test_speedups.py). Those that rely on a dependency's internals name the exact
versions they were written for, pinned in the Pipfile, and stop with a clear error on any other version.

    THEMELIO_SPEEDUPS_OFF=lazy-index,shared-values python main.py

turns those two off (for a comparison, or if one misbehaves after an upgrade); `all` turns every one off.
"""

from __future__ import annotations

import enum
import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager

ENV = "THEMELIO_SPEEDUPS_OFF"


class Speedup(enum.Enum):
    LAZY_BINDINGS = "lazy-bindings"
    """cdktf only: the prebuilt provider bindings' jsii assemblies are registered without their package
    `__init__`, which imports every submodule (bindings_loader.register_assembly); providers.py imports the
    six it needs. CDK Terrain's bindings import their submodules on first use themselves."""
    LAZY_INDEX = "lazy-index"
    """node: the kubernetes bindings' index requires each submodule on first use instead of all 84 MB of
    them at load (node_preload.js)."""
    SHARED_VALUES = "shared-values"
    """Values several stacks pass (outputs, DeviceClass maps) cross into node once, as one token
    (constructs/shared_values.py; public cdktf API)."""
    NO_CREATION_STACKS = "no-creation-stacks"
    """CDK Terrain only: its tokens do not record the stack trace of their creation, which only an error in
    resolving one would show (its own public switch, CDKTN_DISABLE_CREATION_STACK=1, in the kernel's
    environment). cdktf 0.21 has no switch for it (patching its private stack-trace.js saved under 10 %)."""
    PAUSED_COLLECTOR = "paused-collector"
    """Reading, checking and planning the fleet's files runs with Python's cyclic garbage collector paused
    (paused_collector): what it builds is kept and holds no cycles to find, while the collector's passes over
    the growing heap took about a tenth of its CPU at 1,000 cluster files. Reference counting still frees
    everything; anything cyclic left is collected once the collector runs again."""
    ENGINE_AHEAD = "engine-ahead"
    """`changed` without --head: the engine loads in a thread while the head's cluster files are read (at least
    300 of them; outputs/engine_load.py), so that node's share of the load runs on another CPU."""
    SKIP_PREPARE_PASS = "skip-prepare-pass"
    """cdktf only: the preparing pass, which resolves every element once more only to find references to
    other stacks, is skipped (GpuClusterStack.prepare_stack, a public method; cdktn keeps its own pass, which
    also validates)."""


INTERNALS: dict[Speedup, str] = {
    Speedup.LAZY_BINDINGS: "the bindings packages' layout (their `_jsii` module, the submodules' imports)",
    Speedup.LAZY_INDEX: "node's Module.prototype._compile and the bindings' generated lib/index.js",
}
"""The speed-ups that rely on a dependency's internals (the others use public API only): each must save at
least 10 % of synthesis CPU on the example fleet or on 100 clusters (`make bench` checks), and the versions
they know are pinned exactly."""


ONLY_UNDER: dict[Speedup, str] = {
    Speedup.LAZY_BINDINGS: "cdktf",
    Speedup.SKIP_PREPARE_PASS: "cdktf",
    Speedup.NO_CREATION_STACKS: "cdktn",
}
"""The speed-ups one engine alone has (themelio_gpu/engine.py); the others work under both."""


class SpeedupsSettingError(ValueError):
    """THEMELIO_SPEEDUPS_OFF names something that is not a speed-up."""


def switched_off(text: str | None = None) -> frozenset[Speedup]:
    """The speed-ups $THEMELIO_SPEEDUPS_OFF (or `text`) turns off."""
    value = os.environ.get(ENV, "") if text is None else text
    names = {part.strip().lower() for part in value.split(",") if part.strip()}
    if "all" in names:
        return frozenset(Speedup)
    known = {s.value: s for s in Speedup}
    unknown = sorted(names - set(known))
    if unknown:
        raise SpeedupsSettingError(
            f"{ENV}: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not a speed-up; "
            f"allowed: {', '.join(known)} or all, separated by commas"
        )
    return frozenset(known[n] for n in names)


def enabled(speedup: Speedup) -> bool:
    return speedup not in switched_off()


@contextmanager
def paused_collector() -> Iterator[None]:
    """Python's cyclic garbage collector paused while the block runs (Speedup.PAUSED_COLLECTOR), then as it was."""
    if not enabled(Speedup.PAUSED_COLLECTOR) or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
