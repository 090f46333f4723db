"""jsii's kernel spoken to directly, without jsii's relay process (themelio_gpu/kernel_channel.py).

- synthesis through the direct channel writes exactly the bytes it writes through jsii's relay, and runs one
  node process (the kernel) instead of two;
- the kernel's own output still reaches stderr, a JavaScript error is still a Python exception, and the
  kernel is stopped and reaped when the app is done;
- when the Python process dies, whatever killed it, the kernel ends with it;
- a jsii runtime laid out otherwise than the pinned one is a clear error, not a guess;
  THEMELIO_SPEEDUPS_OFF=direct-kernel, a user's JSII_RUNTIME or a platform without posix_spawn keep jsii's
  relay.
All but the last run in fresh interpreters: the test process's own kernel started long ago.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.test_provider_loading import _env_without_preload, _files, _fleet_using_every_binding_class
from themelio_gpu import kernel_channel
from themelio_gpu.kernel_channel import KernelChannelError
from themelio_gpu.speedups import ENV as SPEEDUPS_ENV

RELAY = {SPEEDUPS_ENV: "direct-kernel"}

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads the process tree in /proc")

# Reports the node processes below this interpreter (command lines, read from /proc while they run) after
# the action named by argv[1]; then stops jsii's kernel as atexit would and reports whether it is gone.
SCRIPT = """
import json, os, sys
from pathlib import Path
def descendants(pid):
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        yield Path(f"/proc/{child}/cmdline").read_bytes().split(b"\\0")[:-1]
        yield from descendants(child)
report = {}
action = sys.argv[1]
if action == "synth":
    from themelio_gpu.cli import synth_main
    report["code"] = synth_main(["--catalog", sys.argv[2], "--stacks-dir", sys.argv[3], "--outdir", sys.argv[4],
                                 "--quiet"])
elif action == "start":
    import themelio_gpu.outputs.app  # which starts the kernel (cdktf loads its assembly)
elif action == "javascript-error":
    from themelio_gpu.constructs.providers import App, TerraformStack
    app = App(outdir=sys.argv[2])
    TerraformStack(app, "twice")
    try:
        TerraformStack(app, "twice")
    except RuntimeError as error:
        report["error"] = str(error)
report["node"] = [[part.decode() for part in command] for command in descendants(os.getpid())]
from jsii._runtime import kernel
process = kernel.provider._process
pid = process._process.pid
process.stop()
report["kernel_gone"] = not Path(f"/proc/{pid}").exists()
print(json.dumps(report))
"""


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[dict[str, Any], str]:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args],
        cwd=ROOT,
        env={**_env_without_preload(), **(env or {})},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return report, result.stderr


def _scripts(commands: list[list[str]]) -> list[str]:
    return [Path(c[-1]).name for c in commands]


def test_the_direct_channel_synthesizes_the_same_bytes_as_jsii_relay(tmp_path: Path) -> None:
    catalog, stacks = _fleet_using_every_binding_class(tmp_path)
    direct, _ = _run("synth", str(catalog), str(stacks), str(tmp_path / "direct"))
    relay, _ = _run("synth", str(catalog), str(stacks), str(tmp_path / "relay"), env=RELAY)

    assert direct["code"] == relay["code"] == 0
    # Each run took its own path: one node process running the kernel, or jsii's relay and its kernel.
    assert _scripts(direct["node"]) == ["program.js"]
    assert direct["node"][0][1:3] == ["--max-old-space-size=4069", "--preserve-symlinks"]
    assert _scripts(relay["node"]) == ["jsii-runtime.js", "program.js"]
    assert direct["kernel_gone"] and relay["kernel_gone"]

    direct_files, relay_files = _files(tmp_path / "direct"), _files(tmp_path / "relay")
    assert sorted(direct_files) == sorted(relay_files)
    assert len([f for f in direct_files if f.endswith("cdk.tf.json")]) == 4
    for name, content in relay_files.items():
        assert direct_files[name] == content, name


def test_the_kernel_output_reaches_stderr_and_javascript_errors_stay_exceptions(tmp_path: Path) -> None:
    # JSII_DEBUG makes the kernel log every request on its stderr: through the relay it came base64-wrapped.
    report, stderr = _run("javascript-error", str(tmp_path / "out"), env={"JSII_DEBUG": "1"})
    assert "There is already a Construct with name 'twice'" in report["error"]
    assert '"api":"create"' in stderr.replace(" ", "")
    assert report["kernel_gone"]


KILLED = """
import os, sys, time
import themelio_gpu.outputs.app  # starts the kernel
print(os.getpid(), flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("env", [{}, RELAY], ids=["direct", "relay"])
def test_the_kernel_ends_when_the_python_process_is_killed(env: dict[str, str]) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED],
        cwd=ROOT,
        env={**_env_without_preload(), **env},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.stdout.readline()
    from tests.test_output_folder import _descendants, _gone_within

    tree = _descendants(process.pid)
    assert len(tree) == (1 if not env else 2)
    process.kill()  # SIGKILL: no exit handler runs
    process.wait(timeout=30)
    assert _gone_within(tree, 1.0) == set()


