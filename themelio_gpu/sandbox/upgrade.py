"""`sandbox upgrade CLUSTER --from REF`: a fleet change applied to a running cluster, as a pipeline applies it.

1. REF's stack, synthesized by REF's own code in a temporary worktree (as `changed --base-ref` does), is
   applied to the cluster's sandbox (brought up at REF's definition if none is up), unless the sandbox holds
   it already: the stack this command applied last, with the state untouched since, is not applied again, so
   upgrades chain and hand edits made meanwhile (drift) stay for the next plan to find.
2. Workloads that hold GPUs start (workloads.py).
3. What else changes on the cluster first (cluster_changes.py): the control plane at a new Kubernetes
   version, new nodes; the new revision's charts join the sandbox's chart repository.
4. The work tree's stack is planned into a saved plan, `terraform show -json` reads it (real_plan.py), and
   `changed --base-ref REF --format json` predicts the same change: every address is compared.
5. The saved plan is applied once, as a pipeline applies what it planned, while the DeviceClasses are watched;
   then new MIG layouts are published, and each workload is read again and new pods are placed.
6. A second plan must show no changes.
The work tree must be clean: the upgrade goes from one revision to another, as a pipeline's does. The sandbox
stays up (`sandbox down` removes it); the workloads are removed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from themelio_gpu import interrupts, worktrees
from themelio_gpu.inputs.problems import InputError
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import ClusterPlan
from themelio_gpu.plan.selection import select_cluster
from themelio_gpu.sandbox import (
    cluster_changes,
    deploy,
    driver_upgrade,
    helm_hooks,
    operator_status,
    read_back,
    real_plan,
    revision,
    workloads,
)
from themelio_gpu.sandbox.cluster import Sandbox
from themelio_gpu.sandbox.components import chart_repository
from themelio_gpu.sandbox.errors import SandboxError, SandboxUsageError
from themelio_gpu.sandbox.supervisor import Supervisor
from themelio_gpu.sandbox.tools import PROJECT_ROOT, Toolbox
from themelio_gpu.sandbox.workloads import UNDISTURBED, NewPod, Workload
from themelio_gpu.settings import CHART_MIRROR_ENV, chart_cache, input_paths

PLAN_FILE = "upgrade.tfplan"
APPLY_GRACE = 300.0
"""Seconds an interrupted apply gets to end on its own: Terraform, on SIGINT, lets the running operations
(a Helm upgrade waiting for its pods) finish and writes its state; only then is it killed."""


@dataclass
class Report:
    cluster: str
    base: str
    head: str
    seconds: dict[str, float] = field(default_factory=dict)
    control_plane: dict[str, Any] = field(default_factory=dict)
    nodes_joined: list[str] = field(default_factory=list)
    slices_republished: list[str] = field(default_factory=list)
    rows: list[real_plan.Row] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)
    new_pods: list[NewPod] = field(default_factory=list)
    class_gaps: dict[str, float] = field(default_factory=dict)
    class_polls: int = 0
    class_shared: dict[str, int] = field(default_factory=dict)
    """Name: the polls during the apply that saw two classes or more serve it."""
    classes_before: dict[str, str] = field(default_factory=dict)
    classes_after: dict[str, str] = field(default_factory=dict)
    crds: dict[str, str] = field(default_factory=dict)
    hooks: list[str] = field(default_factory=list)
    """The CRDs the GPU Operator's pre-upgrade hook created or replaced (helm_hooks.py)."""
    driver_upgrade: driver_upgrade.DriverUpgrade | None = None
    """NVIDIA's rolling driver upgrade after the apply, watched to its end (driver_upgrade.py)."""
    operator: dict[str, Any] = field(default_factory=dict)
    """NVIDIA's operator controller after the apply: the version running (the build of the one the Deployment's
    image names) and each of its custom resources' state (operator_status.py); empty without the operator."""
    base_applied: bool = False
    apply_ok: bool = False
    second_plan: str = ""
    """`no changes`, or Terraform's summary line of what it still wants to do."""
    problems: list[str] = field(default_factory=list)

    @property
    def disagreements(self) -> int:
        return sum(not r.agrees for r in self.rows)

    @property
    def disturbed(self) -> int:
        return sum(w.outcome not in UNDISTURBED for w in self.workloads)

    @property
    def ok(self) -> bool:
        return self.apply_ok and not self.disagreements and self.second_plan == "no changes" and not self.problems


def _steps_ok(steps: Sequence[deploy.Step]) -> bool:
    return all(s.code == 0 for s in steps)


