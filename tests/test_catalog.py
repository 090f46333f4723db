"""Catalog rules (issue: the GPU catalog), each with the message a user sees."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import EXAMPLE_CATALOG, FIXTURES
from themelio_gpu.inputs.catalog.catalog import Catalog
from themelio_gpu.inputs.catalog.loading import load_catalog
from themelio_gpu.inputs.catalog.products import PRODUCTS
from themelio_gpu.inputs.problems import Problems, format_location

A100: dict[str, Any] = {
    "deviceClass": "a100.gpu.themelio.io",
    "product": "a100-40gb",
    "displayName": "A100",
    "quota": {"waldurComponent": "gpu_a100"},
    "kubeflow": {"uiName": "A100"},
}


def offering(**overrides: Any) -> dict[str, Any]:
    item = copy.deepcopy(A100)
    item.update(overrides)
    return item


def load(
    tmp_path: Path, offerings: dict[str, Any] | None = None, text: str | None = None
) -> tuple[Catalog | None, list[str]]:
    path = tmp_path / "catalog.yaml"
    path.write_text(text if text is not None else yaml.safe_dump({"offerings": offerings}), encoding="utf-8")
    problems = Problems()
    catalog = load_catalog(path, problems, "catalog.yaml")
    return catalog, [str(p) for p in problems]


def test_example_catalog_is_valid() -> None:
    problems = Problems()
    catalog = load_catalog(EXAMPLE_CATALOG, problems)
    assert not problems, list(problems)
    assert catalog is not None
    assert set(catalog.offerings) >= {
        "nvidia.com/a10g",
        "nvidia.com/a100",
        "nvidia.com/h100",
        "nvidia.com/a100-mig-1g.5gb",
        "nvidia.com/a100-mig-3g.20gb",
        "nvidia.com/gpu",
    }
    legacy = {alias.name for o in catalog for alias in o.aliases}
    assert legacy == {"nvidia.com/mig-1g.5gb", "nvidia.com/mig-3g.20gb"}


def test_a_valid_offering_resolves_with_derived_facts(tmp_path: Path) -> None:
    catalog, problems = load(tmp_path, {"nvidia.com/a100": offering()})
    assert problems == []
    assert catalog is not None
    a100 = catalog.offerings["nvidia.com/a100"]
    assert a100.quota_key == "requests.nvidia.com/a100"
    assert dict(a100.node_selector) == {
        "accelerator": "nvidia-a100",
        "mig_enabled": "false",
        "nvidia.com/gpu": "true",
    }
    assert a100.selector.startswith("device.driver == 'gpu.nvidia.com' && ")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("a100", "'a100' needs a domain prefix such as 'nvidia.com/'"),
        ("nvidia.kubernetes.io/a100", "must not contain 'kubernetes.io/'"),
        ("requests.nvidia.com/a100", "must not start with 'requests.'"),
        ("nvidia.com/a/b", "has more than one '/'"),
        ("NVIDIA.com/a100", "domain of 'NVIDIA.com/a100'"),
        ("nvidia.com/" + "a" * 64, "must be 1 to 63 letters"),
        ("nvidia.com/-a100", "must be 1 to 63 letters"),
        ("nvidia.com/mig-1g.10gb+me", "spell a MIG profile like '1g.10gb+me' as '1g.10gb.me'"),
    ],
)
def test_extended_resource_names_follow_kubernetes_rules(tmp_path: Path, name: str, message: str) -> None:
    _, problems = load(tmp_path, {name: offering()})
    where = format_location(("offerings", name))
    assert any(f"catalog.yaml: {where}: " in p and message in p for p in problems), problems


def test_name_part_may_use_upper_case_and_underscores_like_kubernetes(tmp_path: Path) -> None:
    _, problems = load(tmp_path, {"nvidia.com/A100_big": offering()})
    assert problems == []


@pytest.mark.parametrize(
    ("device_class", "message"),
    [
        ("A100.gpu", "is not a DNS-1123 subdomain"),
        ("a" * 64, "is longer than 63 characters"),
        ("gpu.nvidia.com", "is created by the NVIDIA DRA driver chart itself"),
        ("mig.nvidia.com", "is created by the NVIDIA DRA driver chart itself"),
        ("compute-domain-daemon.nvidia.com", "is created by the NVIDIA DRA driver chart itself"),
    ],
)
def test_device_class_names(tmp_path: Path, device_class: str, message: str) -> None:
    _, problems = load(tmp_path, {"nvidia.com/a100": offering(deviceClass=device_class)})
    assert any('offerings["nvidia.com/a100"].deviceClass: ' in p and message in p for p in problems), problems


def test_names_and_classes_are_unique_across_offerings_and_aliases(tmp_path: Path) -> None:
    _, problems = load(
        tmp_path,
        {
            "nvidia.com/a100": offering(
                aliases=[{"name": "nvidia.com/old", "deviceClass": "a100.gpu.themelio.io"}]
            ),
            "nvidia.com/a100-b": offering(
                quota={"waldurComponent": "gpu_b"},
                kubeflow={"uiName": "A100"},
                aliases=[{"name": "nvidia.com/old", "deviceClass": "old.gpu.themelio.io"}],
            ),
        },
    )
    text = "\n".join(problems)
    assert (
        "DeviceClass 'a100.gpu.themelio.io' is already used by offerings[\"nvidia.com/a100\"].deviceClass" in text
    )
    assert "extended resource name 'nvidia.com/old' is already used by" in text
    assert "Kubeflow uiName 'A100' is already used by" in text


def test_duplicate_offering_keys_are_caught_not_silently_merged(tmp_path: Path) -> None:
    text = "offerings:\n  nvidia.com/a100: {}\n  nvidia.com/a100: {}\n"
    _, problems = load(tmp_path, text=text)
    assert problems == ["catalog.yaml: line 3, column 3: invalid YAML: duplicate key 'nvidia.com/a100' (line 3)"]


def test_nvidia_gpu_must_say_how_it_is_served(tmp_path: Path) -> None:
    _, problems = load(tmp_path, {"nvidia.com/gpu": offering(deviceClass="legacy.gpu.themelio.io")})
    assert any("say how nvidia.com/gpu is served" in p and "servedBy: dra-driver-chart" in p for p in problems)


def test_nvidia_gpu_as_an_alias_must_say_how_it_is_served(tmp_path: Path) -> None:
    _, problems = load(
        tmp_path,
        {"nvidia.com/a100": offering(aliases=[{"name": "nvidia.com/gpu", "deviceClass": "x.themelio.io"}])},
    )
    assert any('offerings["nvidia.com/a100"].aliases[0]: say how nvidia.com/gpu is served' in p for p in problems)


def test_nvidia_gpu_deliberately_served_by_the_catalog_is_accepted(tmp_path: Path) -> None:
    catalog, problems = load(
        tmp_path, {"nvidia.com/gpu": offering(deviceClass="legacy.gpu.themelio.io", servedBy="catalog")}
    )
    assert problems == []
    assert catalog is not None and catalog.offerings["nvidia.com/gpu"].device_class == "legacy.gpu.themelio.io"


def test_chart_serves_only_nvidia_gpu_and_only_whole_gpus(tmp_path: Path) -> None:
    _, problems = load(
        tmp_path,
        {
            "nvidia.com/a100": offering(servedBy="dra-driver-chart"),
            "nvidia.com/gpu": offering(servedBy="dra-driver-chart", deviceClass=None, migProfile="1g.5gb"),
        },
    )
    text = "\n".join(problems)
    assert "the DRA driver chart serves only nvidia.com/gpu; nvidia.com/a100 needs servedBy: catalog" in text
    assert "a product cannot narrow it" in text
    assert "the chart's class serves whole GPUs only" in text


@pytest.mark.parametrize(
    ("changes", "location", "message"),
    [
        ({"product": "a200"}, "product", "unknown product 'a200' (did you mean b200?); known: a10g, l4"),
        ({"product": "a10g", "migProfile": "1g.5gb"}, "migProfile", "NVIDIA A10G 24GB has no MIG support"),
        ({"migProfile": "1g.10gb+me"}, "migProfile", "has no MIG profile '1g.10gb+me'; valid: 1g.5gb, 1g.5gb+me"),
        ({"product": None}, "product", "required: one of a10g"),
        ({"deviceClass": None}, "deviceClass", "required key is missing"),
        ({"quota": {"waldurComponent": "GPU-A100"}}, "quota.waldurComponent", "must be lower-case letters"),
        ({"constraints": {"minMemory": "40GB"}}, "constraints.minMemory", "is not a quantity like 40Gi"),
        ({"constraints": {"minDriverVersion": "r570"}}, "constraints.minDriverVersion", "is not a version"),
        ({"replacedBy": "nvidia.com/h100"}, "replacedBy", "only a deprecated offering can be replaced"),
        ({"placement": {"nodeSelector": {"accelerator": "x" * 64}}}, "placement.nodeSelector", "longer than 63"),
        ({"lifecycle": "retired"}, "lifecycle", "must be one of active, deprecated, not the text 'retired'"),
        ({"qouta": {"waldurComponent": "x"}}, "qouta", "unknown key"),
        ({"quota": {"waldurComponent": "gpu_a100", "units": "GPU"}}, "quota.units", "unknown key"),
        ({"displayName": 5}, "displayName", 'must be text: YAML reads the unquoted 5 as a number; quote it: "5"'),
    ],
)
def test_offering_rules(tmp_path: Path, changes: dict[str, Any], location: str, message: str) -> None:
    item = offering(**changes)
    for key in [k for k, v in changes.items() if v is None]:
        del item[key]
    _, problems = load(tmp_path, {"nvidia.com/a100": item})
    assert any(
        p.startswith(f'catalog.yaml: offerings["nvidia.com/a100"].{location}: ') and message in p for p in problems
    ), problems


def test_every_problem_is_reported_in_one_run(tmp_path: Path) -> None:
    _, problems = load(
        tmp_path,
        {
            "nvidia.com/a100": offering(product="nope"),
            "bad name": offering(deviceClass="b.themelio.io", quota={"waldurComponent": "b"}, kubeflow=None),
            "nvidia.com/a10g": offering(product="a10g", migProfile="1g.5gb", deviceClass="c.themelio.io"),
        },
    )
    assert len(problems) >= 3
    assert {p.split(": ")[1] for p in problems} >= {
        'offerings["nvidia.com/a100"].product',
        'offerings["bad name"]',
        'offerings["nvidia.com/a10g"].migProfile',
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "catalog.yaml: the catalog is empty"),
        ("offerings: [\n", "catalog.yaml: line 2, column 1: invalid YAML"),
        ("offerings: {}\n", "catalog.yaml: offerings: the catalog has no offerings"),
        ("offering: {}\n", "catalog.yaml: offering: unknown key"),
        ("- a\n", "catalog.yaml: the file must be a mapping (key: value lines), not a list"),
    ],
)
def test_malformed_files(tmp_path: Path, text: str, message: str) -> None:
    _, problems = load(tmp_path, text=text)
    assert any(p.startswith(message) for p in problems), problems


def test_missing_catalog_file(tmp_path: Path) -> None:
    problems = Problems()
    assert load_catalog(tmp_path / "nope.yaml", problems, "nope.yaml") is None
    assert [str(p) for p in problems] == ["nope.yaml: file not found"]


def test_product_table_covers_the_required_gpus() -> None:
    assert {"a10g", "l4", "l40s", "a30", "a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb"} <= set(PRODUCTS)
    for key in ("a10g", "l4", "l40s"):
        assert not PRODUCTS[key].supports_mig
    # 1g.10gb is a different slice on A100-40GB (4 per GPU) than on 80GB parts (7 per GPU).
    assert PRODUCTS["a100-40gb"].mig_profiles["1g.10gb"] == 4
    assert PRODUCTS["a100-80gb"].mig_profiles["1g.10gb"] == 7


def test_offerings_whose_podconfig_ids_collide_are_refused_naming_both() -> None:
    """nvidia.com/gpu.48gb and nvidia.com/gpu-48gb both become gpu_nvidia_com_gpu_48gb; the WorkspaceKind
    list is keyed on id, so the API server would refuse the pair (tests/fixtures/refused/)."""
    problems = Problems()
    path = FIXTURES / "refused" / "podconfig-id-collision.yaml"
    assert load_catalog(path, problems, "catalog.yaml") is None
    (problem,) = [str(p) for p in problems]
    assert problem.startswith(
        'catalog.yaml: offerings["nvidia.com/gpu.48gb"].kubeflow: nvidia.com/gpu-48gb and nvidia.com/gpu.48gb '
        "would both be the Kubeflow Notebooks 2.0 podConfig option 'gpu_nvidia_com_gpu_48gb'"
    ), problem
    assert "(line 18, column 5)" in problem


def test_offerings_out_of_the_notebook_form_need_no_podconfig_id_of_their_own(tmp_path: Path) -> None:
    # Only active offerings with a kubeflow key become podConfig options: the others may share an id.
    _, problems = load(
        tmp_path,
        {
            "nvidia.com/a100": offering(),
            "nvidia.com/A100": offering(
                deviceClass="a100-old.gpu.themelio.io", quota={"waldurComponent": "old"}, lifecycle="deprecated"
            ),
        },
    )
    assert problems == []


def test_a_podconfig_id_longer_than_the_crd_allows_is_refused(tmp_path: Path) -> None:
    name = "a" * 60 + "." + "b" * 60 + "." + "c" * 60 + "." + "d" * 60 + ".example/" + "g" * 40
    _, problems = load(tmp_path, {name: offering()})
    assert any("the WorkspaceKind CRD takes at most 256" in p for p in problems), problems


@pytest.mark.parametrize(
    ("overrides", "location", "message"),
    [
        ({"kubeflow": {"uiName": "A"}}, "kubeflow.uiName", "takes with 2 to 128 characters (it has 1)"),
        ({"kubeflow": {"uiName": "A" * 129}}, "kubeflow.uiName", "takes with 2 to 128 characters (it has 129)"),
        ({"description": "d" * 1025}, "description", "at most 1024 characters (it has 1025)"),
    ],
)
def test_a_notebook_option_the_workspacekind_crd_would_refuse_is_refused(
    tmp_path: Path, overrides: dict[str, Any], location: str, message: str
) -> None:
    _, problems = load(tmp_path, {"nvidia.com/a100": offering(**overrides)})
    assert any(f'offerings["nvidia.com/a100"].{location}: ' in p and message in p for p in problems), problems
