"""Text from the catalog and the cluster definitions, written as Terraform literals.

Terraform reads every string of a resource, provider or output as a template (JSON syntax too): `${`
starts a reference and `%{` a directive, so a description, an exec argument or a Helm value holding one
breaks `terraform validate` or silently changes meaning. Doubling the first character (`$${`, `%%{`) is
Terraform's escape for both. Backend blocks are not templates: their values are written as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar, cast

T = TypeVar("T")


def literal(value: T) -> T:
    """`value` with every string in it (map keys included) escaped; lists and tuples come back as lists."""
    return cast(T, _escape(value))


def _escape(value: object) -> object:
    if isinstance(value, str):
        return value.replace("${", "$${").replace("%{", "%%{")
    if isinstance(value, Mapping):
        return {_escape(k): _escape(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_escape(v) for v in value]
    return value
