"""Offline evaluation of Kubernetes DRA device-selector CEL expressions.

Kubernetes compiles `DeviceClass` selectors with cel-go in a typed environment that declares one
variable, `device` (`driver`, `attributes[domain][id]`, `capacity[domain][id]`), plus the Kubernetes
extension libraries (Quantity, Semver, strings ext, `cel.bind`).  This module reproduces that
environment offline so a catalog's selectors can be dry-run against real ResourceSlices.

How: expressions are parsed with cel-python's grammar (`celpy.celparser.CELParser`, string literals
decoded with `celpy.evaluation.celstr`), then the parse tree is type-checked and compiled into
Python closures here.  cel-python's own runners are not used for evaluation because:

* its interpreter costs ~1.5 ms per evaluation (lark visitor overhead); 50 classes x 200 devices
  would take ~15 s;
* its runtime differs from cel-go where selectors care: `dyn(1) == 'a'` is an error there (cel-go:
  false, heterogeneous equality), `error && error` becomes an unrelated "no matching overload" error,
  `has()` swallows errors of the operand, and `cel.bind` and type checking are missing.

Its `&&`/`||` do absorb an error when the other side decides (`false && error` is false); the same
commutative semantics are implemented here, following cel-go's `evalAnd`/`evalOr`.

Faithfulness notes (cel-go / apimachinery behaviour that is reproduced on purpose):

* An unknown attribute domain is an empty map; an unknown key is the runtime error "no such key".
* Quantity values are exact; `isInteger()`/`asInteger()` depend on apimachinery's internal form
  (`quantity('1.5Gi').isInteger()` is false although the value is integral).
* `sign` is declared by Kubernetes as a global function: `sign(q)` works, `q.sign()` does not compile.
* Relational operators (`<`, `>=` ...) are not declared for Quantity or Semver; use `compareTo`.
* `semverAttribute == 'x'` is a runtime error (Semver.Equal returns "no such overload").

Not supported offline (compile error with `unsupported=True`): optional syntax (`.?`, `[?`), the
regex/list/URL/IP/format libraries, timestamps and durations, `device.allowMultipleAllocations`.
Not checked: the 1,000,000 cost limit.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Protocol, cast, final

import lark
import re2  # type: ignore[import-untyped]
from celpy.celparser import CELParseError, CELParser
from celpy.evaluation import celbytes, celstr

from themelio_gpu.k8s.quantity import INT64_MAX, INT64_MIN, Quantity, QuantityError, fits_int64, parse_quantity
from themelio_gpu.k8s.semver import Semver, SemverError, parse_semver

_Tree = lark.Tree[lark.Token]

__all__ = [
    "AttrValue",
    "CelCompileError",
    "CelError",
    "CelEvaluationError",
    "CompiledSelector",
    "SelectorDevice",
    "compile_selector",
]

_U64_MAX = 2**64 - 1


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class CelError(Exception):
    """Base class: a selector that Kubernetes would reject or fail on."""

    def __init__(self, expression: str, message: str) -> None:
        self.expression = expression
        self.message = message
        super().__init__(message)


class CelCompileError(CelError):
    """The expression does not compile (syntax, types, unknown function, non-bool result).

    `unsupported` is True when Kubernetes may accept it but this offline evaluator cannot check it.
    """

    def __init__(self, expression: str, message: str, *, unsupported: bool = False) -> None:
        self.unsupported = unsupported
        super().__init__(expression, message)


class CelEvaluationError(CelError):
    """A runtime error for one device; in Kubernetes it aborts the allocation (pod stays pending)."""


class _EvalError(Exception):
    """Runtime error inside the compiled closures; errors are exceptions, absorbed by && || all exists."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class _CheckError(Exception):
    def __init__(self, message: str, tree: _Tree | None = None, *, unsupported: bool = False) -> None:
        self.message = message
        self.tree = tree
        self.unsupported = unsupported
        super().__init__(message)


# --------------------------------------------------------------------------------------------
# The `device` variable
# --------------------------------------------------------------------------------------------

AttrValue = bool | int | str | Semver
"""A device attribute value: the ResourceSlice's int, bool, string or version (as Semver)."""


class SelectorDevice(Protocol):
    """What a selector sees of a device (resourceslices.Device satisfies it).

    Both mappings are keyed by domain then id; unqualified names belong to the driver's domain.
    """

    @property
    def driver(self) -> str: ...

    @property
    def attributes(self) -> Mapping[str, Mapping[str, AttrValue]]: ...

    @property
    def capacity(self) -> Mapping[str, Mapping[str, Quantity]]: ...


_EMPTY_MAP: Mapping[str, object] = {}


