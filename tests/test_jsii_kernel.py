"""jsii's node processes: its relay (bin/jsii-runtime.js) and the kernel it starts (lib/program.js).

- the kernel's own output still reaches stderr, and a JavaScript error is a Python exception;
- both node processes end when the app is done, and when the Python process dies, whatever killed it;
- a kernel that does not start (node refusing an option) is our one message after node's own, exit 1,
  nothing written and no traceback.
They run in fresh interpreters: the test process's own kernel started long ago.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.test_output_folder import _descendants, _gone_within
from tests.test_provider_loading import _env_without_preload, _fleet_using_every_binding_class

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the process tree in /proc")

# Reports the node processes below this interpreter (pid and script, read from /proc while they run) after
# a JavaScript error, which it reports too.
SCRIPT = """
import json, os, sys
from pathlib import Path
def descendants(pid):
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\\0")[:-1]
        yield [int(child), Path(command[-1].decode()).name]
        yield from descendants(child)
from themelio_gpu.constructs.providers import App, TerraformStack
app = App(outdir=sys.argv[1])
TerraformStack(app, "twice")
report = {}
try:
    TerraformStack(app, "twice")
except RuntimeError as error:
    report["error"] = str(error)
report["node"] = list(descendants(os.getpid()))
print(json.dumps(report))
"""


def test_the_kernel_output_reaches_stderr_and_javascript_errors_stay_exceptions(tmp_path: Path) -> None:
    # JSII_DEBUG makes the kernel log every request on its stderr (the relay passes it on, base64-wrapped).
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "out")],
        cwd=ROOT,
        env={**_env_without_preload(), "JSII_DEBUG": "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    assert "There is already a Construct with name 'twice'" in report["error"]
    assert '"api":"create"' in result.stderr.replace(" ", "")
    assert [script for _, script in report["node"]] == ["jsii-runtime.js", "program.js"]
    # The interpreter has exited: jsii's exit handler stopped its relay, and the relay its kernel.
    assert _gone_within({pid for pid, _ in report["node"]}, 1.0) == set()


KILLED = """
import os, sys, time
import themelio_gpu.outputs.app  # starts the kernel
print(os.getpid(), flush=True)
time.sleep(60)
"""


def test_the_kernel_ends_when_the_python_process_is_killed(tmp_path: Path) -> None:
    """And the relay removes the temporary folder jsii copied its runtime to, which no handler of the killed
    process could (node_preload.js)."""
    env = {**_env_without_preload(), "TMPDIR": str(tmp_path)}
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    process.stdout.readline()
    tree = _descendants(process.pid)
    assert len(tree) == 2  # the relay and the kernel
    assert list(tmp_path.glob("*/bin/jsii-runtime.js"))  # jsii's copy of its runtime
    process.kill()  # SIGKILL: no exit handler runs
    process.wait(timeout=30)
    assert _gone_within(tree, 1.0) == set()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"NODE_OPTIONS": "--cpu-prof"}, "--cpu-prof is not allowed in NODE_OPTIONS"),  # node's own words
        ({"PATH": "/nonexistent"}, "FileNotFoundError"),  # no node at all
    ],
    ids=["option-refused", "node-missing"],
)
def test_a_kernel_that_does_not_start_is_a_message_and_nothing_is_written(
    tmp_path: Path, env: dict[str, str], said: str
) -> None:
    catalog, stacks = _fleet_using_every_binding_class(tmp_path)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "main.py", "--catalog", str(catalog), "--stacks-dir", str(stacks), "--outdir", str(out)],
        cwd=ROOT,
        env={**_env_without_preload(), **env},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert said in result.stderr
    assert "jsii's node kernel did not start" in result.stderr
    assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr
    assert not out.exists()
