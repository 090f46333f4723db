"""Messages about bad input: every problem in one run, each with its path, line and column, and a hint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import EXAMPLE_CATALOG, PYDANTIC_WORDS, cluster, fleet_of, problems_of, write_fleet
from themelio_gpu.cli import main
from themelio_gpu.inputs.catalog.loading import load_catalog
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.inputs.problems import Bracketed, InputError, Mark, Problems, format_location
from themelio_gpu.inputs.validation import allowed_keys
from themelio_gpu.inputs.yaml_input import MAX_FILE_BYTES, display_path, parse_yaml_document
from themelio_gpu.plan.fleet import load_fleet
from themelio_gpu.plan.kubernetes_version import NEWEST_KNOWN_MINOR, OLDEST_VALIDATED_MINOR

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
        "stacks/a.yaml: kubernetesVersion: must be text: YAML reads the unquoted 1.40 as the "
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
        "stacks/a.yaml: nodePools[0].labels.team: must be text: YAML reads the unquoted yes as "
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


def test_locations_are_paths_shown_one_way() -> None:
    assert format_location(("offerings", "nvidia.com/a100", "aliases", 1, "name")) == (
        'offerings["nvidia.com/a100"].aliases[1].name'
    )
    assert format_location(("nodePools", 0, "labels", Bracketed("a.b/c"))) == "nodePools[0].labels[a.b/c]"
    assert format_location(Mark(3, 5)) == "line 3, column 5"
    document = parse_yaml_document("a:\n  - x: 1\n    y: [2, 3]\n", "f", Problems())
    assert document is not None
    assert document.position(["a", 0, "y"]) == Mark(3, 5)
    assert document.position(["a", 0, "y", 1]) == Mark(3, 12)
    assert document.position(["a", 0, "missing"]) == Mark(2, 5)  # the mapping that lacks it


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


# --- in this project's words -----------------------------------------------------------------------------


def test_a_taint_can_be_written_as_kubectl_writes_it(tmp_path: Path) -> None:
    pool = {**cluster()["nodePools"][0], "taints": ["nvidia.com/gpu=present:NoSchedule", "dedicated:NoExecute"]}
    (plan,) = fleet_of(tmp_path, cluster(offerings=["nvidia.com/a100"], nodePools=[pool])).clusters
    assert [str(t) for t in plan.pools[0].taints] == ["nvidia.com/gpu=present:NoSchedule", "dedicated:NoExecute"]


def test_a_taint_that_is_no_taint_says_how_to_write_one(tmp_path: Path) -> None:
    pool = {**cluster()["nodePools"][0], "taints": ["nvidia.com/gpu=present", 7]}
    found = problems_of(tmp_path, cluster(offerings=["nvidia.com/a100"], nodePools=[pool]))
    assert found == [
        "stacks/test.yaml: nodePools[0].taints[0]: 'nvidia.com/gpu=present' is not a taint: write key=value:Effect "
        "as kubectl does (e.g. nvidia.com/gpu=present:NoSchedule), key:Effect, or a mapping {key: ..., value: ..., "
        "effect: ...} (line 18, column 5)",
        "stacks/test.yaml: nodePools[0].taints[1]: must be a mapping (key: value lines), not the number 7 "
        "(line 19, column 5)",
    ]


def test_an_unknown_product_is_the_one_message_with_a_suggestion(tmp_path: Path) -> None:
    pool = {**cluster()["nodePools"][0], "product": "a100-40g"}
    found = problems_of(tmp_path, cluster(nodePools=[pool, cluster()["nodePools"][1]]))
    # Not also "no node pool can provide nvidia.com/a100": that follows from the unknown product.
    assert len(found) == 1 and found[0].startswith(
        "stacks/test.yaml: nodePools[0].product: unknown product 'a100-40g' (did you mean a100-40gb?); known: a10g, "
    ), found


def test_items_refused_one_by_one_leave_no_list_too_short_line(tmp_path: Path) -> None:
    found = problems_of(tmp_path, cluster(nodePools=[{"name": "p"}]))
    assert found and not any("at least" in p for p in found), found
    assert problems_of(tmp_path, cluster(offerings=[])) == [
        "stacks/test.yaml: offerings: needs at least 1 item; the list is empty (line 26, column 1)"
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"gpusPerNode": 20}, "nodePools[0].gpusPerNode: must be 16 or less, not 20"),
        ({"gpusPerNode": 2.5}, "nodePools[0].gpusPerNode: must be a whole number, not the number 2.5"),
        ({"dra": "sometimes"}, "nodePools[0].dra: must be true or false, not the text 'sometimes'"),
        ({"provisioning": {"statik": {}}}, "nodePools[0].provisioning.statik: unknown key; did you mean static?"),
        ({"mig": "1g.5gb"}, "nodePools[0].mig: must be a mapping (key: value lines), not the text '1g.5gb'"),
    ],
)
def test_value_errors_say_what_is_wanted(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    pool = {**cluster()["nodePools"][0], **change}
    found = problems_of(tmp_path, cluster(offerings=["nvidia.com/a100"], nodePools=[pool]))
    assert any(p.startswith(f"stacks/test.yaml: {message}") for p in found), found
    assert not any(word in p for p in found for word in PYDANTIC_WORDS), found


def test_a_backend_without_its_type_names_the_kinds(tmp_path: Path) -> None:
    assert problems_of(tmp_path, cluster(backend={"bucket": "b"})) == [
        "stacks/test.yaml: backend: required key type is missing: the kind of backend (one of local, s3, gcs, "
        "azurerm, kubernetes, http, cloud, remote) (line 5, column 1)"
    ]


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    text = "name: a\n" + "# padding\n" * (MAX_FILE_BYTES // 10 + 1)
    assert problems(tmp_path, text) == [
        "stacks/a.yaml: the file is too large (1.0 MB, over the 1 MiB limit for a catalog or cluster file, which "
        "takes a few KB): is it the right file?"
    ]


def test_a_long_file_without_aliases_is_not_called_an_alias_bomb(tmp_path: Path) -> None:
    text = "name: a\nnodePools:\n" + "- 1\n" * 100_001  # 400 KB: under the size limit, over the value limit
    assert problems(tmp_path, text) == [
        "stacks/a.yaml: invalid YAML: more than 100000 values, far more than any catalog or cluster file: is it the "
        "right file?"
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
            "a binary file, not YAML text (it holds NUL bytes): is it the right file?",
        ),
        ("name: café\n".encode("utf-16"), "the file is UTF-16 text: save it as UTF-8"),
        (
            b"name: a\ndisplayName: caf\xe9\n",
            "line 2: the file is not UTF-8 text (byte 0xE9 is not UTF-8): save it as UTF-8",
        ),
    ],
    ids=["binary", "utf-16", "latin-1"],
)
def test_a_file_that_is_not_utf8_text_says_so(tmp_path: Path, content: bytes, message: str) -> None:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (stacks / "a.yaml").write_bytes(content)
    with pytest.raises(InputError) as error:
        load_fleet(EXAMPLE_CATALOG, stacks)
    assert [str(p).replace(f"{tmp_path}/", "") for p in error.value.problems] == [f"stacks/a.yaml: {message}"]


def test_kubectls_spelling_of_a_version_is_accepted(tmp_path: Path) -> None:
    (plan,) = fleet_of(tmp_path, cluster(kubernetesVersion="v1.36.0")).clusters
    assert plan.definition.kubernetes_version == "1.36.0"
    assert problems_of(tmp_path, cluster(kubernetesVersion="2.0")) == [
        "stacks/test.yaml: kubernetesVersion: '2.0' is not a Kubernetes version like 1.34 or 1.34.2 (or kubectl's "
        "v1.34.2) (line 7, column 1)"
    ]


def test_a_version_newer_than_any_known_is_planned_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = fleet_of(tmp_path, cluster(kubernetesVersion="1.99"), cluster(name="known"))
    assert [str(w).replace(f"{tmp_path}/", "") for w in fleet.warnings] == [
        "stacks/test.yaml: kubernetesVersion: Kubernetes 1.99 is newer than any version this tool knows (1.37): the "
        "stack is planned by the rules of 1.37, and verify cannot check it (its schemas end at 1.37). If 1.99 is a "
        "typo, correct it; if it is real, read its release notes for changes to DRA before deploying, and update "
        "this tool (line 7, column 1)"
    ]
    old = cluster(kubernetesVersion="1.20", nodePools=[{**cluster()["nodePools"][0], "dra": False}])
    old["offerings"] = ["nvidia.com/gpu"]
    assert [str(w).replace(f"{tmp_path}/", "") for w in fleet_of(tmp_path, old).warnings] == [
        "stacks/test.yaml: kubernetesVersion: Kubernetes 1.20 is older than any version verify can check (1.25: "
        "its schemas start there). If 1.20 is a typo, correct it (line 7, column 1)"
    ]
    (tmp_path / "cli").mkdir()
    catalog, stacks = write_fleet(tmp_path / "cli", [cluster(kubernetesVersion="1.99")])
    assert main(["validate", "--catalog", str(catalog), "--stacks-dir", str(stacks)]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"warning: {stacks}/test.yaml: kubernetesVersion: Kubernetes 1.99 is newer than any"), (
        err
    )


def test_the_newest_known_version_is_kubernetes_validates_newest() -> None:
    # A lock update bringing newer schemas is the moment to learn that release's DRA rules (kubernetes_version.py).
    import kubernetes_validate

    assert str(kubernetes_validate.latest_version()).split(".")[:2] == ["1", str(NEWEST_KNOWN_MINOR)]
    assert str(kubernetes_validate.utils.all_versions()[0]).split(".")[:2] == ["1", str(OLDEST_VALIDATED_MINOR)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "name: a\naccess:\n  kubeconfig:\n\tpath: x\n",
            "line 4, column 1: invalid YAML after access.kubeconfig: a tab character indents this line; YAML "
            "indents with spaces only: replace the tab with spaces",
        ),
        (
            "name: a\nnodePools:\n\t- name: x\n",
            "line 3, column 1: invalid YAML after nodePools: a tab character indents this line",
        ),
        (
            "name: a\nbackend:\n  type: s3\n    bucket: b\n",
            "line 4, column 11: invalid YAML after backend.type: a `key: value` where none can start: is this line "
            "indented deeper than the key above it, or does a value hold ': ' unquoted (quote it)? (the parser: "
            "mapping values are not allowed",
        ),
        (
            "name: a\nnodePools:\n  - name: x\n    product: a100-40gb\n   gpusPerNode: 2\n",
            "line 5, column 4: invalid YAML after nodePools[0]: this line is indented differently from the list's "
            "`- ` items: align it with the item it belongs to, or start a new item with `- ` (the parser: ",
        ),
        (
            "name: a\naccess:\n  kubeconfig:\n    path: x\n   context: y\n",
            "line 5, column 4: invalid YAML after access.kubeconfig: this line is indented differently from the "
            "keys of the mapping it belongs to: align it with them (the parser: ",
        ),
    ],
    ids=["tab in a mapping", "tab before a list item", "indented too deep", "list item dedented", "key dedented"],
)
def test_a_tab_is_called_a_tab_and_an_indentation_mistake_names_where_the_parser_was(
    tmp_path: Path, text: str, message: str
) -> None:
    found = problems(tmp_path, text)
    assert len(found) == 1 and found[0].startswith(f"stacks/a.yaml: {message}"), found


def test_a_kubeconfig_without_a_context_says_why_it_needs_one(tmp_path: Path) -> None:
    found = problems_of(tmp_path, cluster(access={"kubeconfig": {"path": "~/.kube/config"}}))
    assert len(found) == 1, found
    assert found[0].startswith(
        "stacks/test.yaml: access.kubeconfig.context: required key is missing: name this cluster's context in the "
        "kubeconfig (`kubectl config get-contexts` lists them). Without one, Terraform would use whichever context "
        "is current when it runs"
    )


def test_a_mig_profile_the_product_lacks_is_not_called_mig_off(tmp_path: Path) -> None:
    """The pool has MIG on, with a profile its product lacks: its own problem says so, and the offering it cannot
    serve points at that, not at MIG being off."""
    pool = {
        "name": "sliced",
        "product": "a100-40gb",
        "gpusPerNode": 8,
        "mig": {"profile": "1g.20gb"},
        "provisioning": {"static": {"nodes": ["n"]}},
    }
    found = problems_of(tmp_path, cluster(offerings=["nvidia.com/a100-mig-1g.5gb"], nodePools=[pool]))
    assert any("nodePools[0].mig.profile: NVIDIA A100 40GB has no MIG profile '1g.20gb'" in f for f in found), (
        found
    )
    (coverage,) = [f for f in found if ": offerings[0]: " in f]
    assert "MIG off" not in coverage
    assert "pool sliced has no 1g.5gb devices (its MIG setting nodePools[0].mig is refused)" in coverage


def test_hints_suggest_the_fleets_own_names(tmp_path: Path) -> None:
    """After `names:` set the fork's own label domain, a hint's example taint is in that domain, not this
    project's."""
    catalog = EXAMPLE_CATALOG.parents[2] / "own-names" / "catalog" / "gpu-catalog.yaml"
    open_pool = {"name": "open", "product": "a100-40gb", "gpusPerNode": 8, "provisioning": {"provisioned": {}}}
    queue = {"queues": [{"name": "training", "pools": ["open"], "namespaces": ["ml"]}]}
    found = problems_of(
        tmp_path, cluster(offerings=["nvidia.com/a100"], nodePools=[open_pool], kueue=queue), catalog=catalog
    )
    (hint,) = [f for f in found if "kueue.queues[0].pools[0]" in f]
    assert "e.g. gpu.acme.example/reserved=training:NoSchedule" in hint and "themelio" not in hint
