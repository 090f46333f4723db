"""What became of one probe attempt, as the model predicts it and as the real cluster answers, in one vocabulary.

An attempt (a pod, or a ResourceClaim) ends in one of: bound to a node of a pool (`landed`); refused when created
(`refused`: quota admission, whose message names the keys it refused by, or another refusal); `admitted` (a
ResourceClaim nothing consumes); or Pending, with the reason parsed from the scheduler's own words: quota
(`quota-pending`: the claim the scheduler creates for a pod's extended or implicit request was refused by
quota admission, the keys named), placement (`placement-pending`: "0/N nodes are available: ..."), or an
error it gave that is neither (`unparsed`). An attempt the scheduler has not decided within the wait is a
`timeout`: its own outcome, which no model predicts, so it always fails its row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from themelio_gpu.k8s.quota import parse_exceeded, pod_charges

# The scheduler's words when no node fits: its unschedulable message (framework.Diagnosis: "0/7 nodes are
# available: 3 node(s) had ..."), or a filter plugin's error for every node ('running "DynamicResources" filter
# plugin: ... number of requested devices 57 exceeds the claim limit of 32').
_PLACEMENT = re.compile(r'\b\d+/\d+ nodes are available\b|^running "[A-Za-z]+" filter plugin')


class Kind(Enum):
    LANDED = "landed"
    REFUSED = "refused by quota admission"
    QUOTA_PENDING = "Pending: the scheduler's claim refused by quota"
    PLACEMENT_PENDING = "Pending: no node fits"
    ADMITTED = "admitted"
    REFUSED_OTHER = "refused, not by quota"
    UNPARSED = "Pending for a reason neither quota nor placement"
    TIMEOUT = "not decided within the wait"


@dataclass(frozen=True)
class Outcome:
    kind: Kind
    pools: tuple[str, ...] = ()
    """The model: the pools it may land on; the cluster: the pool it landed on."""
    keys: tuple[str, ...] = ()
    """The quota keys that refuse it (the model), or that the API server named (the cluster)."""
    reason: str = ""
    """The model's why, or the cluster's own words (the scheduler's message, the API server's refusal)."""

    @property
    def pending(self) -> bool:
        return self.kind in (Kind.QUOTA_PENDING, Kind.PLACEMENT_PENDING, Kind.UNPARSED, Kind.TIMEOUT)

    def agrees_with(self, expected: Outcome) -> bool:
        """This outcome (the cluster's) is what `expected` (the model's) says: the same kind, a pool it allows,
        the same quota keys. A timeout or an unparsed reason never agrees."""
        if self.kind is not expected.kind or self.kind in (Kind.TIMEOUT, Kind.UNPARSED, Kind.REFUSED_OTHER):
            return False
        if self.kind is Kind.LANDED:
            return bool(self.pools) and set(self.pools) <= set(expected.pools)
        if self.kind in (Kind.REFUSED, Kind.QUOTA_PENDING):
            return self.keys == expected.keys
        return True

    def describe(self) -> str:
        if self.kind is Kind.LANDED:
            return f"lands on {' or '.join(self.pools)}" if self.pools else "lands on no pool"
        if self.kind in (Kind.REFUSED, Kind.QUOTA_PENDING):
            return f"{self.kind.value}: {', '.join(self.keys)}"
        return str(self.kind.value) + (f": {self.reason}" if self.reason else "")


ADMITTED = Outcome(Kind.ADMITTED)
"""A ResourceClaim the API server created: nothing consumes it, so nothing more happens to it."""


def landed(pools: Sequence[str], reason: str = "") -> Outcome:
    return Outcome(Kind.LANDED, tuple(pools), reason=reason)


def no_fit(reason: str) -> Outcome:
    return Outcome(Kind.PLACEMENT_PENDING, reason=reason)


def refusal(message: str) -> Outcome:
    """A create the API server refused, from its message."""
    parsed = parse_exceeded(message)
    if parsed is not None:
        return Outcome(Kind.REFUSED, keys=parsed[1], reason=message)
    return Outcome(Kind.REFUSED_OTHER, reason=message)


def decided(pod: dict[str, Any]) -> bool:
    """Bound, or the scheduler has said why not (PodScheduled False: Unschedulable, or a plugin's error such as
    the quota refusal of its claim)."""
    if pod.get("spec", {}).get("nodeName"):
        return True
    return any(c["type"] == "PodScheduled" and c.get("status") == "False" for c in _conditions(pod))


def refused_on_its_own_charge(pod: dict[str, Any]) -> bool:
    """Pending because quota refused the claim the scheduler made for the pod's extended resource, by keys the
    pod itself is charged for (`requests.<name>` of a name it asks for): not yet the scheduler's answer. The
    quota evaluator charges that claim only what the pod is not already charged (kube-apiserver's
    pkg/quota/v1/evaluator/core/resource_claims.go, addExtendedResourceQuota), reading the pod from its
    informer's cache; when the cache has not seen the pod yet, the claim is charged in full and refused, and the
    scheduler's next try (within its backoff) is admitted. Seen on the sandbox under load: a pod refused so,
    then bound."""
    if pod.get("spec", {}).get("nodeName"):
        return False
    words = [
        c.get("message", "")
        for c in _conditions(pod)
        if c["type"] == "PodScheduled" and c.get("status") == "False"
    ]
    parsed = next((found for found in map(parse_exceeded, words) if found is not None), None)
    if parsed is None:
        return False
    containers = [*pod.get("spec", {}).get("initContainers", []), *pod.get("spec", {}).get("containers", [])]
    asked = {
        name: 1
        for container in containers
        for field in ("requests", "limits")
        for name in (container.get("resources", {}).get(field) or {})
    }
    return set(parsed[1]) <= set(pod_charges(asked))


def _conditions(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return list(pod.get("status", {}).get("conditions") or [])


def pod_outcome(pod: dict[str, Any], events: Sequence[dict[str, Any]], pool_of: Callable[[str], str]) -> Outcome:
    """The pod's outcome on the cluster: its node's pool, or its Pending reason parsed from the PodScheduled
    condition (the scheduler's latest word) and the pod's FailedScheduling events."""
    node = pod.get("spec", {}).get("nodeName")
    if node:
        return landed([pool_of(node)], node)
    if not decided(pod):
        return Outcome(Kind.TIMEOUT)
    name = pod["metadata"]["name"]
    messages = [c.get("message", "") for c in _conditions(pod) if c["type"] == "PodScheduled"]
    messages += [
        e.get("message", "")
        for e in sorted(
            events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""), reverse=True
        )
        if e.get("involvedObject", {}).get("name") == name and e.get("reason") == "FailedScheduling"
    ]
    for message in (m for m in messages if m):
        parsed = parse_exceeded(message)
        if parsed is not None:
            return Outcome(Kind.QUOTA_PENDING, keys=parsed[1], reason=message)
        if _PLACEMENT.search(message):
            return Outcome(Kind.PLACEMENT_PENDING, reason=message)
        return Outcome(Kind.UNPARSED, reason=message)
    return Outcome(Kind.UNPARSED, reason="PodScheduled is False without a message")