def _failed(steps: Sequence[deploy.Step], what: str) -> SandboxError:
    last = steps[-1]
    return SandboxError(f"{what}: {last.name} exit {last.code}:\n{last.output[-4000:]}")


def _changed_prediction(
    commit: revision.Revision, catalog: Path, stacks_dir: Path, head: Path, mirror: dict[str, str]
) -> Any:
    """`changed --base-ref REF --head DIR --format json`, as the generated pipeline runs it (docs/changed.md):
    the head is the output folder the work tree's stack was synthesized into, the base REF's fleet by REF's own
    code, with the sandbox's chart repository as the mirror on both sides, as the stacks applied have it."""
    env = {k: v for k, v in os.environ.items() if k != CHART_MIRROR_ENV} | mirror
    command = [sys.executable, "-m", "themelio_gpu", "changed", "--base-ref", commit.sha, "--head", str(head),
               "--catalog", str(catalog), "--stacks-dir", str(stacks_dir), "--format", "json"]  # fmt: skip
    result = interrupts.run(command, env=env, cwd=PROJECT_ROOT)
    if result.returncode != 0:
        raise SandboxError(
            f"changed --base-ref {commit.ref} failed (exit {result.returncode}):\n{result.stderr[-3000:]}"
        )
    return json.loads(result.stdout)


def _show_json(binary: str, plan_file: Path, stack_dir: Path, env: dict[str, str]) -> Any:
    """`terraform show -json PLANFILE`: the saved plan in Terraform's JSON output format."""
    result = interrupts.run([binary, "show", "-json", "-no-color", str(plan_file)], cwd=stack_dir, env=env)
    if result.returncode != 0:
        raise SandboxError(f"terraform show -json {plan_file.name}: {result.stderr.strip()[-2000:]}")
    return json.loads(result.stdout)


