"""Messages about bad input: every problem in one run, each with its path, line and column, and a hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import EXAMPLE_CATALOG
from themelio_gpu.inputs.catalog.catalog import load_catalog
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.problems import InputError, Problems
from themelio_gpu.inputs.yaml_input import allowed_keys, display_path, parse_location, parse_yaml_document
from themelio_gpu.plan.fleet import load_fleet

CLUSTER = """\
name: gpu-a
kubernetesVersion: 1.40
access:
  kubeconfig: {path: ~/.kube/config, context: a}
backend:
  type: s3
  bucket: b
  regoin: eu-west-1
offerings: [nvidia.com/a100]
nodepools: []
nodePools:
  - name: whole
    product: a100-40gb
    gpusPerNode: 8
    labels: {team: yes}
    provisioning:
      static: {nodes: [n-1]}
"""


def problems(tmp_path: Path, cluster_text: str, catalog_text: str | None = None) -> list[str]:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "a.yaml").write_text(cluster_text, encoding="utf-8")
    catalog = EXAMPLE_CATALOG
    if catalog_text is not None:
        catalog = tmp_path / "catalog.yaml"
        catalog.write_text(catalog_text, encoding="utf-8")
    with pytest.raises(InputError) as error:
        load_fleet(catalog, stacks)
    return [str(p).replace(f"{tmp_path}/", "") for p in error.value.problems]


def test_each_problem_has_its_path_line_and_column(tmp_path: Path) -> None:
    found = problems(tmp_path, CLUSTER)
    assert (
        "stacks/a.yaml: kubernetesVersion: Input should be a valid string: YAML reads the unquoted 1.40 as the "
        'number 1.4; quote it: "1.40" (line 2, column 1)'
    ) in found
    assert any(
        p.startswith(
            "stacks/a.yaml: backend.s3.regoin: unknown key; did you mean region? (keys allowed here: type, "
        )
        and p.endswith("(line 8, column 3)")
        for p in found
    ), found
    assert "stacks/a.yaml: backend.s3.region: required key is missing (line 5, column 1)" in found
    assert any(p.startswith("stacks/a.yaml: nodepools: unknown key; did you mean nodePools?") for p in found), (
        found
    )
    assert (
        "stacks/a.yaml: nodePools[0].labels.team: Input should be a valid string: YAML reads the unquoted yes as "
        'the boolean True; quote it: "yes" (line 15, column 14)'
    ) in found
    # In the order of the file's lines.
    lines = [int(p.rsplit("(line ", 1)[1].split(",")[0]) for p in found]
    assert lines == sorted(lines)


def test_checks_after_parsing_get_positions_too(tmp_path: Path) -> None:
    text = CLUSTER.replace("1.40", '"1.36"').replace("  regoin", "  region").replace("nodepools: []\n", "")
    text = text.replace("{team: yes}", "{team: research}").replace("product: a100-40gb", "product: a100-40gbx")
    found = problems(tmp_path, text)
    assert any(
        p.startswith("stacks/a.yaml: nodePools[0].product: unknown product 'a100-40gbx'")
        and p.endswith("(line 12, column 5)")
        for p in found
    ), found


def test_a_catalog_error_does_not_hide_the_cluster_files_errors(tmp_path: Path) -> None:
    catalog = EXAMPLE_CATALOG.read_text(encoding="utf-8").replace(
        "quota: {waldurComponent: gpu_a10g}", "quota: {}"
    )
    cluster = CLUSTER.replace("1.40", '"1.33"').replace("regoin", "region").replace("nodepools: []\n", "")
    cluster = cluster.replace("{team: yes}", "{team: research}").replace(
        "gpusPerNode: 8", "gpusPerNode: 8\n    mig: {profile: 9g.99gb}"
    )
    found = problems(tmp_path, cluster, catalog)
    assert any(
        p.startswith("catalog.yaml: offerings") and "waldurComponent: required key is missing" in p for p in found
    )
    # Checks of the cluster that need no catalog still ran: the version gate and the pool's MIG layout.
    assert any(
        p.startswith("stacks/a.yaml: kubernetesVersion: cluster gpu-a runs Kubernetes 1.33") for p in found
    ), found
    assert any(p.startswith("stacks/a.yaml: nodePools[0].mig") for p in found), found


def test_unknown_keys_in_the_catalog_get_a_suggestion(tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text(
        "offerings:\n  nvidia.com/a100:\n    deviceClass: a.gpu.example.com\n    product: a100-40gb\n"
        "    displayname: A100\n    quota: {waldurComponent: gpu_a100}\n",
        encoding="utf-8",
    )
    found = Problems()
    assert load_catalog(path, found, "catalog.yaml") is None
    messages = [str(p) for p in found]
    assert any(
        m.startswith(
            'catalog.yaml: offerings["nvidia.com/a100"].displayname: unknown key; did you mean displayName?'
        )
        and m.endswith("(line 5, column 5)")
        for m in messages
    ), messages


def test_allowed_keys_follow_the_model_through_unions_and_collections() -> None:
    assert "region" in allowed_keys(ClusterDefinition, ("backend", "s3"))
    assert "gpusPerNode" in allowed_keys(ClusterDefinition, ("nodePools", 0))
    assert "nodeClassRef" in allowed_keys(ClusterDefinition, ("nodePools", 0, "provisioning", "karpenter"))
    assert allowed_keys(ClusterDefinition, ("nodePools", 0, "labels")) == []  # free-form: no suggestion


def test_locations_parse_back_into_paths() -> None:
    assert parse_location('offerings["nvidia.com/a100"].aliases[1].name') == [
        "offerings",
        "nvidia.com/a100",
        "aliases",
        1,
        "name",
    ]
    document = parse_yaml_document("a:\n  - x: 1\n    y: [2, 3]\n", "f", Problems())
    assert document is not None
    assert document.position(["a", 0, "y"]) == "line 3, column 5"
    assert document.position(["a", 0, "y", 1]) == "line 3, column 12"
    assert document.position(["a", 0, "missing"]) == "line 2, column 5"  # the mapping that lacks it


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &a [*a]\n", "line 1, column 4: invalid YAML: an alias refers to a value containing it"),
        (
            "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcde", "bcdef", strict=True)),
            "invalid YAML: aliases expand the document to more than 100000 values",
        ),
        ("? [a, b]\n: 1\n", "line 1, column 3: invalid YAML: a key must be a plain value such as a name"),
        ("a: " + "[" * 3000 + "]" * 3000 + "\n", "invalid YAML: nested too deeply"),
        ("name: a\nname: b\n", "line 2, column 1: invalid YAML: duplicate key 'name'"),
        # PyYAML's constructors raise plain ValueError, KeyError or AttributeError for these.
        (
            "name: a\nnodePools: [{gpusPerNode: !!int eight}]\n",
            "line 2, column 27: invalid YAML: 'eight' is not a valid !!int",
        ),
        ("name: !!float a\n", "line 1, column 7: invalid YAML: 'a' is not a valid !!float"),
        ("name: !!bool maybe\n", "line 1, column 7: invalid YAML: 'maybe' is not a valid !!bool"),
        ("name: !!timestamp monday\n", "line 1, column 7: invalid YAML: 'monday' is not a valid !!timestamp"),
    ],
    ids=[
        "recursive alias",
        "alias bomb",
        "list as key",
        "deep nesting",
        "duplicate key",
        "int",
        "float",
        "bool",
        "date",
    ],
)
def test_hostile_yaml_is_one_message(tmp_path: Path, text: str, message: str) -> None:
    found = problems(tmp_path, text)
    assert len(found) == 1 and found[0].startswith(f"stacks/a.yaml: {message}"), found


def test_paths_are_shown_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same with the working directory given (load_fleet resolves it once) as when looked up per path."""
    (tmp_path / "work" / "stacks").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "work" / "stacks" / "a.yaml").write_text("name: a\n", encoding="utf-8")
    (tmp_path / "work" / "stacks" / "linked.yaml").symlink_to(tmp_path / "elsewhere" / "b.yaml")
    monkeypatch.chdir(tmp_path / "work")
    cwd = Path.cwd().resolve()
    cases = {
        Path("stacks/a.yaml"): "stacks/a.yaml",
        tmp_path / "work" / "stacks" / "a.yaml": "stacks/a.yaml",
        Path("stacks/linked.yaml"): "stacks/linked.yaml",  # outside the working directory once resolved
        tmp_path / "elsewhere" / "b.yaml": str(tmp_path / "elsewhere" / "b.yaml"),
    }
    for path, shown in cases.items():
        assert display_path(path) == display_path(path, cwd) == shown, path
