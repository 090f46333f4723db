"""JSON values that several stacks pass to cdktf cross into jsii's node process once.

jsii copies a value passed to cdktf into node value by value (and node checks each one), and a stack's
outputs and its DeviceClass map are about a thousand JSON values. Clusters that serve the same offerings
pass the same values: the first stack that passes one creates a cdktf token holding it (one copy), and
every stack passes a reference to that token, which synthesizes to the same JSON. A value only one stack
uses costs one round trip more than passing it would; one that two or more use crosses once instead of
once per stack.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from themelio_gpu.constructs.providers import Token
from themelio_gpu.speedups import Speedup, enabled

# Per process, as cdktf's tokens are (they live as long as the jsii node process).
_tokens: dict[tuple[str, Callable[[Any], Any], str], Any] = {}


def _as_is(value: Any) -> Any:
    return value


def _shared(kind: str, value: Any, as_token: Callable[[Any], Any], prepare: Callable[[Any], Any]) -> Any:
    if not enabled(Speedup.SHARED_VALUES):
        return prepare(value)
    # Keyed by the value as given: `prepare` (e.g. literal()) runs once per value, for the token.
    try:
        key = (kind, prepare, json.dumps(value, sort_keys=True))
    except TypeError:
        return prepare(value)  # holds jsii objects (references to resources): nothing to share
    if key not in _tokens:
        _tokens[key] = as_token(prepare(value))
    return _tokens[key]


def shared_value(value: Any, prepare: Callable[[Any], Any] = _as_is) -> Any:
    """One token (an IResolvable) holding `prepare(value)`, the same for every stack that passes it."""
    return _shared("any", value, Token.as_any, prepare)


def shared_map(value: Mapping[str, Any], prepare: Callable[[Any], Any] = _as_is) -> Mapping[str, Any]:
    """One token holding `prepare(value)`, encoded as a map (for map arguments), the same for every stack."""
    result: Mapping[str, Any] = _shared("map", value, Token.as_any_map, prepare)
    return result


@cache
def each_value_map() -> Mapping[str, Any]:
    """`each.value` as a map (for map arguments): one token for all resources, one round trip per process."""
    return Token.as_any_map("${each.value}")
