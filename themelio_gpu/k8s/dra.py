"""Dynamic Resource Allocation's rules by Kubernetes version, each once.

Followed upstream: the `DRAExtendedResource` gate in `pkg/features/kube_features.go` (KEP-5004: alpha and off
in 1.34 and 1.35, beta and on in 1.36, GA and locked on from 1.37), `resource.k8s.io/v1` served from 1.34,
the implicit extended resource name `deviceclass.resource.kubernetes.io/<class>` every DeviceClass has, and
the scheduler's choice among classes that map one extended resource name
(`pkg/scheduler/framework/plugins/dynamicresources/extended`: the most recently created, ties to the name
sorted first).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

RESOURCE_API_VERSION = "resource.k8s.io/v1"
RESOURCE_API_MINOR = 34
"""The first minor that serves resource.k8s.io/v1 (DeviceClass, ResourceClaim, ResourceSlice)."""
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
EXTENDED_RESOURCE_GATE = "DRAExtendedResource"


def implicit_name(device_class: str) -> str:
    """The extended resource name every DeviceClass answers to, with or without `extendedResourceName`."""
    return f"{IMPLICIT_PREFIX}{device_class}"


@dataclass(frozen=True)
class GateStage:
    """Where a feature gate stands in one Kubernetes minor."""

    stage: str
    """`alpha`, `beta` or `GA`."""
    on_by_default: bool
    locked: bool
    """GA gates are locked to on: turning them off is refused."""

    def describe(self) -> str:
        if self.locked:
            return f"{self.stage} and locked on"
        return f"{self.stage} and {'on by default' if self.on_by_default else 'off'}"


_EXTENDED_RESOURCE_STAGES = {34: GateStage("alpha", False, False), 35: GateStage("alpha", False, False),
                             36: GateStage("beta", True, False)}  # fmt: skip
_EXTENDED_RESOURCE_GA = GateStage("GA", True, True)
_EXTENDED_RESOURCE_FIRST, _EXTENDED_RESOURCE_GA_MINOR = 34, 37


def extended_resource_gate(minor: int) -> GateStage | None:
    """DRAExtendedResource in Kubernetes 1.<minor> (None: the release has no such gate)."""
    if minor < _EXTENDED_RESOURCE_FIRST:
        return None
    if minor >= _EXTENDED_RESOURCE_GA_MINOR:
        return _EXTENDED_RESOURCE_GA
    return _EXTENDED_RESOURCE_STAGES[minor]


def extended_resource_on_by_default_from() -> int:
    """The first minor where DRAExtendedResource is on without a flag."""
    return min(m for m, s in _EXTENDED_RESOURCE_STAGES.items() if s.on_by_default)


Class = TypeVar("Class")


def serving_class(
    classes: Sequence[Class], created: Callable[[Class], str], name: Callable[[Class], str]
) -> Class:
    """Of the classes that map one extended resource name, the one the scheduler allocates from: the most
    recently created (RFC 3339 timestamps compare as text), on equal timestamps the name sorted first."""
    newest = max(created(c) for c in classes)
    return min((c for c in classes if created(c) == newest), key=name)
