"""Comparing the base and head configurations of every stack, as Terraform would plan head over base's state.

1. The head's `moved` blocks are applied to the base's addresses, as Terraform applies them to the state: an
   object at `from` (a whole resource moves with every instance key) goes to `to` unless `to` already holds
   one; chained moves follow each other.
2. Per address: only in head: create; only in base: destroy; in both: unchanged, move (moved and otherwise
   unchanged), update, or replace when an attribute the provider forces a new resource for differs
   (replacement.py).
3. A stack whose outputs, providers or `terraform` block differ is changed too: its plan has work to do.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from themelio_gpu.changes.dangerous import Danger, danger_of
from themelio_gpu.changes.replacement import REPLACE_RULES, ReplaceRule, forcing_rules
from themelio_gpu.changes.stacks import Instance, StackConfig, instance_address
from themelio_gpu.inputs.problems import Problems

ACTIONS = ("create", "update", "replace", "destroy", "move")
STATUSES = ("added", "changed", "removed", "unchanged")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class ResourceChange:
    address: str
    type: str
    action: str
    previous_address: str | None = None
    """The base address a `moved` block brought the object from."""
    attributes: tuple[str, ...] = ()
    """The arguments that differ (update, replace)."""
    forced_by: tuple[ReplaceRule, ...] = ()
    """Why a replace: the arguments the provider forces a new resource for."""


@dataclass(frozen=True)
class StackChange:
    name: str
    status: str
    resources: tuple[ResourceChange, ...]
    unchanged_resources: int | None
    """The addresses that do not change; None: not counted (an unchanged stack, when no report form shows it)."""
    other_changes: tuple[str, ...]
    """Outputs, providers, `terraform` block settings (`output.x`, `provider.helm`, `terraform.backend`)."""
    dangers: tuple[Danger, ...]

    def count(self, action: str) -> int:
        return sum(1 for r in self.resources if r.action == action)


@dataclass(frozen=True)
class Comparison:
    base: str
    head: str
    stacks: tuple[StackChange, ...]
    notes: tuple[str, ...] = ()
    """How the stacks were compared (from their inputs, or every one and why)."""

    def status_count(self, status: str) -> int:
        return sum(1 for s in self.stacks if s.status == status)

    def action_count(self, action: str) -> int:
        return sum(s.count(action) for s in self.stacks)

    @property
    def dangers(self) -> list[tuple[str, Danger]]:
        return [(s.name, d) for s in self.stacks for d in s.dangers]

    @property
    def to_plan(self) -> tuple[StackChange, ...]:
        """The stacks a pipeline must plan and apply: added and changed (a removed stack has no configuration)."""
        return tuple(s for s in self.stacks if s.status in ("added", "changed"))


def compare(
    base: Mapping[str, StackConfig], head: Mapping[str, StackConfig], base_label: str, head_label: str
) -> Comparison:
    """Raises InputError when a changed resource is of a type whose replacing attributes are not known."""
    problems = Problems()
    stacks = [
        _compare_stack(name, base.get(name), head.get(name), problems)
        for name in sorted(base.keys() | head.keys())
    ]
    problems.raise_if_any()
    return Comparison(base_label, head_label, tuple(stacks))


def apply_moves(
    instances: Mapping[str, Instance], moves: tuple[tuple[str, str], ...]
) -> dict[str, tuple[Instance, str | None]]:
    """Base instances by the address they have after the moves: (instance, its address before, if moved)."""
    placed: dict[str, tuple[Instance, str | None]] = {address: (i, None) for address, i in instances.items()}
    for _ in range(len(moves)):  # a chain of n moves settles in n rounds
        moved_any = False
        for source, target in moves:
            taken = {a: v for a, v in placed.items() if a == source or _resource_of(a) == source}
            if not taken or any(a == target or _resource_of(a) == target for a in placed):
                continue
            for address, (instance, previous) in taken.items():
                del placed[address]
                new = target if address == source else instance_address(target, _key_of(instance, address))
                placed[new] = (instance, previous or address)
            moved_any = True
        if not moved_any:
            break
    return placed


def _resource_of(address: str) -> str:
    return address.split("[", 1)[0]


def _key_of(instance: Instance, address: str) -> str | int | None:
    return instance.key if _resource_of(address) != address else None


def _compare_stack(
    name: str, base: StackConfig | None, head: StackConfig | None, problems: Problems
) -> StackChange:
    if head is None:
        assert base is not None
        gone = list(base.instances.values())
        destroyed = tuple(ResourceChange(i.address, i.type, "destroy") for i in gone)
        return StackChange(
            name, "removed", destroyed, 0, (), tuple(d for i in gone if (d := danger_of(i, "destroy")))
        )
    if base is None:
        created = tuple(ResourceChange(i.address, i.type, "create") for i in head.instances.values())
        return StackChange(name, "added", created, 0, (), ())
    placed = apply_moves(base.instances, head.moves)
    changes: list[ResourceChange] = []
    dangers: list[Danger] = []
    for address in sorted(placed.keys() | head.instances.keys()):
        before, previous = placed.get(address, (None, None))
        change = _instance_change(address, before, previous, head.instances.get(address), head.file, problems)
        if change is None:
            continue
        changes.append(change)
        danger = danger_of(before, change.action, head.instances.get(address)) if before is not None else None
        dangers += [dataclasses.replace(danger, address=address)] if danger else []
    unchanged = len(placed.keys() & head.instances.keys()) - sum(
        1 for c in changes if c.action in ("update", "replace", "move")
    )
    others = _setting_changes(base.settings, head.settings)
    status = "changed" if changes or others else "unchanged"
    return StackChange(name, status, tuple(changes), unchanged, others, tuple(dangers))


def _instance_change(
    address: str,
    before: Instance | None,
    previous: str | None,
    after: Instance | None,
    file: str,
    problems: Problems,
) -> ResourceChange | None:
    """The change at one address; None when nothing changes (or its type is not known: a problem)."""
    if after is None:
        assert before is not None
        return ResourceChange(address, before.type, "destroy", previous)
    if before is None:
        return ResourceChange(address, after.type, "create")
    attributes = tuple(differences(before.config, after.config))
    if not attributes:
        return None if previous is None else ResourceChange(address, after.type, "move", previous)
    if after.type not in REPLACE_RULES:
        problems.add(
            file,
            f"resource.{after.resource}",
            f"changed does not know which arguments of {after.type} force a new resource (docs/changed.md lists "
            "the types it knows); the stacks of this tool never use it",
        )
        return None
    forced = forcing_rules(after.type, before.config, after.config)
    return ResourceChange(address, after.type, "replace" if forced else "update", previous, attributes, forced)


def _setting_changes(base: Mapping[str, Any], head: Mapping[str, Any]) -> tuple[str, ...]:
    """`output.<name>`, `provider.<name>`, `terraform.<setting>`, `data.<type>.<name>`, or the block's key."""
    found = []
    for block in sorted(base.keys() | head.keys()):
        before, after = base.get(block, {}), head.get(block, {})
        if before == after:
            continue
        if block == "data" and isinstance(before, dict) and isinstance(after, dict):
            for kind in sorted(before.keys() | after.keys()):
                b, a = before.get(kind, {}), after.get(kind, {})
                found += [f"data.{kind}.{n}" for n in sorted(b.keys() | a.keys()) if b.get(n) != a.get(n)]
        elif isinstance(before, dict) and isinstance(after, dict):
            found += [
                f"{block}.{k}" for k in sorted(before.keys() | after.keys()) if before.get(k) != after.get(k)
            ]
        else:
            found.append(block)
    return tuple(found)


def differences(before: Any, after: Any, path: str = "") -> list[str]:
    """The argument paths whose values differ, as Terraform writes them: `labels["gpu.themelio.io/pool"]`,
    `manifest.spec.selectors[0].cel.expression`; a list of another length is one difference."""
    if isinstance(before, dict) and isinstance(after, dict):
        found = []
        for key in sorted(before.keys() | after.keys()):
            step = f".{key}" if _IDENTIFIER.match(key) else f"[{json.dumps(key)}]"
            inner = f"{path}{step}" if path else (key if _IDENTIFIER.match(key) else step)
            if key not in before or key not in after:
                found.append(inner)
            else:
                found += differences(before[key], after[key], inner)
        return found
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [
            p
            for index, (b, a) in enumerate(zip(before, after, strict=True))
            for p in differences(b, a, f"{path}[{index}]")
        ]
    return [] if before == after else [path]
