"""Loading the engine (cdktf or CDK Terrain, the provider bindings and jsii's node kernel) while a large fleet is
read, so that the two share the machine's CPUs instead of taking turns.

`changed --base-ref` without `--head` reads and checks every cluster file of the head before it synthesizes
the few stacks that differ; at 1,000 files the reading takes about 1.5 s and the engine's load about 0.5 s,
most of it in node. A thread imports the synthesis module meanwhile; the block then waits for it to end.
The wait is also what keeps the kernel's environment to itself: bindings_loader.kernel_environment sets
NODE_OPTIONS while the kernel starts, so no program may be started until the load has ended (the block starts
none). Fewer files are read sooner than the engine loads, and may need no synthesis at all: below MIN_FILES
nothing is loaded ahead. A load that fails is not reported here: the synthesis imports the module again and
raises the error where the command handles it.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from themelio_gpu.speedups import Speedup, enabled

MIN_FILES = 300
"""At about 1.5 ms a file, reading fewer takes less time than the engine's load: nothing would be gained, and the
load would be waited for even when nothing is synthesized."""
SYNTHESIS_MODULE = "themelio_gpu.outputs.app"


def _load() -> None:
    try:
        importlib.import_module(SYNTHESIS_MODULE)
    except Exception:  # raised again by the synthesis's own import, where the command handles it
        return


@contextmanager
def engine_loaded_meanwhile(files: int) -> Iterator[None]:
    """The engine loads in a thread while the block reads `files` files (none below MIN_FILES); the block ends
    once the load has."""
    if files < MIN_FILES or not enabled(Speedup.ENGINE_AHEAD):
        yield
        return
    thread = threading.Thread(target=_load, name="engine-load", daemon=True)
    thread.start()
    try:
        yield
    finally:
        thread.join()