class Upgrade:
    """One upgrade of one cluster's sandbox from REF to the work tree (the module's docstring)."""

    def __init__(
        self,
        args: argparse.Namespace,
        tools_for: Callable[[Sequence[ClusterPlan], str | None], Toolbox],
        start: Callable[[ClusterPlan, Toolbox, argparse.Namespace], None],
        say: Callable[[str], None],
    ) -> None:
        self.args, self.tools_for, self.start, self.say = args, tools_for, start, say
        paths = input_paths(args.catalog, args.stacks_dir)
        self.catalog, self.stacks_dir = paths.catalog.absolute(), paths.stacks_dir.absolute()
        self.charts = chart_cache(args.charts)

    def run(self) -> Report:
        args = self.args
        if args.runner not in ("terraform", "tofu"):
            raise SandboxUsageError("upgrade plans and applies a saved plan: --with terraform or tofu")
        commit = revision.resolve(args.from_ref, self.catalog, self.stacks_dir)
        dirty = revision.dirty_files(commit)
        if dirty:
            raise SandboxUsageError(
                f"the work tree has uncommitted changes ({', '.join(dirty[:5])}{', ...' if len(dirty) > 5 else ''}): "
                "commit or stash them; an upgrade goes from one revision to another, as a pipeline's does"
            )
        head = select_cluster(load_fleet(self.catalog, self.stacks_dir), args.cluster)
        with worktrees.worktree(commit.repo, commit.sha, "themelio-upgrade-") as tree:
            base = self._base_plan(commit, tree)
            tools = self.tools_for([base, head], args.runner)
            report = Report(head.name, commit.label, revision.head_label(commit))
            started = time.monotonic()
            sandbox = Sandbox(head.name)
            if not sandbox.exists():
                self.start(base, tools, args)
                report.seconds["up"] = round(time.monotonic() - started, 1)
            with Supervisor(sandbox.folder).command():  # `down` ends this command and what it started
                self._apply_base(base, commit, tree, sandbox, tools, report)
        with Supervisor(sandbox.folder).command():
            return self._upgrade(commit, base, head, sandbox, tools, report)

    def _base_plan(self, commit: revision.Revision, tree: Path) -> ClusterPlan:
        where = f"--from {commit.ref}"
        try:
            fleet = load_fleet(tree / commit.catalog, tree / commit.stacks_dir)
        except InputError as error:
            text = error.render().replace(str(tree), f"<{commit.ref}>")
            raise SandboxUsageError(f"{where}: its fleet does not load with this tool:\n{text}") from None
        if fleet.cluster(self.args.cluster) is None:
            known = ", ".join(c.name for c in fleet.clusters) or "none"
            raise SandboxUsageError(
                f"{where}: {commit.ref} has no cluster {self.args.cluster} (its clusters: {known})"
            )
        return select_cluster(fleet, self.args.cluster)

    def _timed(self, report: Report, name: str, work: Callable[[], Any]) -> Any:
        mark = time.monotonic()
        try:
            return work()
        finally:
            report.seconds[name] = round(report.seconds.get(name, 0.0) + time.monotonic() - mark, 1)

    def _apply_base(
        self,
        base: ClusterPlan,
        commit: revision.Revision,
        tree: Path,
        sandbox: Sandbox,
        tools: Toolbox,
        report: Report,
    ) -> None:
        """REF's stack, by REF's own code, applied unless it is what this command applied last (state untouched)."""
        tool = revision.tool_id(tree / commit.project)
        if revision.holds(sandbox, commit.sha, tool):
            self.say(f"sandbox: {base.name}: {commit.label}'s stack is the one applied last: not applied again")
            return
        stack_dir, env = self._timed(report, "synthesis", lambda: deploy.prepare(
            base, sandbox, tools, tree / commit.catalog, tree / commit.stacks_dir, self.say, tree / commit.project
        ))  # fmt: skip
        self.say(f"sandbox: {base.name}: applying {commit.label}'s stack")
        steps = self._timed(
            report, "apply_base", lambda: deploy.terraform_steps("apply", self.args.runner, stack_dir, env, tools)
        )
        if not _steps_ok(steps):
            raise _failed(steps, f"{commit.label}'s stack does not apply or settle")
        report.base_applied = True
        revision.record_applied(sandbox, stack_dir, commit.sha, tool)

    def _upgrade(
        self,
        commit: revision.Revision,
        base: ClusterPlan,
        head: ClusterPlan,
        sandbox: Sandbox,
        tools: Toolbox,
        report: Report,
    ) -> Report:
        say, runner = self.say, self.args.runner
        mirror = deploy.mirror_environment(head, sandbox)
        try:
            stack_dir, env = self._timed(
                report,
                "synthesis",
                lambda: deploy.prepare(head, sandbox, tools, self.catalog, self.stacks_dir, say),
            )
            outdir = stack_dir.parent.parent
            # `changed` synthesizes the base in a process of its own: it runs while the workloads start.
            with ThreadPoolExecutor(max_workers=1) as pool, interrupts.ending_workers():
                prediction = pool.submit(
                    self._timed, report, "changed",
                    lambda: _changed_prediction(commit, self.catalog, self.stacks_dir, outdir, mirror),
                )  # fmt: skip
                report.workloads = self._timed(
                    report, "workloads_start", lambda: workloads.start(tools, sandbox, base)
                )
                self._cluster_first(head, sandbox, tools, report)
                binary = deploy._binary(runner, tools)
                plan_file = sandbox.folder / PLAN_FILE
                steps = self._timed(report, "plan", lambda: [
                    deploy.run_step("init", [binary, "init", "-input=false", "-no-color"], stack_dir, env),
                    deploy.run_step("plan", [binary, "plan", "-input=false", "-no-color", f"-out={plan_file}"],
                                    stack_dir, env),
                ])  # fmt: skip
                if not _steps_ok(steps):
                    raise _failed(steps, f"the work tree's stack does not plan on {head.name}'s sandbox")
                shown = _show_json(binary, plan_file, stack_dir, env)
                predicted = prediction.result()
            report.rows = real_plan.compare(
                real_plan.read_plan(shown), real_plan.predicted_changes(predicted, head.name)
            )
            report.classes_before = read_back.class_names(tools, sandbox)
            operator = f"helm_release.{head.operator_release.name.replace('-', '_')}"
            if any(r.address == operator and r.real == "update" for r in report.rows):
                report.hooks = helm_hooks.run_crd_upgrade(head, self.charts, tools, sandbox)
            self._apply_head(head, sandbox, tools, report, stack_dir, env, binary, plan_file)
            workloads.remove(tools, sandbox, wait=False)  # the namespace goes while Terraform plans again
            after = self._timed(report, "plan_after", lambda: deploy.run_step(
                "plan", [binary, "plan", "-detailed-exitcode", "-input=false", "-no-color"], stack_dir, env
            ))  # fmt: skip
            report.second_plan = (
                "no changes"
                if after.code == 0
                else deploy.summary(after) or f"exit {after.code}: {after.output[-2000:]}"
            )
            report.crds = read_back.operator_crds(head, self.charts, tools, sandbox)
            if report.apply_ok and report.second_plan == "no changes":
                revision.record_applied(
                    sandbox,
                    stack_dir,
                    revision.git(commit.repo, "rev-parse", "HEAD").strip(),
                    revision.tool_id(PROJECT_ROOT),
                )
        finally:
            self._timed(report, "workloads_removed", lambda: workloads.remove(tools, sandbox))
        return report

    def _cluster_first(self, head: ClusterPlan, sandbox: Sandbox, tools: Toolbox, report: Report) -> None:
        """What changes on the cluster before its stack: control plane, joining nodes, the charts served."""
        change = cluster_changes.control_plane_change(head, sandbox)
        if change:
            away = self._timed(
                report,
                "control_plane",
                lambda: cluster_changes.upgrade_control_plane(head, sandbox, tools, self.say),
            )
            report.control_plane = {
                "change": change,
                "api_server_away_seconds": round(away, 1),
                "emulates": cluster_changes.server_version(tools, sandbox),
            }
        report.nodes_joined = cluster_changes.join_new_nodes(head, sandbox, tools, ("static",))
        repository = sandbox.folder / "charts"
        chart_repository.package_charts(head, self.charts, tools.binary("helm"), repository)

    def _apply_head(
        self,
        head: ClusterPlan,
        sandbox: Sandbox,
        tools: Toolbox,
        report: Report,
        stack_dir: Path,
        env: dict[str, str],
        binary: str,
        plan_file: Path,
    ) -> None:
        """The saved plan, applied once; an interrupt lets Terraform end its running operations (SIGINT, as a
        terminal's Ctrl-C) and says how to recover a Helm release left pending."""
        before = report.classes_before
        kept_names = {f"name {n}" for n in before.values() if n}
        kept = {f"class {c}" for c in before} | kept_names
        self.say(f"sandbox: {head.name}: applying the saved plan of {report.head}")
        try:
            with read_back.watching_classes(tools, sandbox, kept) as watch:
                applied = self._timed(report, "apply", lambda: deploy.run_step(
                    "apply", [binary, "apply", "-input=false", "-no-color", str(plan_file)], stack_dir, env,
                    grace=APPLY_GRACE, stop_signal=signal.SIGINT,
                ))  # fmt: skip
        except interrupts.Interrupted as interrupted:
            advice = read_back.recovery(tools, sandbox, head.name)
            interrupted.outcome = (
                f"the sandbox of {head.name} stays up with what was applied: `sandbox plan {head.name}` shows what is "
                f"left, `sandbox apply {head.name}` finishes it, `sandbox down {head.name}` removes it"
                + ("; " + "; ".join(advice) if advice else "; no Helm release is left pending")
            )
            raise
        report.apply_ok = applied.code == 0
        if not report.apply_ok:
            errors = (
                applied.output[applied.output.find("Error:") :] if "Error:" in applied.output else applied.output
            )
            report.problems.append(f"the saved plan does not apply:\n{errors[-3000:].strip()}")
            report.problems += read_back.recovery(tools, sandbox, head.name)
        report.classes_after = read_back.class_names(tools, sandbox)
        after_keys = {f"class {c}" for c in report.classes_after} | {
            f"name {n}" for n in report.classes_after.values() if n
        }
        report.class_gaps = {k: round(v, 1) for k, v in watch.longest.items() if k in after_keys}
        report.class_polls = watch.polls
        report.class_shared = dict(sorted(watch.shared.items()))
        report.slices_republished = cluster_changes.republish_changed_slices(head, sandbox, tools)
        # NVIDIA's controller of the new chart, then its driver upgrade (GPU pods deleted, nodes cordoned and
        # uncordoned) before the workloads are read and the second plan is made.
        report.operator = operator_status.after_upgrade(tools, sandbox, head.operator_release.version)
        if report.operator.get("running"):
            namespace = head.operator_release.namespace
            report.driver_upgrade = self._timed(
                report, "driver_upgrade", lambda: driver_upgrade.watch(tools, sandbox, namespace)
            )
        report.nodes_joined += cluster_changes.join_new_nodes(head, sandbox, tools, ("provisioned", "karpenter"))
        self._timed(
            report,
            "workloads_after",
            lambda: workloads.settle(tools, sandbox, report.workloads, report.slices_republished),
        )
        report.new_pods = self._timed(report, "new_pods", lambda: workloads.new_pods(tools, sandbox, head))
