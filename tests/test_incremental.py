"""Incremental synthesis (outputs/synth.py, outputs/stack_inputs.py): only the stacks whose inputs changed are
written, and the output is byte-identical to a full synthesis after every edit.

- a property test: random sequences of edits (cluster files added, edited, removed; catalog offerings and
  products; Helm overrides; this tool's code), each step synthesized incrementally into one folder and in
  full into a fresh one: the same bytes every time, and only stacks whose plans changed are written;
- a catalog edit reaches exactly the clusters serving the offering; a stack file edited or deleted by hand
  is written again; unchanged cluster files are not read again; `--full` writes everything;
- manifest.json is written as each engine writes it (both engines' own files compared byte for byte).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import cluster
from tests.conftest import EXAMPLE_CATALOG, EXAMPLE_STACKS, ROOT
from themelio_gpu.engine import ENGINES, ENV
from themelio_gpu.outputs import stack_inputs
from themelio_gpu.outputs.manifest import manifest_text
from themelio_gpu.outputs.synth import Synthesis, synthesize_files
from themelio_gpu.settings import InputPaths

WHOLE = {"name": "whole", "product": "a100-40gb", "gpusPerNode": 8, "provisioning": {"static": {"nodes": ["n1"]}}}
SLICED = {
    "name": "sliced",
    "product": "a100-40gb",
    "gpusPerNode": 8,
    "mig": {"profile": "1g.5gb"},
    "provisioning": {"static": {"nodes": ["n2"]}},
}


def _cluster(name: str, sliced: bool) -> dict[str, Any]:
    """A small cluster: whole A100s, and 1g.5gb slices when `sliced` (so not every cluster serves them)."""
    offerings = ["nvidia.com/a100", "nvidia.com/a100-mig-1g.5gb"] if sliced else ["nvidia.com/a100"]
    pools = [copy.deepcopy(WHOLE), copy.deepcopy(SLICED)] if sliced else [copy.deepcopy(WHOLE)]
    return cluster(name=name, offerings=offerings, nodePools=pools)


class Fleet:
    """A fleet in a folder, edited step by step."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.catalog: dict[str, Any] = yaml.safe_load(EXAMPLE_CATALOG.read_text(encoding="utf-8"))
        self.clusters: dict[str, dict[str, Any]] = {}
        (root / "stacks").mkdir(parents=True)
        self.write()

    @property
    def paths(self) -> InputPaths:
        return InputPaths(self.root / "catalog.yaml", self.root / "stacks")

    def write(self) -> None:
        (self.root / "catalog.yaml").write_text(yaml.safe_dump(self.catalog), encoding="utf-8")
        for path in (self.root / "stacks").glob("*.yaml"):
            if path.stem not in self.clusters:
                path.unlink()
        for name, definition in self.clusters.items():
            (self.root / "stacks" / f"{name}.yaml").write_text(yaml.safe_dump(definition), encoding="utf-8")


