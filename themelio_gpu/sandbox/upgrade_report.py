"""What `sandbox upgrade` prints: the real plan beside `changed`'s prediction per address, each workload's
outcome, new pods, the DeviceClasses' gaps and what was read back, the second plan, and one summary line with
the figures (`--json`: the same as one JSON document)."""

from __future__ import annotations

import dataclasses
from typing import Any

from themelio_gpu.sandbox import driver_upgrade, real_plan
from themelio_gpu.sandbox.upgrade import Report
from themelio_gpu.tables import table
from themelio_gpu.words import count


def as_json(report: Report) -> dict[str, Any]:
    return {
        "cluster": report.cluster,
        "from": report.base,
        "to": report.head,
        "ok": report.ok,
        "base_applied": report.base_applied,
        "seconds": report.seconds,
        "control_plane": report.control_plane,
        "nodes_joined": report.nodes_joined,
        "slices_republished": report.slices_republished,
        "plan": [
            {**dataclasses.asdict(r), "agrees": r.agrees, "shown": real_plan.describe(r)} for r in report.rows
        ],
        "disagreements": report.disagreements,
        "workloads": [
            {
                "name": w.name,
                "asks": w.asks,
                "outcome": w.outcome,
                "before": dataclasses.asdict(w.before),
                "after": dataclasses.asdict(w.after),
            }
            for w in report.workloads
        ],
        "disturbed": report.disturbed,
        "new_pods": [{"name": p.name, **dataclasses.asdict(p.seen)} for p in report.new_pods],
        "class_gaps": report.class_gaps,
        "class_polls": report.class_polls,
        "class_shared": report.class_shared,
        "classes_before": report.classes_before,
        "classes_after": report.classes_after,
        "crds": report.crds,
        "crd_hook": report.hooks,
        "operator": report.operator,
        "driver_upgrade": dataclasses.asdict(report.driver_upgrade) if report.driver_upgrade else None,
        "second_plan": report.second_plan,
        "problems": report.problems,
    }


def _plan_table(report: Report) -> str:
    rows = [("address", "real plan", "changed predicted", "agrees")]
    for row in report.rows:
        verdict = "yes" if row.agrees else "NO: " + "; ".join(row.problems)
        if row.agrees and row.drift and row.predicted == real_plan.NO_CHANGE:
            verdict = "yes (drift: changed cannot see it)"
        rows.append((row.address, real_plan.describe(row), row.predicted, verdict))
    if len(rows) == 1:
        return "real plan: no changes; changed predicted none"
    return table(rows, pad_last=False)


def _workloads_table(report: Report) -> str:
    rows = [("workload", "asks for", "before", "after")]
    for w in report.workloads:
        before = (
            f"{w.before.node}: {', '.join(w.before.devices)}"
            if w.before.node
            else f"Pending: {w.before.pending[:60]}"
        )
        rows.append((w.name, w.asks, before, w.outcome))
    return table(rows, pad_last=False)


def _new_pods_table(report: Report) -> str:
    rows = [("new pod asks for", "landed on", "through class", "devices or why Pending")]
    for pod in report.new_pods:
        seen = pod.seen
        rows.append(
            (
                f"{pod.name}: 1",
                seen.node or "Pending",
                seen.device_class or ("-" if seen.node else ""),
                ", ".join(seen.devices) if seen.node else seen.pending[:100],
            )
        )
    return table(rows, pad_last=False)


def as_text(report: Report) -> str:
    lines = [f"sandbox upgrade {report.cluster}: from {report.base} to {report.head}"]
    if report.control_plane:
        cp = report.control_plane
        lines.append(
            f"control plane: {cp['change']}: restarted with etcd's data kept, API server away "
            f"{cp['api_server_away_seconds']} s; it now emulates {cp['emulates']}"
        )
    if report.nodes_joined:
        lines.append(f"nodes joined: {', '.join(report.nodes_joined)}")
    lines += ["", _plan_table(report), "", _workloads_table(report)]
    if report.slices_republished:
        lines.append(
            f"ResourceSlices republished after the apply (new device layout): {', '.join(report.slices_republished)}"
        )
    lines += ["", _new_pods_table(report)]
    gaps = {k: v for k, v in report.class_gaps.items() if v > 0}
    lines.append(
        f"DeviceClasses during the apply ({report.class_polls} polls): "
        + (
            ", ".join(f"{k} missing {v} s" for k, v in sorted(gaps.items()))
            if gaps
            else "none of those kept was ever missing"
        )
    )
    for name, polls in report.class_shared.items():
        lines.append(
            f"{name}: served by two DeviceClasses or more in {polls} of {report.class_polls} polls (the one created "
            "later is picked)"
        )
    changed_classes = {
        c: (report.classes_before.get(c), report.classes_after.get(c))
        for c in sorted(set(report.classes_before) | set(report.classes_after))
        if report.classes_before.get(c) != report.classes_after.get(c)
    }
    for name, (before, after) in changed_classes.items():
        lines.append(f"DeviceClass {name}: {_mapped(before)} -> {_mapped(after)}")
    if report.hooks:
        lines.append(
            f"the GPU Operator's pre-upgrade hook (operator.upgradeCRD), NVIDIA's manage-crds run as its Job runs it: "
            f"{', '.join(report.hooks)}"
        )
    if report.operator:
        running = report.operator.get("running")
        lines.append(
            f"NVIDIA's GPU Operator controller after the apply: {running} runs"
            if running
            else f"NVIDIA's GPU Operator controller after the apply: none runs ({report.operator.get('why')})"
        )
        lines += [f"  {name}: state {state or '(none)'}" for name, state in report.operator["resources"].items()]
    if report.driver_upgrade is not None and report.driver_upgrade.states:
        lines += driver_upgrade.lines(report.driver_upgrade)
    for crd, state in report.crds.items():
        lines.append(f"CRD {crd}: {state}")
    lines.append(f"second plan: {report.second_plan}")
    lines += [f"problem: {p}" for p in report.problems]
    return "\n".join(lines)


def _mapped(name: str | None) -> str:
    return "absent" if name is None else (name or "no extendedResourceName")


def summary(report: Report) -> str:
    moved = sum(r.real == "move" for r in report.rows)
    return (
        f"sandbox upgrade: {report.cluster}: {'passed' if report.ok else 'FAILED'}; "
        f"{count(len(report.rows), 'address', 'addresses')} acted on ({moved} moved), {report.disagreements} where changed and "
        f"the real plan disagree; {count(len(report.workloads), 'workload')}, {report.disturbed} disturbed; "
        f"second plan: {report.second_plan}; " + ", ".join(f"{k} {v:.0f} s" for k, v in report.seconds.items())
    )
