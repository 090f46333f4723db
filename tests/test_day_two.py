"""Day two on a real control plane: the scenarios of tests/day_two.py applied one after the other to one
sandbox with `sandbox upgrade day2 --from <previous revision>` (real kube-apiserver, scheduler, controller
manager, etcd, HashiCorp's providers built from source, the real charts), each report held against the
disruption written down for it: the real plan per address, `changed`'s prediction (0 disagreements), each
running workload's outcome, new pods, the DeviceClasses, the nodes, and the second plan (empty).

CI (`make test`) runs the scenarios marked `ci` in one chain; `make day-two` runs every one and the interrupted
upgrade (THEMELIO_DAY_TWO=full; THEMELIO_DAY_TWO=NAME,NAME runs those scenarios alone) and writes each report to $THEMELIO_DAY_TWO_FIGURES, from which docs/day-two.md
takes its figures. Needs the tools
of `make sandbox-tools` and ../shared's charts (skipped without them; in CI nothing skips).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests import day_two
from tests.live_sandbox import processes_of
from tests.requirements import ROOT, shared_path, unavailable
from themelio_gpu.sandbox.errors import MissingToolError
from themelio_gpu.sandbox.folder import KUBECTL
from themelio_gpu.sandbox.tools import Toolbox, toolbox

SELECTED = os.environ.get("THEMELIO_DAY_TWO", "")
FULL = SELECTED == "full"
NAMED = {name.strip() for name in SELECTED.split(",") if name.strip()} - {"full"}
"""THEMELIO_DAY_TWO=NAME,NAME: those scenarios alone, in the suite's order (each one's edits apply to the fleet
as the scenarios chosen before it left it: choose the ones an edit builds on too)."""
FIGURES = os.environ.get("THEMELIO_DAY_TWO_FIGURES")
CHOSEN = [s for s in day_two.SCENARIOS if (s.name in NAMED if NAMED else FULL or s.ci)]


@dataclass
class Chain:
    """The scratch repository, the sandbox's environment, and where the chain has got to."""

    repo: Path
    env: dict[str, str]
    tools: Toolbox
    charts: Path
    revision: str
    reports: dict[str, Any] = field(default_factory=dict)
    broken: str = ""
    """The scenario that failed: the ones after it start from an unknown state and are not run."""

    def flags(self) -> list[str]:
        return [*day_two.fleet_flags(self.repo), "--charts", str(self.charts)]

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        kubeconfig = Path(self.env["THEMELIO_SANDBOX_DIR"]) / day_two.CLUSTER / "kubeconfig"
        result = subprocess.run(
            [str(self.tools.binary(*KUBECTL)), "--kubeconfig", str(kubeconfig), *args],
            input=stdin, capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        return result.stdout

    def nodes(self) -> dict[str, Any]:
        return {n["metadata"]["name"]: n for n in json.loads(self.kubectl("get", "nodes", "-o", "json"))["items"]}


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    try:
        tools = toolbox(("kubernetes-1.36", "etcd", "kwok", "helm", "karpenter-crds"))
    except MissingToolError as error:
        unavailable(str(error))
        raise
    root = tmp_path_factory.mktemp("day-two")
    charts = root / "charts"
    charts.mkdir()
    for chart in shared_path("reference", "charts").iterdir():
        if (chart / "Chart.yaml").is_file():
            (charts / chart.name).symlink_to(chart)
    repo = root / "repo"
    revision = day_two.scratch_repository(repo)
    env = dict(
        os.environ, THEMELIO_SANDBOX_DIR=str(root / "sandboxes"), THEMELIO_CHANGED_CACHE=str(root / "changed")
    )
    for name in ("THEMELIO_CATALOG", "THEMELIO_STACKS_DIR", "THEMELIO_CHART_MIRROR"):
        env.pop(name, None)
    state = Chain(repo, env, tools, charts, revision)
    try:
        # The fleet as deployed: the sandbox comes up at the first revision and gets its stack (an upgrade from
        # the revision to itself: nothing to plan), so that every scenario starts from a running cluster.
        started = time.monotonic()
        code, report, err = day_two.upgrade(repo, revision, env, charts)
        state.reports["deployed"] = {**report, "suite_seconds": round(time.monotonic() - started, 1)}
        if code != 0 or report.get("plan"):
            state.broken = f"the first revision did not deploy (exit {code}): {err[-3000:]}"
        yield state
    finally:
        down = day_two.themelio("sandbox", "down", day_two.CLUSTER, *state.flags(), env=env)
        survivors = processes_of(root / "sandboxes")
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
        if FIGURES:
            Path(FIGURES).write_text(json.dumps(state.reports, indent=2) + "\n")
        assert not survivors, f"processes outlived the sandbox: {survivors}"
        assert down.returncode == 0, down.stdout + down.stderr


def _helm_validates_the_new_chart_against_the_old_crds(chain: Chain) -> None:
    """Helm validates a release's new objects against the CRDs installed before its pre-upgrade hook upgrades
    them: the real Helm, on the real API server with the 26.3.3 CRDs, accepts the 26.7.0 release as the stack
    configures it (so the stack leaves that validation on; docs/day-two.md)."""
    kubeconfig = str(Path(chain.env["THEMELIO_SANDBOX_DIR"]) / day_two.CLUSTER / "kubeconfig")
    helm = str(chain.tools.binary("helm"))
    values = subprocess.run(
        [helm, "get", "values", "gpu-operator", "-n", "gpu-operator", "-o", "yaml", "--kubeconfig", kubeconfig],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "upgradeCRD: true" in values
    dry_run = subprocess.run(
        [helm, "upgrade", "gpu-operator", str(chain.charts / "gpu-operator-v26.7.0"), "-n", "gpu-operator",
         "--dry-run=server", "-f", "-", "--kubeconfig", kubeconfig],
        input=values, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert dry_run.returncode == 0, dry_run.stderr


def _run(chain: Chain, scenario: day_two.Scenario) -> None:
    base = chain.revision
    head = day_two.commit_scenario(chain.repo, scenario)
    for command in scenario.hand_edits:
        day_two.hand_edit(command, chain.kubectl)
    if scenario.name == "gpu-operator-26.7":
        _helm_validates_the_new_chart_against_the_old_crds(chain)
    if scenario.name == "drift":
        # `sandbox plan` names every object edited by hand before the apply puts it back.
        shown = day_two.themelio("sandbox", "plan", day_two.CLUSTER, *chain.flags(), env=chain.env)
        assert shown.returncode == 2, shown.stdout + shown.stderr
        for address in scenario.expected.drift:
            assert f"# {address} will be" in shown.stdout, address
    started = time.monotonic()
    code, report, err = day_two.upgrade(chain.repo, base, chain.env, chain.charts)
    report["suite_seconds"] = round(time.monotonic() - started, 1)
    chain.reports[scenario.name] = report
    problems = day_two.disagreements(report, scenario.expected)
    problems += day_two.node_disagreements(chain.nodes(), scenario.expected)
    if scenario.expected.catalog_without:
        config_map = json.loads(chain.kubectl("get", "configmap", "themelio-gpu-catalog", "-n", "themelio-system",
                                              "-o", "json"))  # fmt: skip
        problems += day_two.catalog_disagreements(config_map, scenario.expected)
    assert code == (0 if report.get("ok") else 1), err[-3000:]
    assert not problems, "\n".join(problems) + "\n" + err[-3000:]
    for command in scenario.cleanup:
        chain.kubectl(*command)
    chain.revision = head


@pytest.mark.parametrize("scenario", CHOSEN, ids=[s.name for s in CHOSEN])
def test_scenario(chain: Chain, scenario: day_two.Scenario) -> None:
    if chain.broken:
        pytest.fail(f"not run: scenario {chain.broken} failed before it, the sandbox is in an unknown state")
    try:
        _run(chain, scenario)
    except BaseException:
        chain.broken = scenario.name
        raise


INTERRUPTED_EDIT = (day_two.STACK_FILE, "gpuOperator:\n  version: v26.7.0\n",
                    "gpuOperator:\n  version: v26.7.0\n  values:\n    dcgmExporter: {enabled: false}\n")  # fmt: skip


def ctrl_c_during_the_second_apply_leaves_a_resumable_sandbox(chain: Chain) -> None:
    """SIGINT while the saved plan is applied (a Helm upgrade of the GPU Operator under way): one line saying
    what is left and how to go on; Terraform ended its running operation and wrote its state, no Helm release is
    left pending (or the line says how to undo it); `sandbox plan` and `sandbox apply` finish the upgrade."""
    if chain.broken:
        pytest.fail(f"not run: scenario {chain.broken} failed before it, the sandbox is in an unknown state")
    base = chain.revision
    interrupt = day_two.Scenario(
        "interrupted", "a GPU Operator value changed", (INTERRUPTED_EDIT,), day_two.Expected({})
    )
    day_two.commit_scenario(chain.repo, interrupt)
    process = subprocess.Popen(
        [sys.executable, "-m", "themelio_gpu", "sandbox", "upgrade", day_two.CLUSTER, "--from", base, "--json",
         *chain.flags()],
        cwd=ROOT, env=chain.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        seen.append(line)
        if "applying the saved plan" in line:
            break
    time.sleep(3)  # Terraform is upgrading the release (Helm waits for its pods)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=600)
    lines = "".join([*seen, err]).strip().splitlines()
    assert process.returncode == 130, "".join(seen) + err
    assert out == ""
    last = lines[-1]
    assert last.startswith("interrupted (SIGINT); the sandbox of day2 stays up with what was applied: "), last
    pending = json.loads(subprocess.run(
        [str(chain.tools.binary("helm")), "list", "-A", "--pending", "-o", "json", "--kubeconfig",
         str(Path(chain.env["THEMELIO_SANDBOX_DIR"]) / day_two.CLUSTER / "kubeconfig")],
        capture_output=True, text=True, check=True,
    ).stdout or "[]")  # fmt: skip
    if pending:
        for release in pending:
            assert f"helm rollback {release['name']} -n {release['namespace']}" in last, last
            subprocess.run(
                [str(chain.tools.binary("helm")), "rollback", release["name"], "-n", release["namespace"],
                 "--kubeconfig", str(Path(chain.env["THEMELIO_SANDBOX_DIR"]) / day_two.CLUSTER / "kubeconfig")],
                check=True, capture_output=True,
            )  # fmt: skip
    else:
        assert last.endswith("; no Helm release is left pending"), last
    plan = day_two.themelio("sandbox", "plan", day_two.CLUSTER, *chain.flags(), env=chain.env)
    assert plan.returncode in (0, 2), plan.stdout + plan.stderr
    chain.reports["interrupted"] = {"line": last, "pending": pending, "plan_exit": plan.returncode}
    applied = day_two.themelio("sandbox", "apply", day_two.CLUSTER, *chain.flags(), env=chain.env)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "plan: ok" in applied.stdout and "No changes." in applied.stdout


if FULL:  # the full suite only (`make day-two`): CI's slice stays small (docs/day-two.md, its seconds)
    test_ctrl_c_during_the_second_apply_leaves_a_resumable_sandbox = (
        ctrl_c_during_the_second_apply_leaves_a_resumable_sandbox
    )
