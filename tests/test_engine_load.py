"""The engine loaded while a large fleet is read (themelio_gpu/outputs/engine_load.py): loaded by the time the
block ends, never for a small fleet, the kernel's environment given back before any program can start, and a
load that fails leaves the error to the synthesis (no traceback of the thread's own)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

PROGRAM = """
import os, sys
from themelio_gpu.outputs import engine_load
engine_load.SYNTHESIS_MODULE = {module!r}
before = os.environ.get("NODE_OPTIONS")
with engine_load.engine_loaded_meanwhile({files}):
    pass
print(engine_load.SYNTHESIS_MODULE in sys.modules, os.environ.get("NODE_OPTIONS") == before)
"""


def _run(files: int, module: str = "themelio_gpu.outputs.app", off: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM.format(files=files, module=module)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={
            "PATH": "/usr/bin:/bin",
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
            "THEMELIO_SPEEDUPS_OFF": off,
        },
    )


def test_a_large_fleet_has_the_engine_loaded_when_its_reading_ends_and_node_options_given_back() -> None:
    from themelio_gpu.outputs.engine_load import MIN_FILES

    loaded = _run(MIN_FILES)
    assert (loaded.returncode, loaded.stdout, loaded.stderr) == (0, "True True\n", "")
    small = _run(MIN_FILES - 1)
    assert (small.returncode, small.stdout, small.stderr) == (0, "False True\n", "")
    switched_off = _run(MIN_FILES, off="engine-ahead")
    assert (switched_off.returncode, switched_off.stdout, switched_off.stderr) == (0, "False True\n", "")


def test_a_load_that_fails_says_nothing_of_its_own() -> None:
    failed = _run(10_000, "themelio_gpu.no_such_module")
    assert (failed.returncode, failed.stdout, failed.stderr) == (0, "False True\n", "")
