"""`changed`: per stack added, changed, removed or unchanged; per address create, update, replace, destroy or
move; what would hurt a running cluster; text, JSON (validated against docs/changed.schema.json) and the
GitHub Actions matrix; `--base-ref` synthesizing a commit with its own code in a worktree that never stays.

Most comparisons are of small hand-written stacks (what each rule does); the fixture fleets show the same on
real synthesized output (a renamed pool, a cluster edit, a catalog edit).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # no stubs in the locked environment
import pytest
import yaml

from tests.conftest import EXAMPLE_CATALOG, EXAMPLE_STACKS, FIXTURES, ROOT
from themelio_gpu.changes.compare import Comparison, apply_moves, compare
from themelio_gpu.changes.replacement import REPLACE_RULES
from themelio_gpu.changes.report import as_json, render
from themelio_gpu.changes.stacks import read_output_folder
from themelio_gpu.cli import main
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.outputs.stack_folders import STACKS_FOLDER
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import Fleet

SCHEMA = json.loads((ROOT / "docs" / "changed.schema.json").read_text())
jsonschema.Draft202012Validator.check_schema(SCHEMA)
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
RENAMED = FIXTURES / "fleets" / "renamed-pool"
FIELD_MANAGER = "themelio-gpu-stacks"


# --- hand-written stacks -----------------------------------------------------------------------------------


def write_stacks(folder: Path, stacks: dict[str, dict[str, Any]]) -> Path:
    """A synthesized folder as cdktf writes it: stacks/<name>/cdk.tf.json."""
    for name, config in stacks.items():
        (folder / "stacks" / name).mkdir(parents=True)
        (folder / "stacks" / name / "cdk.tf.json").write_text(json.dumps(config))
    return folder


def read(folder: Path) -> dict[str, Any]:
    problems = Problems()
    stacks = read_output_folder(folder, problems)
    assert not problems, [str(p) for p in problems]
    return stacks


def compared(tmp_path: Path, base: dict[str, dict[str, Any]], head: dict[str, dict[str, Any]]) -> Comparison:
    result = compare(
        read(write_stacks(tmp_path / "base", base)), read(write_stacks(tmp_path / "head", head)), "base", "head"
    )
    VALIDATOR.validate(as_json(result))
    return result


def actions(result: Comparison) -> dict[str, tuple[str, str | None]]:
    return {r.address: (r.action, r.previous_address) for s in result.stacks for r in s.resources}


def labels(pool: str, nodes: list[str], **overrides: Any) -> dict[str, Any]:
    return {
        "//": {"metadata": {"path": f"s/node_labels_{pool}"}},
        "for_each": "${toset(" + json.dumps(nodes) + ")}",
        "api_version": "v1",
        "kind": "Node",
        "metadata": {"name": "${each.value}"},
        "labels": {"gpu.themelio.io/pool": pool, "nvidia.com/gpu": "true"},
        "field_manager": FIELD_MANAGER,
        "force": True,
        **overrides,
    }


def taints(nodes: list[str]) -> dict[str, Any]:
    return {
        "for_each": "${toset(" + json.dumps(nodes) + ")}",
        "metadata": {"name": "${each.value}"},
        "taint": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "field_manager": FIELD_MANAGER,
        "force": True,
    }


def release(chart: str, **overrides: Any) -> dict[str, Any]:
    return {
        "name": chart,
        "chart": chart,
        "namespace": chart,
        "version": "1.0.0",
        "values": ["a: 1\n"],
        **overrides,
    }


def device_classes(names: dict[str, str]) -> dict[str, Any]:
    return {
        "for_each": {
            name: {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"extendedResourceName": served},
            }
            for name, served in names.items()
        },
        "manifest": "${each.value}",
        "field_manager": {"name": FIELD_MANAGER},
    }


def karpenter(name: str) -> dict[str, Any]:
    return {
        "manifest": {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": {}},
        "field_manager": {"name": FIELD_MANAGER},
    }


def stack(resources: dict[str, dict[str, Any]], **top: Any) -> dict[str, Any]:
    by_type: dict[str, dict[str, Any]] = {}
    for address, body in resources.items():
        kind, name = address.split(".", 1)
        by_type.setdefault(kind, {})[name] = body
    return {"//": {"metadata": {"stackName": "s", "version": "0.21.0"}}, "resource": by_type, **top}


def test_for_each_instances_are_addressed_by_their_keys_with_each_value_put_in(tmp_path: Path) -> None:
    config = stack(
        {
            "kubernetes_labels.node_labels_a": labels("a", ["n2", "n1"]),
            "kubernetes_manifest.device_class": device_classes({"x.gpu.themelio.io": "nvidia.com/x"}),
            "helm_release.gpu_operator": release("gpu-operator"),
        }
    )
    instances = read(write_stacks(tmp_path, {"s": config}))["s"].instances
    assert sorted(instances) == [
        "helm_release.gpu_operator",
        'kubernetes_labels.node_labels_a["n1"]',
        'kubernetes_labels.node_labels_a["n2"]',
        'kubernetes_manifest.device_class["x.gpu.themelio.io"]',
    ]
    assert instances['kubernetes_labels.node_labels_a["n1"]'].config["metadata"] == {"name": "n1"}
    assert "for_each" not in instances['kubernetes_labels.node_labels_a["n1"]'].config
    manifest = instances['kubernetes_manifest.device_class["x.gpu.themelio.io"]'].config["manifest"]
    assert manifest["metadata"]["name"] == "x.gpu.themelio.io"


def test_every_action_and_stack_status(tmp_path: Path) -> None:
    base = {
        "kept": stack({"helm_release.gpu_operator": release("gpu-operator")}),
        "edited": stack(
            {
                "helm_release.gpu_operator": release("gpu-operator"),
                "kubernetes_labels.node_labels_a": labels("a", ["n1", "n2"]),
                "kubernetes_namespace_v1.catalog_namespace": {"metadata": {"name": "themelio-system"}},
            }
        ),
        "retired": stack({"helm_release.gpu_operator": release("gpu-operator")}),
    }
    head = {
        "kept": stack({"helm_release.gpu_operator": release("gpu-operator")}),
        "edited": stack(
            {
                "helm_release.gpu_operator": release("gpu-operator", version="2.0.0"),
                "kubernetes_labels.node_labels_a": labels("a", ["n2", "n3"]),
                "kubernetes_namespace_v1.catalog_namespace": {"metadata": {"name": "themelio-gpu"}},
            }
        ),
        "new": stack({"helm_release.gpu_operator": release("gpu-operator")}),
    }
    result = compared(tmp_path, base, head)
    assert {s.name: s.status for s in result.stacks} == {
        "edited": "changed",
        "kept": "unchanged",
        "new": "added",
        "retired": "removed",
    }
    edited = next(s for s in result.stacks if s.name == "edited")
    assert {r.address: r.action for r in edited.resources} == {
        "helm_release.gpu_operator": "update",
        'kubernetes_labels.node_labels_a["n1"]': "destroy",
        'kubernetes_labels.node_labels_a["n3"]': "create",
        "kubernetes_namespace_v1.catalog_namespace": "replace",
    }
    assert edited.unchanged_resources == 1  # node n2's labels
    update = next(r for r in edited.resources if r.action == "update")
    assert update.attributes == ("version",)
    replace = next(r for r in edited.resources if r.action == "replace")
    assert [rule.attribute for rule in replace.forced_by] == ["metadata.name"]
    assert result.action_count("destroy") == 2  # n1's labels, and the retired stack's release
    assert [s.name for s in result.to_plan] == ["edited", "new"]


def test_a_moved_resource_keeps_its_instances_and_updates_instead_of_destroy_and_create(tmp_path: Path) -> None:
    nodes = ["n1", "n2"]
    base = {"s": stack({"kubernetes_labels.node_labels_old": labels("old", nodes)})}
    renamed = {"kubernetes_labels.node_labels_new": labels("new", nodes)}
    moves = [{"from": "kubernetes_labels.node_labels_old", "to": "kubernetes_labels.node_labels_new"}]
    with_moves = compared(tmp_path / "moved", base, {"s": stack(renamed, moved=moves)})
    assert actions(with_moves) == {
        f'kubernetes_labels.node_labels_new["{n}"]': ("update", f'kubernetes_labels.node_labels_old["{n}"]')
        for n in nodes
    }
    assert with_moves.dangers == []
    without = compared(tmp_path / "plain", base, {"s": stack(renamed)})
    assert sorted(a for a, _ in actions(without).values()) == ["create", "create", "destroy", "destroy"]
    assert [d.what for _, d in without.dangers] == ["the labels of Node n1", "the labels of Node n2"]


def test_moves_chain_and_never_overwrite_an_address_the_state_holds(tmp_path: Path) -> None:
    config = stack(
        {
            "kubernetes_labels.node_labels_a": labels("a", ["n1"]),
            "kubernetes_labels.node_labels_c": labels("c", ["n3"]),
        }
    )
    instances = read(write_stacks(tmp_path, {"s": config}))["s"].instances
    chained = apply_moves(
        instances,
        (
            ("kubernetes_labels.node_labels_b", "kubernetes_labels.node_labels_z"),  # follows a -> b
            ("kubernetes_labels.node_labels_a", "kubernetes_labels.node_labels_b"),
        ),
    )
    assert {a: previous for a, (_, previous) in chained.items()} == {
        'kubernetes_labels.node_labels_z["n1"]': 'kubernetes_labels.node_labels_a["n1"]',
        'kubernetes_labels.node_labels_c["n3"]': None,
    }
    # As Terraform does, a move into an address the state already holds is skipped.
    blocked = apply_moves(instances, (("kubernetes_labels.node_labels_a", "kubernetes_labels.node_labels_c"),))
    assert {a: previous for a, (_, previous) in blocked.items()} == dict.fromkeys(instances)


def test_moving_a_karpenter_node_pool_whose_name_changes_still_replaces_it(tmp_path: Path) -> None:
    """Why a renamed Karpenter pool is refused (plan/renames.py): the moved block carries the address, but the
    NodePool's metadata.name changes with it, which kubernetes_manifest replaces: its nodes are terminated."""
    moves = [
        {
            "from": "kubernetes_manifest.karpenter_node_pool_h100",
            "to": "kubernetes_manifest.karpenter_node_pool_big",
        }
    ]
    result = compared(
        tmp_path,
        {"s": stack({"kubernetes_manifest.karpenter_node_pool_h100": karpenter("h100")})},
        {"s": stack({"kubernetes_manifest.karpenter_node_pool_big": karpenter("big")}, moved=moves)},
    )
    (change,) = result.stacks[0].resources
    assert (change.action, change.previous_address) == ("replace", "kubernetes_manifest.karpenter_node_pool_h100")
    assert [rule.attribute for rule in change.forced_by] == ["manifest.metadata.name"]
    ((_, danger),) = result.dangers
    assert danger.what == "Karpenter NodePool h100" and "terminates every node" in danger.why