class _DomainMap(Mapping[str, object]):
    """`device.attributes` / `device.capacity`: an unknown domain reads as an empty map (compile.go)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Mapping[str, object]]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> object:
        return self._data.get(key, _EMPTY_MAP)

    def __contains__(self, key: object) -> bool:
        # `in` uses the underlying map's Contains: real membership.
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


@final
class _DeviceValue:
    __slots__ = ("attributes", "capacity", "driver")

    def __init__(self, device: SelectorDevice) -> None:
        self.driver = device.driver
        self.attributes = _DomainMap(device.attributes)
        self.capacity = _DomainMap(device.capacity)


class _Uint(int):
    """CEL uint, kept apart from int (`1u == 1` compares numerically, arithmetic does not mix)."""

    __slots__ = ()


@final
class _Deferred:
    """A cel.bind variable whose initializer failed; the error surfaces only if it is used."""

    __slots__ = ("error",)

    def __init__(self, error: _EvalError) -> None:
        self.error = error


# --------------------------------------------------------------------------------------------
# Static types
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _T:
    kind: str
    params: tuple[_T, ...] = ()

    def __str__(self) -> str:
        if self.kind == "list":
            return f"list({self.params[0]})"
        if self.kind == "map":
            return f"map({self.params[0]}, {self.params[1]})"
        return _TYPE_NAMES.get(self.kind, self.kind)


_TYPE_NAMES = {
    "quantity": "kubernetes.Quantity",
    "semver": "kubernetes.Semver",
    "device": "kubernetes.DRADevice",
    "null": "null_type",
    "unknown": "unknown",
}

DYN = _T("dyn")
BOOL = _T("bool")
INT = _T("int")
UINT = _T("uint")
DOUBLE = _T("double")
STRING = _T("string")
BYTES = _T("bytes")
NULL = _T("null")
QUANTITY = _T("quantity")
SEMVER = _T("semver")
DEVICE = _T("device")
LIST_DYN = _T("list", (DYN,))
LIST_STRING = _T("list", (STRING,))
MAP_DYN = _T("map", (DYN, DYN))
_ATTRIBUTES = _T("map", (STRING, _T("map", (STRING, DYN))))
_CAPACITY = _T("map", (STRING, _T("map", (STRING, QUANTITY))))
_DEVICE_FIELDS = {"driver": STRING, "attributes": _ATTRIBUTES, "capacity": _CAPACITY}
_NUMERIC = frozenset({"int", "uint", "double"})


def _assignable(param: _T, arg: _T) -> bool:
    if param.kind == "dyn" or arg.kind == "dyn":
        return True
    if param.kind != arg.kind:
        return False
    return all(_assignable(p, a) for p, a in zip(param.params, arg.params, strict=True))


def _join(a: _T, b: _T) -> _T | None:
    """The common type of two branches, DYN when either is dynamic, None when incompatible."""
    if a == b:
        return a
    if a.kind == "dyn" or b.kind == "dyn":
        return DYN
    if a.kind == b.kind and a.kind in ("list", "map"):
        params = [_join(x, y) for x, y in zip(a.params, b.params, strict=True)]
        return _T(a.kind, tuple(p or DYN for p in params))
    return None


_KIND_BY_TYPE: dict[type, str] = {
    bool: "bool",
    int: "int",
    _Uint: "uint",
    float: "double",
    str: "string",
    bytes: "bytes",
    type(None): "null",
    list: "list",
    tuple: "list",
    dict: "map",
    MappingProxyType: "map",
    _DomainMap: "map",
    Quantity: "quantity",
    Semver: "semver",
    _DeviceValue: "device",
}


def _kind(value: object) -> str:
    kind = _KIND_BY_TYPE.get(type(value))
    if kind is not None:
        return kind
    for python_type, name in (
        (bool, "bool"),
        (_Uint, "uint"),
        (int, "int"),
        (float, "double"),
        (str, "string"),
        (bytes, "bytes"),
    ):
        if isinstance(value, python_type):
            return name
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, (list, tuple)):
        return "list"
    return "unknown"


def _type_name(value: object) -> str:
    return str(_T(_kind(value)))


# --------------------------------------------------------------------------------------------
# Runtime operations (cel-go semantics)
# --------------------------------------------------------------------------------------------


def _no_overload(name: str, *values: object) -> _EvalError:
    return _EvalError(f"no such overload: {name}({', '.join(_type_name(v) for v in values)})")


def _check_int(value: int) -> int:
    if not fits_int64(value):
        raise _EvalError("integer overflow")
    return value


def _check_uint(value: int) -> _Uint:
    if not 0 <= value <= _U64_MAX:
        raise _EvalError("unsigned integer overflow")
    return _Uint(value)


def _equals(left: object, right: object) -> bool:
    """cel-go `==`: dispatched on the left operand; different types are unequal, except numbers."""
    lk, rk = _kind(left), _kind(right)
    if lk == "semver":
        # apiserver's Semver.Equal answers MaybeNoSuchOverloadErr for a non-Semver.
        if rk != "semver":
            raise _no_overload("_==_", left, right)
        return cast(Semver, left).compare(cast(Semver, right)) == 0
    if lk in _NUMERIC and rk in _NUMERIC:
        return cast(float, left) == cast(float, right)
    if lk != rk:
        return False
    if lk == "list":
        left_list, right_list = cast(Sequence[object], left), cast(Sequence[object], right)
        return len(left_list) == len(right_list) and all(
            _equals(a, b) for a, b in zip(left_list, right_list, strict=True)
        )
    if lk == "map":
        left_map, right_map = cast(Mapping[object, object], left), cast(Mapping[object, object], right)
        if len(left_map) != len(right_map):
            return False
        return all(key in right_map and _equals(value, right_map[key]) for key, value in left_map.items())
    if lk == "quantity":
        return cast(Quantity, left).compare(cast(Quantity, right)) == 0
    return left == right


def _ordering(name: str, left: object, right: object) -> int:
    lk, rk = _kind(left), _kind(right)
    if (lk in _NUMERIC and rk in _NUMERIC) or (lk == rk and lk in ("string", "bytes", "bool")):
        a, b = cast(float, left), cast(float, right)
        return -1 if a < b else (1 if a > b else 0)
    raise _no_overload(name, left, right)


def _arith(name: str, left: object, right: object) -> object:
    lk, rk = _kind(left), _kind(right)
    if lk != rk:
        raise _no_overload(name, left, right)
    if name == "_+_":
        if lk == "int":
            return _check_int(cast(int, left) + cast(int, right))
        if lk == "uint":
            return _check_uint(cast(int, left) + cast(int, right))
        if lk in ("double", "string", "bytes"):
            return cast(str, left) + cast(str, right)
        if lk == "list":
            return [*cast(Sequence[object], left), *cast(Sequence[object], right)]
        raise _no_overload(name, left, right)
    if lk not in _NUMERIC:
        raise _no_overload(name, left, right)
    if lk == "double":
        a, b = cast(float, left), cast(float, right)
        if name == "_-_":
            return a - b
        if name == "_*_":
            return a * b
        if name == "_/_":
            if b == 0.0:
                # IEEE division, as in Go.
                return (
                    math.nan if a == 0.0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1.0, b)
                )
            return a / b
        raise _no_overload(name, left, right)
    x, y = cast(int, left), cast(int, right)
    check: Callable[[int], int] = _check_int if lk == "int" else _check_uint
    if name == "_-_":
        return check(x - y)
    if name == "_*_":
        return check(x * y)
    if y == 0:
        raise _EvalError("division by zero" if name == "_/_" else "modulus by zero")
    quotient = abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)  # Go truncates toward zero
    if name == "_/_":
        return check(quotient)
    if lk == "int" and x == INT64_MIN and y == -1:
        raise _EvalError("integer overflow")
    return check(x - y * quotient)


def _negate(value: object) -> object:
    kind = _kind(value)
    if kind == "int":
        return _check_int(-cast(int, value))
    if kind == "double":
        return -cast(float, value)
    raise _no_overload("-_", value)


def _contains_item(item: object, container: object) -> bool:
    kind = _kind(container)
    if kind == "list":
        return any(_equals(item, element) for element in cast(Sequence[object], container))
    if kind == "map":
        try:
            return item in cast(Mapping[object, object], container)
        except TypeError:
            return False
    raise _no_overload("@in", item, container)


def _index(container: object, key: object) -> object:
    kind = _kind(container)
    if kind == "map":
        try:
            return cast(Mapping[object, object], container)[key]
        except (KeyError, TypeError):
            raise _EvalError(f"no such key: {key}") from None
    if kind == "list":
        key_kind = _kind(key)
        if key_kind not in ("int", "uint") and not (key_kind == "double" and float(cast(float, key)).is_integer()):
            raise _no_overload("_[_]", container, key)
        items = cast(Sequence[object], container)
        position = int(cast(float, key))
        if not 0 <= position < len(items):
            raise _EvalError(f"index out of range: {position}")
        return items[position]
    raise _no_overload("_[_]", container, key)


def _select(operand: object, field: str) -> object:
    if type(operand) is _DeviceValue:
        return cast(object, getattr(operand, field))
    if isinstance(operand, Mapping):
        try:
            return cast(Mapping[str, object], operand)[field]
        except KeyError:
            raise _EvalError(f"no such key: {field}") from None
    raise _EvalError(f"type '{_type_name(operand)}' does not support field selection")


def _iteration_items(value: object) -> list[object]:
    kind = _kind(value)
    if kind in ("list", "map"):
        return list(cast(Iterable[object], value))
    raise _EvalError(f"cannot iterate over type '{_type_name(value)}'")


@functools.lru_cache(maxsize=512)
def _regex(pattern: str) -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would otherwise print parse errors on stderr
    try:
        return re2.compile(pattern, options=options)
    except re2.error as error:
        detail = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else str(error)
        raise _EvalError(f"error parsing regexp: {detail}: `{pattern}`") from None


def _matches(text: str, pattern: str) -> bool:
    return _regex(pattern).search(text) is not None


# --------------------------------------------------------------------------------------------
# Function library: Kubernetes quantity + semver, standard CEL, strings ext
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Overload:
    member: bool
    params: tuple[_T, ...]
    result: _T
    impl: Callable[..., object]


def _quantity(text: str) -> Quantity:
    try:
        return parse_quantity(text)
    except QuantityError as error:
        raise _EvalError(str(error)) from None


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _semver(text: str, normalize: bool = False) -> Semver:
    try:
        return parse_semver(text, normalize)
    except SemverError as error:
        raise _EvalError(str(error)) from None


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        parse_semver(text, normalize)
    except SemverError:
        return False
    return True


def _as_integer(value: Quantity) -> int:
    result = value.as_int64()
    if result is None:
        raise _EvalError("cannot convert value to integer")
    return result


def _as_go_int64(value: int) -> int:
    # Semver numbers are uint64 in Go; types.Int(v.Major) reinterprets them as int64.
    return value - 2**64 if value > INT64_MAX else value


_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _substring(text: str, start: int, end: int | None = None) -> str:
    stop = len(text) if end is None else end
    if start < 0 or start > len(text):
        raise _EvalError(f"index out of range: {start}")
    if stop < 0 or stop > len(text):
        raise _EvalError(f"index out of range: {stop}")
    if start > stop:
        raise _EvalError(f"invalid substring range. start: {start}, end: {stop}")
    return text[start:stop]


def _char_at(text: str, index: int) -> str:
    if index < 0 or index > len(text):
        raise _EvalError(f"index out of range: {index}")
    return text[index : index + 1]


def _index_of(text: str, sub: str, offset: int = 0) -> int:
    if offset < 0 or offset > len(text):
        raise _EvalError(f"index out of range: {offset}")
    return text.find(sub, offset)


def _last_index_of(text: str, sub: str, offset: int | None = None) -> int:
    if offset is None:
        return text.rfind(sub)
    if offset < 0 or offset > len(text):
        raise _EvalError(f"index out of range: {offset}")
    return text.rfind(sub, 0, offset + len(sub))


def _split(text: str, separator: str, limit: int = -1) -> list[object]:
    if limit == 0:
        return []
    if separator == "":
        # Go splits into UTF-8 sequences; the last piece keeps the rest.
        chars: list[object] = list(text)
        if 0 < limit < len(chars):
            return [*chars[: limit - 1], text[limit - 1 :]]
        return chars
    return list(text.split(separator, limit - 1 if limit > 0 else -1))


def _replace(text: str, old: str, new: str, limit: int = -1) -> str:
    return text.replace(old, new, limit if limit >= 0 else -1)


def _join_strings(items: Sequence[object], separator: str = "") -> str:
    if not all(isinstance(item, str) for item in items):
        raise _EvalError("join: list must contain only strings")
    return separator.join(cast(Sequence[str], items))


def _size(value: object) -> int:
    return len(cast(Sequence[object], value))


def _to_int(value: object) -> int:
    kind = _kind(value)
    if kind in ("int", "uint"):
        return _check_int(int(cast(int, value)))
    if kind == "double":
        number = cast(float, value)
        if math.isnan(number) or math.isinf(number) or not (-(2.0**63) <= number < 2.0**63):
            raise _EvalError("integer overflow")
        return int(number)
    text = cast(str, value)
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise _EvalError(f"type conversion error from string to int: {text!r}")
    return _check_int(int(text))


def _to_uint(value: object) -> _Uint:
    kind = _kind(value)
    if kind in ("int", "uint"):
        return _check_uint(int(cast(int, value)))
    if kind == "double":
        number = cast(float, value)
        if math.isnan(number) or not (0 <= number < 2.0**64):
            raise _EvalError("unsigned integer overflow")
        return _Uint(int(number))
    text = cast(str, value)
    if not re.fullmatch(r"\+?[0-9]+", text):
        raise _EvalError(f"type conversion error from string to uint: {text!r}")
    return _check_uint(int(text))


_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)", re.I)


def _to_double(value: object) -> float:
    if _kind(value) == "string":
        text = cast(str, value)
        if not _FLOAT_TEXT.fullmatch(text):
            raise _EvalError(f"type conversion error from string to double: {text!r}")
        return float(text)
    return float(cast(float, value))


def _go_format_float(number: float) -> str:
    """strconv.FormatFloat(f, 'g', -1, 64), as cel-go's string(double): %e when exp < -4 or >= 6."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    sign, digit_tuple, exponent = Decimal(repr(number)).as_tuple()
    prefix = "-" if sign else ""
    if number == 0.0:
        return prefix + "0"
    raw = "".join(map(str, digit_tuple))
    point = len(raw) + int(exponent)  # Go's digs.dp
    digits = raw.rstrip("0")
    exp = point - 1
    if exp < -4 or exp >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    integer = digits[:point].ljust(point, "0") if point > 0 else "0"
    decimals = max(len(digits) - point, 0)
    fraction = "".join(digits[point + i] if 0 <= point + i < len(digits) else "0" for i in range(decimals))
    return prefix + integer + ("." + fraction if fraction else "")


