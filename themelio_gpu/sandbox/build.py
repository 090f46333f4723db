"""`make sandbox-tools`: build every tool of tools.toml that is not built yet, in parallel.

A tool from the module proxy is built in a scratch module that requires it (the standard way for a module
whose go.mod replaces its own parts, like k8s.io/kubernetes and etcd): `go mod tidy`, then `go build
-trimpath` with CGO off, the entry's tags and version-stamping ldflags. A tool from an upstream source archive
(the releases the proxy refuses) has the archive's SHA-256 checked against tools.toml before it is unpacked
into a scratch folder, and is built there as its own repository builds it (`-mod=vendor` where it vendors its
dependencies, else with the module proxy). Every archive is checked before anything is built: a missing or
altered one stops the command with one line naming it. The binaries go to a temporary
folder beside the tool's cache folder and replace it by rename only when every binary is built, so an
interrupted or failed build leaves the old folder or none, never half of one. Every child runs in its own
process group and is ended with the command (Ctrl-C, SIGTERM): no `go` or compiler outlives it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import suppress
from pathlib import Path

from themelio_gpu import exits, interrupts
from themelio_gpu.sandbox.tools import (
    ARCHIVES_ENV,
    ARCHIVES_README,
    PROVIDERS_ENV,
    Tool,
    cache_root,
    go_version,
    load_tools,
    registry_providers,
)


class BuildError(Exception):
    """A tool did not build: the message names it, the command and the end of its output."""


class _Children:
    """The build's running children, so that an interrupt in the main thread can end every one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[subprocess.Popen[str]] = set()
        self.stopping = threading.Event()

    def run(self, command: Sequence[str], cwd: Path, env: dict[str, str], log: Path) -> None:
        if self.stopping.is_set():
            raise BuildError("stopped")
        with log.open("a") as out:
            out.write(f"$ {' '.join(command)}\n")
            out.flush()
            process = subprocess.Popen(
                list(command), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
                start_new_session=True,
            )  # fmt: skip
            with self._lock:
                self._live.add(process)
            try:
                code = process.wait()
            finally:
                with self._lock:
                    self._live.discard(process)
        if code != 0:
            tail = "".join(log.read_text(errors="replace").splitlines(keepends=True)[-25:])
            raise BuildError(f"`{' '.join(command[:3])} ...` exited {code} (log: {log}):\n{tail}")

    def end_all(self) -> None:
        self.stopping.set()
        with self._lock:
            live = list(self._live)
        for process in live:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for process in live:
            with suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


def _go_env(tool: Tool) -> dict[str, str]:
    env = dict(os.environ)
    env.update(CGO_ENABLED="1" if tool.cgo else "0", GOFLAGS="-buildvcs=false", GOWORK="off")
    return env


def archive_problem(tool: Tool) -> str | None:
    """Why the tool's source archive cannot be built from (missing, or not the archive tools.toml pins), or None."""
    path = tool.archive_path
    if not path.is_file():
        where = f"${ARCHIVES_ENV}" if os.environ.get(ARCHIVES_ENV) else "../shared/sources"
        return (
            f"{tool.name} {tool.version}: no source archive {path} ({where}; {ARCHIVES_README} says where each "
            f"comes from; set {ARCHIVES_ENV} to a folder holding it"
            + (f", or {PROVIDERS_ENV}=registry where Terraform reaches its registry)" if tool.provider else ")")
        )
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != tool.sha256:
        return (
            f"{tool.name} {tool.version}: {path} has SHA-256 {digest.hexdigest()}, tools.toml pins {tool.sha256}: "
            f"not the upstream archive ({ARCHIVES_README})"
        )
    return None


