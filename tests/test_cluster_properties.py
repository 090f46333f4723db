"""Property-based: any mangling of a real cluster definition yields a fleet or clear problems, never a
traceback (the secret scan, positions and did-you-mean included)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import PYDANTIC_WORDS
from tests.conftest import EXAMPLE_CATALOG, EXAMPLE_STACKS
from themelio_gpu.inputs.problems import InputError
from themelio_gpu.plan.fleet import load_fleet

CLUSTERS = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(EXAMPLE_STACKS.glob("*.yaml"))]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.sampled_from(["1.40", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "--token", "https://u:p@h"]),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=10), children, max_size=3)
    ),
    max_leaves=8,
)


def _paths(data: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path] if path else []
    if isinstance(data, dict):
        for key, value in data.items():
            found += _paths(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += _paths(value, (*path, index))
    return found


@st.composite
def mangled(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(draw(st.sampled_from(CLUSTERS)))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(data)))
        parent: Any = data
        for part in path[:-1]:
            parent = parent[part]
        if isinstance(parent, dict) and draw(st.booleans()):
            parent[draw(st.sampled_from(["nodepools", "tokn", "token", path[-1]]))] = draw(values)
        else:
            parent[path[-1]] = draw(values)
    return data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mangled())
def test_any_mangled_cluster_is_planned_or_refused_with_messages(tmp_path: Path, data: dict[str, Any]) -> None:
    stacks = tmp_path / "stacks"
    stacks.mkdir(exist_ok=True)
    for old in stacks.iterdir():
        old.unlink()
    (stacks / "c.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    try:
        load_fleet(EXAMPLE_CATALOG, stacks)
    except InputError as error:
        assert error.problems
        assert "eyJhbGciOiJIUzI1NiJ9" not in error.render()  # a refused secret is never printed
        assert not [word for word in PYDANTIC_WORDS if word in error.render()], error.render()
