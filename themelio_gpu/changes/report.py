"""The three forms of a comparison: text for people, JSON for programs (docs/changed.schema.json), and the
matrix a GitHub Actions workflow plans one job per stack from."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from themelio_gpu.changes.compare import ACTIONS, STATUSES, Comparison, ResourceChange, StackChange
from themelio_gpu.changes.dangerous import Danger
from themelio_gpu.outputs.stack_folders import STACKS_FOLDER

SCHEMA_VERSION = 3
FORMATS = ("text", "json", "github-matrix")
_SYMBOL = {"create": "+", "update": "~", "replace": "-/+", "destroy": "-", "move": "->"}
_SHOWN_ATTRIBUTES = 4


def directory(stack: str) -> str:
    """The stack's folder, relative to the synthesized output folder."""
    return f"{STACKS_FOLDER}/{stack}"


def as_json(comparison: Comparison) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "base": comparison.base,
        "head": comparison.head,
        "notes": list(comparison.notes),
        "summary": {
            "stacks": {status: comparison.status_count(status) for status in STATUSES},
            "resources": {action: comparison.action_count(action) for action in ACTIONS},
            "dangerous": len(comparison.dangers),
        },
        "stacks": [_stack_json(stack) for stack in comparison.stacks],
        "dangerous": [{"stack": stack, **_danger_json(d)} for stack, d in comparison.dangers],
    }


def _stack_json(stack: StackChange) -> dict[str, Any]:
    return {
        "name": stack.name,
        "status": stack.status,
        "directory": directory(stack.name),
        "resources": [_resource_json(r) for r in stack.resources],
        "unchanged_resources": stack.unchanged_resources,
        "other_changes": list(stack.other_changes),
        "dangerous": [_danger_json(d) for d in stack.dangers],
    }


def _resource_json(change: ResourceChange) -> dict[str, Any]:
    return {
        "address": change.address,
        "type": change.type,
        "action": change.action,
        "previous_address": change.previous_address,
        "attributes": list(change.attributes),
        "forced_by": [{"attribute": rule.attribute, "source": rule.source} for rule in change.forced_by],
    }


def _danger_json(danger: Danger) -> dict[str, str | None]:
    return {k: v for k, v in dataclasses.asdict(danger).items() if k != "scenario"}


def as_github_matrix(comparison: Comparison, skipped: frozenset[str] = frozenset()) -> dict[str, Any]:
    """`strategy.matrix` for one job per stack to plan, but the `skipped`; no stack: exactly `{"include":[]}`."""
    return {
        "include": [
            {"stack": s.name, "directory": directory(s.name), "status": s.status}
            for s in comparison.to_plan
            if s.name not in skipped
        ]
    }


def render(comparison: Comparison, form: str, skipped: frozenset[str] = frozenset()) -> str:
    """`skipped`: stacks left out of the matrix (`--skip-stack`), which the text names where they changed."""
    if form == "json":
        return json.dumps(as_json(comparison), indent=2) + "\n"
    if form == "github-matrix":
        # One line, compact: what `echo "matrix=..." >> "$GITHUB_OUTPUT"` takes.
        return json.dumps(as_github_matrix(comparison, skipped), separators=(",", ":")) + "\n"
    return as_text(comparison, skipped)


def as_text(comparison: Comparison, skipped: frozenset[str] = frozenset()) -> str:
    lines = [f"base: {comparison.base}", f"head: {comparison.head}", *(f"note: {n}" for n in comparison.notes), ""]
    width = max((len(s.name) for s in comparison.stacks), default=0)
    for stack in comparison.stacks:
        lines.append(f"{stack.name.ljust(width)}  {stack.status}{_counts(stack)}")
        lines += [f"  {_resource_line(r)}" for r in stack.resources]
        if stack.other_changes:
            lines.append(f"  also: {', '.join(stack.other_changes)}")
    if not comparison.stacks:
        lines.append("no stacks on either side")
    dangers = comparison.dangers
    if dangers:
        lines += ["", f"Dangerous ({len(dangers)}): what would hurt a running cluster"]
        lines += [
            f"  {stack}: {d.action} {d.address}, {d.what}: {d.why}"
            + (f" (what it does to running workloads, and what to do: {d.scenario})" if d.scenario else "")
            for stack, d in dangers
        ]
    left_out = [s.name for s in comparison.to_plan if s.name in skipped]
    if left_out:
        lines += ["", f"Not planned here (--skip-stack): {', '.join(left_out)}; deploy them by hand"]
    lines += ["", _summary(comparison)]
    return "\n".join(lines) + "\n"


def _counts(stack: StackChange) -> str:
    counts = [f"{stack.count(a)} to {a}" for a in ACTIONS if a != "move" and stack.count(a)]
    if stack.count("move"):
        counts.append(f"{stack.count('move')} moved")
    if stack.status == "changed" and stack.unchanged_resources:
        counts.append(f"{stack.unchanged_resources} unchanged")
    return f": {', '.join(counts)}" if counts else ""


def _resource_line(change: ResourceChange) -> str:
    line = f"{_SYMBOL[change.action]} {change.address}"
    if change.previous_address:
        line += f" (moved from {change.previous_address})"
    if change.forced_by:
        line += f": {', '.join(r.attribute for r in change.forced_by)} forces a new resource"
    elif change.attributes:
        shown = ", ".join(change.attributes[:_SHOWN_ATTRIBUTES])
        more = len(change.attributes) - _SHOWN_ATTRIBUTES
        line += f": {shown}" + (f" and {more} more" if more > 0 else "")
    return line


def _summary(comparison: Comparison) -> str:
    stacks = ", ".join(f"{comparison.status_count(s)} {s}" for s in STATUSES)
    resources = ", ".join(f"{comparison.action_count(a)} to {a}" for a in ACTIONS if a != "move")
    moved = comparison.action_count("move")
    dangerous = len(comparison.dangers)
    return (
        f"{len(comparison.stacks)} stack{'s' if len(comparison.stacks) != 1 else ''}: {stacks}; {resources}"
        + (f", {moved} moved" if moved else "")
        + f"; {dangerous} dangerous."
    )
