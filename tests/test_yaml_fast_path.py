"""YAML without aliases is built straight from its nodes (inputs/yaml_input.py `_plain_data`), not by PyYAML's
constructor: the data, the node tree (positions) and every message must be exactly what PyYAML's path gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import ROOT
from themelio_gpu.inputs import yaml_input
from themelio_gpu.inputs.problems import Problems


def outcome(text: str) -> tuple[str, str, list[str]]:
    """The data and node tree (as repr: types count, 1 is not 1.0 or True) and the problems of `text`.

    An exception that escapes (none should: see test_input_messages.py) must be the same one too.
    """
    problems = Problems()
    try:
        document = yaml_input.parse_yaml_document(text, "f.yaml", problems)
    except Exception as error:
        return "raised", repr(error), []
    data, root = (document.data, document.root) if document is not None else (None, None)
    return repr(data), repr(root), [str(p) for p in problems]


def pyyaml_outcome(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str, list[str]]:
    """The outcome on PyYAML's path alone."""

    def never_plain(root: yaml.Node, loader: Any) -> Any:
        raise yaml_input._NotPlainError

    with monkeypatch.context() as patch:
        patch.setattr(yaml_input, "_plain_data", never_plain)
        return outcome(text)


FIXTURE_YAML = sorted((ROOT / "tests" / "fixtures" / "fleets").rglob("*.yaml"))

TRICKY = {
    "scalars": "a: 1\nb: 1.5\nc: true\nd: null\ne: ~\nf: 2024-01-02\ng: '8'\nh: 0x1F\ni: 1_000\nj: .inf\nk:\n",
    "timestamp": "t: 2001-12-14t21:59:43.10-05:00\n",
    "binary": "b: !!binary aGVsbG8=\n",
    "explicit str": "a: !!str 1\nb: !!int '3'\n",
    "str tag on a mapping": "a: !!str {b: 1}\n",
    "set": "a: !!set {x, y}\n",
    "omap": "a: !!omap [x: 1, y: 2]\n",
    "unknown tag": "a: !thing 1\n",
    "merge key": "base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\n",
    "merge key without alias": "derived:\n  <<: {x: 1}\n  y: 2\n",
    "value key": "a:\n  =: 1\n",
    "duplicate key": "name: a\nname: b\n",
    "equal keys": "1: a\n1.0: b\n",
    "true and one": "true: a\n1: b\n",
    "list as key": "? [a, b]\n: 1\n",
    "mapping as key": "? {a: 1}\n: 1\n",
    "nested duplicate after a list": "a: [!thing x]\nb: {c: 1, c: 2}\n",
    "bad int after a bad tag": "a: [!!int x]\nb: !!float y\n",
    "asterisk in a string": "a: '*.example.com'\nb: c\n",
    "deep but fine": "a: " + "[" * 100 + "]" * 100 + "\n",
    "deep mapping": "".join("  " * i + f"k{i}:\n" for i in range(80)) + "  " * 80 + "v: 1\n",
    "too deep": "a: " + "[" * 3000 + "]" * 3000 + "\n",
    # Too deep for PyYAML's recursive constructor (about 4 frames a level), not for one frame a level.
    "mapping too deep": "".join("  " * i + f"k{i}:\n" for i in range(300)) + "  " * 300 + "v: 1\n",
    "too many values": "a: [" + "x, " * 100_001 + "]\n",
    "just enough values": "[" + "x, " * 99_999 + "]\n",
    "recursive alias": "a: &a [*a]\n",
    "empty": "",
    "comment only": "# nothing\n",
    "scalar document": "hello\n",
    "two documents": "a: 1\n---\nb: 2\n",
    "syntax error": "a: [\n",
    "tab": "a:\n\tb: 1\n",
}


@pytest.mark.parametrize("path", FIXTURE_YAML, ids=lambda p: str(p.relative_to(ROOT / "tests" / "fixtures")))
def test_fixture_files_read_the_same_on_both_paths(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = path.read_text(encoding="utf-8")
    assert outcome(text) == pyyaml_outcome(text, monkeypatch)


@pytest.mark.parametrize("text", TRICKY.values(), ids=TRICKY.keys())
def test_tricky_documents_read_the_same_on_both_paths(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert outcome(text) == pyyaml_outcome(text, monkeypatch)


def test_cluster_files_take_the_direct_path() -> None:
    """Else the fast path would be dead code: every fixture cluster file is plain."""
    stacks = [path for path in FIXTURE_YAML if path.parent.name == "stacks"]  # the fixture fleets' clusters
    assert stacks
    for path in stacks:
        loader = yaml_input._UniqueKeyLoader(path.read_text(encoding="utf-8"))
        root = loader.get_single_node()
        assert yaml_input._plain_data(root, loader) == yaml.safe_load(path.read_text(encoding="utf-8")), path


@pytest.mark.parametrize("text", [TRICKY["merge key without alias"], TRICKY["duplicate key"], TRICKY["too deep"]])
def test_what_pyyaml_treats_specially_is_left_to_it(text: str) -> None:
    loader = yaml_input._UniqueKeyLoader(text)
    with pytest.raises(yaml_input._NotPlainError):
        yaml_input._plain_data(loader.get_single_node(), loader)


# Well-formed single documents, shallow enough for repr().
COMPOSABLE = [
    t
    for k, t in TRICKY.items()
    if k not in ("too deep", "mapping too deep", "two documents", "syntax error", "tab")
]


@pytest.mark.parametrize("text", [p.read_text(encoding="utf-8") for p in FIXTURE_YAML] + COMPOSABLE)
def test_nodes_get_the_tags_pyyaml_gives_them(text: str) -> None:
    """The loader remembers the tag each scalar resolved to (`_resolved_tag`): the same tree as plain PyYAML's."""
    mine = yaml_input._UniqueKeyLoader(text).get_single_node()
    assert repr(mine) == repr(yaml.compose(text, Loader=yaml.SafeLoader))


def test_an_alias_is_the_same_object_as_its_anchor() -> None:
    """As PyYAML builds it; a copy per alias (what building each node as found would do) is not the same."""
    document = yaml_input.parse_yaml_document("a: &x [1]\nb: *x\n", "f.yaml", Problems())
    assert document is not None and document.data["a"] is document.data["b"]


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=json_like,
    cut=st.integers(min_value=0, max_value=400),
    noise=st.text(alphabet="{}[]:,-&!'\"\n #?<=*", max_size=3),
)
def test_any_document_reads_the_same_on_both_paths(
    data: Any, cut: int, noise: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dumped data, and the same text broken by a few YAML characters at some place."""
    text = yaml.safe_dump(data, default_flow_style=None)
    for variant in (text, text[:cut] + noise + text[cut:]):
        assert outcome(variant) == pyyaml_outcome(variant, monkeypatch)
