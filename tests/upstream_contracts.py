"""Custom resources judged as the API server judges them, against the consumers' real CRDs in
../shared/reference/upstream (see its README): read, never copied here.

For an object and the CRD of its kind, as kube-apiserver's apiextensions does on create:
1. the served version named by `apiVersion` is looked up, and the structural schema's `default`s are applied
   to the fields that are missing (defaulting runs before validation);
2. the object is validated against the version's `openAPIV3Schema` with jsonschema (Draft 7, as structural
   schemas allow), with every object that lists `properties` closed (`additionalProperties: false` unless
   the schema says otherwise or preserves unknown fields): the API server would prune an unknown field
   silently, so one here is a bug of ours;
3. every `x-kubernetes-validations` rule is evaluated with cel-python on the value it sits on (`self`),
   except transition rules (those reading `oldSelf`, which only run on update); Kubernetes' `find` (its regex
   library) is provided. A rule that cannot be compiled or evaluated is a failure, never a pass;
4. list types: `x-kubernetes-list-type: map` items are unique by their `x-kubernetes-list-map-keys`, `set`
   items unique;
5. `metadata.name` is a DNS subdomain, and a namespaced kind has a namespace that is a DNS label.

The consumers' webhook and agent rules that no schema holds are in tests/test_upstream_contracts.py.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import jsonschema  # type: ignore[import-untyped]  # no stubs in the locked environment
import yaml
from celpy import celtypes
from celpy.adapter import json_to_cel

from tests.requirements import shared_path
from themelio_gpu.k8s import names as k8s_names

UPSTREAM = ("reference", "upstream")


def upstream_file(name: str) -> Path:
    """A file of ../shared/reference/upstream; skips (fails in CI) without ../shared."""
    return shared_path(*UPSTREAM, name)


@cache
def _crd(file: str) -> dict[str, Any]:
    documents = [d for d in yaml.safe_load_all(upstream_file(file).read_text(encoding="utf-8")) if d]
    (crd,) = [d for d in documents if d.get("kind") == "CustomResourceDefinition"]
    return dict(crd)


def _closed(schema: Any) -> Any:
    """Every object schema with `properties` refuses other fields (see the module docstring)."""
    if isinstance(schema, dict):
        schema = {k: _closed(v) for k, v in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
    elif isinstance(schema, list):
        schema = [_closed(v) for v in schema]
    return schema


@cache
def _version(file: str, api_version: str) -> tuple[dict[str, Any], jsonschema.Draft7Validator, str]:
    crd = _crd(file)
    group, _, version = api_version.rpartition("/")
    if group != crd["spec"]["group"]:
        raise AssertionError(f"{file} defines the group {crd['spec']['group']}, not {group}")
    served = {v["name"]: v for v in crd["spec"]["versions"] if v.get("served")}
    if version not in served:
        raise AssertionError(f"{file} serves {', '.join(served)}, not {version}")
    schema = served[version]["schema"]["openAPIV3Schema"]
    closed = _closed(schema)
    jsonschema.Draft7Validator.check_schema(closed)
    return schema, jsonschema.Draft7Validator(closed), crd["spec"]["scope"]


def _with_defaults(schema: Mapping[str, Any], value: Any) -> Any:
    """The value with the schema's defaults set on missing fields, as the API server decodes it."""
    if isinstance(value, dict):
        value = dict(value)
        properties = schema.get("properties") or {}
        for key, sub in properties.items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                value[key] = _with_defaults(sub, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        value = [_with_defaults(schema["items"], item) for item in value]
    return value


def _find(text: celtypes.StringType, pattern: celtypes.StringType) -> celtypes.StringType:
    """Kubernetes' CEL regex library: the first match of the pattern, or ''."""
    match = re.search(str(pattern), str(text))
    return celtypes.StringType(match.group(0) if match else "")


_CEL = celpy.Environment()


@cache
def _program(rule: str) -> Any:
    return _CEL.program(_CEL.compile(rule), functions={"find": _find})


def _path(parts: Iterable[str | int]) -> str:
    """`spec.taints[0].value`, as the API server names a field."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "."


def _walk(
    schema: Mapping[str, Any], value: Any, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[str, Mapping[str, Any], Any]]:
    """(path, schema, value) for every value of the object that its schema describes."""
    yield _path(path), schema, value
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                yield from _walk(sub, item, (*path, key))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from _walk(schema["items"], item, (*path, index))


def _rule_errors(schema: Mapping[str, Any], value: Any, path: str) -> list[str]:
    errors = []
    for rule in schema.get("x-kubernetes-validations") or ():
        text = rule["rule"]
        if re.search(r"\boldSelf\b", text):
            continue  # a transition rule: evaluated on update only
        try:
            result = _program(text).evaluate({"self": json_to_cel(value)})
        except Exception as error:  # cel-python raises several types; each is a failure here
            errors.append(f"{path}: rule {text!r} cannot be evaluated: {error}")
            continue
        if result is not True and not (isinstance(result, celtypes.BoolType) and bool(result)):
            errors.append(f"{path}: {rule.get('message', 'rule failed')} ({text})")
    return errors


def _list_type_errors(schema: Mapping[str, Any], value: Any, path: str) -> list[str]:
    kind = schema.get("x-kubernetes-list-type")
    if not isinstance(value, list) or kind not in ("map", "set"):
        return []
    if kind == "set":
        seen = [yaml.safe_dump(v, sort_keys=True) for v in value]
        return [f"{path}: list-type set with a duplicate item"] if len(set(seen)) != len(seen) else []
    keys = schema.get("x-kubernetes-list-map-keys") or []
    items = schema.get("items") or {}
    defaults = {k: (items.get("properties") or {}).get(k, {}).get("default") for k in keys}
    identities = [tuple(v.get(k, defaults[k]) for k in keys) for v in value]
    duplicates = sorted({i for i in identities if identities.count(i) > 1}, key=str)
    return [f"{path}: list-type map keyed on {keys} has the key {d} twice" for d in duplicates]


def crd_errors(file: str, obj: Mapping[str, Any]) -> list[str]:
    """Everything the API server would refuse in `obj` against the CRD in `file` (empty: it is accepted)."""
    schema, validator, scope = _version(file, str(obj.get("apiVersion", "")))
    value = _with_defaults(schema, obj)
    errors = [f"{_path(e.absolute_path)}: {e.message}" for e in validator.iter_errors(value)]
    for path, sub, item in _walk(schema, value):
        errors += _rule_errors(sub, item, path)
        errors += _list_type_errors(sub, item, path)
    metadata = obj.get("metadata") or {}
    errors += [f"metadata.name: {m}" for m in k8s_names.dns1123_subdomain(str(metadata.get("name", "")))]
    if scope == "Namespaced":
        errors += [f"metadata.namespace: {m}" for m in k8s_names.dns1123_label(str(metadata.get("namespace", "")))]
    elif "namespace" in metadata:
        errors.append("metadata.namespace: the kind is cluster-scoped")
    return errors
