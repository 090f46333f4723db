"""Where a pod may run: Kubernetes' node filters on plain values, each rule once.

Followed upstream: `k8s.io/api/core/v1` `Toleration.ToleratesTaint` (tolerations), `k8s.io/component-helpers`
`scheduling/corev1/nodeaffinity` (nodeSelector and required node affinity: the `nodeSelectorTerms` are ORed,
within a term every `matchExpressions` and `matchFields` entry must hold, an empty term matches no node),
`pkg/scheduler/framework/plugins/tainttoleration` (only NoSchedule and NoExecute keep a pod off a node) and
`pkg/controller/daemon/util/daemonset_util.go` (the tolerations the DaemonSet controller adds to its pods).
The callers (verify's placement proof, the consumer contracts, the Kueue plan, preflight, the sandbox probe)
keep only their own messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
"""The effects that keep a pod that does not tolerate the taint off the node (PreferNoSchedule only avoids it)."""


@dataclass(frozen=True)
class TaintSpec:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"

    def as_object(self) -> dict[str, str]:
        """The taint as a Kubernetes API object: without a value, `value` is left out (Karpenter's NodePool
        CRD refuses an empty one; core/v1 and Kueue read a missing value as empty)."""
        if self.value:
            return {"key": self.key, "value": self.value, "effect": self.effect}
        return {"key": self.key, "effect": self.effect}


def text(value: object) -> str:
    """A string field as the API server decodes it: JSON null becomes the empty string."""
    return "" if value is None else str(value)


def tolerates(toleration: Mapping[str, Any], taint: TaintSpec) -> bool:
    """k8s.io/api/core/v1 Toleration.ToleratesTaint."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    if key and key != taint.key:
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return text(toleration.get("value")) == taint.value
    return False


def untolerated(tolerations: Iterable[Mapping[str, Any]], taints: Iterable[TaintSpec]) -> tuple[TaintSpec, ...]:
    """The taints (NoSchedule, NoExecute) that keep a pod with these tolerations off a node."""
    given = list(tolerations)
    return tuple(t for t in taints if t.effect in BLOCKING_EFFECTS and not any(tolerates(x, t) for x in given))


def toleration_covers(wide: Mapping[str, str], narrow: Mapping[str, str]) -> bool:
    """True when every taint `narrow` tolerates is tolerated by `wide` too (by ToleratesTaint's rules)."""
    if wide.get("effect", "") not in ("", narrow.get("effect", "")):
        return False
    if wide.get("key", "") not in ("", narrow.get("key", "")):
        return False
    if wide.get("operator", "Equal") == "Exists":
        return True
    return narrow.get("operator", "Equal") != "Exists" and wide.get("value", "") == narrow.get("value", "")


# pkg/controller/daemon/util/daemonset_util.go AddOrUpdateDaemonPodTolerations: on every DaemonSet pod.
DAEMONSET_TOLERATIONS: tuple[Mapping[str, str], ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
HOST_NETWORK_TOLERATION = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}
"""Added by the DaemonSet controller to a hostNetwork pod's tolerations."""


def daemonset_tolerations(
    tolerations: Iterable[Mapping[str, Any]], *, host_network: bool
) -> list[Mapping[str, Any]]:
    """A DaemonSet pod's tolerations as the controller runs it: the template's plus the controller's own."""
    return [*tolerations, *DAEMONSET_TOLERATIONS, *([HOST_NETWORK_TOLERATION] if host_network else [])]


def selector_mismatches(selector: Mapping[str, str], labels: Mapping[str, str]) -> list[str]:
    """The nodeSelector keys the node's labels do not match exactly (sorted; [] when the selector matches)."""
    return sorted(key for key, value in selector.items() if labels.get(key) != value)


def _integer(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def requirement_matches(requirement: Mapping[str, Any], value: str | None) -> bool:
    """One matchExpressions/matchFields entry against the node's value for its key (None: no such key)."""
    operator = requirement.get("operator")
    values = [text(v) for v in requirement.get("values") or ()]
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt"):
        bound = _integer(values[0]) if len(values) == 1 else None
        have = _integer(value) if value is not None else None
        if bound is None or have is None:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False  # an unknown operator matches nothing (the API server would have refused it)
