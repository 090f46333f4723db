"""pydantic's validation errors in a user's words: each a problem at its key path, with its line and column.

What pydantic says ("Input should be a valid string") becomes what the user can act on: the kind of value
expected and what YAML made of the one given, the keys allowed where an unknown one stands, the nearest
allowed value, why a required key is needed.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Iterable, Mapping, Sequence, Sized
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from themelio_gpu.inputs.problems import KeyPath, Problems
from themelio_gpu.inputs.yaml_input import YamlDocument

ModelT = TypeVar("ModelT", bound=BaseModel)


def _flatten(annotation: Any) -> list[Any]:
    """The concrete types behind Annotated[...] and unions."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _flatten(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [t for arg in get_args(annotation) for t in _flatten(arg)]
    return [annotation]


def _type_under(annotation: Any, part: str | int) -> Any:
    """The type of what sits under `part` in a value of type `annotation` (None when unknown)."""
    for candidate in _flatten(annotation):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            for name, field in candidate.model_fields.items():
                if part in (name, field.alias):
                    return field.annotation
            tag = candidate.model_fields.get("type")
            if tag is not None and part in get_args(tag.annotation):
                return candidate  # the tag pydantic puts in the location of a discriminated union member
        origin = get_origin(candidate)
        if origin in (tuple, list) and isinstance(part, int):
            return get_args(candidate)[0]
        if origin is dict:
            return get_args(candidate)[1]
    return None


def _annotation_at(model: type[BaseModel], location: Sequence[str | int]) -> Any:
    """The type of what sits at `location` in a file of `model` (None when unknown)."""
    annotation: Any = model
    for part in location:
        annotation = _type_under(annotation, part)
        if annotation is None:
            return None
    return annotation


def allowed_keys(model: type[BaseModel], location: Sequence[str | int]) -> list[str]:
    """The keys a file may have at `location` (the parent of an unknown key), as the user spells them."""
    annotation = _annotation_at(model, location)
    if annotation is None:
        return []
    keys: list[str] = []
    for candidate in _flatten(annotation):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            keys += [f.alias or n for n, f in candidate.model_fields.items() if (f.alias or n) not in keys]
    return keys


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """The closest of `choices` to a misspelt `word` (case mistakes first), or None."""
    choices = list(choices)
    same_case = [c for c in choices if c.lower() == word.lower()]
    if same_case:
        return same_case[0]
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return close[0] if close else None


def _why_required(model: type[BaseModel], loc: Sequence[str | int]) -> str | None:
    """Why the key at `loc` must be given, from the `WHY_REQUIRED` of the model holding it (None: not said)."""
    if not loc:
        return None
    annotation = _annotation_at(model, loc[:-1])
    for candidate in _flatten(annotation) if annotation is not None else ():
        reasons = getattr(candidate, "WHY_REQUIRED", None) if isinstance(candidate, type) else None
        if isinstance(reasons, dict) and loc[-1] in reasons:
            return str(reasons[loc[-1]])
    return None


def _unknown_key_message(model: type[BaseModel], loc: Sequence[str | int]) -> str:
    allowed = allowed_keys(model, loc[:-1])
    if not allowed:
        return "unknown key (check the spelling; see the JSON schema for the keys allowed here)"
    guess = did_you_mean(str(loc[-1]), allowed)
    hint = f"; did you mean {guess}?" if guess else ""
    return f"unknown key{hint} (keys allowed here: {', '.join(allowed)})"


_YAML_KINDS = {bool: "boolean", int: "number", float: "number"}


def describe_value(value: Any) -> str:
    """What YAML made of a value, in a user's words: `a list`, `the number 8`, `the text 'x'`."""
    if value is None:
        return "an empty value"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the text {value if len(value) <= 40 else value[:37] + '...'!r}"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return f"a {type(value).__name__}"


def _quote_hint(value: Any, node: yaml.Node | None) -> str:
    """For a string field given a YAML number or boolean: the value quoted as the user wrote it."""
    kind = _YAML_KINDS.get(type(value))
    if kind is None:
        return ""
    # libyaml marks a plain scalar with style '', the pure-Python parser with None.
    written = node.value if isinstance(node, yaml.ScalarNode) and not node.style else str(value)
    read_as = f"the {kind} {value!r}" if written != str(value) else f"a {kind}"
    return f': YAML reads the unquoted {written} as {read_as}; quote it: "{written}"'


def _choices(expected: str) -> list[str]:
    """`'a', 'b' or 'c'` (pydantic's list of allowed values) -> ['a', 'b', 'c']."""
    return re.findall(r"'([^']*)'", expected)


def _one_of(value: Any, choices: Sequence[str]) -> str:
    guess = did_you_mean(str(value), choices) if isinstance(value, str) else None
    hint = f" (did you mean {guess}?)" if guess else ""
    return f"must be one of {', '.join(choices)}, not {describe_value(value)}{hint}"


