"""Which operator mode a rendered operator release runs in: the custom resource its operands come from.

`MODES` maps the resource kind to its model (clusterpolicy_mode.py, gpucluster_mode.py). A rendered kind
listed in `UNMODELLED` fails the proof rather than passing unproven. Apart from the modes so that adding one
touches only its own module and this table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from themelio_gpu.verify.clusterpolicy_mode import ClusterPolicyMode
from themelio_gpu.verify.gpucluster_mode import GPUClusterMode
from themelio_gpu.verify.operator_model import OperatorMode

ModeFactory = Callable[[Mapping[str, Any], str, Sequence[Mapping[str, Any]]], OperatorMode]
MODES: dict[str, ModeFactory] = {"ClusterPolicy": ClusterPolicyMode, "GPUCluster": GPUClusterMode}
"""Custom resource kind -> its model, given the rendered resource, the operator chart version and every
object of the release (an NVIDIADriver beside the GPUCluster)."""
UNMODELLED: dict[str, str] = {}
"""Operator resource kinds that no model covers yet (kind -> why): rendering one fails the proof."""


@dataclass(frozen=True)
class ModeFound:
    mode: OperatorMode | None
    problems: tuple[str, ...]


def operator_mode(objects: Sequence[Mapping[str, Any]], operator_version: str) -> ModeFound:
    """The operator mode of a rendered operator release: which custom resource its operands come from."""
    modes = [MODES[o["kind"]](o, operator_version, objects) for o in objects if o.get("kind") in MODES]
    problems = [UNMODELLED[str(o["kind"])] for o in objects if o.get("kind") in UNMODELLED]
    if len(modes) > 1:
        problems.append(f"{len(modes)} operator resources rendered ({', '.join(m.resource for m in modes)})")
    if not modes and not problems:
        problems.append(
            "the operator release renders no ClusterPolicy and no GPUCluster: the operator would create no operands"
        )
    return ModeFound(modes[0] if len(modes) == 1 else None, tuple(problems))
