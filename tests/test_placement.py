"""The scheduler model of `verify` on hand-built DaemonSets and nodes: every selector operator, every
toleration and effect rule, as kube-scheduler and the DaemonSet controller apply them."""

from __future__ import annotations

from typing import Any

import pytest

from themelio_gpu.k8s.scheduling import (
    Node,
    PodScheduling,
    TaintSpec,
    requirement_matches,
    tolerates,
    untolerated_taints,
    why_not,
)

GPU_TAINT = TaintSpec("nvidia.com/gpu", "present", "NoSchedule")


def daemonset(pod_spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "probe"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}], **pod_spec}}},
    }


def node(labels: dict[str, str] | None = None, *taints: TaintSpec, name: str = "n1") -> Node:
    return Node(name, labels or {}, taints)


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, GPU_TAINT, True),  # empty effect: every effect
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),
        ({"key": "other", "operator": "Exists"}, GPU_TAINT, False),
        ({"operator": "Exists"}, GPU_TAINT, True),  # empty key with Exists: every taint
        ({"operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "value": "present"}, GPU_TAINT, True),  # empty operator means Equal
        ({"key": "nvidia.com/gpu"}, GPU_TAINT, False),  # Equal to the empty value
        ({"key": "k", "operator": "Equal", "value": ""}, TaintSpec("k", "", "NoSchedule"), True),
        ({"key": "nvidia.com/gpu", "operator": "Gt", "value": "1"}, GPU_TAINT, False),  # not a toleration op
    ],
)
def test_toleration_matches_a_taint_as_kubernetes_does(
    toleration: dict[str, str], taint: TaintSpec, expected: bool
) -> None:
    assert tolerates(toleration, taint) is expected


def test_only_no_schedule_and_no_execute_taints_block() -> None:
    soft = TaintSpec("batch", "yes", "PreferNoSchedule")
    hard = TaintSpec("batch", "yes", "NoExecute")
    scheduling = PodScheduling()
    assert untolerated_taints(scheduling, [soft]) == []
    assert untolerated_taints(scheduling, [hard, GPU_TAINT]) == [hard, GPU_TAINT]


def test_the_daemonset_controller_adds_its_own_tolerations() -> None:
    cordoned = TaintSpec("node.kubernetes.io/unschedulable", "", "NoSchedule")
    not_ready = TaintSpec("node.kubernetes.io/not-ready", "", "NoExecute")
    network = TaintSpec("node.kubernetes.io/network-unavailable", "", "NoSchedule")
    assert untolerated_taints(PodScheduling(), [cordoned, not_ready]) == []
    assert untolerated_taints(PodScheduling(), [network]) == [network]
    assert untolerated_taints(PodScheduling(host_network=True), [network]) == []


@pytest.mark.parametrize(
    ("requirement", "value", "expected"),
    [
        ({"key": "k", "operator": "In", "values": ["a", "b"]}, "b", True),
        ({"key": "k", "operator": "In", "values": ["a"]}, "b", False),
        ({"key": "k", "operator": "In", "values": ["a"]}, None, False),
        ({"key": "k", "operator": "NotIn", "values": ["a"]}, "b", True),
        ({"key": "k", "operator": "NotIn", "values": ["a"]}, "a", False),
        ({"key": "k", "operator": "NotIn", "values": ["a"]}, None, True),  # a missing label is not "a"
        ({"key": "k", "operator": "Exists"}, "", True),
        ({"key": "k", "operator": "Exists"}, None, False),
        ({"key": "k", "operator": "DoesNotExist"}, None, True),
        ({"key": "k", "operator": "DoesNotExist"}, "x", False),
        ({"key": "k", "operator": "Gt", "values": ["4"]}, "8", True),
        ({"key": "k", "operator": "Gt", "values": ["8"]}, "8", False),
        ({"key": "k", "operator": "Lt", "values": ["8"]}, "4", True),
        ({"key": "k", "operator": "Lt", "values": ["4"]}, "8", False),
        ({"key": "k", "operator": "Gt", "values": ["4"]}, "eight", False),  # not an integer: no match
        ({"key": "k", "operator": "Gt", "values": ["4"]}, None, False),
        ({"key": "k", "operator": "Lt", "values": ["4", "5"]}, "1", False),  # Gt/Lt take one value
        ({"key": "k", "operator": "Near", "values": ["a"]}, "a", False),
    ],
)
def test_node_selector_requirement_operators(
    requirement: dict[str, Any], value: str | None, expected: bool
) -> None:
    assert requirement_matches(requirement, value) is expected


