"""What `python -m themelio_gpu sandbox ...` runs (its arguments are in themelio_gpu/commands/sandbox.py): each
subcommand's steps, by name in SUBCOMMANDS; SandboxUsageError and SandboxError say why one cannot go on."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TextIO

from themelio_gpu import exits, interrupts
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan, Fleet
from themelio_gpu.plan.selection import select_cluster, unknown_cluster
from themelio_gpu.sandbox import (
    admission,
    build,
    cluster,
    components,
    coverage,
    daemonsets,
    deploy,
    inventory,
    karpenter_probe,
    kueue_probe,
    nvidia_report,
    parallel,
    probe,
    providers,
    read_back,
    upgrade,
    upgrade_report,
)
from themelio_gpu.sandbox import trial as sandbox_trial
from themelio_gpu.sandbox.errors import SandboxUsageError
from themelio_gpu.sandbox.outcomes import Kind
from themelio_gpu.sandbox.rest import Rest
from themelio_gpu.sandbox.supervisor import Supervisor
from themelio_gpu.sandbox.tools import Toolbox, registry_providers, toolbox
from themelio_gpu.settings import InputPaths, chart_cache, fleet_folders, input_paths
from themelio_gpu.words import count

EXIT_OK, EXIT_FAILED = exits.OK, exits.FAILED


UP_TOOLS = ("kubernetes-1.36", "etcd", "kwok", "helm")


def _needed(plans: Sequence[ClusterPlan], runner: str | None, probe_components: bool = True) -> Toolbox:
    """The tools these clusters' sandboxes need: the control plane at each one's version, their components'
    (without `probe_components`, not those only the probe asks of); to deploy, HashiCorp's providers the stacks pin (and
    OpenTofu with --with tofu)."""
    needed = {*UP_TOOLS, *(cluster.kubernetes_tool(p.definition) for p in plans)}
    needed |= {tool for plan in plans for tool in components.tools(plan, probe_components)}
    if runner is not None:
        needed |= providers.provider_tools()
        if runner == "tofu":
            needed.add("opentofu")
    return toolbox(tuple(sorted(needed)))


def _tools(args: argparse.Namespace) -> int:
    return build.build(args.names, jobs=args.jobs, force=args.force)


def _plan_of(args: argparse.Namespace) -> ClusterPlan:
    paths = input_paths(args.catalog, args.stacks_dir)
    return select_cluster(load_fleet(paths.catalog, paths.stacks_dir), args.cluster)


def _say(text: str) -> None:
    print(text, flush=True)


def _up(args: argparse.Namespace) -> int:
    plan = _plan_of(args)
    _start(plan, _needed([plan], None), args)
    return EXIT_OK


def _start(plan: ClusterPlan, tools: Toolbox, args: argparse.Namespace) -> None:
    substitutes = (
        ""
        if registry_providers()
        else providers.describe_substitutes(providers.provider_uses(providers.engine_pins(), tools.tools))
    )
    if substitutes:
        _say(f"sandbox: {plan.name}: {substitutes}")
    probing = getattr(args, "probe", True)  # `up` starts every component: a `sandbox probe` may follow
    sandbox = cluster.up(
        plan, tools, chart_cache(args.charts), port=args.port, keep=args.keep, say=_say, probe_components=probing
    )
    try:
        with _working_on(sandbox):
            inventory.record_baseline(sandbox, tools)
    except BaseException:
        cluster.down(plan.name, say=_say)
        raise


def _sandbox_of(name: str) -> cluster.Sandbox:
    sandbox = cluster.Sandbox(name)
    if not sandbox.exists():
        raise SandboxUsageError(f"no sandbox of {name} is up ({sandbox.folder}): `sandbox up {name}` first")
    return sandbox


def _working_on(sandbox: cluster.Sandbox) -> AbstractContextManager[None]:
    """This command works on the sandbox: `down` ends it and whatever it started (supervisor.py)."""
    return Supervisor(sandbox.folder).command()


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
    with _working_on(sandbox):
        steps = deploy.execute("apply", args.runner, plan, sandbox, tools, *_inputs(args))
    _show(steps)
    if any(s.code != 0 for s in steps[:-1]) or steps[-1].name != "plan":
        for line in read_back.recovery(tools, sandbox, plan.name):  # a Helm release an interrupt left pending
            _say(f"sandbox: {line}")
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
    with _working_on(sandbox):
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
    """Destroy the stack if it was applied, list what it left; then, whatever happened meanwhile (a failure,
    Ctrl-C), end every process of the sandbox and remove it."""
    sandbox = cluster.Sandbox(args.cluster)
    if not sandbox.folder.exists():
        cluster.down(args.cluster, say=_say)  # says there is none
        return EXIT_OK
    code = EXIT_OK
    with _working_on(sandbox):  # recorded until it is done: another `down` meanwhile ends it first
        try:
            if sandbox.exists() and deploy.has_state(sandbox):
                Supervisor(sandbox.folder).end_commands()  # a killed `apply`'s Terraform must not hold the state
                code = _destroy(args, sandbox, plan)
        finally:
            cluster.down(args.cluster, say=_say)
    return code


def _destroy(args: argparse.Namespace, sandbox: cluster.Sandbox, plan: ClusterPlan | None) -> int:
    plan = plan or _plan_of(args)
    tools = _needed([plan], args.runner)
    steps = deploy.execute("destroy", args.runner, plan, sandbox, tools, *_inputs(args))
    _show(steps)
    left, kept = inventory.leftovers(sandbox, tools, inventory.kept_by_helm(plan, chart_cache(args.charts)))
    if kept:
        objects = [k for k in kept if not k.startswith("Node/")]
        labels = (
            f"; {len(kept) - len(objects)} node labels the GPU Operator and NFD set"
            if len(kept) > len(objects)
            else ""
        )
        _say(f"sandbox: left after uninstall by design (what Helm keeps: its charts' CRDs, the namespaces it "
             f"created, objects marked helm.sh/resource-policy: keep, and what those own; the GPU Operator's and NFD's "
             f"node labels; docs/sandbox.md): {count(len(objects), 'object')}: {', '.join(objects)}{labels}")  # fmt: skip
    _say(f"sandbox: {len(left)} object(s) the stack created are left after destroy{':' if left else ''}")
    for line in left:
        _say(f"  {line}")
    return EXIT_FAILED if any(s.code != 0 for s in steps) or left else EXIT_OK


def _run(args: argparse.Namespace, plan: ClusterPlan | None = None, tools: Toolbox | None = None) -> int:
    """Everything CI asks of a stack, with figures; the sandbox is removed at the end (or on failure,
    unless --keep). With --json the probe's JSON is alone on stdout: all else the run says goes to stderr."""
    if not args.json:
        return _run_steps(args, plan, tools, sys.stdout)
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        return _run_steps(args, plan, tools, out)


