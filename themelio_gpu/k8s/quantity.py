"""Kubernetes quantities, as k8s.io/apimachinery/pkg/api/resource/quantity.go parses, compares and writes them.

`parse_quantity` is `resource.ParseQuantity` (same errors, same internal form: `isInteger()` and
`asApproximateFloat()` of the CEL library depend on it); `canonical_quantity` is the text the API server
stores (`Quantity.CanonicalizeBytes`): a whole number in decimal SI keeps the largest exponent that is a
multiple of 3 and leaves an integer mantissa, so `1000` is stored as `1k` and `1500` stays `1500`. A manifest
that says `1000` reads back as `1k`, and Terraform's kubernetes_manifest then fails with "Provider produced
inconsistent result after apply" (hashicorp/terraform-provider-kubernetes#2508).
"""

from __future__ import annotations

import decimal
import math
import re
from decimal import Decimal
from typing import final

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "Quantity",
    "QuantityError",
    "canonical_quantity",
    "fits_int64",
    "parse_quantity",
]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class QuantityError(ValueError):
    """`resource.ParseQuantity` would reject the string; the message is apimachinery's."""


def fits_int64(value: int) -> bool:
    return INT64_MIN <= value <= INT64_MAX


# Wide enough that scaleb/compare are exact for any value a selector or a ResourceSlice can hold.
_EXACT = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
# Refuse to materialise absurd powers of ten (apimachinery would allocate them too, then hang).
_MAX_SHIFT = 10_000

_ERR_FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_ERR_NUMERIC = "unable to parse numeric part of quantity"
_ERR_SUFFIX = "unable to parse quantity's suffix"
_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SIGNED_DIGITS = re.compile(r"[+-]?[0-9]+")

# Go's math.Pow10 tables: asApproximateFloat() multiplies by these, so results match bit for bit.
_POW10 = [float(f"1e{i}") for i in range(32)]
_POW10_POS32 = [float(f"1e{32 * i}") for i in range(10)]
_POW10_NEG32 = [float(f"1e-{32 * i}") for i in range(11)]


def _go_pow10(n: int) -> float:
    if 0 <= n <= 308:
        return _POW10_POS32[n // 32] * _POW10[n % 32]
    if -323 <= n <= 0:
        return _POW10_NEG32[-n // 32] / _POW10[-n % 32]
    return math.inf if n > 0 else 0.0


@final
class Quantity:
    """An exact Kubernetes quantity.

    The value is `coef * 10**exp`.  `dec` records apimachinery's internal form: False for the
    int64Amount fast path (exp = its scale), True for the inf.Dec form (exp = -inf scale).  The form
    matters for `isInteger()`, `asInteger()` and `asApproximateFloat()`, so it is kept faithfully.
    """

    __slots__ = ("_coef", "_dec", "_exp", "_text", "_value")

    def __init__(self, coef: int, exp: int, *, dec: bool, text: str | None = None) -> None:
        self._coef = coef
        self._exp = exp
        self._dec = dec
        self._text = text
        self._value = Decimal(coef).scaleb(exp, context=_EXACT)

    @property
    def value(self) -> Decimal:
        """The exact numeric value."""
        return self._value

    @property
    def text(self) -> str:
        """The string it was parsed from, else a plain decimal rendering."""
        if self._text is not None:
            return self._text
        normalized = self._value.normalize(context=_EXACT)
        if -40 <= normalized.adjusted() <= 40:
            return format(normalized, "f")
        return str(normalized)

    def compare(self, other: Quantity) -> int:
        """Quantity.Cmp: -1, 0 or 1."""
        if self._value < other._value:
            return -1
        return 1 if self._value > other._value else 0

    def sign(self) -> int:
        return (self._coef > 0) - (self._coef < 0)

    def as_int64(self) -> int | None:
        """Quantity.AsInt64: only the int64Amount form with a non-negative scale converts."""
        if self._dec or self._exp < 0:
            return None
        if self._coef == 0:
            return 0
        if self._exp > 18:
            return None
        result = self._coef * 10**self._exp
        return result if fits_int64(result) else None

    def as_approximate_float(self) -> float:
        """Quantity.AsApproximateFloat64, including Go's Pow10 rounding."""
        try:
            base = float(self._coef)
        except OverflowError:
            base = math.inf if self._coef > 0 else -math.inf
        if self._exp == 0:
            return base
        return base * _go_pow10(self._exp)

    def add(self, other: Quantity) -> Quantity:
        """Quantity.Add: int64Amount arithmetic when both fit, else exact inf.Dec arithmetic."""
        if not self._dec and not other._dec:
            summed = _int64_amount_add((self._coef, self._exp), (other._coef, other._exp))
            if summed is not None:
                return Quantity(summed[0], summed[1], dec=False)
        exp = min(self._exp, other._exp)
        if max(self._exp, other._exp) - exp > _MAX_SHIFT:
            raise QuantityError("quantity arithmetic exceeds the supported precision")
        coef = self._coef * 10 ** (self._exp - exp) + other._coef * 10 ** (other._exp - exp)
        return Quantity(coef, exp, dec=True)

    def sub(self, other: Quantity) -> Quantity:
        # int64Amount.Sub negates in int64, so -MinInt64 wraps to itself as in Go.
        negated = -other._coef if other._coef != INT64_MIN or other._dec else INT64_MIN
        return self.add(Quantity(negated, other._exp, dec=other._dec))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._value == other._value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._value)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Quantity({self.text!r})"


def _int64_amount_add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int] | None:
    """int64Amount.Add: None when the result leaves int64 (the caller falls back to inf.Dec)."""
    (a_value, a_scale), (b_value, b_scale) = a, b
    if b_value == 0:
        return a
    if a_value == 0:
        return b
    if a_scale == b_scale:
        total, scale = a_value + b_value, a_scale
    elif a_scale > b_scale:
        if a_scale - b_scale > 18:
            return None
        shifted = a_value * 10 ** (a_scale - b_scale)
        if not fits_int64(shifted):
            return None
        total, scale = shifted + b_value, b_scale
    else:
        if b_scale - a_scale > 18:
            return None
        shifted = b_value * 10 ** (b_scale - a_scale)
        if not fits_int64(shifted):
            return None
        total, scale = a_value + shifted, a_scale
    return (total, scale) if fits_int64(total) else None


