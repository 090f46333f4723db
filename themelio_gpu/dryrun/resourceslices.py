"""Load ResourceSlices (what `kubectl get resourceslices -o json|yaml` prints) into `Device` records.

Accepted input: a JSON or YAML `List` (`kind: List` or `ResourceSliceList`) with `items`, a single
ResourceSlice, a YAML stream of them (`---`), or a bare YAML/JSON sequence of them.  API versions
`resource.k8s.io/v1` and `v1beta2` share the device shape; `v1beta1` nests attributes and capacity
under `basic:` and is accepted too.

Like the scheduler, only the newest `pool.generation` of each (driver, pool) is used: slices of an
older generation that are still listed during a driver update are dropped.

Bad input raises `ResourceSliceError` listing every problem as `file: slice: field: message`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from types import MappingProxyType

import yaml

from themelio_gpu.dryrun.cel_kubernetes import AttrValue
from themelio_gpu.k8s.quantity import Quantity, QuantityError, parse_quantity
from themelio_gpu.k8s.semver import SemverError, parse_semver

__all__ = [
    "ALL_NODES",
    "SUPPORTED_API_VERSIONS",
    "Device",
    "ResourceSliceError",
    "load_resourceslices",
    "parse_resourceslices",
]

SUPPORTED_API_VERSIONS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1beta1")
ALL_NODES = "<all nodes>"

# Attribute/capacity names: a C identifier, optionally prefixed by "<domain>/" (QualifiedName).
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_VALUE_TYPES = ("int", "bool", "string", "version")


@dataclass(frozen=True)
class Device:
    """One device of a ResourceSlice, as a DRA selector sees it.

    `attributes` and `capacity` are keyed by domain, then id: unqualified names published by the
    driver live under the driver's own domain, `resource.kubernetes.io/pciBusID` under
    `resource.kubernetes.io`.  Identity (hash) is (node, driver, pool, name).
    """

    node: str
    driver: str
    pool: str
    name: str
    attributes: Mapping[str, Mapping[str, AttrValue]] = field(hash=False)
    capacity: Mapping[str, Mapping[str, Quantity]] = field(hash=False)

    def attribute(self, name: str) -> AttrValue | None:
        """An attribute by its ResourceSlice name (`productName` or `domain/id`), or None."""
        domain, ident = _split_qualified(name, self.driver)
        return self.attributes.get(domain, {}).get(ident)

    def capacity_of(self, name: str) -> Quantity | None:
        domain, ident = _split_qualified(name, self.driver)
        return self.capacity.get(domain, {}).get(ident)

    def _string_attribute(self, name: str) -> str | None:
        value = self.attribute(name)
        return value if isinstance(value, str) else None

    @property
    def product_name(self) -> str | None:
        return self._string_attribute("productName")

    @property
    def device_type(self) -> str | None:
        """The NVIDIA driver's `type` attribute: gpu, mig, vfio, channel, daemon."""
        return self._string_attribute("type")

    @property
    def profile(self) -> str | None:
        """The MIG profile (`1g.5gb`, `1g.10gb+me`), None for whole GPUs."""
        return self._string_attribute("profile")


class ResourceSliceError(ValueError):
    """The input is not a usable ResourceSlice dump; `problems` has one line per issue."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(problems))


def _split_qualified(name: str, driver: str) -> tuple[str, str]:
    domain, slash, ident = name.partition("/")
    return (domain, ident) if slash else (driver, name)


def _type_label(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list", dict: "mapping"}.get(
        type(value), type(value).__name__
    )


class _Problems:
    """Collects problems so one run reports everything wrong in the file."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.items: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.items.append(f"{self.source}: {where}: {message}" if where else f"{self.source}: {message}")


@dataclass
class _Slice:
    label: str
    driver: str
    pool: str
    generation: int
    devices: list[Device]


