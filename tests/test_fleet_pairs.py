"""The fixture fleets that come as a pair of revisions, upgraded on a real control plane: the earlier revision is
deployed on a sandbox, then `sandbox upgrade CLUSTER --from <it>` applies the fixture as it is, once, and its
report is held against the plan written down here: the real plan per address, `changed`'s prediction of each
(0 disagreements), the workloads holding GPUs (none disturbed), and the second plan (empty).

One pair so far: tests/fixtures/fleets/renamed-pool, whose pools were renamed with `renamedFrom`, against the
same cluster before the rename (tests/test_changed.py compares the two synthesized stacks; here real Terraform
reads the moved blocks against a state the earlier revision wrote). The day-two fleet's pairs are the scenarios
of tests/day_two.py. `make day-two` runs this module too (THEMELIO_DAY_TWO=full), and CI does not: docs/day-two.md
has its figures. Needs the tools of `make sandbox-tools` and ../shared's charts.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import day_two
from tests.conftest import FIXTURES
from tests.live_sandbox import processes_of
from tests.requirements import shared_path, unavailable
from tests.test_changed import renamed_back
from themelio_gpu.sandbox.errors import MissingToolError
from themelio_gpu.sandbox.tools import toolbox

LABELS, TAINTS = day_two.LABELS, day_two.TAINTS


@dataclass(frozen=True)
class Pair:
    fleet: str
    cluster: str
    earlier: Callable[[Path, Path], Path]
    """(the fixture's stacks folder, a new folder) -> the earlier revision's stacks folder."""
    plan: Mapping[str, str]
    """Every address the real plan acts on, with its action, written down before the run."""


PAIRS = (
    Pair(
        "renamed-pool",
        "gpu-renamed",
        renamed_back,
        {
            # A renamed pool's labels move to its new address and take the new pool name (an update); its taints
            # only move. The provisioned pool has nothing to move, the Karpenter pool keeps its name.
            **{
                LABELS.format(pool=pool, node=node): "update"
                for pool, node in (
                    ("a100-training", "gpu-renamed-a100-01"),
                    ("a100-training", "gpu-renamed-a100-02"),
                    ("a100-sliced", "gpu-renamed-a100-11"),
                )
            },
            **{
                TAINTS.format(pool="a100-training", node=node): "move"
                for node in ("gpu-renamed-a100-01", "gpu-renamed-a100-02")
            },
        },
    ),
)

RUN = os.environ.get("THEMELIO_DAY_TWO", "") == "full" or os.environ.get("THEMELIO_FLEET_PAIRS") == "1"
"""`make day-two` (THEMELIO_DAY_TWO=full), or THEMELIO_FLEET_PAIRS=1; `make test` collects no test here (so none
skips under CI=true)."""


def the_later_revision_applies_once_as_changed_says(pair: Pair, tmp_path: Path) -> None:
    try:
        toolbox(("kubernetes-1.36", "etcd", "kwok", "helm", "karpenter-crds"))
    except MissingToolError as error:
        unavailable(str(error))
        raise
    charts = tmp_path / "charts"
    charts.mkdir()
    for chart in shared_path("reference", "charts").iterdir():
        if (chart / "Chart.yaml").is_file():
            (charts / chart.name).symlink_to(chart)
    fleet, repo = FIXTURES / "fleets" / pair.fleet, tmp_path / "repo"
    earlier = day_two.scratch_repository(repo, fleet, pair.earlier(fleet / "stacks", tmp_path / "earlier"))
    env = dict(
        os.environ,
        THEMELIO_SANDBOX_DIR=str(tmp_path / "sandboxes"),
        THEMELIO_CHANGED_CACHE=str(tmp_path / "changed"),
    )
    for name in ("THEMELIO_CATALOG", "THEMELIO_STACKS_DIR", "THEMELIO_CHART_MIRROR"):
        env.pop(name, None)
    flags = [*day_two.fleet_flags(repo), "--charts", str(charts)]
    try:
        # The earlier revision deployed (an upgrade from itself: nothing to plan after it), then the later one.
        code, report, err = day_two.upgrade(repo, earlier, env, charts, pair.cluster)
        assert code == 0 and not report.get("plan"), f"the earlier revision did not deploy (exit {code}): {err}"
        (repo / "stacks").joinpath(f"{pair.cluster}.yaml").write_text(
            (fleet / "stacks" / f"{pair.cluster}.yaml").read_text()
        )
        day_two.git(repo, "commit", "-q", "-am", f"{pair.fleet}: the fixture as it is")
        started = time.monotonic()
        code, report, err = day_two.upgrade(repo, earlier, env, charts, pair.cluster)
        seconds = time.monotonic() - started
        problems = day_two.disagreements(report, day_two.Expected(pair.plan))
        assert code == 0, err[-3000:]
        assert not problems, "\n".join(problems) + "\n" + err[-3000:]
        print(f"{pair.fleet}: {len(report['plan'])} addresses agree, upgrade in {seconds:.0f} s")
    finally:
        down = day_two.themelio("sandbox", "down", pair.cluster, *flags, env=env)
        survivors = processes_of(tmp_path / "sandboxes")
        for pid in survivors:
            os.kill(pid, signal.SIGKILL)
        assert not survivors, f"processes outlived the sandbox: {survivors}"
        assert down.returncode == 0, down.stdout + down.stderr


if RUN:
    test_the_later_revision_applies_once_as_changed_says = pytest.mark.parametrize(
        "pair", PAIRS, ids=[p.fleet for p in PAIRS]
    )(the_later_revision_applies_once_as_changed_says)
