"""`terraform-check`: the real Terraform CLI on every synthesized stack, before a pipeline sees it.

Per stack, in a scratch copy outside the project (the stack folder is never written to):
1. `terraform init -backend=false`: installs the pinned providers (from wherever the user's Terraform gets
   them: the registry, or a mirror named in `TF_CLI_CONFIG_FILE`), reads the configuration and its one backend;
2. `terraform validate`: every argument, block, type, reference, `for_each`/`each.value` path and
   `depends_on` against the providers' schemas, and `required_version`;
3. `terraform plan -refresh=false -lock=false` with the backend (or `cloud`) block removed, since no state
   can be reached: evaluates every expression, output and provider configuration. With real providers the
   plan also needs what they need at plan time: the cluster's API (`kubernetes_manifest` types its manifest
   from it) and the chart repositories (`helm_release` loads the chart); `--no-plan` stops after validate.

One provider plugin cache serves every stack (`TF_PLUGIN_CACHE_DIR`, a scratch folder unless the user has
one), so providers are installed once per run. Inits run one at a time (Terraform does not promise a cache
safe for concurrent installs); validate and plan of different stacks run in parallel.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from themelio_gpu import interrupts
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.outputs.stack_folders import STACK_FILE as STACK_FILE  # re-exported
from themelio_gpu.outputs.stack_folders import synthesized_stacks

if TYPE_CHECKING:
    from themelio_gpu.plan.model import Fleet

# The variable the CDKTF CLI reads to run another binary, e.g. `tofu`.
BINARY_ENV = "TERRAFORM_BINARY_NAME"
STEP_TIMEOUT_SECONDS = 900
OUTPUT_TAIL_LINES = 40
_PROVIDERS_NOT_INSTALLED = re.compile(r"Failed to (query available provider packages|install provider)")
# Settings of the user's shell that would make a scratch copy share state with their real work.
_DROPPED_ENV = ("TF_DATA_DIR", "TF_WORKSPACE")
CLI_CONFIG_ENV = "TF_CLI_CONFIG_FILE"
MIRROR_DOCS = "docs/deploying.md#without-the-registry-a-provider-mirror"


@dataclass(frozen=True)
class BuiltProviders:
    """Providers from a mirror of builds instead of the registry (the sandbox's builds of HashiCorp's source)."""

    describe: str
    mirror: Callable[[Path], Path]
    """Writes the mirror into a folder; returns its CLI configuration file."""
    prepare: Callable[[Path], None]
    """Writes what a stack's copy needs to use them (an override file pinning a build for a pin it lacks)."""


class TerraformMissingError(Exception):
    """No Terraform binary to run: the command says so instead of failing on every stack."""


@dataclass(frozen=True)
class Step:
    name: str
    ok: bool
    seconds: float
    output: str


@dataclass(frozen=True)
class StackCheck:
    stack: str
    steps: tuple[Step, ...]

    @property
    def ok(self) -> bool:
        return all(step.ok for step in self.steps)

    def step(self, name: str) -> Step | None:
        return next((s for s in self.steps if s.name == name), None)

    @property
    def plan_summary(self) -> str:
        plan = self.step("plan")
        if plan is None or not plan.ok:
            return ""
        found = re.search(r"^(Plan: .*|No changes\..*)$", plan.output, re.MULTILINE)
        return found.group(1).strip() if found else ""


def find_terraform(environ: Mapping[str, str] = os.environ) -> str:
    name = environ.get(BINARY_ENV) or "terraform"
    found = shutil.which(name)
    if found is None:
        raise TerraformMissingError(
            f"no {name!r} found on PATH. Install Terraform (1.10 or later runs every stack) or OpenTofu "
            f"(then set {BINARY_ENV}=tofu), or point {BINARY_ENV} at the binary."
        )
    return found


