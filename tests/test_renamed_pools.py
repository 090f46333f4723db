"""Renamed node pools (`renamedFrom`): the stack moves the old Terraform addresses to the new ones (`moved`
blocks), real Terraform reads them, and every rename the blocks cannot carry is refused with why.

The fixture fleet tests/fixtures/fleets/renamed-pool has a tainted static pool, an untainted one and a
provisioned one renamed, and a Karpenter pool that keeps its name; `make verify-fixtures` and
`make terraform-check-fixtures` run the real tools on it in CI. tests/test_changed.py shows that `changed`
then reports updates, not destroy and create.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.builders import cluster, problems_of
from tests.conftest import FIXTURES
from tests.test_terraform import mirror_environment, terraform_cli_config  # noqa: F401 (a fixture)
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.model import Fleet
from themelio_gpu.plan.renames import KARPENTER_RENAME
from themelio_gpu.verify import terraform as tf

RENAMED = FIXTURES / "fleets" / "renamed-pool"


@pytest.fixture(scope="session")
def renamed_fleet() -> Fleet:
    return load_fleet(RENAMED / "catalog" / "gpu-catalog.yaml", RENAMED / "stacks")


@pytest.fixture(scope="session")
def renamed_stack(renamed_fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from themelio_gpu.outputs.synth import synthesize

    out = tmp_path_factory.mktemp("renamed-cdktf.out")
    synthesize(renamed_fleet, out, progress=None)
    stack: dict[str, Any] = json.loads((out / "stacks" / "gpu-renamed" / "cdk.tf.json").read_text())
    return stack


def test_a_renamed_static_pool_moves_its_labels_and_its_taints(renamed_stack: dict[str, Any]) -> None:
    assert renamed_stack["moved"] == [
        {
            "from": "kubernetes_labels.node_labels_a100-whole",
            "to": "kubernetes_labels.node_labels_a100-training",
        },
        {
            "from": "kubernetes_node_taint.node_taints_a100-whole",
            "to": "kubernetes_node_taint.node_taints_a100-training",
        },
        # An untainted pool has no taint resource: only its labels move.
        {"from": "kubernetes_labels.node_labels_a100-mig", "to": "kubernetes_labels.node_labels_a100-sliced"},
    ]
    resources = {f"{t}.{n}" for t, by_name in renamed_stack["resource"].items() for n in by_name}
    assert {move["to"] for move in renamed_stack["moved"]} <= resources
    assert not {move["from"] for move in renamed_stack["moved"]} & resources
    # The provisioned pool (a10g-edge, renamed from a10g-remote) has nothing to move; Karpenter's keeps its name.
    assert "kubernetes_manifest.karpenter_node_pool_h100" in resources
    assert renamed_stack["terraform"]["required_version"] == ">= 1.1"  # moved blocks: Terraform 1.1


def test_stacks_without_a_rename_have_no_moved_blocks(stack_json: Any) -> None:
    for name in ("gpu-east", "gpu-lab", "gpu-west"):
        assert "moved" not in stack_json(name)


@pytest.mark.parametrize(
    ("pools", "location", "message"),
    [
        (
            [{"name": "whole", "renamedFrom": "sliced"}, {"name": "sliced"}],
            "nodePools[0].renamedFrom",
            "pool 'sliced' still exists (nodePools[1]): Terraform cannot move addresses that are still in the "
            "configuration",
        ),
        ([{"name": "whole", "renamedFrom": "whole"}], "nodePools[0].renamedFrom", "is the pool's own name"),
        (
            [{"name": "whole", "renamedFrom": "old"}, {"name": "sliced", "renamedFrom": "old"}],
            "nodePools[1].renamedFrom",
            "nodePools[0] is also renamed from 'old': one pool's addresses can move to one pool only",
        ),
        ([{"name": "whole", "renamedFrom": "Old_Pool"}], "nodePools[0].renamedFrom", "DNS-1123"),
    ],
)
def test_a_rename_that_cannot_be_moved_is_refused(
    pools: list[dict[str, Any]], location: str, message: str, tmp_path: Path
) -> None:
    definition = cluster()
    for pool, override in zip(definition["nodePools"], pools, strict=False):
        pool.update(override)
    found = [p for p in problems_of(tmp_path, definition) if f": {location}: " in p]
    assert any(message in p for p in found), found


def test_a_karpenter_pool_cannot_be_renamed_in_place(tmp_path: Path) -> None:
    """A moved block would carry the NodePool's address, but not its name: kubernetes_manifest replaces an
    object whose metadata.name changes (tests/test_changed.py shows `changed` reporting that replace as
    dangerous), and Karpenter terminates the nodes of a deleted NodePool."""
    definition = cluster(karpenter=True)
    definition["nodePools"][0].update(
        name="whole-big",
        renamedFrom="whole",
        provisioning={"karpenter": {"nodeClassRef": {"name": "gpu"}, "instanceTypes": ["p4d.24xlarge"]}},
    )
    found = problems_of(tmp_path, definition)
    assert [p for p in found if "nodePools[0].renamedFrom" in p] == [
        f"stacks/test.yaml: nodePools[0].renamedFrom: {KARPENTER_RENAME} (line 20, column 3)"
    ]


def test_real_terraform_plans_the_moved_blocks(
    renamed_stack: dict[str, Any],
    terraform_cli_config: Path,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    """`terraform validate` does not read moved blocks, `terraform plan` does: the stack plans, and the same
    stack with a block moving an address that is still in the configuration fails as Terraform says it must."""
    broken = json.loads(json.dumps(renamed_stack))
    broken["moved"][0]["from"] = "kubernetes_labels.node_labels_a100-sliced"
    with mirror_environment(terraform_cli_config):
        terraform = tf.find_terraform()
        env = tf.terraform_environment(tmp_path / "plugins")
        runs = {}
        for name, config in (("stack", renamed_stack), ("broken", broken)):
            folder = tmp_path / name
            folder.mkdir()
            (folder / "cdk.tf.json").write_text(json.dumps(tf.without_state_backend(config)))
            init = subprocess.run(
                [terraform, "init", "-backend=false", "-input=false", "-no-color"],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            assert init.returncode == 0, init.stdout + init.stderr
            plan = [terraform, "plan", "-refresh=false", "-lock=false", "-input=false", "-no-color"]
            # Both plans at once: the provider stand-ins idle about 2 s per call.
            runs[name] = subprocess.Popen(
                plan, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        outputs = {name: (run.communicate()[0], run.returncode) for name, run in runs.items()}
    shutil.rmtree(tmp_path / "plugins", ignore_errors=True)
    out, code = outputs["stack"]
    assert code == 0 and "Plan: " in out, out
    out, code = outputs["broken"]
    assert code != 0 and "Moved object still exists" in out, out
