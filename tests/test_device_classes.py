"""Synthesized DeviceClasses: valid against the Kubernetes OpenAPI schema of each cluster's version."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import kubernetes_validate
import pytest

from themelio_gpu.plan.model import Fleet

StackJson = Callable[[str], dict[str, Any]]


def _classes(stack: dict[str, Any]) -> dict[str, Any]:
    manifests: dict[str, Any] = stack["resource"]["kubernetes_manifest"]["device_class"]["for_each"]
    return manifests


def test_every_device_class_validates_against_the_cluster_version_schema(
    example_fleet: Fleet, stack_json: StackJson
) -> None:
    checked = 0
    for plan in example_fleet.clusters:
        version = ".".join(plan.definition.kubernetes_version.split(".")[:2])
        for name, manifest in _classes(stack_json(plan.name)).items():
            assert manifest["metadata"]["name"] == name
            kubernetes_validate.validate(manifest, version, strict=True)
            checked += 1
    assert checked == sum(len(p.device_classes) for p in example_fleet.clusters) > 0


def test_the_validator_rejects_what_the_api_server_would(example_fleet: Fleet, stack_json: StackJson) -> None:
    manifest = next(iter(_classes(stack_json("gpu-west")).values()))
    broken = {**manifest, "spec": {**manifest["spec"], "extendedResourceNames": "typo"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.36", strict=True)


def test_device_class_carries_the_catalog_contract(stack_json: StackJson) -> None:
    classes = _classes(stack_json("gpu-east"))
    mig = classes["a100-40gb-mig-1g.5gb.gpu.themelio.io"]
    assert mig["spec"]["extendedResourceName"] == "nvidia.com/a100-mig-1g.5gb"
    (selector,) = mig["spec"]["selectors"]
    expression = selector["cel"]["expression"]
    # The driver guard comes first: an attribute lookup on another driver's device would abort allocation.
    assert expression.startswith("device.driver == 'gpu.nvidia.com' && ")
    assert "type == 'mig'" in expression
    assert "profile == '1g.5gb'" in expression
    assert "productName in ['NVIDIA A100-SXM4-40GB', 'NVIDIA A100-PCIE-40GB']" in expression
    legacy = classes["legacy-mig-1g.5gb.gpu.themelio.io"]
    assert legacy["spec"]["extendedResourceName"] == "nvidia.com/mig-1g.5gb"
    assert legacy["spec"]["selectors"] == mig["spec"]["selectors"]


def test_chart_served_name_has_no_class_of_ours(stack_json: StackJson) -> None:
    names = [m["spec"]["extendedResourceName"] for m in _classes(stack_json("gpu-east")).values()]
    assert "nvidia.com/gpu" not in names
    assert len(names) == len(set(names))
