"""A cluster named on the command line: the one place that says there is no cluster of that name."""

from __future__ import annotations

from themelio_gpu.inputs.problems import Problems
from themelio_gpu.plan.model import ClusterPlan, Fleet


def unknown_cluster(fleet: Fleet, name: str, problems: Problems, where: str | None = None) -> None:
    """The problem of a name no cluster of the fleet has, listing the names it has; `where` is the location
    the problem names (default: the name itself), e.g. `--cluster gpu-north`."""
    known = ", ".join(c.name for c in fleet.clusters) or "none"
    problems.add("command line", where or name, f"no cluster of that name; known: {known}")


def select_cluster(
    fleet: Fleet, name: str, where: str | None = None, problems: Problems | None = None
) -> ClusterPlan:
    """The fleet's cluster `name`; InputError (with the problems already in `problems`) when there is none."""
    plan = fleet.cluster(name)
    if plan is None:
        problems = problems if problems is not None else Problems()
        unknown_cluster(fleet, name, problems, where)
        problems.raise_if_any()
    assert plan is not None
    return plan