def _run_steps(args: argparse.Namespace, plan: ClusterPlan | None, tools: Toolbox | None, out: TextIO) -> int:
    parallel.follow_parent()
    plan = plan or _plan_of(args)
    tools = tools or _needed([plan], args.runner, args.probe)
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
            code = _probe(args, plan, tools, out)
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


def _fleets(args: argparse.Namespace) -> list[InputPaths]:
    """The fleets to check: each `--fleet DIR` (its catalog/gpu-catalog.yaml and stacks/), else the one fleet
    of --catalog and --stacks-dir."""
    if not args.fleets:
        return [input_paths(args.catalog, args.stacks_dir)]
    if args.catalog or args.stacks_dir:
        raise SandboxUsageError("--fleet names each fleet's folder: leave out --catalog and --stacks-dir")
    if args.clusters and len(args.fleets) > 1:
        raise SandboxUsageError("clusters by name with one --fleet only: a name may be in several fleets")
    fleets, wrong = fleet_folders(args.fleets)
    if wrong:
        raise SandboxUsageError(f"--fleet: {'; '.join(wrong)} (a fleet's folder holds both)")
    return fleets


def _chosen(args: argparse.Namespace, fleet: Fleet) -> list[tuple[ClusterPlan, list[str]]]:
    if not (args.clusters or args.every):
        return coverage.covering(fleet.clusters)
    wanted = set(args.clusters) if args.clusters else {p.name for p in fleet.clusters}
    unknown = sorted(wanted - {p.name for p in fleet.clusters})
    if unknown:
        problems = Problems()
        for name in unknown:
            unknown_cluster(fleet, name, problems)
        problems.raise_if_any()
    return [(p, ["named" if args.clusters else "every cluster"]) for p in fleet.clusters if p.name in wanted]