def _to_string(value: object) -> str:
    kind = _kind(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind in ("int", "uint"):
        return str(int(cast(int, value)))
    if kind == "double":
        return _go_format_float(cast(float, value))
    if kind == "bytes":
        try:
            return cast(bytes, value).decode("utf-8")
        except UnicodeDecodeError:
            raise _EvalError("invalid UTF-8 in bytes, cannot convert to string") from None
    return cast(str, value)


_GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_GO_BOOLS.update({"0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False})


def _to_bool(value: object) -> bool:
    if _kind(value) == "bool":
        return cast(bool, value)
    text = cast(str, value)
    if text not in _GO_BOOLS:
        raise _EvalError(f"type conversion error from 'string' to 'bool': {text!r}")
    return _GO_BOOLS[text]


def _to_bytes(value: object) -> bytes:
    if _kind(value) == "bytes":
        return cast(bytes, value)
    return cast(str, value).encode("utf-8")


def _fn(*params: _T, result: _T, impl: Callable[..., object]) -> _Overload:
    return _Overload(False, params, result, impl)


def _method(*params: _T, result: _T, impl: Callable[..., object]) -> _Overload:
    return _Overload(True, params, result, impl)


def _arithmetic(impl: Callable[[Quantity, Quantity], Quantity]) -> Callable[[Quantity, Quantity | int], Quantity]:
    """Quantity add/sub as a CEL function: an int is a whole quantity, a range error a runtime error."""

    def run(left: Quantity, right: Quantity | int) -> Quantity:
        other = right if isinstance(right, Quantity) else Quantity(right, 0, dec=False)
        try:
            return impl(left, other)
        except QuantityError as error:
            raise _EvalError(str(error)) from None

    return run


_FUNCTIONS: dict[str, tuple[_Overload, ...]] = {
    # Kubernetes quantity library (k8s.io/apiserver/pkg/cel/library/quantity.go).
    "quantity": (_fn(STRING, result=QUANTITY, impl=_quantity),),
    "isQuantity": (_fn(STRING, result=BOOL, impl=_is_quantity),),
    "sign": (_fn(QUANTITY, result=INT, impl=Quantity.sign),),
    "isInteger": (_method(QUANTITY, result=BOOL, impl=lambda q: q.as_int64() is not None),),
    "asInteger": (_method(QUANTITY, result=INT, impl=_as_integer),),
    "asApproximateFloat": (_method(QUANTITY, result=DOUBLE, impl=Quantity.as_approximate_float),),
    "add": (
        _method(QUANTITY, QUANTITY, result=QUANTITY, impl=_arithmetic(Quantity.add)),
        _method(QUANTITY, INT, result=QUANTITY, impl=_arithmetic(Quantity.add)),
    ),
    "sub": (
        _method(QUANTITY, QUANTITY, result=QUANTITY, impl=_arithmetic(Quantity.sub)),
        _method(QUANTITY, INT, result=QUANTITY, impl=_arithmetic(Quantity.sub)),
    ),
    # Shared by the quantity and semver libraries; dispatched on the receiver's type.
    "compareTo": (
        _method(QUANTITY, QUANTITY, result=INT, impl=Quantity.compare),
        _method(SEMVER, SEMVER, result=INT, impl=Semver.compare),
    ),
    "isGreaterThan": (
        _method(QUANTITY, QUANTITY, result=BOOL, impl=lambda a, b: a.compare(b) == 1),
        _method(SEMVER, SEMVER, result=BOOL, impl=lambda a, b: a.compare(b) == 1),
    ),
    "isLessThan": (
        _method(QUANTITY, QUANTITY, result=BOOL, impl=lambda a, b: a.compare(b) == -1),
        _method(SEMVER, SEMVER, result=BOOL, impl=lambda a, b: a.compare(b) == -1),
    ),
    # Kubernetes semver library (semverlib.go, version 1 with the normalize overloads).
    "semver": (
        _fn(STRING, result=SEMVER, impl=_semver),
        _fn(STRING, BOOL, result=SEMVER, impl=_semver),
    ),
    "isSemver": (
        _fn(STRING, result=BOOL, impl=_is_semver),
        _fn(STRING, BOOL, result=BOOL, impl=_is_semver),
    ),
    "major": (_method(SEMVER, result=INT, impl=lambda v: _as_go_int64(v.major)),),
    "minor": (_method(SEMVER, result=INT, impl=lambda v: _as_go_int64(v.minor)),),
    "patch": (_method(SEMVER, result=INT, impl=lambda v: _as_go_int64(v.patch)),),
    # Standard CEL.
    "size": tuple(
        overload
        for arg in (STRING, BYTES, LIST_DYN, MAP_DYN)
        for overload in (_fn(arg, result=INT, impl=_size), _method(arg, result=INT, impl=_size))
    ),
    "contains": (_method(STRING, STRING, result=BOOL, impl=lambda s, sub: sub in s),),
    "startsWith": (_method(STRING, STRING, result=BOOL, impl=str.startswith),),
    "endsWith": (_method(STRING, STRING, result=BOOL, impl=str.endswith),),
    "matches": (
        _method(STRING, STRING, result=BOOL, impl=_matches),
        _fn(STRING, STRING, result=BOOL, impl=_matches),
    ),
    "int": tuple(_fn(arg, result=INT, impl=_to_int) for arg in (INT, UINT, DOUBLE, STRING)),
    "uint": tuple(_fn(arg, result=UINT, impl=_to_uint) for arg in (INT, UINT, DOUBLE, STRING)),
    "double": tuple(_fn(arg, result=DOUBLE, impl=_to_double) for arg in (INT, UINT, DOUBLE, STRING)),
    "string": tuple(_fn(arg, result=STRING, impl=_to_string) for arg in (INT, UINT, DOUBLE, BOOL, BYTES, STRING)),
    "bool": tuple(_fn(arg, result=BOOL, impl=_to_bool) for arg in (BOOL, STRING)),
    "bytes": tuple(_fn(arg, result=BYTES, impl=_to_bytes) for arg in (BYTES, STRING)),
    # Strings extension (cel-go ext.Strings, version 2 in the Kubernetes base environment).
    "lowerAscii": (_method(STRING, result=STRING, impl=lambda s: s.translate(_LOWER)),),
    "upperAscii": (_method(STRING, result=STRING, impl=lambda s: s.translate(_UPPER)),),
    "trim": (_method(STRING, result=STRING, impl=str.strip),),
    "charAt": (_method(STRING, INT, result=STRING, impl=_char_at),),
    "indexOf": (
        _method(STRING, STRING, result=INT, impl=_index_of),
        _method(STRING, STRING, INT, result=INT, impl=_index_of),
    ),
    "lastIndexOf": (
        _method(STRING, STRING, result=INT, impl=_last_index_of),
        _method(STRING, STRING, INT, result=INT, impl=_last_index_of),
    ),
    "substring": (
        _method(STRING, INT, result=STRING, impl=_substring),
        _method(STRING, INT, INT, result=STRING, impl=_substring),
    ),
    "replace": (
        _method(STRING, STRING, STRING, result=STRING, impl=_replace),
        _method(STRING, STRING, STRING, INT, result=STRING, impl=_replace),
    ),
    "split": (
        _method(STRING, STRING, result=LIST_STRING, impl=_split),
        _method(STRING, STRING, INT, result=LIST_STRING, impl=_split),
    ),
    "join": (
        _method(LIST_STRING, result=STRING, impl=_join_strings),
        _method(LIST_STRING, STRING, result=STRING, impl=_join_strings),
    ),
}

# Kubernetes declares these, this evaluator does not implement them: say so instead of "undeclared".
_UNSUPPORTED = frozenset(
    {
        "find", "findAll", "isSorted", "sum", "min", "max", "reverse", "quote", "format",
        "url", "isURL", "getScheme", "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery",
        "ip", "isIP", "cidr", "isCIDR", "containsIP", "containsCIDR", "family", "isUnspecified",
        "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast", "prefixLength",
        "masked", "mul", "div", "divInt", "includes", "timestamp", "duration", "type", "optional",
        "orValue", "hasValue", "value", "or", "getField", "sets.contains", "sets.equivalent",
        "sets.intersects", "strings.quote", "math.greatest", "math.least", "math.ceil", "math.floor",
        "math.round", "math.abs", "math.sign", "image", "isImage", "transformList", "transformMap",
        "transformMapEntry",
    }
)  # fmt: skip
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_TYPE_IDENTIFIERS = frozenset(
    {"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"}
)


# --------------------------------------------------------------------------------------------
# Compiler: lark parse tree -> closures
# --------------------------------------------------------------------------------------------

_Env = dict[str, object]
_Closure = Callable[[_Env], object]
_NO_CONSTANT = object()


@dataclass(frozen=True)
class _Node:
    fn: _Closure
    type: _T
    constant: object = _NO_CONSTANT


def _constant(value: object, type_: _T) -> _Node:
    return _Node(lambda _env: value, type_, value)


# Nodes that only wrap a single child in cel-python's grammar.
_PASS_THROUGH = frozenset(
    {
        "expr",
        "conditionalor",
        "conditionaland",
        "relation",
        "addition",
        "multiplication",
        "unary",
        "member",
        "primary",
    }
)
_RELATION_OPS = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "@in",
}
_ARITH_OPS = {
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
}
_ARITH_TYPES = {
    "_+_": frozenset({"int", "uint", "double", "string", "bytes", "list"}),
    "_-_": _NUMERIC,
    "_*_": _NUMERIC,
    "_/_": _NUMERIC,
    "_%_": frozenset({"int", "uint"}),
}
_ORDERED = frozenset({"int", "uint", "double", "string", "bytes", "bool"})


def _children(tree: _Tree) -> list[_Tree]:
    return [cast(_Tree, child) for child in tree.children]


def _token(tree: _Tree, index: int = 0) -> str:
    return str(cast(lark.Token, tree.children[index]).value)


def _unwrap(tree: _Tree) -> _Tree:
    """Skip the single-child grammar levels (and parentheses) down to the meaningful node."""
    while (tree.data in _PASS_THROUGH and len(tree.children) == 1) or tree.data == "paren_expr":
        child = tree.children[0]
        if not isinstance(child, lark.Tree):
            break
        tree = child
    return tree


def _simple_name(tree: _Tree) -> str | None:
    node = _unwrap(tree)
    return _token(node) if node.data == "ident" else None


class _Compiler:
    def __init__(self) -> None:
        self._scopes: list[dict[str, _T]] = [{"device": DEVICE}]

    # -- dispatch ----------------------------------------------------------------------------

    def compile(self, tree: _Tree) -> _Node:
        handler = getattr(self, f"_c_{tree.data}", None)
        if handler is None:
            raise _CheckError(f"unsupported syntax '{tree.data}'", tree, unsupported=True)
        return cast(_Node, handler(tree))

    def _c_expr(self, tree: _Tree) -> _Node:
        if len(tree.children) == 1:
            return self.compile(_children(tree)[0])
        cond, first, second = (self.compile(child) for child in _children(tree))
        if cond.type not in (BOOL, DYN):
            raise _CheckError(f"found no matching overload for '_?_:_' applied to '({cond.type}, ...)'", tree)
        joined = _join(first.type, second.type)
        if joined is None:
            raise _CheckError(
                f"found no matching overload for '_?_:_' applied to '(bool, {first.type}, {second.type})'", tree
            )
        cf, ff, sf = cond.fn, first.fn, second.fn

        def ternary(env: _Env) -> object:
            chosen = cf(env)
            if chosen is True:
                return ff(env)
            if chosen is False:
                return sf(env)
            raise _no_overload("_?_:_", chosen)

        return _Node(ternary, joined)

    def _logical(self, tree: _Tree, name: str) -> _Node:
        if len(tree.children) == 1:
            return self.compile(_children(tree)[0])
        left, right = (self.compile(child) for child in _children(tree))
        for operand in (left, right):
            if operand.type not in (BOOL, DYN):
                raise _CheckError(
                    f"found no matching overload for '{name}' applied to '({left.type}, {right.type})'", tree
                )
        lf, rf = left.fn, right.fn
        # cel-go evalAnd/evalOr: a deciding value wins over an error on either side; else the first error.
        decisive = name == "_||_"

        def logical(env: _Env) -> object:
            error: _EvalError | None = None
            try:
                value = lf(env)
            except _EvalError as caught:
                error = caught
            else:
                if value is decisive:
                    return decisive
                if value is not (not decisive):
                    error = _no_overload(name, value)
            try:
                value = rf(env)
            except _EvalError as caught:
                raise (error or caught) from None
            if value is decisive:
                return decisive
            if error is not None:
                raise error
            if value is not (not decisive):
                raise _no_overload(name, value)
            return not decisive

        return _Node(logical, BOOL)

    def _c_conditionalor(self, tree: _Tree) -> _Node:
        return self._logical(tree, "_||_")

    def _c_conditionaland(self, tree: _Tree) -> _Node:
        return self._logical(tree, "_&&_")

    def _c_relation(self, tree: _Tree) -> _Node:
        if len(tree.children) == 1:
            return self.compile(_children(tree)[0])
        op_tree, right_tree = _children(tree)
        name = _RELATION_OPS[op_tree.data]
        left, right = self.compile(_children(op_tree)[0]), self.compile(right_tree)
        lt, rt = left.type, right.type
        lf, rf = left.fn, right.fn
        mismatch = f"found no matching overload for '{name}' applied to '({lt}, {rt})'"
        if name == "@in":
            if rt.kind not in ("list", "map", "dyn"):
                raise _CheckError(mismatch, tree)
            return self._fold(_Node(lambda env: _contains_item(lf(env), rf(env)), BOOL), (left, right))
        if name in ("_==_", "_!=_"):
            # The checker wants one type on both sides (`dyn(1) == 1.0` is how mixed numbers compare).
            if _join(lt, rt) is None:
                raise _CheckError(mismatch, tree)
            if name == "_==_":
                return self._fold(_Node(lambda env: _equals(lf(env), rf(env)), BOOL), (left, right))
            return self._fold(_Node(lambda env: not _equals(lf(env), rf(env)), BOOL), (left, right))
        # Relational operators: numbers compare across types; Quantity and Semver have none.
        known = [t.kind for t in (lt, rt) if t.kind != "dyn"]
        if any(kind not in _ORDERED for kind in known) or (
            len(known) == 2 and known[0] != known[1] and not set(known) <= _NUMERIC
        ):
            hint = " (use compareTo)" if {"quantity", "semver"} & set(known) else ""
            raise _CheckError(mismatch + hint, tree)
        test: Callable[[int], bool] = {
            "_<_": lambda c: c < 0,
            "_<=_": lambda c: c <= 0,
            "_>_": lambda c: c > 0,
            "_>=_": lambda c: c >= 0,
        }[name]
        return self._fold(_Node(lambda env: test(_ordering(name, lf(env), rf(env))), BOOL), (left, right))

    def _arithmetic(self, tree: _Tree) -> _Node:
        if len(tree.children) == 1:
            return self.compile(_children(tree)[0])
        op_tree, right_tree = _children(tree)
        name = _ARITH_OPS[op_tree.data]
        left, right = self.compile(_children(op_tree)[0]), self.compile(right_tree)
        lt, rt = left.type, right.type
        known = {t.kind for t in (lt, rt) if t.kind != "dyn"}
        if len(known) > 1 or (known and not known <= _ARITH_TYPES[name]):
            raise _CheckError(f"found no matching overload for '{name}' applied to '({lt}, {rt})'", tree)
        result = _join(lt, rt) or DYN
        lf, rf = left.fn, right.fn
        return self._fold(_Node(lambda env: _arith(name, lf(env), rf(env)), result), (left, right))

    _c_addition = _arithmetic
    _c_multiplication = _arithmetic

    def _c_unary(self, tree: _Tree) -> _Node:
        if len(tree.children) == 1:
            return self.compile(_children(tree)[0])
        op_tree, operand_tree = _children(tree)
        operand = self.compile(operand_tree)
        of = operand.fn
        if op_tree.data == "unary_not":
            if operand.type not in (BOOL, DYN):
                raise _CheckError(f"found no matching overload for '!_' applied to '({operand.type})'", tree)

            def negate_bool(env: _Env) -> object:
                value = of(env)
                if type(value) is not bool:
                    raise _no_overload("!_", value)
                return not value

            return self._fold(_Node(negate_bool, BOOL), (operand,))
        if operand.type.kind not in ("int", "double", "dyn"):
            raise _CheckError(f"found no matching overload for '-_' applied to '({operand.type})'", tree)
        return self._fold(_Node(lambda env: _negate(of(env)), operand.type), (operand,))

    def _c_member(self, tree: _Tree) -> _Node:
        return self.compile(_children(tree)[0])

    def _c_primary(self, tree: _Tree) -> _Node:
        return self.compile(_children(tree)[0])

    def _c_paren_expr(self, tree: _Tree) -> _Node:
        return self.compile(_children(tree)[0])

    # -- member access -----------------------------------------------------------------------

    def _c_member_dot(self, tree: _Tree) -> _Node:
        operand_tree = _children(tree)[0]
        field = _token(tree, 1)
        self._require_declared(operand_tree, field)
        operand = self.compile(operand_tree)
        of = operand.fn
        if operand.type == DEVICE:
            if field == "allowMultipleAllocations":
                raise _CheckError(
                    "device.allowMultipleAllocations (DRAConsumableCapacity) is not supported offline",
                    tree,
                    unsupported=True,
                )
            if field not in _DEVICE_FIELDS:
                raise _CheckError(f"undefined field '{field}'", tree)
            return _Node(lambda env: getattr(of(env), field), _DEVICE_FIELDS[field])
        if operand.type.kind == "map":
            if operand.type.params[0].kind not in ("string", "dyn"):
                raise _CheckError(f"type '{operand.type}' does not support field selection", tree)
            return _Node(lambda env: _select(of(env), field), operand.type.params[1])
        if operand.type.kind != "dyn":
            raise _CheckError(f"type '{operand.type}' does not support field selection", tree)
        return _Node(lambda env: _select(of(env), field), DYN)

    def _c_member_index(self, tree: _Tree) -> _Node:
        container_tree, key_tree = _children(tree)
        container, key = self.compile(container_tree), self.compile(key_tree)
        ct = container.type
        if ct.kind == "map":
            if not _assignable(ct.params[0], key.type):
                raise _CheckError(f"found no matching overload for '_[_]' applied to '({ct}, {key.type})'", tree)
            result = ct.params[1]
        elif ct.kind == "list":
            if key.type.kind not in ("int", "uint", "dyn"):
                raise _CheckError(f"found no matching overload for '_[_]' applied to '({ct}, {key.type})'", tree)
            result = ct.params[0]
        elif ct.kind == "dyn":
            result = DYN
        else:
            raise _CheckError(f"found no matching overload for '_[_]' applied to '({ct}, {key.type})'", tree)
        cf, kf = container.fn, key.fn
        return self._fold(_Node(lambda env: _index(cf(env), kf(env)), result), (container, key))

    def _c_member_object(self, tree: _Tree) -> _Node:
        raise _CheckError("message construction is not available in the DRA environment", tree)

    def _c_member_dot_arg(self, tree: _Tree) -> _Node:
        children = _children(tree)
        receiver_tree, method = children[0], _token(tree, 1)
        arg_trees = _children(children[2]) if len(children) > 2 else []
        namespace = _simple_name(receiver_tree)
        if namespace is not None and not self._lookup(namespace):
            # `cel.bind(...)`, `sets.contains(...)`: a namespaced function, not a method call.
            qualified = f"{namespace}.{method}"
            if qualified == "cel.bind":
                return self._bind(tree, arg_trees)
            if qualified in _UNSUPPORTED:
                raise _CheckError(f"function '{qualified}' is not supported offline", tree, unsupported=True)
            raise _CheckError(f"undeclared reference to '{qualified}'", tree)
        if method in _MACROS:
            return self._comprehension(tree, method, receiver_tree, arg_trees)
        receiver = self.compile(receiver_tree)
        args = [self.compile(arg) for arg in arg_trees]
        return self._call(tree, method, [receiver, *args], member=True)

    # -- primaries ---------------------------------------------------------------------------

    def _c_literal(self, tree: _Tree) -> _Node:
        token = cast(lark.Token, tree.children[0])
        text = str(token.value)
        if token.type == "INT_LIT":
            value = self._int_literal(text, tree)
            if not fits_int64(value):
                raise _CheckError(f"integer literal out of range: {text}", tree)
            return _constant(value, INT)
        if token.type == "UINT_LIT":
            value = self._int_literal(text[:-1], tree)
            if not 0 <= value <= _U64_MAX:
                raise _CheckError(f"unsigned integer literal out of range: {text}", tree)
            return _constant(_Uint(value), UINT)
        if token.type == "FLOAT_LIT":
            return _constant(float(text), DOUBLE)
        if token.type in ("STRING_LIT", "MLSTRING_LIT"):
            return _constant(str(celstr(token)), STRING)
        if token.type == "BYTES_LIT":
            return _constant(bytes(celbytes(token)), BYTES)
        if token.type == "BOOL_LIT":
            return _constant(text == "true", BOOL)
        return _constant(None, NULL)

    @staticmethod
    def _int_literal(text: str, tree: _Tree) -> int:
        negative = text.startswith("-")
        body = text.lstrip("-")
        try:
            value = int(body[2:], 16) if body[:2].lower() == "0x" else int(body, 10)
        except ValueError:
            raise _CheckError(f"invalid integer literal: {text}", tree) from None
        return -value if negative else value

    def _c_ident(self, tree: _Tree) -> _Node:
        name = _token(tree)
        found = self._lookup(name)
        if found is None:
            if name in _TYPE_IDENTIFIERS:
                raise _CheckError(f"type value '{name}' is not supported offline", tree, unsupported=True)
            raise _CheckError(f"undeclared reference to '{name}'", tree)
        if name == "device" and found == DEVICE and len(self._scopes) == 1:
            return _Node(lambda env: env["device"], DEVICE)

        def variable(env: _Env) -> object:
            value = env[name]
            if type(value) is _Deferred:
                raise value.error
            return value

        return _Node(variable, found)

    def _c_dot_ident(self, tree: _Tree) -> _Node:
        if _token(tree) != "device":
            raise _CheckError(f"undeclared reference to '.{_token(tree)}'", tree)
        return _Node(lambda env: env["device"], DEVICE)

    def _c_ident_arg(self, tree: _Tree) -> _Node:
        name = _token(tree)
        arg_trees = _children(_children(tree)[1]) if len(tree.children) > 1 else []
        if name == "has":
            return self._has(tree, arg_trees)
        if name == "dyn":
            if len(arg_trees) != 1:
                raise _CheckError("dyn() takes exactly one argument", tree)
            inner = self.compile(arg_trees[0])
            return _Node(inner.fn, DYN, inner.constant)
        return self._call(tree, name, [self.compile(arg) for arg in arg_trees], member=False)

    def _c_dot_ident_arg(self, tree: _Tree) -> _Node:
        return self._c_ident_arg(tree)

    def _c_list_lit(self, tree: _Tree) -> _Node:
        elements = [self.compile(child) for child in _children(_children(tree)[0])] if tree.children else []
        element_type: _T | None = elements[0].type if elements else DYN
        for element in elements[1:]:
            element_type = _join(element_type or DYN, element.type) or DYN
        fns = [element.fn for element in elements]
        return self._fold(_Node(lambda env: [fn(env) for fn in fns], _T("list", (element_type or DYN,))), elements)

    def _c_map_lit(self, tree: _Tree) -> _Node:
        parts = [self.compile(child) for child in _children(_children(tree)[0])] if tree.children else []
        keys, values = parts[0::2], parts[1::2]
        key_type: _T = keys[0].type if keys else DYN
        value_type: _T = values[0].type if values else DYN
        for key in keys:
            if key.type.kind not in ("bool", "int", "uint", "string", "dyn"):
                raise _CheckError(f"unsupported map key type: {key.type}", tree)
            key_type = _join(key_type, key.type) or DYN
        for value in values:
            value_type = _join(value_type, value.type) or DYN
        pairs = [(key.fn, value.fn) for key, value in zip(keys, values, strict=True)]

        def build(env: _Env) -> object:
            result: dict[object, object] = {}
            for key_fn, value_fn in pairs:
                key = key_fn(env)
                if _kind(key) not in ("bool", "int", "uint", "string"):
                    raise _EvalError(f"unsupported key type: {_type_name(key)}")
                if key in result:
                    raise _EvalError(f"Failed with repeated key: {key}")
                result[key] = value_fn(env)
            return result

        return self._fold(_Node(build, _T("map", (key_type, value_type))), parts)

    # -- calls and macros --------------------------------------------------------------------

    def _call(self, tree: _Tree, name: str, args: list[_Node], *, member: bool) -> _Node:
        overloads = _FUNCTIONS.get(name)
        if overloads is None:
            if name in _UNSUPPORTED:
                raise _CheckError(f"function '{name}' is not supported offline", tree, unsupported=True)
            raise _CheckError(f"undeclared reference to '{name}'", tree)
        candidates = [
            overload
            for overload in overloads
            if overload.member == member
            and len(overload.params) == len(args)
            and all(_assignable(p, a.type) for p, a in zip(overload.params, args, strict=True))
        ]
        if not candidates:
            types = [str(a.type) for a in args]
            signature = f"{types[0]}.({', '.join(types[1:])})" if member else f"({', '.join(types)})"
            raise _CheckError(f"found no matching overload for '{name}' applied to '{signature}'", tree)
        results = {c.result for c in candidates}
        result = results.pop() if len(results) == 1 else DYN
        fns = [a.fn for a in args]
        statically_exact = len(candidates) == 1 and all(
            p.kind == "dyn" or p.kind == a.type.kind for p, a in zip(candidates[0].params, args, strict=True)
        )
        if statically_exact:
            impl = candidates[0].impl
            if len(fns) == 1:
                (f0,) = fns
                return self._fold(_Node(lambda env: impl(f0(env)), result), args)
            if len(fns) == 2:
                f0, f1 = fns
                return self._fold(_Node(lambda env: impl(f0(env), f1(env)), result), args)
            return self._fold(_Node(lambda env: impl(*[f(env) for f in fns]), result), args)

        def dispatch(env: _Env) -> object:
            values = [f(env) for f in fns]
            kinds = [_kind(v) for v in values]
            for candidate in candidates:
                if all(p.kind in ("dyn", k) for p, k in zip(candidate.params, kinds, strict=True)):
                    return candidate.impl(*values)
            raise _no_overload(name, *values)

        return self._fold(_Node(dispatch, result), args)

    def _has(self, tree: _Tree, arg_trees: list[_Tree]) -> _Node:
        selection = _unwrap(arg_trees[0]) if len(arg_trees) == 1 else None
        if selection is None or selection.data != "member_dot":
            raise _CheckError("invalid argument to has() macro", tree)
        operand_tree, field = _children(selection)[0], _token(selection, 1)
        operand = self.compile(operand_tree)
        if operand.type == DEVICE:
            if field not in _DEVICE_FIELDS:
                raise _CheckError(f"undefined field '{field}'", tree)
            return _constant(True, BOOL)
        if operand.type.kind not in ("map", "dyn"):
            raise _CheckError(f"type '{operand.type}' does not support field selection", tree)
        of = operand.fn

        def has(env: _Env) -> object:
            value = of(env)
            # Kubernetes' domain map answers every lookup (Find returns found=true).
            if type(value) is _DomainMap or type(value) is _DeviceValue:
                return True
            if isinstance(value, Mapping):
                return field in value
            raise _EvalError(f"type '{_type_name(value)}' does not support field selection")

        return _Node(has, BOOL)

    def _bind(self, tree: _Tree, arg_trees: list[_Tree]) -> _Node:
        name = _simple_name(arg_trees[0]) if len(arg_trees) == 3 else None
        if name is None:
            raise _CheckError("cel.bind() requires (name, init, expression)", tree)
        init = self.compile(arg_trees[1])
        self._scopes.append({name: init.type})
        try:
            body = self.compile(arg_trees[2])
        finally:
            self._scopes.pop()
        init_fn, body_fn = init.fn, body.fn

        def bind(env: _Env) -> object:
            local = dict(env)
            try:
                local[name] = init_fn(env)
            except _EvalError as error:
                local[name] = _Deferred(error)
            return body_fn(local)

        return _Node(bind, body.type)

    def _comprehension(self, tree: _Tree, macro: str, range_tree: _Tree, arg_trees: list[_Tree]) -> _Node:
        arity_ok = len(arg_trees) in ((2, 3) if macro == "map" else (2,))
        variable = _simple_name(arg_trees[0]) if arg_trees else None
        if not arity_ok or variable is None:
            raise _CheckError(f"invalid arguments to {macro}() macro", tree)
        collection = self.compile(range_tree)
        ct = collection.type
        if ct.kind in ("list", "map"):
            item_type = ct.params[0]
        elif ct.kind == "dyn":
            item_type = DYN
        else:
            raise _CheckError(f"expression of type '{ct}' cannot be the range of a comprehension", tree)
        self._scopes.append({variable: item_type})
        try:
            bodies = [self.compile(arg) for arg in arg_trees[1:]]
        finally:
            self._scopes.pop()
        predicates = bodies if macro != "map" else bodies[:-1]
        for predicate in predicates:
            if predicate.type not in (BOOL, DYN):
                raise _CheckError(f"{macro}() predicate must be bool, not {predicate.type}", tree)
        range_fn = collection.fn
        body_fns = [body.fn for body in bodies]
        var = variable

        def each(env: _Env) -> Iterable[_Env]:
            local = dict(env)
            for item in _iteration_items(range_fn(env)):
                local[var] = item
                yield local

        if macro in ("all", "exists"):
            decisive = macro == "exists"
            (predicate_fn,) = body_fns

            def quantifier(env: _Env) -> object:
                # Folded with && (all) or || (exists): a deciding value absorbs earlier errors.
                error: _EvalError | None = None
                for local in each(env):
                    try:
                        value = predicate_fn(local)
                    except _EvalError as caught:
                        error = error or caught
                        continue
                    if value is decisive:
                        return decisive
                    if value is not (not decisive):
                        error = error or _no_overload(macro, value)
                if error is not None:
                    raise error
                return not decisive

            return _Node(quantifier, BOOL)
        if macro == "exists_one":
            (predicate_fn,) = body_fns

            def exists_one(env: _Env) -> object:
                count = 0
                for local in each(env):
                    value = predicate_fn(local)
                    if type(value) is not bool:
                        raise _no_overload("exists_one", value)
                    count += value
                return count == 1

            return _Node(exists_one, BOOL)
        if macro == "filter":
            (predicate_fn,) = body_fns

            def filter_items(env: _Env) -> object:
                kept: list[object] = []
                for local in each(env):
                    value = predicate_fn(local)
                    if type(value) is not bool:
                        raise _no_overload("filter", value)
                    if value:
                        kept.append(local[var])
                return kept

            return _Node(filter_items, _T("list", (item_type,)))
        transform_fn = body_fns[-1]
        filter_fn = body_fns[0] if len(body_fns) == 2 else None

        def map_items(env: _Env) -> object:
            mapped: list[object] = []
            for local in each(env):
                if filter_fn is not None:
                    keep = filter_fn(local)
                    if type(keep) is not bool:
                        raise _no_overload("map", keep)
                    if not keep:
                        continue
                mapped.append(transform_fn(local))
            return mapped

        return _Node(map_items, _T("list", (bodies[-1].type,)))

    # -- helpers -----------------------------------------------------------------------------

    def _lookup(self, name: str) -> _T | None:
        for scope in reversed(self._scopes):
            if name in scope:
                return scope[name]
        return None

    def _require_declared(self, operand_tree: _Tree, field: str) -> None:
        name = _simple_name(operand_tree)
        if name is not None and self._lookup(name) is None:
            raise _CheckError(f"undeclared reference to '{name}.{field}'", operand_tree)

    @staticmethod
    def _fold(node: _Node, operands: Sequence[_Node]) -> _Node:
        """Evaluate pure operations on constants once (quantity('40Gi'), semver('570.0.0'), ...).

        A constant that fails stays a runtime error: Kubernetes reports it per evaluation.
        """
        if not all(operand.constant is not _NO_CONSTANT for operand in operands):
            return node
        try:
            value = node.fn({})
        except _EvalError:
            return node
        return _Node(node.fn, node.type, value) if isinstance(value, list | dict) else _constant(value, node.type)


# Optional-type syntax is valid in Kubernetes but cel-python's grammar has no rule for it.
_OPTIONAL_SYNTAX = re.compile(r"""('(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*")|(\.\?|\[\?)""")


def _uses_optional_syntax(expression: str) -> bool:
    return any(match.group(2) for match in _OPTIONAL_SYNTAX.finditer(expression))


def _position(tree: _Tree | None) -> str:
    if tree is None or getattr(tree.meta, "empty", True):
        return ""
    return f" at line {tree.meta.line}, column {tree.meta.column}"


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------

_MAX_EXPRESSION_LENGTH = 10 * 1024  # CELSelectorExpressionMaxLength


@final
class CompiledSelector:
    """A compiled DRA selector; evaluate it against many devices."""

    __slots__ = ("_fn", "_result_type", "expression")

    def __init__(self, expression: str, fn: _Closure, result_type: _T) -> None:
        self.expression = expression
        self._fn = fn
        self._result_type = result_type

    def evaluate(self, device: SelectorDevice) -> bool:
        """True/False as Kubernetes would decide; CelEvaluationError where it would abort allocation."""
        try:
            result = self._fn({"device": _DeviceValue(device)})
        except _EvalError as error:
            raise CelEvaluationError(self.expression, error.message) from None
        except RecursionError:
            raise CelEvaluationError(self.expression, "expression nests too deeply") from None
        if type(result) is not bool:
            raise CelEvaluationError(
                self.expression, f"CEL result of type {_type_name(result)} could not be converted to bool"
            )
        return result

    def __repr__(self) -> str:
        return f"CompiledSelector({self.expression!r})"


@functools.lru_cache(maxsize=2048)
def compile_selector(expression: str) -> CompiledSelector:
    """Compile a DeviceClass/request selector; cached, so repeated expressions compile once.

    Raises CelCompileError for a syntax error, an unknown function or field, a type mismatch
    Kubernetes' type checker would reject, or a result that is neither bool nor dyn.
    """
    if len(expression) > _MAX_EXPRESSION_LENGTH:
        raise CelCompileError(expression, f"expression is longer than {_MAX_EXPRESSION_LENGTH} characters")
    if _uses_optional_syntax(expression):
        raise CelCompileError(
            expression, "optional field/index syntax (.? / [?) is not supported offline", unsupported=True
        )
    try:
        tree = CELParser().parse(expression)
    except CELParseError as error:
        context = str(error.args[0]).rstrip() if error.args else ""
        raise CelCompileError(
            expression, f"syntax error at line {error.line}, column {error.column}:\n{context}"
        ) from None
    try:
        node = _Compiler().compile(tree)
    except _CheckError as issue:
        raise CelCompileError(
            expression, f"{issue.message}{_position(issue.tree)}", unsupported=issue.unsupported
        ) from None
    except RecursionError:
        raise CelCompileError(expression, "expression nests too deeply") from None
    if node.type not in (BOOL, DYN):
        raise CelCompileError(expression, f"must evaluate to bool or the unknown type, not {node.type}")
    return CompiledSelector(expression, node.fn, node.type)