def load_resourceslices(path: str | PathLike[str]) -> list[Device]:
    """Read a file written by `kubectl get resourceslices -o json` / `-o yaml` (or a single slice)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ResourceSliceError([f"{source}: cannot read: {error}"]) from None
    return parse_resourceslices(text, source)


def parse_resourceslices(text: str, source: str = "<input>") -> list[Device]:
    """Parse ResourceSlice JSON or YAML text; `source` names the input in error messages."""
    problems = _Problems(source)
    documents = _documents(text, problems)
    slices: list[_Slice] = []
    for document, where in documents:
        for raw, label in _slice_objects(document, where, problems):
            parsed = _parse_slice(raw, label, problems)
            if parsed is not None:
                slices.append(parsed)
    if problems.items:
        raise ResourceSliceError(problems.items)
    devices = _newest_generation(slices, problems)
    if problems.items:
        raise ResourceSliceError(problems.items)
    return devices


def _documents(text: str, problems: _Problems) -> list[tuple[object, str]]:
    if text.lstrip().startswith(("{", "[")):
        try:
            return [(json.loads(text), "")]
        except json.JSONDecodeError:
            pass  # YAML flow style also starts with { or [: let the YAML parser decide.
        except RecursionError:
            problems.add("", "not valid JSON: nested too deeply")
            raise ResourceSliceError(problems.items) from None
    try:
        loaded = list(yaml.safe_load_all(text))
    except RecursionError:
        problems.add("", "not valid YAML: nested too deeply")
        raise ResourceSliceError(problems.items) from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        problems.add("", f"not valid JSON or YAML{at}: {problem}")
        raise ResourceSliceError(problems.items) from None
    documents = [doc for doc in loaded if doc is not None]
    if not documents:
        problems.add("", "no ResourceSlice found (empty document)")
        raise ResourceSliceError(problems.items)
    if len(documents) == 1:
        return [(documents[0], "")]
    return [(doc, f"document {index + 1}") for index, doc in enumerate(documents)]


def _join(where: str, part: str) -> str:
    """`slice label: field.path`."""
    return f"{where}: {part}" if where else part


def _a(label: str) -> str:
    return f"an {label}" if label[:1] in ("a", "e", "i", "o", "u") else f"a {label}"


def _slice_objects(document: object, where: str, problems: _Problems) -> Iterator[tuple[dict[str, object], str]]:
    if isinstance(document, list):
        for index, item in enumerate(document):
            yield from _one_slice(item, _join(where, f"[{index}]"), problems)
        return
    if not isinstance(document, dict):
        problems.add(where, f"expected a ResourceSlice or a List, got {_a(_type_label(document))}")
        return
    kind = document.get("kind")
    if isinstance(kind, str) and kind.endswith("List"):
        items = document.get("items")
        if items is None:
            return  # `kubectl get` on an empty cluster prints a List without items
        if not isinstance(items, list):
            problems.add(_join(where, "items"), f"expected a list, got {_a(_type_label(items))}")
            return
        for index, item in enumerate(items):
            yield from _one_slice(item, _join(where, f"items[{index}]"), problems)
        return
    yield from _one_slice(document, where, problems)


def _one_slice(item: object, where: str, problems: _Problems) -> Iterator[tuple[dict[str, object], str]]:
    if not isinstance(item, dict):
        problems.add(where, f"expected a ResourceSlice mapping, got {_a(_type_label(item))}")
        return
    metadata = item.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    label = where
    if isinstance(name, str) and name:
        label = f"{where} ({name})" if where else f"ResourceSlice {name}"
    elif not where:
        label = "ResourceSlice"
    if item.get("kind") != "ResourceSlice":
        problems.add(label, f"kind is {item.get('kind')!r}, expected 'ResourceSlice' (or a List of them)")
        return
    yield item, label


def _parse_slice(raw: dict[str, object], label: str, problems: _Problems) -> _Slice | None:
    errors_before = len(problems.items)
    api_version = raw.get("apiVersion")
    if api_version not in SUPPORTED_API_VERSIONS:
        problems.add(
            _join(label, "apiVersion"),
            f"{api_version!r} is not supported (expected one of {', '.join(SUPPORTED_API_VERSIONS)})",
        )
        return None
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        problems.add(_join(label, "spec"), "missing or not a mapping")
        return None
    driver = spec.get("driver")
    if not isinstance(driver, str) or not driver:
        problems.add(_join(label, "spec.driver"), "missing or not a string")
        driver = ""
    pool = spec.get("pool")
    pool_name: object = None
    generation: object = 0
    if isinstance(pool, dict):
        pool_name = pool.get("name")
        generation = pool.get("generation", 0)
    if not isinstance(pool_name, str) or not pool_name:
        problems.add(_join(label, "spec.pool.name"), "missing or not a string")
    if not isinstance(generation, int) or isinstance(generation, bool):
        problems.add(
            _join(label, "spec.pool.generation"), f"expected an integer, got {_a(_type_label(generation))}"
        )
        generation = 0
    slice_node = _slice_node(spec, label, problems)

    devices_raw = spec.get("devices", [])
    if devices_raw is None:
        devices_raw = []
    if not isinstance(devices_raw, list):
        problems.add(_join(label, "spec.devices"), f"expected a list, got {_a(_type_label(devices_raw))}")
        devices_raw = []
    devices: list[Device] = []
    for index, raw_device in enumerate(devices_raw):
        where = _join(label, f"spec.devices[{index}]")
        device = _parse_device(
            raw_device, where, str(api_version), driver, str(pool_name or ""), slice_node, problems
        )
        if device is not None:
            devices.append(device)
    if len(problems.items) > errors_before:
        return None
    return _Slice(label, driver, str(pool_name), int(generation), devices)


def _slice_node(spec: dict[str, object], label: str, problems: _Problems) -> str | None:
    """The node the whole slice belongs to; None when each device names its own node."""
    chosen = [key for key in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(key)]
    if len(chosen) != 1:
        found = ", ".join(chosen) if chosen else "none"
        problems.add(
            _join(label, "spec"),
            f"exactly one of nodeName, nodeSelector, allNodes or perDeviceNodeSelection is required (found {found})",
        )
        return ""
    key = chosen[0]
    if key == "perDeviceNodeSelection":
        return None
    return _render_node(key, spec[key], _join(label, f"spec.{key}"), problems)


def _render_node(key: str, value: object, where: str, problems: _Problems) -> str:
    if key == "nodeName":
        if not isinstance(value, str):
            problems.add(where, f"expected a string, got {_a(_type_label(value))}")
            return ""
        return value
    if key == "allNodes":
        return ALL_NODES
    return _render_selector(value)


def _render_selector(selector: object) -> str:
    """A short, readable node selector: `<nodes: key In (a,b) | other Exists>`."""
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, dict) else None
    rendered: list[str] = []
    for term in terms if isinstance(terms, list) else []:
        parts: list[str] = []
        for group in ("matchExpressions", "matchFields"):
            expressions = term.get(group) if isinstance(term, dict) else None
            for expression in expressions if isinstance(expressions, list) else []:
                if not isinstance(expression, dict):
                    continue
                values = expression.get("values") or []
                shown = f" ({','.join(map(str, values))})" if isinstance(values, list) and values else ""
                parts.append(f"{expression.get('key')} {expression.get('operator')}{shown}")
        rendered.append(", ".join(parts) or "any")
    return f"<nodes: {' | '.join(rendered) or 'none'}>"


def _parse_device(
    raw: object,
    where: str,
    api_version: str,
    driver: str,
    pool: str,
    slice_node: str | None,
    problems: _Problems,
) -> Device | None:
    if not isinstance(raw, dict):
        problems.add(where, f"expected a device mapping, got {_a(_type_label(raw))}")
        return None
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        problems.add(f"{where}.name", "missing or not a string")
        return None
    where = f"{where} ({name})"
    body = raw
    prefix = ""
    if api_version == "resource.k8s.io/v1beta1":
        # v1beta1 wraps the device contents in `basic`.
        basic = raw.get("basic") or {}
        if not isinstance(basic, dict):
            problems.add(f"{where}.basic", f"expected a mapping, got {_a(_type_label(basic))}")
            return None
        body, prefix = basic, "basic."

    node = slice_node
    if node is None:
        chosen = [key for key in ("nodeName", "nodeSelector", "allNodes") if raw.get(key)]
        if len(chosen) != 1:
            problems.add(
                where, "with perDeviceNodeSelection, exactly one of nodeName, nodeSelector or allNodes is required"
            )
            return None
        node = _render_node(chosen[0], raw[chosen[0]], _join(where, chosen[0]), problems)

    attributes: dict[str, dict[str, AttrValue]] = {}
    for attr_name, attr_value in _mapping(body.get("attributes"), _join(where, prefix + "attributes"), problems):
        at = _join(where, f"{prefix}attributes.{attr_name}")
        key = _qualified(attr_name, driver, at, problems)
        value = _attribute_value(attr_value, at, problems)
        if key is not None and value is not None:
            attributes.setdefault(key[0], {})[key[1]] = value
    capacity: dict[str, dict[str, Quantity]] = {}
    for cap_name, cap_value in _mapping(body.get("capacity"), _join(where, prefix + "capacity"), problems):
        at = _join(where, f"{prefix}capacity.{cap_name}")
        key = _qualified(cap_name, driver, at, problems)
        quantity = _capacity_value(cap_value, at, problems)
        if key is not None and quantity is not None:
            capacity.setdefault(key[0], {})[key[1]] = quantity
    return Device(
        node=node,
        driver=driver,
        pool=pool,
        name=name,
        attributes=MappingProxyType({d: MappingProxyType(v) for d, v in attributes.items()}),
        capacity=MappingProxyType({d: MappingProxyType(v) for d, v in capacity.items()}),
    )


def _mapping(value: object, where: str, problems: _Problems) -> list[tuple[str, object]]:
    if value is None:
        return []
    if not isinstance(value, dict):
        problems.add(where, f"expected a mapping, got {_a(_type_label(value))}")
        return []
    return [(str(key), item) for key, item in value.items()]


def _qualified(name: str, driver: str, where: str, problems: _Problems) -> tuple[str, str] | None:
    domain, slash, ident = name.partition("/")
    if not slash:
        domain, ident = driver, name
    elif not _DNS_SUBDOMAIN.fullmatch(domain) or len(domain) > 63:
        problems.add(where, f"invalid domain {domain!r} in the name (expected a DNS subdomain)")
        return None
    if not _C_IDENTIFIER.fullmatch(ident):
        problems.add(where, f"invalid name {ident!r} (expected a C identifier of at most 32 characters)")
        return None
    return domain, ident


def _attribute_value(raw: object, where: str, problems: _Problems) -> AttrValue | None:
    if not isinstance(raw, dict):
        problems.add(
            where, f"expected a mapping with one of int, bool, string, version; got {_a(_type_label(raw))}"
        )
        return None
    present = [key for key in raw if raw[key] is not None]
    unknown = [str(key) for key in present if key not in _VALUE_TYPES]
    if unknown:
        problems.add(
            where, f"unsupported value type(s) {', '.join(unknown)} (expected int, bool, string or version)"
        )
        return None
    if len(present) != 1:
        found = ", ".join(map(str, present)) if present else "none"
        problems.add(where, f"must have exactly one of int, bool, string, version (found {found})")
        return None
    kind = str(present[0])
    value = raw[kind]
    expected: type = {"int": int, "bool": bool, "string": str, "version": str}[kind]
    if not isinstance(value, expected) or (kind == "int" and isinstance(value, bool)):
        hint = " (quote it in YAML)" if kind in ("string", "version") else ""
        wanted = {"int": "an integer", "bool": "a boolean"}.get(kind, "a string")
        problems.add(f"{where}.{kind}", f"expected {wanted}, got {_a(_type_label(value))}{hint}")
        return None
    if kind == "version":
        try:
            return parse_semver(str(value))
        except SemverError as error:
            problems.add(f"{where}.{kind}", f"{value!r} is not a semantic version: {error}")
            return None
    return value if isinstance(value, bool | int | str) else None


def _capacity_value(raw: object, where: str, problems: _Problems) -> Quantity | None:
    if not isinstance(raw, dict) or "value" not in raw:
        problems.add(where, f"expected a mapping with 'value', got {_a(_type_label(raw))}")
        return None
    value = raw["value"]
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # YAML reads an unquoted `14` as an integer
    if not isinstance(value, str):
        problems.add(f"{where}.value", f"expected a quantity string, got {_a(_type_label(value))}")
        return None
    try:
        return parse_quantity(value)
    except QuantityError as error:
        problems.add(f"{where}.value", f"{value!r} is not a quantity: {error}")
        return None


def _newest_generation(slices: list[_Slice], problems: _Problems) -> list[Device]:
    newest: dict[tuple[str, str], int] = {}
    for item in slices:
        key = (item.driver, item.pool)
        newest[key] = max(newest.get(key, item.generation), item.generation)
    seen: dict[tuple[str, str, str], str] = {}
    devices: list[Device] = []
    for item in slices:
        if item.generation != newest[(item.driver, item.pool)]:
            continue
        for device in item.devices:
            identity = (device.driver, device.pool, device.name)
            if identity in seen:
                problems.add(
                    item.label,
                    f"device {device.name!r} of pool {device.pool!r} (driver {device.driver}) "
                    f"is already listed in {seen[identity]}",
                )
                continue
            seen[identity] = item.label
            devices.append(device)
    return devices