def _scan_quantity(text: str) -> tuple[bool, str, str, str, str]:
    """parseQuantityString: (positive, value, num, denom, suffix); raises on a malformed string."""
    positive = True
    pos, end = 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        # Go returns here with value "0" (so "-", "+" and "00" all parse as zero).
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return positive, text, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(_ERR_FORMAT)
    return positive, value, num, denom, text[suffix_start:]


def _interpret_suffix(suffix: str) -> tuple[int, int, bool] | None:
    """quantitySuffixer.interpret: (base, exponent, binary) or None."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], False
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], True
    if len(suffix) > 1 and suffix[0] in "eE" and _SIGNED_DIGITS.fullmatch(suffix[1:]):
        parsed = int(suffix[1:])
        # Current apimachinery rejects exponents outside [-MaxInt32, MaxInt32] (older releases
        # silently wrapped them into an unrelated int32).
        if abs(parsed) > 2**31 - 1:
            return None
        return 10, parsed, False
    return None


def parse_quantity(text: str) -> Quantity:
    """resource.ParseQuantity, exactly; raises QuantityError with apimachinery's message."""
    if text == "":
        raise QuantityError(_ERR_FORMAT)
    if text == "0":
        return Quantity(0, 0, dec=False, text=text)
    positive, value, num, denom, suffix = _scan_quantity(text)
    interpreted = _interpret_suffix(suffix)
    if interpreted is None:
        raise QuantityError(_ERR_SUFFIX)
    base, exponent, binary = interpreted

    mantissa = 1
    scale = 0
    if not binary:
        scale = exponent
        precision = 18 - (len(num) + len(denom))
    elif exponent >= 0 and not denom:
        mantissa = 1 << exponent
        precision = 15 - len(num) - exponent * 3 // 10 - 1
    else:
        precision = -1
    if precision >= 0:
        scale -= len(denom)
        if scale >= -9:
            result = int(num + denom) * mantissa
            if result <= INT64_MAX:
                return Quantity(result if positive else -result, scale, dec=False, text=text)

    # Slow path: inf.Dec arithmetic, rounded up (away from zero) to nano, binary capped at int64.
    try:
        parsed = Decimal(value)
    except decimal.InvalidOperation:
        raise QuantityError(_ERR_NUMERIC) from None
    sign_bit, digits, dec_exp = parsed.as_tuple()
    unscaled = int("".join(map(str, digits)) or "0")
    exp = int(dec_exp)
    if base == 10:
        exp += exponent
    else:
        unscaled <<= exponent
    if unscaled != 0:
        # inf.Dec Round(amount, Nano, RoundUp): the result always has nano scale.
        if exp < -9:
            shift = -9 - exp
            unscaled = 1 if shift > len(str(unscaled)) else -(-unscaled // 10**shift)
        elif exp + 9 > _MAX_SHIFT:
            raise QuantityError(_ERR_NUMERIC)
        else:
            unscaled *= 10 ** (exp + 9)
        exp = -9
        if binary and unscaled > INT64_MAX * 10**9:
            # maxAllowed is inf.NewDec(MaxInt64, 0): the capped value has scale 0.
            unscaled, exp = INT64_MAX, 0
    if sign_bit:
        unscaled = -unscaled
    return Quantity(unscaled, exp, dec=True, text=text)


_SUFFIXES = {0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def canonical_quantity(value: int) -> str:
    """The API server's canonical text of a whole, non-negative decimal quantity."""
    if value < 0:
        raise ValueError(f"a count is not negative: {value}")
    exponent = 0
    while value and value % 1000 == 0 and exponent < 18:
        value //= 1000
        exponent += 3
    return f"{value}{_SUFFIXES[exponent]}"