@dataclass(frozen=True)
class ProviderSource:
    """Where Terraform will install the stacks' providers from, as the environment sets it."""

    config: str | None
    """TF_CLI_CONFIG_FILE, when set."""
    missing: str | None
    """Why that setting names no readable file (`does not exist`, `is a folder`), or None."""

    def describe(self) -> str:
        if self.config is None:
            return "the Terraform CLI configuration (default: the registry)"
        if self.missing is not None:
            return f"the registry: {CLI_CONFIG_ENV}={self.config} {self.missing}, so Terraform ignores it"
        return f"{CLI_CONFIG_ENV}={self.config}"

    def warning(self) -> str | None:
        if self.config is None or self.missing is None:
            return None
        return (
            f"{CLI_CONFIG_ENV} names {self.config}, which {self.missing}: Terraform says `Unable to open CLI "
            "configuration file` and installs the providers from the registry, not from the mirror that file "
            f"would name. Point {CLI_CONFIG_ENV} at your terraformrc, or unset it"
        )

    def install_hint(self) -> str:
        """What to do when `terraform init` could not install the providers."""
        if self.config is not None and self.missing is None:
            return (
                f"Terraform could not install the providers with the CLI configuration {self.config}: check that "
                "its provider_installation names a mirror holding the versions the stacks pin (listed above), "
                f"for this platform ({MIRROR_DOCS})."
            )
        mirror = (
            "on a machine that has it, run `terraform providers mirror DIR` in a stack folder, copy DIR here, and "
            f"point {CLI_CONFIG_ENV} at a terraformrc whose provider_installation reads DIR ({MIRROR_DOCS})."
        )
        if self.missing is not None:
            return f"{self.warning()}. Without access to the registry: {mirror}"
        return f"Terraform could not install the providers from the registry. Without access to it: {mirror}"


def provider_source(environ: Mapping[str, str] = os.environ) -> ProviderSource:
    config = environ.get(CLI_CONFIG_ENV) or None
    if config is None:
        return ProviderSource(None, None)
    path = Path(config)
    if path.is_file():
        return ProviderSource(config, None)
    return ProviderSource(config, "is a folder, not a file" if path.is_dir() else "does not exist")


def terraform_version(terraform: str) -> str:
    result = interrupts.run([terraform, "version", "-json"], timeout=60)
    try:
        version = json.loads(result.stdout)["terraform_version"]
    except (ValueError, KeyError, TypeError):
        first = (result.stdout or result.stderr).strip().splitlines()
        return first[0] if first else "unknown version"
    return f"{Path(terraform).name} v{version}"


def stack_folders(outdir: Path) -> dict[str, Path]:
    """Every stack of a synthesized output folder: `<outdir>/stacks/<name>/cdk.tf.json`."""
    return {name: file.parent for name, file in synthesized_stacks(outdir).items()}


def without_state_backend(config: Mapping[str, Any]) -> dict[str, Any]:
    """The stack's configuration minus its backend or cloud block: plan then uses a local scratch state."""
    stripped = copy.deepcopy(dict(config))
    settings = stripped.get("terraform")
    if isinstance(settings, dict):
        settings.pop("backend", None)
        settings.pop("cloud", None)
    return stripped


