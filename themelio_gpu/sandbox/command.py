"""`python -m themelio_gpu sandbox ...`: try a cluster's stack on a real control plane, no GPU needed.

tools [TOOL ...]        build the pinned tools that are missing (`make sandbox-tools`)
up CLUSTER              control plane, nodes, GPUs (ResourceSlices) and chart repository
apply CLUSTER           init + apply the stack, then a plan that must show no changes
plan CLUSTER            plan against the sandbox: exit 0 no changes, 2 changes (terraform's -detailed-exitcode)
kubeconfig CLUSTER      print the sandbox's kubeconfig path (as `kind get kubeconfig` prints the config)
down CLUSTER            destroy what apply created, list what is left, stop everything, remove the folder
run CLUSTER             up, apply, second plan, destroy, down: what CI runs on every stack
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from themelio_gpu import interrupts
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.sandbox import build, cluster, coverage, daemonsets, deploy, inventory, probe
from themelio_gpu.sandbox.errors import SandboxError, SandboxUsageError
from themelio_gpu.sandbox.tools import Toolbox, toolbox
from themelio_gpu.settings import chart_cache, input_paths

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
EXITS = {
    "up": "0 up, 1 the control plane or a node could not be started (nothing is left), 2 bad input, a missing "
    "tool or chart, a port in use, or a sandbox of that cluster is up already",
    "apply": "0 applied and the next plan shows no changes, 1 the apply failed (the provider's own error is "
    "printed; the sandbox stays for a look) or the next plan shows changes, 2 bad input or no sandbox",
    "plan": "0 no changes, 1 error, 2 changes (as terraform plan -detailed-exitcode)",
    "kubeconfig": "0 printed, 2 no sandbox of that cluster",
    "down": "0 destroyed and stopped with nothing left, 1 destroy failed or objects are left (listed), 2 bad input",
    "run": "0 every step passed, 1 a step failed (the sandbox is removed unless --keep), 2 bad input",
    "probe": "0 every pod landed where the model says with the devices its offering names, 1 a row disagrees "
    "(both answers shown), 2 bad input or no sandbox",
    "check": "0 every chosen cluster passed `run`, 1 one failed (each is listed), 2 bad input",
    "tools": "0 every tool is built, 1 a build failed (the end of its log is printed), 2 no Go or no such tool",
}
ENGINES = deploy.RUNNERS


def _fleet_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--catalog", metavar="FILE", help="the GPU catalog (default: catalog/gpu-catalog.yaml)")
    parser.add_argument("--stacks-dir", metavar="DIR", help="folder of cluster definitions (default: stacks/)")
    parser.add_argument("--charts", metavar="DIR", help="the chart cache (default: .cache/charts)")


def register(commands: Any) -> None:
    """Add `sandbox` and its subcommands to the CLI's parser."""
    group = commands.add_parser(
        "sandbox",
        help="apply a cluster's stack to a real control plane on this machine (kwok nodes, no GPU needed)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = group.add_subparsers(dest="sandbox_command", required=True, metavar="SUBCOMMAND")
    tools = sub.add_parser(
        "tools",
        help="build the pinned tools that are missing",
        description="Build every tool of themelio_gpu/sandbox/tools.toml that is not built yet, from its Go module, "
        "into the tool cache ($THEMELIO_TOOLS_CACHE or ~/.cache/themelio-gpu/tools); what `make sandbox-tools` runs.",
        epilog=f"exit codes: {EXITS['tools']}",
    )
    tools.add_argument("names", nargs="*", metavar="TOOL", help="only these (default: every tool of tools.toml)")
    tools.add_argument("--jobs", type=int, default=2, help="builds at once (default 2)")
    tools.add_argument("--force", action="store_true", help="build again even when built")
    tools.set_defaults(run=run, sandbox_run=_tools)
    for name, summary in (
        ("up", "start a sandbox of the cluster"),
        ("apply", "apply the cluster's stack to its sandbox, then plan again"),
        ("plan", "plan the cluster's stack against its sandbox"),
        ("kubeconfig", "print the path of the sandbox's kubeconfig"),
        ("down", "destroy the stack, stop the sandbox and remove its folder"),
        ("probe", "ask the real scheduler for every GPU name the applied stack serves"),
        ("run", "up, apply, plan, destroy and down in one go"),
    ):
        parser = sub.add_parser(name, help=summary, description=f"{summary[0].upper()}{summary[1:]}.",
                                epilog=f"exit codes: {EXITS[name]}")  # fmt: skip
        parser.add_argument("cluster", metavar="CLUSTER", help="the cluster's name (its file in stacks/)")
        _fleet_flags(parser)
        if name in ("up", "run"):
            parser.add_argument(
                "--port", type=int, help="the API server's port on 127.0.0.1 (default: a free one)"
            )
            parser.add_argument("--keep", action="store_true", help="on failure, keep the sandbox for a look")
        if name in ("probe", "run"):
            parser.add_argument("--json", action="store_true", help="the probe's rows as JSON")
        if name == "run":
            parser.add_argument("--probe", action="store_true", help="probe after apply; a disagreeing row fails")
        if name in ("apply", "plan", "down", "run"):
            parser.add_argument("--with", dest="runner", choices=ENGINES, default="terraform",
                                help="terraform (default), tofu, or cdktf (the CDKTF CLI's deploy/diff/destroy)")  # fmt: skip
        parser.set_defaults(run=run, sandbox_run=_SUBCOMMANDS[name])
    check = sub.add_parser(
        "check",
        help="run every chosen cluster's stack through up, apply, plan, destroy and down",
        description="`sandbox run` on the named clusters, on every cluster (--every), or by default on the fewest "
        "clusters that cover every pool kind, DRA mode, chart version and Kubernetes minor of the fleet.",
        epilog=f"exit codes: {EXITS['check']}",
    )
    check.add_argument("clusters", nargs="*", metavar="CLUSTER", help="these clusters (default: a covering set)")
    check.add_argument("--every", action="store_true", help="every cluster of the fleet")
    _fleet_flags(check)
    check.add_argument("--with", dest="runner", choices=ENGINES, default="terraform", help="as for run")
    check.add_argument("--probe", action="store_true", help="probe every cluster after apply")
    check.set_defaults(run=run, sandbox_run=_check, port=None, keep=False, json=False)


UP_TOOLS = ("kubernetes-1.36", "etcd", "kwok", "helm", "karpenter-crds")


def _needed(plans: Sequence[ClusterPlan], runner: str | None) -> Toolbox:
    """The tools these clusters' sandboxes need: the control plane at each one's version; to deploy, the
    provider stand-ins (and OpenTofu with --with tofu)."""
    needed = {*UP_TOOLS, *(cluster.kubernetes_tool(p.definition) for p in plans)}
    if runner is not None:
        needed.add("provider-standin")
        if runner == "tofu":
            needed.add("opentofu")
    return toolbox(tuple(sorted(needed)))


def _tools(args: argparse.Namespace) -> int:
    return build.build(args.names, jobs=args.jobs, force=args.force)


def _plan_of(args: argparse.Namespace) -> ClusterPlan:
    paths = input_paths(args.catalog, args.stacks_dir)
    fleet = load_fleet(paths.catalog, paths.stacks_dir)
    for plan in fleet.clusters:
        if plan.name == args.cluster:
            return plan
    problems = Problems()
    known = ", ".join(p.name for p in fleet.clusters) or "none"
    problems.add("command line", args.cluster, f"no cluster of that name; known: {known}")
    problems.raise_if_any()
    raise AssertionError("unreachable")


def _say(text: str) -> None:
    print(text, flush=True)


def _up(args: argparse.Namespace) -> int:
    plan = _plan_of(args)
    _start(plan, _needed([plan], None), args)
    return EXIT_OK


def _start(plan: ClusterPlan, tools: Toolbox, args: argparse.Namespace) -> None:
    sandbox = cluster.up(plan, tools, chart_cache(args.charts), port=args.port, keep=args.keep, say=_say)
    try:
        inventory.record_baseline(sandbox, tools)
    except BaseException:
        cluster.down(plan.name, tools, say=_say)
        raise


def _sandbox_of(name: str) -> cluster.Sandbox:
    sandbox = cluster.Sandbox(name)
    if not sandbox.exists():
        raise SandboxUsageError(f"no sandbox of {name} is up ({sandbox.folder}): `sandbox up {name}` first")
    return sandbox


def _show(steps: Sequence[deploy.Step]) -> None:
    for step in steps:
        status = "ok" if step.code == 0 else f"exit {step.code}"
        summary = deploy.summary(step)
        _say(f"sandbox: {step.name}: {status} in {step.seconds:.1f} s{': ' + summary if summary else ''}")
        if step.code not in (0,) and not (step.name.endswith("plan") and step.code == 2):
            print(step.output[-6000:], file=sys.stderr)


def _apply(args: argparse.Namespace, plan: ClusterPlan | None = None, tools: Toolbox | None = None) -> int:
    plan = plan or _plan_of(args)
    tools = tools or _needed([plan], args.runner)
    sandbox = _sandbox_of(plan.name)
    steps = deploy.execute("apply", args.runner, plan, sandbox, tools, *_inputs(args))
    _show(steps)
    if any(s.code != 0 for s in steps[:-1]) or steps[-1].name != "plan":
        return EXIT_FAILED
    if steps[-1].code == 2:
        _say("sandbox: the plan after apply shows changes (above): the stack does not settle")
        print(steps[-1].output[-6000:], file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK if steps[-1].code == 0 else EXIT_FAILED


def _inputs(args: argparse.Namespace) -> tuple[Path, Path]:
    paths = input_paths(args.catalog, args.stacks_dir)
    return paths.catalog, paths.stacks_dir


def _plan(args: argparse.Namespace) -> int:
    plan = _plan_of(args)
    sandbox = _sandbox_of(plan.name)
    steps = deploy.execute("plan", args.runner, plan, sandbox, _needed([plan], args.runner), *_inputs(args))
    _show(steps)
    last = steps[-1]
    if last.code == 2:
        print(last.output[-8000:])
    return last.code if last.name.endswith(("plan", "diff")) and last.code in (0, 2) else EXIT_FAILED


def _kubeconfig(args: argparse.Namespace) -> int:
    print(_sandbox_of(args.cluster).kubeconfig)
    return EXIT_OK


def _down(args: argparse.Namespace, plan: ClusterPlan | None = None, tools: Toolbox | None = None) -> int:
    sandbox = cluster.Sandbox(args.cluster)
    tools = tools or toolbox(UP_TOOLS)
    code = EXIT_OK
    if sandbox.exists() and deploy.has_state(sandbox):
        plan = plan or _plan_of(args)
        tools = _needed([plan], args.runner)
        steps = deploy.execute("destroy", args.runner, plan, sandbox, tools, *_inputs(args))
        _show(steps)
        left, kept = inventory.leftovers(sandbox, tools, inventory.kept_by_helm(plan, chart_cache(args.charts)))
        if kept:
            _say(f"sandbox: {len(kept)} object(s) Helm keeps after uninstall by design (its charts' CRDs, the "
                 f"namespaces it created, objects marked helm.sh/resource-policy: keep; docs/sandbox.md): "
                 f"{', '.join(kept)}")  # fmt: skip
        _say(f"sandbox: {len(left)} object(s) the stack created are left after destroy{':' if left else ''}")
        for line in left:
            _say(f"  {line}")
        if any(s.code != 0 for s in steps) or left:
            code = EXIT_FAILED
    cluster.down(args.cluster, tools, say=_say)
    return code


def _run(args: argparse.Namespace, plan: ClusterPlan | None = None, tools: Toolbox | None = None) -> int:
    """Everything CI asks of a stack, with figures; the sandbox is removed at the end (or on failure,
    unless --keep)."""
    plan = plan or _plan_of(args)
    tools = tools or _needed([plan], args.runner)
    figures: dict[str, Any] = {"cluster": plan.name, "runner": args.runner}
    started = time.monotonic()
    _start(plan, tools, args)
    figures["up_seconds"] = round(time.monotonic() - started, 1)
    ok = False
    try:
        mark = time.monotonic()
        code = _apply(args, plan, tools)
        figures["apply_and_plan_seconds"] = round(time.monotonic() - mark, 1)
        if code == EXIT_OK and args.probe:
            mark = time.monotonic()
            code = _probe(args, plan, tools)
            figures["probe_seconds"] = round(time.monotonic() - mark, 1)
        ok = code == EXIT_OK
    except interrupts.Interrupted:
        args.keep = False  # an interrupted run leaves nothing, --keep or not
        raise
    finally:
        if ok or not args.keep:
            mark = time.monotonic()
            down = _down(args, plan, tools)
            figures["destroy_and_down_seconds"] = round(time.monotonic() - mark, 1)
            ok = ok and down == EXIT_OK
        else:
            _say(f"sandbox: kept for a look: {cluster.Sandbox(plan.name).kubeconfig}; `sandbox down {plan.name}`")
    figures["ok"] = ok
    figures["seconds"] = round(time.monotonic() - started, 1)
    _say(f"sandbox run: {json.dumps(figures, sort_keys=True)}")
    return EXIT_OK if ok else EXIT_FAILED


def _check(args: argparse.Namespace) -> int:
    paths = input_paths(args.catalog, args.stacks_dir)
    fleet = load_fleet(paths.catalog, paths.stacks_dir)
    if args.clusters or args.every:
        wanted = set(args.clusters) if args.clusters else {p.name for p in fleet.clusters}
        unknown = sorted(wanted - {p.name for p in fleet.clusters})
        if unknown:
            problems = Problems()
            for name in unknown:
                problems.add("command line", name, "no cluster of that name")
            problems.raise_if_any()
        chosen = [(p, ["named" if args.clusters else "every cluster"]) for p in fleet.clusters if p.name in wanted]
    else:
        chosen = coverage.covering(fleet.clusters)
    tools = _needed([p for p, _ in chosen], args.runner)
    _say(f"sandbox check: {len(chosen)} of {len(fleet.clusters)} clusters of {paths.stacks_dir}")
    for plan, why in chosen:
        _say(f"  {plan.name}: {', '.join(why)}")
    results: list[tuple[str, int, float]] = []
    for plan, _ in chosen:
        started = time.monotonic()
        code = _run(argparse.Namespace(**{**vars(args), "cluster": plan.name}), plan, tools)
        results.append((plan.name, code, time.monotonic() - started))
    failed = [name for name, code, _ in results if code != EXIT_OK]
    for name, code, seconds in results:
        _say(f"sandbox check: {name}: {'passed' if code == EXIT_OK else 'FAILED'} in {seconds:.0f} s")
    _say(f"sandbox check: {len(results) - len(failed)} passed, {len(failed)} failed")
    return EXIT_FAILED if failed else EXIT_OK


def _probe(args: argparse.Namespace, plan: ClusterPlan | None = None, tools: Toolbox | None = None) -> int:
    plan = plan or _plan_of(args)
    tools = tools or _needed([plan], None)
    sandbox = _sandbox_of(plan.name)
    rows = probe.probe(plan, sandbox, tools)
    quota = probe.quota_probe(plan, sandbox, tools)
    placed = daemonsets.compare(tools, sandbox)
    operator = daemonsets.operator_resources(tools, sandbox)
    if args.json:
        report = {
            "placement": json.loads(probe.as_json(rows)),
            "quota": [{**dataclasses.asdict(q), "agrees": q.agrees} for q in quota],
            "daemonsets": [{**dataclasses.asdict(d), "agrees": d.agrees} for d in placed],
            "modelOnly": [{"operandsOf": r, "why": daemonsets.MODEL_ONLY} for r in operator],
        }
        print(json.dumps(report, indent=2))
    else:
        print(probe.as_table(rows))
        print(probe.quota_table(quota))
        print(daemonsets.as_table(placed, operator))
    agreeing = sum(r.agrees for r in rows)
    closed = sum(q.agrees for q in quota)
    where = sum(d.agrees for d in placed)
    _say(
        f"sandbox probe: {plan.name}: {len(rows)} pods, {agreeing} where the model says, {len(rows) - agreeing} not; "
        f"quota: {len(quota)} attempts, {closed} as the quota model says, {len(quota) - closed} not; "
        f"DaemonSets: {len(placed)}, {where} on the nodes verify's placement says, {len(placed) - where} not; "
        f"{sum(r.cel_checked for r in rows)} allocated devices asked of the offline CEL evaluator"
        + (f"; {len(operator)} operator resource(s) whose operands are verify's model only" if operator else "")
    )
    ok = agreeing == len(rows) and closed == len(quota) and where == len(placed)
    return EXIT_OK if ok else EXIT_FAILED


_SUBCOMMANDS = {
    "up": _up,
    "apply": _apply,
    "plan": _plan,
    "kubeconfig": _kubeconfig,
    "down": _down,
    "run": _run,
    "probe": _probe,
}


def run(args: argparse.Namespace) -> int:
    """The exit code of a sandbox subcommand: its failures are one message each, never a traceback."""
    try:
        code: int = args.sandbox_run(args)
        return code
    except SandboxUsageError as error:
        print(f"sandbox: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SandboxError as error:
        print(f"sandbox: {error}", file=sys.stderr)
        return EXIT_FAILED
    except interrupts.Interrupted:
        raise
