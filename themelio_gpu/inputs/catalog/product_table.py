"""The catalog's product table: the built-in products, plus and corrected by the catalog's `products:`.

Every product lookup (offerings, capabilities, node pools) goes through this merged table. A key that is
not built in needs every fact; a built-in key may give only the facts it corrects (the catalog wins, key by
key). The merged products are checked by the same rules as the built-in table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from themelio_gpu.inputs.catalog.model import Product
from themelio_gpu.inputs.catalog.products import (
    PRODUCTS,
    GpuProduct,
    canonical_mig_profile,
    product_problems,
    table_clashes,
)
from themelio_gpu.inputs.problems import Problems

# What selectors and placement cannot do without. Unknown architecture or compute capability: the product
# meets no capability that tests them (coverage says so); the display name defaults to the key.
_REQUIRED_FOR_NEW = ("productNames", "memoryGiB")


def _profiles(values: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType({canonical_mig_profile(p): n for p, n in values.items()})


def _entry_fields(entry: Product) -> dict[str, Any]:
    """The GpuProduct fields an entry sets (profiles in the driver's spelling: `.me` becomes `+me`)."""
    fields: dict[str, Any] = {}
    if entry.display_name is not None:
        fields["display_name"] = entry.display_name
    if entry.product_names is not None:
        fields["product_names"] = entry.product_names
    if entry.memory_gib is not None:
        fields["memory_gib"] = entry.memory_gib
    if entry.architecture is not None:
        fields["architecture"] = entry.architecture
    if entry.compute_capability is not None:
        fields["compute_capability"] = entry.compute_capability
    if entry.pci_device_ids is not None:
        fields["pci_device_ids"] = tuple(_pci_id(i) for i in entry.pci_device_ids)
    if entry.mig_profiles is not None:
        fields["mig_profiles"] = _profiles(entry.mig_profiles)
    if entry.mig_layouts is not None:
        fields["mig_layouts"] = MappingProxyType({n: _profiles(v) for n, v in entry.mig_layouts.items()})
    return fields


def _pci_id(text: str) -> str:
    """`0x2bb510de` -> `0x2BB510DE`, the spelling mig-parted's device filters use."""
    return "0x" + text[2:].upper() if text[:2].lower() == "0x" else text


def merged_products(entries: Mapping[str, Product], file: str, problems: Problems) -> Mapping[str, GpuProduct]:
    """The built-in table with the catalog's products merged in; problems name the file and line."""
    table = dict(PRODUCTS)
    for key, entry in entries.items():
        where = ("products", key)
        fields = _entry_fields(entry)
        built_in = PRODUCTS.get(key)
        if built_in is None:
            missing = [name for name in _REQUIRED_FOR_NEW if getattr(entry, _snake(name)) is None]
            if missing:
                problems.add(
                    file,
                    where,
                    f"{key} is not a built-in product ({', '.join(PRODUCTS)}), so it needs {', '.join(missing)}",
                )
                continue
            defaults = {"display_name": key, "architecture": "", "compute_capability": "", "pci_device_ids": ()}
            product = GpuProduct(key=key, **{**defaults, **fields})
        else:
            product = dataclasses.replace(built_in, **fields)
        if built_in is not None and entry.mig_profiles is not None and entry.mig_layouts is None:
            # New profiles without new layouts: keep the built-in layouts that still fit them.
            kept = {n: v for n, v in built_in.mig_layouts.items() if set(v) <= set(product.mig_profiles)}
            product = dataclasses.replace(product, mig_layouts=MappingProxyType(kept))
        found = product_problems(product)
        for path, message in found:
            problems.add(file, (*where, *path), message)
        if not found:
            table[key] = product
    for key, other, field, value in table_clashes(table):
        # Two built-ins never clash (a test checks it): report the clash on the catalog's own entry.
        mine, theirs = (key, other) if key in entries else (other, key)
        problems.add(file, ("products", mine, field), f"{value!r} is also in {field} of product {theirs}")
    return MappingProxyType(table)


def _snake(alias: str) -> str:
    return {"productNames": "product_names", "memoryGiB": "memory_gib"}.get(alias, alias)