REPLACING_CHANGES: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("kubernetes_labels", labels("a", ["n1"]), {"kind": "Namespace"}, "kind"),
    ("kubernetes_labels", labels("a", ["n1"]), {"api_version": "v2"}, "api_version"),
    ("kubernetes_labels", labels("a", ["n1"]), {"metadata": {"name": "n9"}}, "metadata.name"),
    (
        "kubernetes_labels",
        labels("a", ["n1"]),
        {"metadata": {"name": "${each.value}", "namespace": "x"}},
        "metadata.namespace",
    ),
    ("kubernetes_node_taint", taints(["n1"]), {"metadata": {"name": "n9"}}, "metadata.name"),
    (
        "kubernetes_manifest",
        karpenter("h100"),
        {"manifest": karpenter("h100-big")["manifest"]},
        "manifest.metadata.name",
    ),
    (
        "kubernetes_manifest",
        karpenter("h100"),
        {"manifest": {**karpenter("h100")["manifest"], "kind": "X"}},
        "manifest.kind",
    ),
    ("helm_release", release("gpu-operator"), {"name": "gpu-operator-2"}, "name"),
    ("helm_release", release("gpu-operator"), {"namespace": "other"}, "namespace"),
    ("kubernetes_namespace_v1", {"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}, "metadata.name"),
    (
        "kubernetes_config_map_v1",
        {"metadata": {"name": "a", "namespace": "n"}},
        {"metadata": {"name": "a", "namespace": "m"}},
        "metadata.namespace",
    ),
    (
        "kubernetes_config_map_v1",
        {"metadata": {"name": "a"}, "immutable": True, "data": {"k": "1"}},
        {"data": {"k": "2"}},
        "data",
    ),
]


@pytest.mark.parametrize(("kind", "before", "change", "forced"), REPLACING_CHANGES)
def test_an_argument_the_provider_forces_a_new_resource_for_is_a_replace(
    kind: str, before: dict[str, Any], change: dict[str, Any], forced: str, tmp_path: Path
) -> None:
    address = f"{kind}.x"
    result = compared(tmp_path, {"s": stack({address: before})}, {"s": stack({address: {**before, **change}})})
    (resource,) = result.stacks[0].resources
    assert resource.action == "replace"
    assert [rule.attribute for rule in resource.forced_by] == [forced]
    assert all(
        rule.source.startswith("https://github.com/hashicorp/terraform-provider-") for rule in resource.forced_by
    )


@pytest.mark.parametrize(
    ("kind", "before", "change"),
    [
        ("kubernetes_labels", labels("a", ["n1"]), {"labels": {"gpu.themelio.io/pool": "b"}}),
        ("kubernetes_node_taint", taints(["n1"]), {"taint": [{"key": "k", "value": "", "effect": "NoExecute"}]}),
        (
            "kubernetes_manifest",
            karpenter("h100"),
            {"manifest": {**karpenter("h100")["manifest"], "spec": {"x": 1}}},
        ),
        (
            "helm_release",
            release("gpu-operator"),
            {"chart": "other", "repository": "oci://x", "values": ["b: 2\n"]},
        ),
        ("kubernetes_config_map_v1", {"metadata": {"name": "a"}, "data": {"k": "1"}}, {"data": {"k": "2"}}),
        (
            "kubernetes_namespace_v1",
            {"metadata": {"name": "a"}},
            {"metadata": {"name": "a", "labels": {"x": "y"}}},
        ),
    ],
)
def test_other_arguments_update_in_place(
    kind: str, before: dict[str, Any], change: dict[str, Any], tmp_path: Path
) -> None:
    result = compared(
        tmp_path, {"s": stack({f"{kind}.x": before})}, {"s": stack({f"{kind}.x": {**before, **change}})}
    )
    assert [r.action for s in result.stacks for r in s.resources] == ["update"]


def test_the_replacement_table_covers_every_resource_the_bindings_create() -> None:
    from cdktf import TerraformResource

    from themelio_gpu.constructs import providers

    classes = [v for v in vars(providers).values() if isinstance(v, type) and issubclass(v, TerraformResource)]
    types = {getattr(c, "TF_RESOURCE_TYPE") for c in classes}  # noqa: B009 (a jsii static property)
    assert types == set(REPLACE_RULES), "list the replacing arguments of every resource type the stacks use"


@pytest.mark.parametrize(
    ("address", "before", "change", "what"),
    [
        (
            "helm_release.gpu_operator",
            release("gpu-operator"),
            None,
            "the GPU Operator (Helm release gpu-operator",
        ),
        ("helm_release.gpu_operator", release("gpu-operator"), {"namespace": "x"}, "the GPU Operator"),
        ("helm_release.dra", release("dra-driver-nvidia-gpu"), None, "the NVIDIA DRA driver"),
        ("helm_release.dra", release("nvidia-dra-driver-gpu"), {"name": "other"}, "the NVIDIA DRA driver"),
        (
            "kubernetes_manifest.device_class",
            device_classes({"a.gpu.themelio.io": "nvidia.com/a"}),
            None,
            "DeviceClass a.gpu.themelio.io",
        ),
        ("kubernetes_manifest.karpenter_node_pool_h100", karpenter("h100"), None, "Karpenter NodePool h100"),
        (
            "kubernetes_manifest.karpenter_node_pool_h100",
            karpenter("h100"),
            {"manifest": karpenter("h1")["manifest"]},
            "Karpenter NodePool h100",
        ),
        ("kubernetes_labels.node_labels_a", labels("a", ["n1"]), None, "the labels of Node n1"),
        ("kubernetes_node_taint.node_taints_a", taints(["n1"]), None, "the taints of node n1"),
        ("kubernetes_namespace_v1.catalog_namespace", {"metadata": {"name": "t"}}, None, "namespace t"),
    ],
)
def test_what_would_hurt_a_running_cluster_is_dangerous_with_why(
    address: str, before: dict[str, Any], change: dict[str, Any] | None, what: str, tmp_path: Path
) -> None:
    """None: the object is destroyed; else it changes so that it is replaced."""
    head = {} if change is None else {address: {**before, **change}}
    result = compared(tmp_path, {"s": stack({address: before})}, {"s": stack(head)})
    ((name, danger),) = result.dangers
    assert name == "s" and danger.what.startswith(what)
    assert danger.action == ("destroy" if change is None else "replace")
    assert len(danger.why) > 60
    text = render(result, "text")
    assert f"s: {danger.action} {danger.address}, {danger.what}: {danger.why}" in text


def test_destroying_what_does_not_hold_gpus_is_not_dangerous(tmp_path: Path) -> None:
    config_map = {"metadata": {"name": "themelio-gpu-catalog", "namespace": "themelio-system"}, "data": {"a": "b"}}
    result = compared(
        tmp_path, {"s": stack({"kubernetes_config_map_v1.catalog_config_map": config_map})}, {"s": stack({})}
    )
    assert actions(result) == {"kubernetes_config_map_v1.catalog_config_map": ("destroy", None)}
    assert result.dangers == []


def test_outputs_providers_and_terraform_settings_change_a_stack_too(tmp_path: Path) -> None:
    before = stack({}, output={"a": {"value": 1}}, terraform={"required_version": ">= 1.0"})
    after = stack({}, output={"a": {"value": 2}, "b": {"value": 1}}, terraform={"required_version": ">= 1.1"})
    after["//"]["metadata"]["version"] = "0.22.0"  # cdktf's metadata is no configuration
    result = compared(tmp_path, {"s": before}, {"s": after})
    assert result.stacks[0].status == "changed"
    assert result.stacks[0].other_changes == ("output.a", "output.b", "terraform.required_version")
    same = compared(tmp_path / "same", {"s": before}, {"s": {**before, "//": after["//"]}})
    assert same.stacks[0].status == "unchanged"


def test_the_github_matrix_lists_the_stacks_to_plan_and_is_exactly_empty_without(tmp_path: Path) -> None:
    base = {"a": stack({}), "b": stack({}), "gone": stack({})}
    head = {"a": stack({}, output={"x": {"value": 1}}), "b": stack({}), "new": stack({})}
    assert render(compared(tmp_path, base, head), "github-matrix") == (
        '{"include":[{"stack":"a","directory":"stacks/a","status":"changed"},'
        '{"stack":"new","directory":"stacks/new","status":"added"}]}\n'
    )
    assert render(compared(tmp_path / "same", base, base), "github-matrix") == '{"include":[]}\n'


def test_the_schema_refuses_what_the_report_never_holds(tmp_path: Path) -> None:
    report = as_json(compared(tmp_path, {"s": stack({"helm_release.x": release("a")})}, {"s": stack({})}))
    assert VALIDATOR.is_valid(report)
    wrong = json.loads(json.dumps(report))
    wrong["stacks"][0]["resources"][0]["action"] = "explode"
    assert not VALIDATOR.is_valid(wrong)
    wrong = json.loads(json.dumps(report))
    wrong["stacks"][0]["resources"][0]["action"] = "replace"  # a replace names what forces it
    assert not VALIDATOR.is_valid(wrong)
    wrong = json.loads(json.dumps(report))
    del wrong["summary"]["dangerous"]
    assert not VALIDATOR.is_valid(wrong)


# --- the fixture fleets --------------------------------------------------------------------------------------


def synthesize_into(fleet: Fleet, out: Path) -> Path:
    from themelio_gpu.outputs.synth import synthesize

    synthesize(fleet, out, progress=None)
    return out


def both_ways(args: list[str], code: int, capsys: pytest.CaptureFixture[str]) -> str:
    """`changed` deciding from the inputs first, and comparing every stack (--full): the same exit code and
    the same report but for the note saying how (tests/test_changed_inputs.py checks more). Its stdout."""
    reports: list[tuple[Any, str]] = []
    for extra in ([], ["--full"]):
        assert main(["changed", *args, *extra]) == code
        out = capsys.readouterr().out
        try:
            data = json.loads(out)
        except ValueError:
            reports.append(([line for line in out.splitlines() if not line.startswith("note: ")], out))
            continue
        reports.append(({k: v for k, v in data.items() if k != "notes"}, out))
    assert reports[0][0] == reports[1][0]
    return reports[0][1]


def renamed_back(stacks: Path, folder: Path) -> Path:
    """The renamed-pool cluster as it was before the rename (the pools' old names, no renamedFrom)."""
    folder.mkdir()
    for path in stacks.glob("*.yaml"):
        definition = yaml.safe_load(path.read_text())
        for pool in definition["nodePools"]:
            pool["name"] = pool.pop("renamedFrom", pool["name"])
        (folder / path.name).write_text(yaml.safe_dump(definition))
    return folder


def test_renaming_pools_with_renamed_from_updates_the_labels_and_moves_the_taints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = RENAMED / "catalog" / "gpu-catalog.yaml"
    before = synthesize_into(
        load_fleet(catalog, renamed_back(RENAMED / "stacks", tmp_path / "before-rename")), tmp_path / "before"
    )
    flags = ["--catalog", str(catalog), "--stacks-dir", str(RENAMED / "stacks"), "--base", str(before)]
    report = json.loads(both_ways([*flags, "--format", "json", "--fail-on", "dangerous"], 0, capsys))
    VALIDATOR.validate(report)
    resources = {r["address"]: (r["action"], r["previous_address"]) for r in report["stacks"][0]["resources"]}
    old = {"a100-training": "a100-whole", "a100-sliced": "a100-mig"}
    expected = {
        **{
            f'kubernetes_labels.node_labels_{new}["{node}"]': (
                "update",
                f'kubernetes_labels.node_labels_{was}["{node}"]',
            )
            for new, was, node in [
                ("a100-training", old["a100-training"], "gpu-renamed-a100-01"),
                ("a100-training", old["a100-training"], "gpu-renamed-a100-02"),
                ("a100-sliced", old["a100-sliced"], "gpu-renamed-a100-11"),
            ]
        },
        **{
            f'kubernetes_node_taint.node_taints_a100-training["{node}"]': (
                "move",
                f'kubernetes_node_taint.node_taints_a100-whole["{node}"]',
            )
            for node in ("gpu-renamed-a100-01", "gpu-renamed-a100-02")
        },
    }
    assert resources == expected
    assert report["summary"]["dangerous"] == 0


def test_without_renamed_from_the_rename_destroys_the_labels_and_fails_on_dangerous(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = RENAMED / "catalog" / "gpu-catalog.yaml"
    original = renamed_back(RENAMED / "stacks", tmp_path / "before-rename")
    before = synthesize_into(load_fleet(catalog, original), tmp_path / "before")
    plain = tmp_path / "plain"
    plain.mkdir()
    for path in (RENAMED / "stacks").glob("*.yaml"):
        definition = yaml.safe_load(path.read_text())
        for pool in definition["nodePools"]:
            pool.pop("renamedFrom", None)
        (plain / path.name).write_text(yaml.safe_dump(definition))
    flags = ["--catalog", str(catalog), "--stacks-dir", str(plain), "--base", str(before)]
    text = both_ways([*flags, "--fail-on", "dangerous"], 1, capsys)
    assert "5 to create, 0 to update, 0 to replace, 5 to destroy; 5 dangerous." in text
    assert 'destroy kubernetes_labels.node_labels_a100-whole["gpu-renamed-a100-01"], the labels of Node' in text
    # Each points at the day-two scenario that removed a pool's labels and taints on a running sandbox.
    assert text.count("(what it does to running workloads, and what to do: docs/day-two.md#a-pool-removed)") == 5


def test_a_cluster_edit_changes_that_stack_alone(
    synthesized: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stacks = tmp_path / "stacks"
    shutil.copytree(EXAMPLE_STACKS, stacks)
    east = stacks / "gpu-east.yaml"
    east.write_text(east.read_text().replace("gpu-east-a100-02]", "gpu-east-a100-02, gpu-east-a100-03]"))
    flags = ["--catalog", str(EXAMPLE_CATALOG), "--stacks-dir", str(stacks), "--base", str(synthesized)]
    matrix = {"include": [{"stack": "gpu-east", "directory": f"{STACKS_FOLDER}/gpu-east", "status": "changed"}]}
    assert (
        both_ways([*flags, "--format", "github-matrix"], 0, capsys)
        == json.dumps(matrix, separators=(",", ":")) + "\n"
    )
    both_ways([*flags, "--format", "json"], 0, capsys)


def test_a_catalog_edit_changes_the_stacks_serving_that_offering_alone(
    synthesized: Path, example_fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    offering = "nvidia.com/a100-mig-1g.5gb"
    serving = example_fleet.clusters_serving(offering)
    assert 0 < len(serving) < len(example_fleet.clusters)
    catalog = yaml.safe_load(EXAMPLE_CATALOG.read_text())
    catalog["offerings"][offering]["description"] = "One seventh of an A100, for notebooks."
    edited = tmp_path / "gpu-catalog.yaml"
    edited.write_text(yaml.safe_dump(catalog))
    flags = ["--catalog", str(edited), "--stacks-dir", str(EXAMPLE_STACKS), "--base", str(synthesized)]
    report = json.loads(both_ways([*flags, "--format", "json"], 0, capsys))
    changed = {s["name"]: s for s in report["stacks"] if s["status"] != "unchanged"}
    assert sorted(changed) == sorted(serving)
    for stack in changed.values():  # the offering's text is in the outputs, and the ConfigMap where there is one
        assert "output.kubeflow_workspacekind_podconfig" in stack["other_changes"]
        assert {r["action"] for r in stack["resources"]} <= {"update"}


def test_the_same_fleet_on_both_sides_is_unchanged_everywhere(synthesized: Path) -> None:
    stacks = read(synthesized)
    result = compare(stacks, stacks, "a", "b")
    assert {s.status for s in result.stacks} == {"unchanged"}
    assert all(s.unchanged_resources == len(stacks[s.name].instances) for s in result.stacks)
    removed = compare(stacks, {}, "a", "b")
    assert {s.status for s in removed.stacks} == {"removed"}
    assert {d.what.split(" (")[0] for _, d in removed.dangers} >= {"the GPU Operator", "the NVIDIA DRA driver"}
    VALIDATOR.validate(as_json(removed))


# --- bad input -----------------------------------------------------------------------------------------------


def run_changed(*args: str) -> tuple[int, str, str]:
    result = subprocess.run(
        [sys.executable, "-m", "themelio_gpu", "changed", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return result.returncode, result.stdout, result.stderr


def test_bad_input_is_exit_2_with_what_is_wrong_and_no_traceback(tmp_path: Path, synthesized: Path) -> None:
    broken = tmp_path / "broken"
    (broken / "stacks" / "x").mkdir(parents=True)
    (broken / "stacks" / "x" / "cdk.tf.json").write_text('{"resource": {\n  "a": [}')
    dynamic = write_stacks(
        tmp_path / "dynamic",
        {"y": stack({"kubernetes_labels.l": {**labels("l", []), "for_each": "${var.nodes}"}})},
    )
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "README.md").write_text("not a synthesized folder")
    cases: list[tuple[list[str], str]] = [
        (
            ["--base", str(tmp_path / "nope"), "--head", str(synthesized)],
            f"--base {tmp_path / 'nope'}: folder not found",
        ),
        (["--base", str(tmp_path / "notes"), "--head", str(synthesized)], "not a synthesized output folder"),
        (
            ["--base", str(broken), "--head", str(synthesized)],
            "cdk.tf.json: not valid JSON: Expecting value (line 2, column 9)",
        ),
        (
            ["--base", str(dynamic), "--head", str(synthesized)],
            "resource.kubernetes_labels.l.for_each: changed reads for_each",
        ),
        (
            ["--base", str(synthesized), "--head", str(synthesized), "--format", "yaml"],
            "--format yaml: unknown format",
        ),
        (
            ["--base", str(synthesized), "--head", str(synthesized), "--format", "json", "--format", "text"],
            "only one format can go to stdout",
        ),
        (["--base", str(synthesized), "--base-ref", "HEAD"], "not allowed with argument"),
        (["--head", str(synthesized)], "one of the arguments --base --base-ref is required"),
        (
            ["--base-ref", "no-such-ref-anywhere", "--head", str(synthesized)],
            "--base-ref no-such-ref-anywhere: no commit",
        ),
        (["--base-ref", "", "--head", str(synthesized)], "--base-ref: empty; name a commit"),
    ]
    for args, message in cases:
        code, out, err = run_changed(*args)
        assert code == 2, (args, out, err)
        assert message in err, (args, err)
        assert "Traceback" not in err


def test_formats_go_to_the_files_they_name(synthesized: Path, tmp_path: Path) -> None:
    code, out, _ = run_changed(
        "--base", str(synthesized), "--head", str(synthesized),
        "--format", f"json={tmp_path / 'out' / 'changed.json'}", "--format", f"github-matrix={tmp_path / 'matrix.json'}",
    )  # fmt: skip
    assert code == 0
    assert out.startswith("base: ")  # text, the default, on stdout
    VALIDATOR.validate(json.loads((tmp_path / "out" / "changed.json").read_text()))
    assert (tmp_path / "matrix.json").read_text() == '{"include":[]}\n'


# --- --base-ref ----------------------------------------------------------------------------------------------


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A git repository of this project's code and the example fleet, with one commit; its code writes another
    field manager than this checkout's, so a base synthesized by its own code shows it."""
    repo = tmp_path / "repo"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "themelio_gpu", repo / "themelio_gpu", ignore=ignore)
    shutil.copy(ROOT / "main.py", repo / "main.py")
    shutil.copytree(EXAMPLE_STACKS, repo / "stacks")
    (repo / "catalog").mkdir()
    shutil.copy(EXAMPLE_CATALOG, repo / "catalog" / "gpu-catalog.yaml")
    names = repo / "themelio_gpu" / "inputs" / "catalog" / "names.py"
    assert names.read_text().count(f'"{FIELD_MANAGER}"') == 1  # the default field manager, in one place
    names.write_text(names.read_text().replace(f'"{FIELD_MANAGER}"', '"themelio-gpu-stacks-old"'))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "fleet")
    return repo


def base_ref_command(repository: Path, *extra: str) -> list[str]:
    """`changed --base-ref main` on the repository's fleet, run in a process of its own."""
    fleet = [
        "--catalog",
        str(repository / "catalog" / "gpu-catalog.yaml"),
        "--stacks-dir",
        str(repository / "stacks"),
    ]
    return [sys.executable, "-m", "themelio_gpu", "changed", "--base-ref", "main", *fleet, *extra]


def worktrees(repo: Path) -> list[str]:
    return [
        line for line in git(repo, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")
    ]


def test_base_ref_synthesizes_the_commit_with_its_own_code_and_removes_its_worktree(
    repository: Path, tmp_path: Path
) -> None:
    east = repository / "stacks" / "gpu-east.yaml"
    east.write_text(east.read_text().replace("gpu-east-a100-02]", "gpu-east-a100-02, gpu-east-a100-03]"))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = subprocess.run(
        base_ref_command(repository, "--format", "json"),
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["base"].startswith("git main (commit ")
    east_report = next(s for s in report["stacks"] if s["name"] == "gpu-east")
    created = [r["address"] for r in east_report["resources"] if r["action"] == "create"]
    assert created == [
        'kubernetes_labels.node_labels_a100-whole["gpu-east-a100-03"]',
        'kubernetes_node_taint.node_taints_a100-whole["gpu-east-a100-03"]',
    ]
    # The commit's code wrote its own field manager: every node's labels and taints update to this checkout's.
    updated = {
        a for s in report["stacks"] for r in s["resources"] if r["action"] == "update" for a in r["attributes"]
    }
    assert "field_manager" in updated and "field_manager.name" in updated
    assert worktrees(repository) == [f"worktree {repository}"]
    assert list(scratch.glob("themelio-changed-*")) == []


# Where the run is stopped: while `git worktree add` checks the commit out (its main.py is there), or while
# the commit's main.py synthesizes (it has created its output folder).
STOP_AT = {"checkout": "themelio-changed-base-*/worktree/main.py", "synthesis": "themelio-changed-*/base"}


@pytest.mark.parametrize("moment", sorted(STOP_AT))
@pytest.mark.parametrize(
    ("signum", "code", "message"),
    [
        (signal.SIGINT, 130, "interrupted (SIGINT); temporary files removed"),
        (signal.SIGTERM, 143, "interrupted (SIGTERM); temporary files removed"),
    ],
)
def test_an_interrupted_base_ref_removes_its_worktree(
    signum: int, code: int, message: str, moment: str, repository: Path, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    process = subprocess.Popen(
        base_ref_command(repository),
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(scratch)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def reached() -> bool:
        return any(scratch.glob(STOP_AT[moment]))

    deadline = time.monotonic() + 120  # a bound for a broken run, not a timing assertion
    while not reached() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert reached(), f"the run never reached its {moment}"
    process.send_signal(signum)
    _, err = process.communicate(timeout=120)
    assert process.returncode == code, err
    assert err.splitlines()[-1] == message and "Traceback" not in err
    assert worktrees(repository) == [f"worktree {repository}"]
    assert list(scratch.glob("themelio-changed-*")) == []