# --- in this process: the layout checks and when jsii's relay stays -----------------------------------


def _runtime(tmp_path: Path, relay: str, program: str | None) -> Path:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "jsii-runtime.js").write_text(relay)
    if program is not None:
        (tmp_path / "lib").mkdir()
        (tmp_path / "lib" / "program.js").write_text(program)
    return tmp_path / "bin" / "jsii-runtime.js"


def test_the_pinned_runtime_layout_is_accepted(tmp_path: Path) -> None:
    runtime = _runtime(
        tmp_path, f"x{kernel_channel._RELAY_SPAWNS_KERNEL}x", f"y{kernel_channel._KERNEL_USES_FD_3}y"
    )
    assert kernel_channel._kernel_program(str(runtime)) == tmp_path / "lib" / "program.js"


@pytest.mark.parametrize(
    ("relay", "program", "problem"),
    [
        ("", None, "its runtime jsii-runtime.js has no lib/program.js beside it"),
        (
            "spawn(process.execPath,[program])",
            "readFD:3,writeFD:3",
            "its relay (bin/jsii-runtime.js) does not start lib/program.js as 1.142's does",
        ),
        (
            kernel_channel._RELAY_SPAWNS_KERNEL,
            "readFD:0,writeFD:1",
            "its kernel (lib/program.js) does not use fd 3 for its API channel",
        ),
    ],
)
def test_another_runtime_layout_is_a_clear_error(
    tmp_path: Path, relay: str, program: str | None, problem: str
) -> None:
    with pytest.raises(KernelChannelError) as error:
        kernel_channel._kernel_program(str(_runtime(tmp_path, relay, program)))
    message = str(error.value)
    assert message.startswith(f"jsii: {problem}. themelio_gpu/kernel_channel.py starts jsii 1.142.0's kernel")
    assert "Set THEMELIO_SPEEDUPS_OFF=direct-kernel to use jsii's relay" in message


def test_another_jsii_version_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import jsii

    monkeypatch.setattr(jsii, "__version__", "1.143.0")
    monkeypatch.delenv(SPEEDUPS_ENV, raising=False)
    monkeypatch.delenv("JSII_RUNTIME", raising=False)
    with pytest.raises(KernelChannelError, match=r"^jsii: version 1\.143\.0 is installed, the channel is written"):
        kernel_channel.use_direct_channel()


@pytest.mark.parametrize(
    ("env", "has_posix_spawn", "wanted"),
    [
        ({}, True, True),
        (RELAY, True, False),
        ({SPEEDUPS_ENV: "all"}, True, False),
        ({"JSII_RUNTIME": "/opt/my-runtime.js"}, True, False),
        ({}, False, False),
    ],
)
def test_when_jsii_relay_stays(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], has_posix_spawn: bool, wanted: bool
) -> None:
    monkeypatch.delenv(SPEEDUPS_ENV, raising=False)
    monkeypatch.delenv("JSII_RUNTIME", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if not has_posix_spawn:
        monkeypatch.delattr(os, "posix_spawn")
    assert kernel_channel.direct_channel_wanted() is wanted


def test_a_kernel_that_does_not_start_is_a_message_and_nothing_is_written(tmp_path: Path) -> None:
    catalog, stacks = _fleet_using_every_binding_class(tmp_path)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "main.py", "--catalog", str(catalog), "--stacks-dir", str(stacks), "--outdir", str(out)],
        cwd=ROOT,
        env={**_env_without_preload(), "NODE_OPTIONS": "--cpu-prof"},  # an option node refuses there
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "--cpu-prof is not allowed in NODE_OPTIONS" in result.stderr  # node's own words
    assert "jsii's node kernel did not start" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()
