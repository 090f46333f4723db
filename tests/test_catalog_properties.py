"""Property-based: any catalog, valid or malformed, yields a catalog or clear problems, never a traceback."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import PYDANTIC_WORDS
from themelio_gpu.inputs.catalog.loading import resolve_catalog
from themelio_gpu.inputs.catalog.model import CatalogFile
from themelio_gpu.inputs.catalog.products import PRODUCTS
from themelio_gpu.inputs.problems import Problems, format_location
from themelio_gpu.inputs.validation import validate_model
from themelio_gpu.inputs.yaml_input import parse_yaml_text

FILE = "catalog.yaml"
scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20))
json_like = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
names = st.one_of(
    st.text(max_size=70),
    st.from_regex(r"[a-z]{1,8}\.(com|io)/[a-zA-Z0-9._+-]{0,70}", fullmatch=True),
    st.sampled_from(["nvidia.com/gpu", "nvidia.com/a100", "requests.nvidia.com/x", "a.kubernetes.io/x"]),
)
offering_fields = st.fixed_dictionaries(
    {},
    optional={
        "deviceClass": st.one_of(
            st.text(max_size=70), st.sampled_from(["gpu.nvidia.com", "x.themelio.io"]), json_like
        ),
        "servedBy": st.one_of(st.sampled_from(["catalog", "dra-driver-chart", "other"]), json_like),
        "product": st.one_of(st.sampled_from([*PRODUCTS, "nope"]), json_like),
        "migProfile": st.one_of(st.sampled_from(["1g.5gb", "1g.10gb+me", "9g.1gb"]), json_like),
        "displayName": st.one_of(st.text(max_size=20), json_like),
        "quota": st.one_of(
            st.fixed_dictionaries(
                {"waldurComponent": st.one_of(st.from_regex(r"[a-z_]{1,10}", fullmatch=True), st.text())}
            ),
            json_like,
        ),
        "kubeflow": st.one_of(st.fixed_dictionaries({"uiName": st.text(max_size=10)}), json_like),
        "lifecycle": st.one_of(st.sampled_from(["active", "deprecated"]), json_like),
        "aliases": st.one_of(
            st.lists(
                st.fixed_dictionaries({"name": names}, optional={"deviceClass": st.text(max_size=20)}), max_size=3
            ),
            json_like,
        ),
        "constraints": st.one_of(
            st.fixed_dictionaries(
                {}, optional={"minMemory": st.text(max_size=8), "minDriverVersion": st.text(max_size=8)}
            ),
            json_like,
        ),
        "capability": st.one_of(
            st.fixed_dictionaries(
                {},
                optional={
                    "minMemory": st.one_of(st.sampled_from(["48Gi", "1Ti", "-1Gi", "40GB"]), json_like),
                    "architectures": st.one_of(
                        st.lists(st.sampled_from(["Hopper", "Ampere", "hopper"])), json_like
                    ),
                    "minComputeCapability": st.one_of(st.sampled_from(["8.0", 9.0, "x"]), json_like),
                    "minDriverVersion": st.one_of(st.sampled_from(["570", "580.95.5", "r5"]), json_like),
                    "products": st.one_of(st.lists(st.sampled_from([*PRODUCTS, "nope"]), max_size=3), json_like),
                    "type": st.one_of(st.sampled_from(["gpu", "mig", "vgpu"]), json_like),
                },
            ),
            json_like,
        ),
        "overlaps": st.one_of(st.just("allowed"), json_like),
        "typo": json_like,
    },
)
profile_names = st.one_of(
    st.sampled_from(["1g.10gb", "1g.10gb.me", "7g.80gb", "3g.40gb", "2g.20gb+me", "9g.1gb"]), st.text(max_size=10)
)
product_fields = st.fixed_dictionaries(
    {},
    optional={
        "displayName": st.one_of(st.text(max_size=10), json_like),
        "productNames": st.one_of(
            st.lists(st.sampled_from(["NVIDIA X", "NVIDIA A10G", ""]), max_size=2), json_like
        ),
        "memoryGiB": st.one_of(st.floats(min_value=-1, max_value=300, allow_nan=False), json_like),
        "architecture": st.one_of(st.sampled_from(["Hopper", "Rubin", ""]), json_like),
        "computeCapability": st.one_of(st.sampled_from(["9.0", 12.0, "x"]), json_like),
        "pciDeviceIds": st.one_of(
            st.lists(st.sampled_from(["0x233010DE", "0x12345678", "x"]), max_size=2), json_like
        ),
        "migProfiles": st.one_of(st.dictionaries(profile_names, st.integers(-1, 9), max_size=4), json_like),
        "migLayouts": st.one_of(
            st.dictionaries(
                st.sampled_from(["all-balanced", "all-1g.10gb", "mine"]),
                st.dictionaries(profile_names, st.integers(-1, 9), max_size=3),
                max_size=2,
            ),
            json_like,
        ),
    },
)
catalogs = st.one_of(
    json_like,
    st.fixed_dictionaries(
        {"offerings": st.dictionaries(names, st.one_of(offering_fields, json_like), max_size=5)},
        optional={
            "products": st.dictionaries(
                st.one_of(st.sampled_from(["b300", "h100-80gb", "Bad Key"]), st.text(max_size=8)),
                st.one_of(product_fields, json_like),
                max_size=3,
            )
        },
    ),
)


def check(data: Any) -> None:
    problems = Problems()
    model = validate_model(CatalogFile, data, FILE, problems)
    catalog = resolve_catalog(model, FILE, problems) if model is not None else None
    if catalog is None:
        assert problems, "a rejected catalog must say why"
    else:
        assert not problems
    for problem in problems:
        assert problem.file == FILE
        assert problem.message.strip()
        assert "Traceback" not in problem.message
        # A message may quote the input; pydantic's own words are what the input itself does not say.
        said = [word for word in PYDANTIC_WORDS if word in problem.message and word not in repr(data)]
        assert not said, problem.message


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(catalogs)
def test_any_structure_gives_a_catalog_or_clear_problems(data: Any) -> None:
    check(data)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_text_gives_yaml_or_a_located_syntax_problem(text: str) -> None:
    problems = Problems()
    data = parse_yaml_text(text, FILE, problems)
    if problems:
        assert data is None
        assert all(p.message.startswith("invalid YAML") for p in problems)
    else:
        check(data)


VALID = {
    "offerings": {
        "nvidia.com/a100": {
            "deviceClass": "a100.gpu.themelio.io",
            "product": "a100-40gb",
            "displayName": "A100",
            "quota": {"waldurComponent": "gpu_a100"},
        }
    }
}


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["deviceClass", "product", "displayName", "quota"]), json_like)
def test_one_corrupted_field_is_reported_at_that_field(field: str, value: Any) -> None:
    data = copy.deepcopy(VALID)
    data["offerings"]["nvidia.com/a100"][field] = value
    problems = Problems()
    model = validate_model(CatalogFile, data, FILE, problems)
    catalog = resolve_catalog(model, FILE, problems) if model is not None else None
    if catalog is None:
        assert any(field in format_location(p.location) for p in problems), [str(p) for p in problems]
