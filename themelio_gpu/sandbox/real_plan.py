"""The real plan of an upgrade, per address, beside `changed`'s prediction for the same pair of revisions.

Terraform's own words: `terraform show -json` of the saved plan (its JSON output format, format_version 1.x):
`resource_changes[]` gives each address's `change.actions` (`["create"]`, `["update"]`, `["delete",
"create"]` or `["create", "delete"]` for a replace, `["delete"]`, `["no-op"]`), `previous_address` when a
`moved` block brought it there, `action_reason` and `change.replace_paths` (what forces a replace);
`resource_drift[]` lists the objects Terraform found changed outside it when it refreshed.

`changed --format json` (docs/changed.schema.json) predicts per address `create`, `update`, `replace`,
`destroy` or `move` (a move with an update is an `update` with a `previous_address`), and leaves out what does
not change. Both are put in one vocabulary here and compared address by address: a different action is a
disagreement, and so is a replace the two explain by different arguments. `changed` cannot see drift (it
reads no cluster): an address the real plan updates only because it drifted is shown as `drift`, not as a
disagreement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

NO_CHANGE = "no change"
ACTIONS = {
    ("create",): "create",
    ("update",): "update",
    ("delete", "create"): "replace",
    ("create", "delete"): "replace",
    ("delete",): "destroy",
}


@dataclass(frozen=True)
class RealChange:
    address: str
    action: str
    """create, update, replace, destroy, move, or `no change`."""
    previous_address: str | None = None
    replace_paths: tuple[str, ...] = ()
    """What forces the replace, each path dotted (`manifest.metadata.name`)."""
    action_reason: str | None = None
    order: str = ""
    """For a replace, `delete, create` (Terraform's default) or `create, delete` (create_before_destroy)."""


@dataclass(frozen=True)
class RealPlan:
    changes: dict[str, RealChange]
    """Every address the plan acts on (a move without change included); unchanged ones are left out."""
    drifted: dict[str, str]
    """Addresses Terraform found changed outside it, with what it found (`update`, `destroy`)."""


def _dotted(path: Iterable[Any]) -> str:
    return ".".join(str(part) for part in path)


def read_plan(shown: Mapping[str, Any]) -> RealPlan:
    """The plan's actions per address from `terraform show -json PLANFILE`."""
    changes: dict[str, RealChange] = {}
    for item in shown.get("resource_changes") or []:
        if item.get("mode") != "managed":
            continue
        change = item.get("change") or {}
        actions = tuple(change.get("actions") or ())
        previous = item.get("previous_address")
        if actions in (("no-op",), ("read",)):
            if previous:
                changes[item["address"]] = RealChange(item["address"], "move", previous)
            continue
        action = ACTIONS.get(actions, "+".join(actions))
        paths = tuple(_dotted(p) for p in change.get("replace_paths") or ())
        changes[item["address"]] = RealChange(
            item["address"],
            action,
            previous,
            paths if action == "replace" else (),
            item.get("action_reason"),
            ", ".join(actions) if action == "replace" else "",
        )
    drifted: dict[str, str] = {}
    for item in shown.get("resource_drift") or []:
        actions = tuple((item.get("change") or {}).get("actions") or ())
        drifted[item["address"]] = ACTIONS.get(actions, "+".join(actions))
    return RealPlan(changes, drifted)


@dataclass(frozen=True)
class Predicted:
    action: str
    previous_address: str | None
    forced_by: tuple[str, ...]


def predicted_changes(report: Mapping[str, Any], stack: str) -> dict[str, Predicted]:
    """`changed`'s prediction for one stack of its JSON report; a stack it does not list changes nothing."""
    for entry in report.get("stacks", []):
        if entry["name"] == stack:
            return {
                r["address"]: Predicted(
                    r["action"], r.get("previous_address"), tuple(f["attribute"] for f in r.get("forced_by", []))
                )
                for r in entry["resources"]
            }
    return {}


@dataclass
class Row:
    address: str
    real: str
    predicted: str
    previous_address: str | None = None
    replace_paths: tuple[str, ...] = ()
    forced_by: tuple[str, ...] = ()
    action_reason: str | None = None
    order: str = ""
    drift: str = ""
    """What Terraform found changed outside it at this address (the plan puts it back)."""
    problems: list[str] = field(default_factory=list)

    @property
    def agrees(self) -> bool:
        return not self.problems


def compare(real: RealPlan, predicted: Mapping[str, Predicted]) -> list[Row]:
    """One row per address either side acts on, sorted; `problems` says how the two disagree."""
    rows = []
    for address in sorted(set(real.changes) | set(predicted)):
        seen = real.changes.get(address)
        said = predicted.get(address)
        row = Row(
            address,
            seen.action if seen else NO_CHANGE,
            said.action if said else NO_CHANGE,
            (seen.previous_address if seen else None) or (said.previous_address if said else None),
            seen.replace_paths if seen else (),
            said.forced_by if said else (),
            seen.action_reason if seen else None,
            seen.order if seen else "",
            real.drifted.get(address, ""),
        )
        if row.real != row.predicted:
            if not (row.drift and row.predicted == NO_CHANGE):
                row.problems.append(f"the real plan says {row.real}, changed says {row.predicted}")
        elif seen and said and seen.previous_address != said.previous_address:
            row.problems.append(
                f"moved from {seen.previous_address or 'nowhere'} in the real plan, from "
                f"{said.previous_address or 'nowhere'} as changed says"
            )
        if row.real == row.predicted == "replace" and set(row.replace_paths) != set(row.forced_by):
            row.problems.append(
                f"replaced for {', '.join(row.replace_paths) or 'no argument'} in the real plan, for "
                f"{', '.join(row.forced_by) or 'no argument'} as changed says"
            )
        rows.append(row)
    return rows


def describe(row: Row) -> str:
    """The real plan's action as a reviewer reads it: moves, what forces a replace and in which order."""
    text = row.real
    if row.previous_address:
        text += f" (from {row.previous_address})"
    if row.real == "replace":
        text += f": {', '.join(row.replace_paths) or row.action_reason or '?'}; {row.order}"
    if row.drift:
        text += f"; drifted ({row.drift} outside Terraform)"
    return text
