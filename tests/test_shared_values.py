"""Values several stacks share cross into node once (constructs/shared_values.py) and synthesize the same JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, fleet_of
from themelio_gpu.constructs import shared_values


def test_stacks_sharing_values_synthesize_the_same_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from themelio_gpu.outputs.synth import synthesize

    monkeypatch.setattr(shared_values, "_tokens", {})  # the first stack makes every token
    names = ("first", "second", "third")
    config_map = {"namespace": "themelio-system"}
    fleet = fleet_of(tmp_path, *(cluster(name=n, catalogConfigMap=config_map) for n in names))
    synthesize(fleet, tmp_path / "out", progress=None)

    def stack(name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((tmp_path / "out" / "stacks" / name / "cdk.tf.json").read_text())
        return data

    def device_classes(stack: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = stack["resource"]["kubernetes_manifest"]["device_class"]
        return {k: v for k, v in body.items() if k != "//"}  # "//" names the stack

    first, second, third = (stack(n) for n in names)
    # The first stack made the tokens, the others reused them: outputs and the DeviceClass map.
    assert len(shared_values._tokens) >= 2

    def outputs(stack: dict[str, Any], name: str) -> str:
        return json.dumps(stack["output"], sort_keys=True).replace(f'"cluster": "{name}"', '"cluster": "<name>"')

    for later, name in ((second, "second"), (third, "third")):
        assert outputs(later, name) == outputs(first, "first")  # the same but for the cluster's own name
        assert device_classes(later) == device_classes(first)
        assert "TfToken" not in json.dumps(later)
    assert len(device_classes(first)["for_each"]) == 3
    assert device_classes(first)["manifest"] == "${each.value}"


def test_values_holding_jsii_objects_are_passed_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared_values, "_tokens", {})
    value = {"ref": object()}  # not JSON: a reference to a resource, say
    assert shared_values.shared_value(value) is value
    assert shared_values.shared_value(value) is value
    assert shared_values._tokens == {}


def test_every_stack_passes_one_token_per_value_and_prepare_runs_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from cdktf import Tokenization

    from themelio_gpu.constructs.literal import literal

    monkeypatch.setattr(shared_values, "_tokens", {})
    prepared: list[Any] = []

    def escape(value: Any) -> Any:
        prepared.append(value)
        return literal(value)

    value = {"description": "${not a reference}"}
    first = shared_values.shared_value(value, escape)
    assert Tokenization.is_resolvable(first)  # from the first stack on: the token, holding the escaped value
    assert shared_values.shared_value(dict(value), escape) is first  # an equal value: the same token
    assert prepared == [value]
    # The same value passed as it is is another value: it never gets the escaped one's token.
    assert shared_values.shared_value(value) is not first
    assert len(shared_values._tokens) == 2