def _check(args: argparse.Namespace) -> int:
    runs: list[parallel.Run] = []
    plans: list[ClusterPlan] = []
    fleets = _fleets(args)
    for number, paths in enumerate(fleets, 1):
        fleet = load_fleet(paths.catalog, paths.stacks_dir)
        chosen = _chosen(args, fleet)
        _say(f"sandbox check: {len(chosen)} of {len(fleet.clusters)} clusters of {paths.stacks_dir}")
        for plan, why in chosen:
            _say(f"  {plan.name}: {', '.join(why)}")
        # Fleets may share cluster names: with several, each fleet's sandboxes get a folder of their own.
        folder = f"fleet-{number}" if len(fleets) > 1 else None
        runs += [parallel.Run(plan.name, paths.catalog, paths.stacks_dir, folder) for plan, _ in chosen]
        plans += [plan for plan, _ in chosen]
    tools = _needed(plans, args.runner, args.probe)
    results: list[tuple[str, int, float]] = []
    if args.jobs > 1 and len(runs) > 1:
        results = parallel.run_all(runs, args, args.jobs)
    else:
        for run, plan in zip(runs, plans, strict=True):
            started = time.monotonic()
            one = {"cluster": plan.name, "catalog": str(run.catalog), "stacks_dir": str(run.stacks_dir)}
            code = _run(argparse.Namespace(**{**vars(args), **one}), plan, tools)
            results.append((run.label, code, time.monotonic() - started))
    failed = [name for name, code, _ in results if code != EXIT_OK]
    for name, code, seconds in results:
        _say(f"sandbox check: {name}: {'passed' if code == EXIT_OK else 'FAILED'} in {seconds:.0f} s")
    _say(f"sandbox check: {len(results) - len(failed)} passed, {len(failed)} failed")
    return EXIT_FAILED if failed else EXIT_OK


def _probe(
    args: argparse.Namespace,
    plan: ClusterPlan | None = None,
    tools: Toolbox | None = None,
    out: TextIO | None = None,
) -> int:
    plan = plan or _plan_of(args)
    tools = tools or _needed([plan], None)
    sandbox = _sandbox_of(plan.name)
    predict: daemonsets.Predictor = args.daemonset_model
    with _working_on(sandbox):
        try:  # Karpenter's rows first: the others find one node per Karpenter pool, as the model has it
            launched = karpenter_probe.probe_karpenter(plan, sandbox)
            rows = probe.probe(plan, sandbox, tools)
            quota = admission.quota_probe(plan, sandbox, tools)
            queued = kueue_probe.probe_kueue(plan, sandbox, tools)
            nvidia = nvidia_report.read(plan, sandbox, tools)
            absent = (
                "" if nvidia.operator is None or nvidia.operator.running else nvidia.operator.why or "not started"
            )
            placed = daemonsets.compare(tools, sandbox, predict(plan, sandbox, tools), absent)
            _wait_cleared(plan, sandbox)
        finally:
            karpenter_probe.end(sandbox, tools)
    if args.json:
        report = {
            "placement": probe.as_dicts(rows),
            "quota": admission.as_dicts(quota),
            "kueue": kueue_probe.as_dicts(queued),
            "karpenter": karpenter_probe.as_dicts(launched),
            "daemonsets": [{**dataclasses.asdict(d), "agrees": d.agrees} for d in placed],
            "nvidia": nvidia_report.as_json(nvidia),
        }
        print(json.dumps(report, indent=2), file=out or sys.stdout, flush=True)
    else:
        print(probe.as_table(rows))
        print(admission.quota_table(quota))
        for part in (
            kueue_probe.as_table(queued) if queued else "",
            karpenter_probe.as_table(launched) if launched else "",
        ):
            if part:
                print(part)
        print(daemonsets.as_table(placed))
        print(nvidia_report.as_text(nvidia), flush=True)
    # The summary goes with the tables; beside JSON it goes to stderr, so that stdout is the JSON alone.
    summary = probe_summary(plan.name, rows, quota, placed) + f"; {nvidia_report.summary(nvidia)}"
    summary += f"; Kueue: {len(queued)} Jobs, {sum(k.agrees for k in queued)} as the model says" if queued else ""
    summary += (
        f"; Karpenter: {len(launched)} attempts, {sum(k.agrees for k in launched)} as the model says"
        if launched
        else ""
    )
    print(summary, file=sys.stderr if args.json else sys.stdout, flush=True)
    agreed = [r.agrees for r in rows] + [q.agrees for q in quota] + [k.agrees for k in queued]
    agreed += [k.agrees for k in launched] + [d.agrees for d in placed] + [nvidia.ok]
    return EXIT_OK if all(agreed) else EXIT_FAILED


