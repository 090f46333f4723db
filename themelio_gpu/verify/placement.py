"""Where a DaemonSet's pods can run: the scheduler's node filters, on plain dicts of the rendered objects.

Modelled as kube-scheduler and the DaemonSet controller decide it (k8s.io/component-helpers
`scheduling/corev1`, `pkg/scheduler/framework/plugins/{nodeaffinity,tainttoleration}`,
`pkg/controller/daemon/util`):

- `nodeSelector`: every key must be on the node with exactly that value;
- required node affinity: the `nodeSelectorTerms` are ORed, and within a term every `matchExpressions`
  entry (In, NotIn, Exists, DoesNotExist, Gt, Lt; NotIn and DoesNotExist also match a missing label) and
  every `matchFields` entry (`metadata.name` only) must hold; an empty term list or an empty term matches
  no node;
- taints: every NoSchedule and NoExecute taint needs a toleration (PreferNoSchedule never blocks). A
  toleration matches by effect (empty: any), key (empty with Exists: any key) and operator (Exists, or
  Equal/empty comparing the value). The DaemonSet controller adds its own tolerations to every pod.

Preferred affinity, pod (anti-)affinity, topology spread and resources do not decide where a DaemonSet
pod may go, or depend on other pods and capacity: they are not modelled (see docs/verify.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from themelio_gpu.k8s.scheduling import (
    TaintSpec,
    daemonset_tolerations,
    requirement_matches,
    selector_mismatches,
    text,
    untolerated,
)

__all__ = ["Node", "PodScheduling", "untolerated_taints", "why_not"]


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