def _unpack(tool: Tool, scratch: Path) -> Path:
    """The archive's tree in the scratch folder (its one top folder, as `git archive --prefix` writes it)."""
    with tarfile.open(tool.archive_path) as archive:
        archive.extractall(scratch, filter="data")
    tops = [p for p in scratch.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise BuildError(f"{tool.name}: {tool.archive_path} holds {len(tops)} top folders, not one")
    return tops[0]


def _staging_replaces(tool: Tool, children: _Children, scratch: Path, env: dict[str, str], log: Path) -> list[str]:
    """Every `k8s.io/<name> v0.0.0` requirement of the module's own go.mod, replaced by the staging version."""
    children.run(["go", "mod", "download", "-json", f"{tool.module}@{tool.version}"], scratch, env, log)
    text = log.read_text()
    found = re.findall(r'"GoMod": "([^"]+)"', text)
    if not found:
        raise BuildError(f"{tool.name}: `go mod download` named no go.mod for {tool.module}@{tool.version}")
    gomod = Path(found[-1]).read_text()
    names = re.findall(r"^\s+(k8s\.io/[\w.-]+) v0\.0\.0$", gomod, re.MULTILINE)
    return [f"{name} => {name} {tool.staging}" for name in names]


def _scratch_module(tool: Tool, scratch: Path, replaces: list[str]) -> None:
    lines = [f"module themelio.local/sandbox-tools/{tool.name}", "", "go 1.26.0", ""]
    lines += [f"require {tool.module} {tool.version}", ""]
    if replaces:
        lines += ["replace (", *(f"\t{r}" for r in replaces), ")", ""]
    (scratch / "go.mod").write_text("\n".join(lines))
    imports = "\n".join(f'\t_ "{package}"' for package in sorted(set(tool.binaries.values())))
    (scratch / "tools.go").write_text(f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n")


def _build_tool(tool: Tool, go: str, children: _Children, logs: Path) -> float:
    """Build one tool into its cache folder; returns the seconds it took."""
    started = time.monotonic()
    log = logs / f"{tool.name}-{tool.version}.log"
    log.write_text("")
    env = _go_env(tool)
    parent = tool.folder.parent
    parent.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix=f".{tool.name}-{tool.version}.", dir=parent))
    scratch = Path(tempfile.mkdtemp(prefix=f".scratch-{tool.name}.", dir=parent))
    try:
        ldflags = "-s -w " + tool.ldflags.replace("{version}", tool.version)
        build = ["go", "build", "-trimpath", "-ldflags", ldflags.strip()]
        if tool.tags:
            build += ["-tags", tool.tags]
        if tool.vendor:
            build += ["-mod=vendor"]
        if tool.buildmode:
            build += [f"-buildmode={tool.buildmode}"]
        if tool.archive:  # an upstream tree: built where it is, as its repository builds it
            workdir = _unpack(tool, scratch)
            for name, path in tool.files.items():
                _copy(workdir / path, out / name)
        elif tool.files:  # data from the module: downloaded, not built
            children.run(["go", "mod", "download", "-json", f"{tool.module}@{tool.version}"], scratch, env, log)
            found = re.findall(r'"Dir": "([^"]+)"', log.read_text())
            if not found:
                raise BuildError(
                    f"{tool.name}: `go mod download` named no folder for {tool.module}@{tool.version}"
                )
            for name, path in tool.files.items():
                _copy(Path(found[-1]) / path, out / name)
            workdir = scratch
        else:
            replaces = list(tool.replace)
            if tool.staging:
                replaces += _staging_replaces(tool, children, scratch, env, log)
            _scratch_module(tool, scratch, replaces)
            children.run(["go", "mod", "tidy"], scratch, env, log)
            workdir = scratch
        # Binaries named as their package's folder build in one `go build` (packages loaded once, links in
        # parallel); any other is built on its own under its name.
        together = [p for b, p in tool.binaries.items() if b == p.rstrip("/").rsplit("/", 1)[-1]]
        if together:
            children.run([*build, "-o", f"{out}/", *together], workdir, env, log)
        for binary, package in tool.binaries.items():
            if package not in together:
                children.run([*build, "-o", str(out / binary), package], workdir, env, log)
        (out / ".recipe").write_text(tool.recipe(go) + "\n")
        (out / "VERSION").write_text(
            f"{tool.name} {tool.version} ({tool.module or tool.archive}), built with {go}\n"
        )
        out.chmod(0o755)
        with interrupts.deferred():
            old = parent / f".old-{tool.folder.name}-{os.getpid()}"
            if tool.folder.exists():
                tool.folder.rename(old)
            out.rename(tool.folder)
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return time.monotonic() - started


def _copy(source: Path, target: Path) -> None:
    """A file, or a folder with everything in it (the module cache's copies are read-only: the copy is not), at a
    path whose folders are made as needed (a file the image puts in a folder of its own: tools.toml)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, copy_function=shutil.copyfile)
    else:
        shutil.copyfile(source, target)


def build(names: Sequence[str] = (), jobs: int = 2, force: bool = False) -> int:
    """Build the named tools (all when none is named) that are not ready; print what was done. Exit code."""
    tools = load_tools()
    unknown = [n for n in names if n not in tools]
    if unknown:
        print(
            f"sandbox tools: no tool named {', '.join(unknown)}; tools.toml has {', '.join(tools)}",
            file=sys.stderr,
        )
        return exits.BAD_INPUT
    go = go_version()
    if not go:
        print(
            "sandbox tools: `go` is not on PATH: the tools are built from their Go modules (Go 1.26 or newer: "
            "Debian's golang package, or the Go toolchain)",
            file=sys.stderr,
        )
        return exits.BAD_INPUT
    chosen = [tools[n] for n in (names or tools)]
    if registry_providers() and not names:
        skipped = [t for t in chosen if t.provider]
        if skipped:
            print(f"sandbox tools: not building {', '.join(t.name for t in skipped)}: {PROVIDERS_ENV}=registry "
                  "(Terraform installs the providers)")  # fmt: skip
        chosen = [t for t in chosen if not t.provider]
    todo = [t for t in chosen if force or not t.ready(go)]
    problems = [p for p in (archive_problem(t) for t in todo if t.archive) if p]
    if problems:
        for problem in problems:
            print(f"sandbox tools: {problem}", file=sys.stderr)
        return exits.BAD_INPUT
    for tool in chosen:
        if tool not in todo:
            print(f"sandbox tools: {tool.name} {tool.version} is built ({tool.folder})")
    if not todo:
        return exits.OK
    logs = cache_root() / ".logs"
    logs.mkdir(parents=True, exist_ok=True)
    children = _Children()
    started = time.monotonic()
    print(
        f"sandbox tools: building {', '.join(f'{t.name} {t.version}' for t in todo)} with {go}, {jobs} at a time"
    )
    failures: list[str] = []
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    futures: dict[Future[float], Tool] = {pool.submit(_build_tool, t, go, children, logs): t for t in todo}
    try:
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.5)
            for future in done:
                tool = futures[future]
                error = future.exception()
                if error is None:
                    print(f"sandbox tools: built {tool.name} {tool.version} in {future.result():.0f} s")
                else:
                    failures.append(f"{tool.name} {tool.version}: {error}")
                    print(f"sandbox tools: {tool.name} {tool.version} FAILED", file=sys.stderr)
    except BaseException:
        children.end_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    elapsed = time.monotonic() - started
    summary = {
        "built": [t.name for t in todo if f"{t.name} " not in " ".join(failures)],
        "seconds": round(elapsed),
    }
    print(
        f"sandbox tools: {len(todo) - len(failures)} of {len(todo)} built in {elapsed:.0f} s {json.dumps(summary)}"
    )
    for failure in failures:
        print(f"sandbox tools: {failure}", file=sys.stderr)
    return exits.FAILED if failures else exits.OK