def _wait_cleared(plan: ClusterPlan, sandbox: cluster.Sandbox) -> None:
    """Until the namespaces of the probe's halves are gone: each half deletes its own as it ends, and the
    namespace controller removes them (seconds each) while the next half runs; nothing of a probe outlives it."""
    api = Rest(sandbox.kubeconfig)
    for namespace in (probe.NAMESPACE, *admission.namespaces(plan)):
        api.wait_namespace_gone(namespace)


def probe_summary(
    cluster_name: str,
    rows: Sequence[probe.Row],
    quota: Sequence[admission.QuotaRow],
    placed: Sequence[daemonsets.DaemonSetRow],
) -> str:
    """One line: each part's rows, how many agree with the model, and the figures the probe is judged by."""
    compared = [r for r in rows if not r.uncompared]
    shown = [q for q in quota if not q.uncompared]
    pending = [o for o in [*(r.real for r in compared), *(q.real for q in shown)] if o is not None and o.pending]
    unparsed = [o for o in pending if o.kind in (Kind.UNPARSED, Kind.TIMEOUT)]
    real = [d for d in placed if d.compared]
    parts = [
        f"sandbox probe: {cluster_name}: placement: {len(compared)} pods, {sum(r.agrees for r in compared)} as "
        f"the model says"
        + (f" ({len(rows) - len(compared)} more shown, not compared)" if len(compared) < len(rows) else ""),
        f"quota: {len(shown)} attempts, {sum(q.agrees for q in shown)} as the quota model says"
        + (f" ({len(quota) - len(shown)} more shown, not compared)" if len(shown) < len(quota) else ""),
        f"{len(pending)} Pending, {len(pending) - len(unparsed)} for a reason parsed from the cluster's words",
        f"DaemonSets: {len(real)}, {sum(d.agrees for d in real)} on the GPU nodes verify predicts"
        + (f" ({len(placed) - len(real)} verify's prediction only)" if len(real) < len(placed) else ""),
        f"{sum(r.cel_checked for r in rows)} allocated devices asked of the offline CEL evaluator",
    ]
    return "; ".join(parts)


def trial(args: argparse.Namespace) -> int:
    """`trial --sandbox CLUSTER`: the offline trial on the sandbox's ResourceSlices, and the real allocations."""
    from themelio_gpu.dryrun.trial import resolve_offerings

    paths = input_paths(args.catalog, args.stacks_dir)
    fleet = load_fleet(paths.catalog, paths.stacks_dir)
    plan = select_cluster(fleet, args.sandbox)
    offerings = resolve_offerings(fleet.catalog, args.offerings)
    sandbox = _sandbox_of(plan.name)
    with _working_on(sandbox):
        report, rows = sandbox_trial.run(fleet.catalog, plan, offerings, sandbox, _needed([plan], None))
    print(sandbox_trial.as_json(report, rows) if args.json else sandbox_trial.as_text(report, rows))
    agreeing = sum(r.agrees for r in rows)
    _say(
        f"trial --sandbox {plan.name}: {count(len(rows), 'offering')}, {agreeing} allocated as the offline trial "
        f"predicts, {len(rows) - agreeing} not; {count(len(report.problems), 'problem')} of the offline trial"
    )
    return EXIT_OK if agreeing == len(rows) and not report.problems else EXIT_FAILED


def _upgrade(args: argparse.Namespace) -> int:
    """`sandbox upgrade CLUSTER --from REF` (upgrade.py): REF's stack, then the work tree's, on one sandbox."""
    if args.json:  # the report alone on stdout; the progress lines go to stderr
        with contextlib.redirect_stdout(sys.stderr):
            report = upgrade.Upgrade(args, _needed, _start, _say).run()
            _say(upgrade_report.summary(report))
        print(json.dumps(upgrade_report.as_json(report), indent=2))
        return EXIT_OK if report.ok else EXIT_FAILED
    report = upgrade.Upgrade(args, _needed, _start, _say).run()
    print(upgrade_report.as_text(report))
    _say(upgrade_report.summary(report))
    return EXIT_OK if report.ok else EXIT_FAILED


SUBCOMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "tools": _tools,
    "check": _check,
    "up": _up,
    "apply": _apply,
    "plan": _plan,
    "kubeconfig": _kubeconfig,
    "down": _down,
    "run": _run,
    "probe": _probe,
    "upgrade": _upgrade,
}