def terraform_environment(cache_dir: Path, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    env = {k: v for k, v in environ.items() if k not in _DROPPED_ENV}
    env.setdefault("TF_PLUGIN_CACHE_DIR", str(cache_dir))
    # Without a lock file Terraform would install from the origin every time and only then fill the cache;
    # the scratch lock files are thrown away, so nothing they would record is lost.
    env["TF_PLUGIN_CACHE_MAY_BREAK_DEPENDENCY_LOCK_FILE"] = "true"
    env["TF_IN_AUTOMATION"] = "1"
    env["TF_INPUT"] = "0"
    env.setdefault("CHECKPOINT_DISABLE", "1")
    return env


def _tail(text: str) -> str:
    lines = text.strip().splitlines()
    if len(lines) > OUTPUT_TAIL_LINES:
        lines = [f"... ({len(lines) - OUTPUT_TAIL_LINES} lines before)", *lines[-OUTPUT_TAIL_LINES:]]
    return "\n".join(lines)


def _run(name: str, command: Sequence[str], cwd: Path, env: Mapping[str, str]) -> Step:
    start = time.monotonic()
    try:
        result = interrupts.run(command, cwd=cwd, env=dict(env), timeout=STEP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        return Step(name, False, time.monotonic() - start, f"timed out after {STEP_TIMEOUT_SECONDS} s")
    output = (result.stdout + ("\n" if result.stdout and result.stderr else "") + result.stderr).strip()
    return Step(name, result.returncode == 0, time.monotonic() - start, output)


def check_stack(
    terraform: str,
    stack: str,
    source: Path,
    scratch: Path,
    env: Mapping[str, str],
    plan: bool,
    init_lock: threading.Lock,
    prepare: Callable[[Path], None] | None = None,
) -> StackCheck:
    work = scratch / stack
    # A copy: init writes .terraform and a lock file, plan rewrites the configuration.
    shutil.copytree(source, work, ignore=shutil.ignore_patterns(".terraform", "*.tfstate", "*.tfstate.*"))
    if prepare is not None:
        prepare(work)
    steps: list[Step] = []
    with init_lock:
        steps.append(_run("init", [terraform, "init", "-backend=false", "-input=false", "-no-color"], work, env))
    if steps[-1].ok:
        steps.append(_run("validate", [terraform, "validate", "-no-color"], work, env))
    if plan and steps[-1].ok:
        config_file = work / STACK_FILE
        config = json.loads(config_file.read_text(encoding="utf-8"))
        config_file.write_text(json.dumps(without_state_backend(config), indent=2), encoding="utf-8")
        command = [terraform, "plan", "-refresh=false", "-lock=false", "-input=false", "-no-color"]
        steps.append(_run("plan", command, work, env))
    return StackCheck(stack, tuple(steps))


def check_stacks(
    terraform: str,
    stacks: Mapping[str, Path],
    *,
    plan: bool = True,
    jobs: int = 4,
    environ: Mapping[str, str] = os.environ,
    on_result: Callable[[StackCheck], None] | None = None,
    prepare: Callable[[Path], None] | None = None,
) -> list[StackCheck]:
    """Every stack checked in a scratch folder that is removed afterwards; results in the stacks' order."""
    with tempfile.TemporaryDirectory(prefix="themelio-terraform-check-") as tmp:
        scratch = Path(tmp)
        cache = scratch / "plugin-cache"
        cache.mkdir()
        env = terraform_environment(cache, environ)
        init_lock, report_lock = threading.Lock(), threading.Lock()
        results: dict[str, StackCheck] = {}

        def one(name: str) -> StackCheck:
            result = check_stack(terraform, name, stacks[name], scratch / "stacks", env, plan, init_lock, prepare)
            if on_result is not None:
                with report_lock:
                    on_result(result)
            return result

        (scratch / "stacks").mkdir()
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool, interrupts.ending_workers():
            try:
                for result in pool.map(one, list(stacks)):
                    results[result.stack] = result
            except BaseException:  # interrupted: the stacks not started are not, the running commands end
                pool.shutdown(wait=False, cancel_futures=True)
                raise
    return [results[name] for name in stacks]


def render_result(result: StackCheck, plan: bool, source: ProviderSource | None = None) -> str:
    parts = [f"{s.name} {'ok' if s.ok else 'FAILED'} ({s.seconds:.1f} s)" for s in result.steps]
    if plan and result.ok:
        parts[-1] += f": {result.plan_summary}" if result.plan_summary else ""
    line = f"{result.stack}: {', '.join(parts)}"
    failed = next((s for s in result.steps if not s.ok), None)
    if failed is None:
        return line
    detail = "\n".join(f"    {text}" for text in _tail(failed.output).splitlines())
    hint = ""
    if failed.name == "init" and _PROVIDERS_NOT_INSTALLED.search(failed.output):
        hint = f"\n  hint: {(source or provider_source()).install_hint()}"
    return f"{line}\n  terraform {failed.name} said:\n{detail}{hint}"


def render_summary(
    results: Sequence[StackCheck], plan: bool, seconds: float, skipped_by: str = "--no-plan"
) -> str:
    validated = sum(1 for r in results if (s := r.step("validate")) is not None and s.ok)
    planned = sum(1 for r in results if (s := r.step("plan")) is not None and s.ok)
    failed = [r.stack for r in results if not r.ok]
    count = f"{len(results)} stack{'s' if len(results) != 1 else ''}"
    done = f"{validated} validated" + (f", {planned} planned" if plan else f" (plan skipped: {skipped_by})")
    verdict = f"{len(failed)} failed: {', '.join(failed)}" if failed else "all passed"
    return f"{count}: {done}; {verdict} ({seconds:.1f} s)"


# --- the command's run: which stacks, then every check reported as it ends ------------------------------------


def terraform_check(
    terraform: str,
    stacks_in: Callable[[Path], dict[str, Path]],
    *,
    plan: bool,
    jobs: int,
    providers: BuiltProviders | None = None,
) -> bool:
    """Check the stacks `stacks_in(scratch folder)` gives (synthesized there, or found elsewhere), reporting each
    as it ends and then a summary; True when every stack passed. Nothing is written into the project. With
    `providers`, Terraform installs them from their mirror, and each stack's copy gets their override file."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="themelio-terraform-check-synth-") as tmp:
        stacks = stacks_in(Path(tmp))
        environ = dict(os.environ)
        if providers is not None:
            environ[CLI_CONFIG_ENV] = str(providers.mirror(Path(tmp) / "providers"))
        source = provider_source(environ)
        warning = source.warning()
        if warning is not None:
            print(f"warning: {warning}", file=sys.stderr)
        plural = "s" if len(stacks) != 1 else ""
        print(
            f"terraform-check: {len(stacks)} stack{plural} with {terraform_version(terraform)}; providers from "
            f"{source.describe()}"
        )
        pinned = sorted({pin for folder in stacks.values() for pin in provider_pins(folder)})
        if pinned:
            print(f"terraform-check: the stacks pin {', '.join(pinned)}")
        if providers is not None:
            print(f"terraform-check: {providers.describe}")

        def report(result: StackCheck) -> None:
            print(render_result(result, plan=plan, source=source), flush=True)

        results = check_stacks(
            terraform, stacks, plan=plan, jobs=jobs, environ=environ, on_result=report,
            prepare=providers.prepare if providers is not None else None,
        )  # fmt: skip
    skipped_by = "--built-providers" if providers is not None else "--no-plan"
    print(render_summary(results, plan=plan, seconds=time.monotonic() - start, skipped_by=skipped_by))
    return all(r.ok for r in results)


def provider_pins(folder: Path) -> list[str]:
    """The providers a stack folder's cdk.tf.json pins, as `source version`."""
    try:
        data = json.loads((folder / STACK_FILE).read_text(encoding="utf-8"))
        providers = data["terraform"]["required_providers"].values()
        return [f"{p['source']} {p['version']}" for p in providers]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []


def outdir_stacks(outdir: Path, wanted: Sequence[str]) -> dict[str, Path]:
    """The `wanted` stacks (all when none) of a synthesized folder; InputError for none there or an unknown name."""
    problems = Problems()
    stacks = stack_folders(outdir)
    if not stacks:
        problems.add(
            display_path(outdir), "", "no synthesized stacks (stacks/<name>/cdk.tf.json); synthesize first"
        )
    _unknown_stacks(wanted, list(stacks), problems)
    problems.raise_if_any()
    return {name: path for name, path in stacks.items() if not wanted or name in wanted}


def fleet_stacks(fleet: Fleet, wanted: Sequence[str], into: Path) -> dict[str, Path]:
    """The `wanted` clusters (all when none) of the fleet synthesized into `into`; InputError for an unknown name."""
    from themelio_gpu.outputs.synth import synthesize

    problems = Problems()
    _unknown_stacks(wanted, [c.name for c in fleet.clusters], problems)
    problems.raise_if_any()
    selected = [c for c in fleet.clusters if not wanted or c.name in wanted]
    synthesize(dataclasses.replace(fleet, clusters=tuple(selected)), into, progress=None)
    return {name: path for name, path in stack_folders(into).items() if not wanted or name in wanted}


def _unknown_stacks(wanted: Sequence[str], known: Sequence[str], problems: Problems) -> None:
    for name in wanted:
        if name not in known and known:
            problems.add("command line", f"--cluster {name}", f"no stack of that name; known: {', '.join(known)}")
