"""Apply, plan and destroy a cluster's stack on its sandbox, the way users deploy it.

The stack is the one `main.py` synthesizes, with the sandbox's chart repository on loopback as the fleet's
mirror ($THEMELIO_CHART_MIRROR, as a catalog's `charts.mirror`: every release that installs from the mirror
installs from it, a chart from a local chart folder ships with the stack; components/chart_repository.py);
Terraform's own mechanisms point it at the sandbox:
- `HOME` is the sandbox's home, whose kubeconfig (at the path the cluster file names, `~/.kube/config` or
  another) has the cluster file's context pointing at the sandbox's API server;
- `sandbox_override.tf.json` (a Terraform override file) sets a local backend in the sandbox's folder (and,
  for a cluster reached by host and exec plugin, the providers' access to the sandbox; for a Karpenter pool,
  its NodePool's `nodeClassRef` to the kwok provider's node class);
- `TF_CLI_CONFIG_FILE` installs the providers from the sandbox's filesystem mirror of HashiCorp's providers as
  built from source (providers.py), unless THEMELIO_SANDBOX_PROVIDERS=registry.
`terraform` (1.11, or $THEMELIO_TERRAFORM), `tofu` (the built OpenTofu) or `cdktf` (`cdktf deploy` through
the CDKTF CLI, which synthesizes the app itself and runs Terraform in its output folder) run it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from themelio_gpu import interrupts
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox import providers
from themelio_gpu.sandbox.cluster import Sandbox
from themelio_gpu.sandbox.components import chart_repository, karpenter
from themelio_gpu.sandbox.errors import SandboxError
from themelio_gpu.sandbox.tools import PROJECT_ROOT, Toolbox, registry_providers
from themelio_gpu.settings import CHART_MIRROR_ENV

RUNNERS = ("terraform", "tofu", "cdktf")


@dataclass(frozen=True)
class Step:
    name: str
    code: int
    seconds: float
    output: str


def _kubeconfig_for(plan: ClusterPlan, sandbox: Sandbox) -> tuple[Path, dict[str, Any]]:
    """The kubeconfig file the stack reads (inside the sandbox's HOME) and its content: the sandbox's
    cluster and credentials under the cluster file's context name."""
    config = yaml.safe_load(sandbox.kubeconfig.read_text())
    access = plan.definition.access.kubeconfig
    context = access.context if access is not None else sandbox.kwok_name
    path = access.path if access is not None else "~/.kube/config"
    if not path.startswith("~/"):
        raise SandboxError(
            f"access.kubeconfig.path {path!r} is outside the home folder: the sandbox points the stack at its "
            "API server through a kubeconfig in its own home; use a path under ~/ for the sandbox"
        )
    current = config["contexts"][0]
    current["name"] = context
    config["current-context"] = context
    return sandbox.folder / "home" / path[2:], config


def mirror_environment(plan: ClusterPlan, sandbox: Sandbox) -> dict[str, str]:
    """What the synthesis gets to install from the sandbox's chart repository: it as the fleet's mirror (none
    when the fleet's mirror is a local chart folder: its charts ship with the stack, as everywhere)."""
    if chart_repository.mirror_is_local_folder(plan):
        return {}
    url = sandbox.state().get("chartRepository")
    if not url:
        raise SandboxError("the sandbox has no chart repository: `sandbox down` and `sandbox up` again")
    return {CHART_MIRROR_ENV: str(url)}


def _with_mirror(mirror: dict[str, str]) -> dict[str, str]:
    """This process's environment with the sandbox's mirror (or none) instead of any the shell set."""
    return {k: v for k, v in os.environ.items() if k != CHART_MIRROR_ENV} | mirror


def _api_access(plan: ClusterPlan, sandbox: Sandbox) -> dict[str, Any]:
    """For a cluster reached by host and exec plugin (`access.api`): the sandbox's server and CA, and an exec
    plugin that hands out the sandbox's client certificate, in the providers' own arguments."""
    config = yaml.safe_load(sandbox.kubeconfig.read_text())
    server = config["clusters"][0]["cluster"]["server"]
    ca_file = config["clusters"][0]["cluster"]["certificate-authority"]
    access = plan.definition.access.api
    assert access is not None
    exec_plugin = {
        "api_version": access.exec.api_version,
        "command": sys.executable,
        "args": ["-m", "themelio_gpu.sandbox.credential", str(sandbox.kubeconfig), access.exec.api_version],
        "env": {"PYTHONPATH": str(PROJECT_ROOT)},
    }
    settings = {"host": server, "cluster_ca_certificate": Path(ca_file).read_text()}
    return {
        "kubernetes": {**settings, "exec": [exec_plugin]},
        "helm": {"kubernetes": {**settings, "exec": exec_plugin}},
    }


def _override(
    plan: ClusterPlan, sandbox: Sandbox, stack: dict[str, Any], uses: list[providers.ProviderUse]
) -> dict[str, Any]:
    """The sandbox's state and API access; the provider releases that stand for pins the sandbox cannot build
    (describe_substitutes); for a release whose cluster file names a repository address of its own (out of
    the sandbox's reach), the sandbox's chart repository as that release's repository; and each Karpenter
    NodePool with the kwok provider's node class."""
    override: dict[str, Any] = {
        "terraform": {"backend": {"local": {"path": str(sandbox.folder / "terraform.tfstate")}}},
    }
    override["terraform"] |= providers.required_providers_override(uses)
    if plan.definition.access.api is not None:
        override["provider"] = _api_access(plan, sandbox)
    own = chart_repository.own_repositories(plan)
    releases = stack.get("resource", {}).get("helm_release", {})
    replaced = sorted(name for name, release in releases.items() if release.get("repository") in own)
    if replaced:
        url = sandbox.state()["chartRepository"]
        override["resource"] = {"helm_release": {name: {"repository": url} for name in replaced}}
    node_pools = karpenter.node_pool_overrides(stack)  # the kwok provider's node class (components/karpenter.py)
    if node_pools:
        override.setdefault("resource", {})["kubernetes_manifest"] = node_pools
    return override


def _environment(
    sandbox: Sandbox, toolbox: Toolbox, mirror: dict[str, str], uses: list[providers.ProviderUse]
) -> dict[str, str]:
    """Terraform's (and `cdktf deploy`'s, whose synthesis gets the same mirror) environment."""
    env = _with_mirror(mirror)
    sandbox.scratch.mkdir(exist_ok=True)
    env.update(
        HOME=str(sandbox.folder / "home"),
        TMPDIR=str(sandbox.scratch),
        TF_IN_AUTOMATION="1",
        TF_INPUT="0",
        CHECKPOINT_DISABLE="1",
        KUBECONFIG=str(sandbox.kubeconfig),
    )
    if registry_providers():
        return env
    env["TF_CLI_CONFIG_FILE"] = str(providers.write_mirror(sandbox.folder / "providers", toolbox, uses))
    return env


def _synthesize(
    plan: ClusterPlan, sandbox: Sandbox, catalog: Path, stacks_dir: Path, mirror: dict[str, str], project: Path
) -> Path:
    outdir = sandbox.folder / "cdktf.out"
    env = _with_mirror(mirror)
    result = interrupts.run(
        [sys.executable, str(project / "main.py"), "--catalog", str(catalog), "--stacks-dir", str(stacks_dir),
         "--outdir", str(outdir), "--quiet"],
        env=env,
    )  # fmt: skip
    if result.returncode != 0:
        raise SandboxError(f"synthesis failed:\n{(result.stderr or result.stdout).strip()}")
    return outdir / "stacks" / plan.name


def prepare(
    plan: ClusterPlan,
    sandbox: Sandbox,
    toolbox: Toolbox,
    catalog: Path,
    stacks_dir: Path,
    say: Any = print,
    project: Path = PROJECT_ROOT,
) -> tuple[Path, dict[str, str]]:
    """Synthesize the stack into the sandbox (by `project`'s main.py: this checkout's, or a commit's own) and point
    it at the sandbox; returns its folder and environment."""
    mirror = mirror_environment(plan, sandbox)
    stack_dir = _synthesize(plan, sandbox, catalog, stacks_dir, mirror, project)
    stack = json.loads((stack_dir / "cdk.tf.json").read_text())
    uses = [] if registry_providers() else providers.provider_uses(providers.stack_pins(stack), toolbox.tools)
    substitutes = providers.describe_substitutes(uses)
    if substitutes:
        say(f"sandbox: {plan.name}: {substitutes}")
    (stack_dir / "sandbox_override.tf.json").write_text(
        json.dumps(_override(plan, sandbox, stack, uses), indent=2) + "\n"
    )
    kubeconfig, content = _kubeconfig_for(plan, sandbox)
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    kubeconfig.write_text(yaml.safe_dump(content))
    return stack_dir, _environment(sandbox, toolbox, mirror, uses)


def _binary(runner: str, toolbox: Toolbox) -> str:
    if runner == "tofu":
        return str(toolbox.binary("opentofu", "tofu"))
    name = os.environ.get("THEMELIO_TERRAFORM", "terraform")
    found = shutil.which(name)
    if found is None:
        raise SandboxError(
            f"no {name!r} on PATH: install Terraform 1.11 (or use --with tofu, which the sandbox builds)"
        )
    return found


def run_step(name: str, command: list[str], cwd: Path, env: dict[str, str], **stopping: Any) -> Step:
    """`stopping`: how an interrupt ends it (interrupts.run's `grace` and `stop_signal`)."""
    started = time.monotonic()
    result = interrupts.run(command, cwd=cwd, env=env, **stopping)
    return Step(name, result.returncode, time.monotonic() - started, (result.stdout + result.stderr).strip())


def terraform_steps(
    action: str, runner: str, stack_dir: Path, env: dict[str, str], toolbox: Toolbox
) -> list[Step]:
    """init, then `apply` (and the plan after it), `plan` or `destroy`; stops at the first failing step."""
    binary = _binary(runner, toolbox)
    steps = [run_step("init", [binary, "init", "-input=false", "-no-color"], stack_dir, env)]
    if steps[-1].code != 0:
        return steps
    if action == "apply":
        steps.append(
            run_step("apply", [binary, "apply", "-auto-approve", "-input=false", "-no-color"], stack_dir, env)
        )
        if steps[-1].code != 0:
            return steps
        action = "plan"
    if action == "plan":
        steps.append(
            run_step("plan", [binary, "plan", "-detailed-exitcode", "-input=false", "-no-color"], stack_dir, env)
        )
    elif action == "destroy":
        steps.append(
            run_step("destroy", [binary, "destroy", "-auto-approve", "-input=false", "-no-color"], stack_dir, env)
        )
    return steps


def cdktf_steps(action: str, plan: ClusterPlan, sandbox: Sandbox, env: dict[str, str]) -> list[Step]:
    """`cdktf deploy|diff|destroy <cluster>` as users run it, writing into the sandbox's output folder."""
    cli = PROJECT_ROOT / "node_modules" / ".bin" / "cdktf"
    if not cli.exists():
        raise SandboxError("the CDKTF CLI is not installed: run `make setup`")
    outdir = str(sandbox.folder / "cdktf.out")
    # The CLI runs the app from cdktf.json in the project root; the app reads the outdir from CDKTF_OUTDIR.
    env = dict(env, CDKTF_DISABLE_PLUGIN_CACHE_ENV="1")
    verbs = {"apply": ["deploy", "--auto-approve"], "plan": ["diff"], "destroy": ["destroy", "--auto-approve"]}
    # --skip-provider-lock: the CLI's own `terraform providers lock` asks the registry for every provider,
    # whatever TF_CLI_CONFIG_FILE says (what air-gapped teams pass too); init still records the mirror's hashes.
    command = [str(cli), *verbs[action], plan.name, "--output", outdir, "--skip-provider-lock"]
    return [run_step(f"cdktf {verbs[action][0]}", command, PROJECT_ROOT, env)]


def execute(
    action: str,
    runner: str,
    plan: ClusterPlan,
    sandbox: Sandbox,
    toolbox: Toolbox,
    catalog: Path,
    stacks_dir: Path,
) -> list[Step]:
    """Run `action` (apply, plan or destroy) with `runner` on the cluster's sandbox."""
    stack_dir, env = prepare(plan, sandbox, toolbox, catalog, stacks_dir)
    if runner == "cdktf":
        env = dict(env, THEMELIO_CATALOG=str(catalog.absolute()), THEMELIO_STACKS_DIR=str(stacks_dir.absolute()))
        steps = cdktf_steps(action, plan, sandbox, env)
        if action == "apply" and steps[-1].code == 0:  # the plan after it, with the same Terraform it used
            steps += terraform_steps("plan", "terraform", stack_dir, env, toolbox)[1:]
        return steps
    return terraform_steps(action, runner, stack_dir, env, toolbox)


def summary(step: Step) -> str:
    """Terraform's own one-line result of a step (`Apply complete! Resources: ...`, `Plan: ...`)."""
    for pattern in (r"^(Apply complete!.*)$", r"^(Destroy complete!.*)$", r"^(Plan: .*)$", r"^(No changes\..*)$"):
        found = re.search(pattern, step.output, re.MULTILINE)
        if found:
            return found.group(1).strip()
    return ""


def has_state(sandbox: Sandbox) -> bool:
    state = sandbox.folder / "terraform.tfstate"
    if not state.is_file():
        return False
    try:
        return bool(json.loads(state.read_text()).get("resources"))
    except ValueError:
        return True