def _tags_under(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The `type` values of the models a discriminated union at `loc` takes (the backend kinds, ...)."""
    annotation = _annotation_at(model, loc)
    tags: list[str] = []
    for candidate in _flatten(annotation) if annotation is not None else ():
        if isinstance(candidate, type) and issubclass(candidate, BaseModel) and "type" in candidate.model_fields:
            tags += [str(tag) for tag in get_args(candidate.model_fields["type"].annotation)]
    return tags


_KIND_WORDS = {
    **dict.fromkeys(("string_type",), "must be text"),
    **dict.fromkeys(("int_type", "int_parsing", "int_from_float", "int_parsing_size"), "must be a whole number"),
    **dict.fromkeys(("float_type", "float_parsing", "finite_number"), "must be a number"),
    **dict.fromkeys(("bool_type", "bool_parsing"), "must be true or false"),
    **dict.fromkeys(
        ("dict_type", "model_type", "model_attributes_type", "mapping_type", "dataclass_type"),
        "must be a mapping (key: value lines)",
    ),
    **dict.fromkeys(
        ("tuple_type", "list_type", "set_type", "frozen_set_type", "iterable_type"),
        "must be a list (`- item` lines, or [a, b])",
    ),
}
"""pydantic's error types whose own words ("Input should be a valid ...") mean "this is the wrong kind of value"."""


def _pydantic_message(
    error: Any, model: type[BaseModel], loc: Sequence[str | int], node: yaml.Node | None
) -> str | None:
    """The problem in this project's words; None for an error that only follows from others (not reported)."""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    if kind == "extra_forbidden":
        return _unknown_key_message(model, loc)
    if kind == "missing":
        why = _why_required(model, loc)
        return "required key is missing" + (f": {why}" if why else "")
    if kind == "string_type" and _quote_hint(value, node):
        return "must be text" + _quote_hint(value, node)
    if kind in _KIND_WORDS:
        return f"{_KIND_WORDS[kind]}, not {describe_value(value)}"
    if kind == "too_short":
        if isinstance(value, Sized) and len(value) >= ctx["min_length"]:
            return None  # items were refused (each has its own problem): fewer than enough are left
        least = ctx["min_length"]
        return f"needs at least {least} item{'s' if least != 1 else ''}; {_count_items(ctx['actual_length'])}"
    if kind == "too_long":
        return f"takes at most {ctx['max_length']} items; {_count_items(ctx['actual_length'])}"
    bounds = {"greater_than": "more than {}", "greater_than_equal": "{} or more", "less_than": "less than {}"}
    bounds["less_than_equal"] = "{} or less"
    if kind in bounds:
        return f"must be {bounds[kind].format(next(iter(ctx.values())))}, not {value!r}"
    if kind in ("literal_error", "enum"):
        return _one_of(value, _choices(ctx["expected"]))
    if kind == "union_tag_invalid":  # validate_model puts the discriminator key into the location
        key = str(ctx["discriminator"]).strip("'")
        given = value.get(key, ctx["tag"]) if isinstance(value, Mapping) else ctx["tag"]  # ctx's tag is str()-ed
        return _one_of(given, _choices(ctx["expected_tags"]))
    if kind == "union_tag_not_found":
        what = f"the kind of {loc[-1]}" if loc and isinstance(loc[-1], str) else "which kind it is"
        tags = _tags_under(model, loc)
        return f"required key type is missing: {what}" + (f" (one of {', '.join(tags)})" if tags else "")
    message = str(error["msg"])
    # pydantic prefixes custom ValueError messages with "Value error, "; users need only the message.
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return message.replace("Input should be", "must be")


def _count_items(count: int) -> str:
    return "the list is empty" if count == 0 else f"it has {count}"


def validate_model(
    model: type[ModelT],
    data: Any,
    name: str,
    problems: Problems,
    prefix: KeyPath = (),
    document: YamlDocument | None = None,
) -> ModelT | None:
    """`model` validated from `data`, or None with every validation error recorded.

    With the `document` the data came from, each problem gets the line and column of its key.
    """
    try:
        return model.model_validate(data)
    except ValidationError as error:
        found: list[tuple[KeyPath, str | None]] = []
        for item in error.errors():
            # Discriminated unions add the tag as a location part; drop function-name noise.
            loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            full = prefix + loc
            if item["type"] == "union_tag_invalid":
                full += (str(item["ctx"]["discriminator"]).strip("'"),)  # the message is about that key
            node = document.value_node(full) if document is not None else None
            found.append((full, _pydantic_message(item, model, loc, node)))
        consequences_only = all(message is None for _, message in found)
        for full, message in found:
            if message is None:
                if not consequences_only:
                    continue
                message = "holds too few valid items"  # never reached: a refused item has its own message
            if not full and message.startswith("must be"):
                message = f"the file {message}"
            problems.add(name, full, message, document.position(full) if document is not None else None)
        return None
