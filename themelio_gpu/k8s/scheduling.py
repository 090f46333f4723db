"""Where a pod may run: Kubernetes' node filters on plain values, each rule once.

Followed upstream: `k8s.io/api/core/v1` `Toleration.ToleratesTaint` (tolerations), `k8s.io/component-helpers`
`scheduling/corev1/nodeaffinity` (nodeSelector and required node affinity: the `nodeSelectorTerms` are ORed,
within a term every `matchExpressions` and `matchFields` entry must hold, an empty term matches no node),
`pkg/scheduler/framework/plugins/tainttoleration` (only NoSchedule and NoExecute keep a pod off a node) and
`pkg/controller/daemon/util/daemonset_util.go` (the tolerations the DaemonSet controller adds to its pods).
`why_not` gives every reason a pod cannot run on a node: what `verify` proves of each DaemonSet, and what the
sandbox compares with the real DaemonSet controller and scheduler. Preferred affinity, pod (anti-)affinity,
topology spread and resources do not decide where a DaemonSet pod may go, or depend on other pods and
capacity: they are not modelled (docs/verify.md). The callers (verify's placement proof, the consumer
contracts, the Kueue plan, preflight, the sandbox probe) keep only their own messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str]
    taints: tuple[TaintSpec, ...] = ()


@dataclass(frozen=True)
class PodScheduling:
    """The parts of a pod template that decide which nodes a DaemonSet pod may run on."""

    node_selector: Mapping[str, str] = field(default_factory=dict)
    node_selector_terms: tuple[Mapping[str, Any], ...] | None = None
    """Required node affinity terms; None when the pod has no required node affinity."""
    tolerations: tuple[Mapping[str, Any], ...] = ()
    host_network: bool = False

    @classmethod
    def of_pod_spec(cls, spec: Mapping[str, Any]) -> PodScheduling:
        affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
        terms = None if required is None else tuple(required.get("nodeSelectorTerms") or ())
        return cls(
            node_selector={str(k): text(v) for k, v in (spec.get("nodeSelector") or {}).items()},
            node_selector_terms=terms,
            tolerations=tuple(spec.get("tolerations") or ()),
            host_network=bool(spec.get("hostNetwork")),
        )

    @classmethod
    def of_daemonset(cls, daemonset: Mapping[str, Any]) -> PodScheduling:
        return cls.of_pod_spec(((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {})


def untolerated_taints(scheduling: PodScheduling, taints: Sequence[TaintSpec]) -> list[TaintSpec]:
    tolerations = daemonset_tolerations(scheduling.tolerations, host_network=scheduling.host_network)
    return list(untolerated(tolerations, taints))


def describe_requirement(requirement: Mapping[str, Any]) -> str:
    operator = requirement.get("operator")
    values = requirement.get("values") or []
    shown = f" [{', '.join(str(v) for v in values)}]" if operator in ("In", "NotIn", "Gt", "Lt") else ""
    return f"{requirement.get('key')} {operator}{shown}"


def term_mismatches(term: Mapping[str, Any], node: Node) -> list[str] | None:
    """Why a nodeSelectorTerm does not match the node ([] when it matches, None for an empty term)."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return None
    reasons = [
        _missing(describe_requirement(r), node, str(r.get("key")))
        for r in expressions
        if not requirement_matches(r, node.labels.get(str(r.get("key"))))
    ]
    for requirement in fields:
        value = node.name if requirement.get("key") == "metadata.name" else None
        if not requirement_matches(requirement, value):
            reasons.append(f"field {describe_requirement(requirement)} (node {node.name})")
    return reasons


def _missing(what: str, node: Node, key: str) -> str:
    have = node.labels.get(key)
    return f"{what} (node has no {key} label)" if have is None else f"{what} (node has {key}={have})"


def why_not(scheduling: PodScheduling, node: Node) -> list[str]:
    """Every reason the pod cannot run on the node; [] when it can."""
    reasons = []
    for key in selector_mismatches(scheduling.node_selector, node.labels):
        reasons.append(_missing(f"nodeSelector {key}={scheduling.node_selector[key]}", node, key))
    if scheduling.node_selector_terms is not None:
        terms = scheduling.node_selector_terms
        results = [term_mismatches(term, node) for term in terms]
        if not any(r == [] for r in results):
            if not terms:
                reasons.append("required node affinity has no nodeSelectorTerms (matches no node)")
            else:
                first = next((r for r in results if r), None)
                detail = f", e.g. {'; '.join(first)}" if first else " (every term is empty)"
                reasons.append(f"required node affinity: none of its {len(terms)} terms matches{detail}")
    for taint in untolerated_taints(scheduling, node.taints):
        reasons.append(f"taint {taint} not tolerated")
    return reasons
