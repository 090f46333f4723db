"""docs/resource-addresses.md lists every address a stack can hold: each address the fixture fleets synthesize
matches one of its rows, each row is synthesized by some fixture fleet, and its gpu-east example is the
stack's own list."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT
from themelio_gpu.changes.stacks import read_output_folder
from themelio_gpu.inputs.problems import Problems
from themelio_gpu.plan.fleet import load_fleet

PAGE = (ROOT / "docs" / "resource-addresses.md").read_text(encoding="utf-8")
# Between them, every construct, pool kind and DRA chart (README "Tests and snapshots", fixtures/fleets).
FLEETS = ("example", "terraform", "renamed-pool")
PLACEHOLDER = {"<pool>": r"[a-z0-9-]+", "<node>": r"[a-z0-9.-]+", "<class>": r"[a-z0-9.-]+"}


def documented() -> list[str]:
    """The address column of the first table: backticked addresses with placeholders."""
    table = PAGE[PAGE.index("\n| construct") + 1 :].split("\n\n", 1)[0]
    rows = table.splitlines()[2:]
    return [m for row in rows for m in re.findall(r"`([a-z0-9_]+\.[^`]+)`", row.split("|")[2])]


def pattern(address: str) -> re.Pattern[str]:
    regex = re.escape(address)
    for placeholder, part in PLACEHOLDER.items():
        regex = regex.replace(re.escape(placeholder), part)
    return re.compile(regex)


@pytest.fixture(scope="module")
def synthesized_fleets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from themelio_gpu.outputs.synth import synthesize

    out = {}
    for name in FLEETS:
        folder = FIXTURES / "fleets" / name
        out[name] = tmp_path_factory.mktemp(f"{name}-out")
        synthesize(
            load_fleet(folder / "catalog" / "gpu-catalog.yaml", folder / "stacks"), out[name], progress=None
        )
    return out


def test_every_synthesized_address_is_documented_and_every_documented_one_is_synthesized(
    synthesized_fleets: dict[str, Path],
) -> None:
    rows = {address: pattern(address) for address in documented()}
    assert len(rows) == 9, rows
    matched: set[str] = set()
    for folder in synthesized_fleets.values():
        problems = Problems()
        for stack in read_output_folder(folder, problems).values():
            for address in stack.instances:
                found = [row for row, regex in rows.items() if regex.fullmatch(address)]
                assert len(found) == 1, f"{stack.name}: {address} matches {found or 'no row'} of the page"
                matched.update(found)
        assert not problems
    assert matched == set(rows)


def test_the_gpu_east_example_is_its_stacks_list(synthesized_fleets: dict[str, Path]) -> None:
    example = PAGE.split("```\n", 2)[1]
    listed = {line.split()[0] for line in example.splitlines() if line.strip()}
    problems = Problems()
    stack = read_output_folder(synthesized_fleets["example"], problems)["gpu-east"]
    assert listed <= set(stack.instances)
    assert {stack.instances[a].resource for a in listed} == {i.resource for i in stack.instances.values()}