def _files(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _both(fleet: Fleet, incremental: Path, fresh: Path) -> Synthesis:
    """The fleet synthesized incrementally into `incremental` and in full into `fresh`: the same bytes."""
    _, result = synthesize_files(fleet.paths, incremental, progress=None)
    synthesize_files(fleet.paths, fresh, progress=None, full=True)
    assert _files(incremental) == _files(fresh)
    return result


def edit_fleet(fleet: Fleet, edit: str, n: int, step: int) -> None:
    """One edit of EDITS (but "tool", this tool's code, which each test changes its own way), in memory: then
    `fleet.write()`. `n` picks the cluster; `step` makes the new values differ from the earlier ones."""
    names = sorted(fleet.clusters)
    target = names[n % len(names)] if names else None
    if edit == "add cluster":
        name = f"c{step}x{n}"
        fleet.clusters[name] = _cluster(name, n % 2 == 0)
    elif edit == "remove cluster" and len(names) > 1 and target:
        del fleet.clusters[target]
    elif edit == "edit cluster" and target:
        fleet.clusters[target].setdefault("draDriver", {})["timeoutSeconds"] = 600 + step + n
    elif edit == "serve slices" and target:
        fleet.clusters[target] = _cluster(target, not any("mig" in p for p in fleet.clusters[target]["nodePools"]))
    elif edit == "offering text":
        fleet.catalog["offerings"]["nvidia.com/a100-mig-1g.5gb"]["description"] = f"Slices, step {step}."
    elif edit == "product":
        fleet.catalog["offerings"]["nvidia.com/h100"]["displayName"] = f"H100, step {step}"
    elif edit == "helm override" and target:
        values = fleet.clusters[target].setdefault("gpuOperator", {}).setdefault("values", {})
        values.setdefault("dcgmExporter", {})["enabled"] = n % 2 == 0


EDITS = st.sampled_from(
    [
        "add cluster",
        "remove cluster",
        "edit cluster",
        "serve slices",
        "offering text",
        "product",
        "helm override",
        "tool",
        "nothing",
    ]
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(EDITS, st.integers(0, 9)), min_size=1, max_size=4))
def test_every_edit_sequence_gives_the_bytes_of_a_full_synthesis(
    edits: list[tuple[str, int]], tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path_factory.mktemp("edits")
    fleet = Fleet(root / "fleet")
    fleet.clusters = {"alpha": _cluster("alpha", True), "beta": _cluster("beta", False)}
    fleet.write()
    out = root / "cdktf.out"
    _both(fleet, out, root / "full-0")
    tool = 0
    for step, (edit, n) in enumerate(edits, start=1):
        before = _files(out)
        edit_fleet(fleet, edit, n, step)
        if edit == "tool":
            tool += 1
            # Unique to this example: hypothesis runs every example with the one monkeypatch, so a version an
            # earlier example set may still be in place.
            version = f"tool version {tool} of {root.name}"
            monkeypatch.setattr(stack_inputs, "code_digest", lambda version=version: version)
        fleet.write()
        result = _both(fleet, out, root / f"full-{step}")
        after = _files(out)
        changed = {
            name
            for name in fleet.clusters
            if before.get(f"stacks/{name}/cdk.tf.json") != after.get(f"stacks/{name}/cdk.tf.json")
        }
        assert changed <= set(result.written), (edit, changed, result.written)
        if edit == "tool":
            assert set(result.written) == set(fleet.clusters)  # a new tool writes every stack again
        elif edit in ("nothing", "product"):
            # The H100 offering is served by no cluster here: no plan changes.
            assert result.written == (), (edit, result.written)


@pytest.fixture
def four_clusters(tmp_path: Path) -> tuple[Fleet, Path]:
    fleet = Fleet(tmp_path / "fleet")
    fleet.clusters = {name: _cluster(name, name in ("east", "west")) for name in ("east", "lab", "north", "west")}
    fleet.write()
    out = tmp_path / "cdktf.out"
    _, first = synthesize_files(fleet.paths, out, progress=None)
    assert first.written == ("east", "lab", "north", "west")
    return fleet, out


def test_a_catalog_edit_writes_exactly_the_stacks_serving_the_offering(four_clusters: tuple[Fleet, Path]) -> None:
    fleet, out = four_clusters
    fleet.catalog["offerings"]["nvidia.com/a100-mig-1g.5gb"]["displayName"] = "A100 slice (1g.5gb)"
    fleet.write()
    fleet_loaded, result = synthesize_files(fleet.paths, out, progress=None)
    assert result.written == ("east", "west")
    assert result.unchanged == ("lab", "north")
    assert fleet_loaded.reused == ()  # the catalog changed: every cluster file is read and planned again


def test_unchanged_cluster_files_are_not_read_again(four_clusters: tuple[Fleet, Path]) -> None:
    fleet, out = four_clusters
    fleet.clusters["lab"]["draDriver"] = {"timeoutSeconds": 900}
    fleet.write()
    loaded, result = synthesize_files(fleet.paths, out, progress=None)
    assert result.written == ("lab",)
    assert [name for _, name in loaded.reused] == ["east", "north", "west"]
    assert [plan.name for plan in loaded.clusters] == ["lab"]
    assert [row[0] for row in result.summary] == ["east", "lab", "north", "west"]  # the table still has all


@pytest.mark.parametrize("damage", ["edited", "deleted"])
def test_a_stack_file_changed_by_hand_is_written_again(four_clusters: tuple[Fleet, Path], damage: str) -> None:
    fleet, out = four_clusters
    stack = out / "stacks" / "north" / "cdk.tf.json"
    good = stack.read_bytes()
    if damage == "edited":
        stack.write_text(good.decode().replace('"gpu-operator"', '"gpu-operator-edited"', 1))
    else:
        stack.unlink()
    _, result = synthesize_files(fleet.paths, out, progress=None)
    assert result.written == ("north",)
    assert stack.read_bytes() == good


def test_full_writes_every_stack(four_clusters: tuple[Fleet, Path]) -> None:
    fleet, out = four_clusters
    _, result = synthesize_files(fleet.paths, out, progress=None, full=True)
    assert result.written == ("east", "lab", "north", "west")
    _, again = synthesize_files(fleet.paths, out, progress=None)
    assert (again.written, again.unchanged) == ((), ("east", "lab", "north", "west"))


def test_a_removed_cluster_leaves_the_manifest_and_its_folder(four_clusters: tuple[Fleet, Path]) -> None:
    fleet, out = four_clusters
    del fleet.clusters["north"]
    fleet.write()
    _, result = synthesize_files(fleet.paths, out, progress=None)
    assert (result.written, result.removed) == ((), ("north",))
    assert sorted(json.loads((out / "manifest.json").read_text())["stacks"]) == ["east", "lab", "west"]
    assert not (out / "stacks" / "north").exists()
    assert sorted(json.loads((out / stack_inputs.INDEX).read_text())["stacks"]) == ["east", "lab", "west"]


ENGINE_MANIFEST = """
import json, sys
from pathlib import Path
from themelio_gpu.outputs.app import build_app
from themelio_gpu.plan.fleet import load_fleet
fleet = load_fleet(Path(sys.argv[1]), Path(sys.argv[2]))
build_app(fleet.clusters, Path(sys.argv[3])).synth()  # the engine writes its manifest itself
"""


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_the_manifest_is_written_as_each_engine_writes_it(name: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", ENGINE_MANIFEST, str(EXAMPLE_CATALOG), str(EXAMPLE_STACKS), str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, ENV: name},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "manifest.json").read_text(encoding="utf-8")
    assert manifest_text(json.loads(text), ENGINES[name]) == text