def test_node_selector_needs_every_label_with_its_exact_value() -> None:
    scheduling = PodScheduling.of_daemonset(daemonset({"nodeSelector": {"a": "1", "b": "2"}}))
    assert why_not(scheduling, node({"a": "1", "b": "2", "c": "3"})) == []
    assert why_not(scheduling, node({"a": "1"})) == ["nodeSelector b=2 (node has no b label)"]
    assert why_not(scheduling, node({"a": "1", "b": "3"})) == ["nodeSelector b=2 (node has b=3)"]


def test_a_null_selector_value_is_the_empty_string_as_the_api_server_decodes_it() -> None:
    scheduling = PodScheduling.of_daemonset(daemonset({"nodeSelector": {"a": None}}))
    assert scheduling.node_selector == {"a": ""}
    assert why_not(scheduling, node({"a": ""})) == []
    assert tolerates({"key": "k", "operator": "Equal", "value": None}, TaintSpec("k", "", "NoSchedule"))


def _affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
        }
    }


def test_node_selector_terms_are_ored_and_their_expressions_anded() -> None:
    term_a = {
        "matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}, {"key": "b", "operator": "Exists"}]
    }
    term_c = {"matchExpressions": [{"key": "c", "operator": "DoesNotExist"}]}
    scheduling = PodScheduling.of_daemonset(daemonset(_affinity(term_a, term_c)))
    assert why_not(scheduling, node({"a": "1", "b": "", "c": "x"})) == []  # first term
    assert why_not(scheduling, node({"a": "2"})) == []  # second term
    reasons = why_not(scheduling, node({"a": "1", "c": "x"}))  # first lacks b, second sees c
    assert reasons == ["required node affinity: none of its 2 terms matches, e.g. b Exists (node has no b label)"]


def test_an_empty_term_or_no_terms_match_no_node() -> None:
    empty_term = PodScheduling.of_daemonset(daemonset(_affinity({})))
    assert why_not(empty_term, node({"a": "1"})) == [
        "required node affinity: none of its 1 terms matches (every term is empty)"
    ]
    no_terms = PodScheduling.of_daemonset(daemonset(_affinity()))
    assert why_not(no_terms, node()) == ["required node affinity has no nodeSelectorTerms (matches no node)"]
    assert why_not(PodScheduling.of_daemonset(daemonset({})), node()) == []  # no affinity at all


def test_match_fields_select_by_node_name() -> None:
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]}
    scheduling = PodScheduling.of_daemonset(daemonset(_affinity(term)))
    assert why_not(scheduling, node(name="gpu-1")) == []
    assert why_not(scheduling, node(name="gpu-2")) != []


def test_every_reason_is_reported_together() -> None:
    spec = {
        "nodeSelector": {"nvidia.com/dra-kubelet-plugin": "true"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    reserved = TaintSpec("themelio.io/reserved", "training", "NoSchedule")
    reasons = why_not(PodScheduling.of_daemonset(daemonset(spec)), node({}, GPU_TAINT, reserved))
    assert reasons == [
        "nodeSelector nvidia.com/dra-kubelet-plugin=true (node has no nvidia.com/dra-kubelet-plugin label)",
        "taint themelio.io/reserved=training:NoSchedule not tolerated",
    ]


def test_a_pod_spec_without_scheduling_fields_runs_on_an_untainted_node() -> None:
    scheduling = PodScheduling.of_daemonset({"kind": "DaemonSet"})
    assert scheduling == PodScheduling()
    assert why_not(scheduling, node({"any": "label"})) == []
    assert why_not(scheduling, node({}, GPU_TAINT)) == ["taint nvidia.com/gpu=present:NoSchedule not tolerated"]
