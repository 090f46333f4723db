"""The catalog file loaded: YAML, secrets and the model, every offering resolved, the catalog-wide rules.

Apart from the types (catalog.py) and one offering's rules (offerings.py): what is checked here spans
offerings, each name, class, Waldur component and Kubeflow label identifying one, and which offerings
can take the same devices.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import MappingProxyType

from themelio_gpu.inputs.catalog.catalog import Catalog, ResolvedOffering
from themelio_gpu.inputs.catalog.model import CatalogFile, Lifecycle, ServedBy
from themelio_gpu.inputs.catalog.names import check_names
from themelio_gpu.inputs.catalog.notebooks import check_notebook_option
from themelio_gpu.inputs.catalog.offerings import resolve_offering
from themelio_gpu.inputs.catalog.product_table import merged_products
from themelio_gpu.inputs.chart_sources import chart_source_problem, folder_problem, is_local_folder, project_root
from themelio_gpu.inputs.problems import KeyPath, Location, Problems, format_location
from themelio_gpu.inputs.secrets import find_secrets
from themelio_gpu.inputs.validation import validate_model
from themelio_gpu.inputs.yaml_input import add_positions, display_path, load_yaml_document
from themelio_gpu.settings import CHART_MIRROR_ENV, chart_mirror_override


def load_catalog(path: Path, problems: Problems, shown_as: str | None = None) -> Catalog | None:
    name = shown_as or str(path)
    before = len(problems)
    document = load_yaml_document(path, problems, name)
    if document is None or document.data is None:
        if len(problems) == before:
            problems.add(name, (), "the catalog is empty")
        return None
    found = find_secrets(document.data, catalog=True)
    for finding in found:
        problems.add(name, finding.path, finding.message)
    model = validate_model(CatalogFile, document.data, name, problems, document=document)
    catalog = resolve_catalog(model, name, problems) if model is not None else None
    if catalog is not None:
        catalog = dataclasses.replace(
            catalog, chart_mirror=_chart_mirror(catalog.chart_mirror, path, name, problems)
        )
    problems.redact(f.secret for f in found if f.secret)
    add_positions(problems, {name: document})
    return catalog if not found else None


def catalog_chart_mirror(path: Path) -> str | None:
    """The catalog's `charts.mirror` (None without a catalog file): `charts fetch` pulls from it. A catalog with
    problems is refused with all of them (InputError), as every command that reads it does."""
    if not path.is_file():
        return None
    problems = Problems()
    catalog = load_catalog(path, problems, display_path(path))
    problems.raise_if_any()
    return catalog.chart_mirror if catalog is not None else None


def _chart_mirror(written: str | None, path: Path, file: str, problems: Problems) -> str | None:
    """The fleet's mirror: $THEMELIO_CHART_MIRROR when set, else the catalog's `charts.mirror`; a local chart
    folder is checked here, once for the fleet (each release's archive in it, where the release is planned)."""
    override = chart_mirror_override()
    where: tuple[str, Location] = (file, ("charts", "mirror"))
    if override is not None:
        where = ("environment", CHART_MIRROR_ENV)
        problem = chart_source_problem(override, secrets_checked=False)
        if problem is not None:
            problems.add(*where, problem)
            return None
    mirror = override or written
    if mirror is not None and is_local_folder(mirror):
        problem = folder_problem(project_root(path), mirror)
        if problem is not None:
            problems.add(*where, problem)
    return mirror


def resolve_catalog(model: CatalogFile, file: str, problems: Problems) -> Catalog | None:
    before = len(problems)
    check_names(model.names, file, problems)
    products = merged_products(model.products, file, problems)
    resolved: dict[str, ResolvedOffering] = {}
    for name, offering in model.offerings.items():
        item = resolve_offering(name, offering, file, problems, products, model.names)
        if item is not None:
            resolved[name] = item
    if not model.offerings:
        problems.add(file, ("offerings",), "the catalog has no offerings")
    _check_uniqueness(model, file, problems)
    resolved = _with_overlaps(resolved, file, problems)
    if len(problems) > before:
        return None
    return Catalog(
        file=file,
        offerings=MappingProxyType(dict(sorted(resolved.items()))),
        products=products,
        names=model.names,
        chart_mirror=model.charts.mirror,
    )


def _with_overlaps(
    offerings: dict[str, ResolvedOffering], file: str, problems: Problems
) -> dict[str, ResolvedOffering]:
    """Which offerings can take the same devices; a capability offering must allow it explicitly.

    Two product offerings of one product are not checked here (`match` finds them on real devices), and the
    chart-served generic name shares with every whole-GPU offering by design.
    """
    result = {}
    for name, offering in offerings.items():
        mine = set(offering.takes)
        shared = tuple(sorted(o.name for o in offerings.values() if o.name != name and mine & set(o.takes)))
        if offering.capability is not None and not offering.overlaps_allowed:
            for other_name in shared:
                other = offerings[other_name]
                if other.is_generic:
                    continue
                common = ", ".join(str(k) for k in sorted(mine & set(other.takes)))
                problems.add(
                    file,
                    ("offerings", name, "capability"),
                    f"{name} overlaps {other_name}: both can take {common}. Requests for one would use "
                    f"devices the other counts on; set overlaps: allowed on {name} if that is intended "
                    "(README: Overlapping offerings and quotas), or narrow the capability",
                )
        result[name] = dataclasses.replace(offering, overlaps_with=shared)
    return result


def _check_uniqueness(model: CatalogFile, file: str, problems: Problems) -> None:
    """Names, classes, Waldur components and Kubeflow labels each identify one offering."""
    names: dict[str, str] = {}
    classes: dict[str, str] = {}
    components: dict[str, str] = {}
    ui_names: dict[str, str] = {}
    pod_config_ids: dict[str, str] = {}  # id -> the offering that has it

    def claim(table: dict[str, str], value: str, where: KeyPath, what: str) -> None:
        if value in table:
            problems.add(file, where, f"{what} {value!r} is already used by {table[value]}")
        else:
            table[value] = format_location(where)

    for name, offering in model.offerings.items():
        where = ("offerings", name)
        claim(names, name, where, "extended resource name")
        if offering.device_class and offering.served_by is not ServedBy.dra_driver_chart:
            claim(classes, offering.device_class, (*where, "deviceClass"), "DeviceClass")
        claim(
            components, offering.quota.waldur_component, (*where, "quota", "waldurComponent"), "Waldur component"
        )
        if offering.kubeflow and offering.lifecycle is Lifecycle.active:
            claim(ui_names, offering.kubeflow.ui_name, (*where, "kubeflow", "uiName"), "Kubeflow uiName")
            check_notebook_option(name, offering, pod_config_ids, file, where, problems)
        for index, alias in enumerate(offering.aliases):
            alias_where = (*where, "aliases", index)
            claim(names, alias.name, (*alias_where, "name"), "extended resource name")
            if alias.device_class and alias.served_by is not ServedBy.dra_driver_chart:
                claim(classes, alias.device_class, (*alias_where, "deviceClass"), "DeviceClass")
        if offering.replaced_by is not None and offering.replaced_by not in model.offerings:
            problems.add(
                file, (*where, "replacedBy"), f"no offering named {offering.replaced_by!r} in this catalog"
            )
