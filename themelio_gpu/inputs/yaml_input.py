"""Reading user YAML into pydantic models, turning every failure into `Problems`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from themelio_gpu.inputs.problems import Problems

ModelT = TypeVar("ModelT", bound=BaseModel)


# libyaml's parser when PyYAML has it (its wheels do): the same documents, several times faster.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """SafeLoader that refuses duplicate mapping keys.

    Plain PyYAML keeps the last of two equal keys, so a pasted offering would silently replace another.
    """


def _construct_unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            mark = key_node.start_mark
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (line {mark.line + 1})", mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_unique_mapping,
)


def display_path(path: Path) -> str:
    """A path as users typed it, relative to the working directory when possible (no machine paths)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load_yaml_file(path: Path, problems: Problems, shown_as: str | None = None) -> Any:
    """The parsed YAML of `path`, or None with a problem recorded."""
    return load_yaml_document(path, problems, shown_as)[0]


def load_yaml_document(path: Path, problems: Problems, shown_as: str | None = None) -> tuple[Any, KeyLines]:
    """The parsed YAML of `path` (None with a problem recorded) and the line of every key in it."""
    name = shown_as or display_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        problems.add(name, "", "file not found")
        return None, KeyLines()
    except (OSError, UnicodeDecodeError) as error:
        problems.add(name, "", f"cannot read file: {error}")
        return None, KeyLines()
    data = parse_yaml_text(text, name, problems)
    return data, KeyLines.of(text) if data is not None else KeyLines()


class KeyLines:
    """Where each key of a YAML document is (1-based line), so a problem can name the line to fix."""

    def __init__(self, lines: Mapping[tuple[str | int, ...], int] | None = None) -> None:
        self._lines = MappingProxyType(dict(lines or {}))

    @classmethod
    def of(cls, text: str) -> KeyLines:
        try:
            root = yaml.compose(text, Loader=_SafeLoader)
        except yaml.YAMLError:
            return cls()
        lines: dict[tuple[str | int, ...], int] = {}
        pending: list[tuple[tuple[str | int, ...], yaml.Node]] = [((), root)] if root is not None else []
        while pending:
            path, node = pending.pop()
            if isinstance(node, yaml.MappingNode):
                for key_node, value_node in node.value:
                    key = (*path, str(key_node.value))
                    lines[key] = key_node.start_mark.line + 1
                    pending.append((key, value_node))
            elif isinstance(node, yaml.SequenceNode):
                for index, item in enumerate(node.value):
                    lines[(*path, index)] = item.start_mark.line + 1
                    pending.append(((*path, index), item))
        return cls(lines)

    def line(self, path: tuple[str | int, ...]) -> int | None:
        """The line of `path`, or of its nearest ancestor the document has (a missing key: its parent)."""
        for end in range(len(path), 0, -1):
            if path[:end] in self._lines:
                return self._lines[path[:end]]
        return None

    def locate(self, path: tuple[str | int, ...]) -> str:
        """`line 12: products.b200.memoryGiB` (the key path alone when the line is unknown)."""
        line = self.line(path)
        where = format_location(path)
        return f"line {line}: {where}" if line is not None else where


def parse_yaml_text(text: str, name: str, problems: Problems) -> Any:
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = " ".join(part for part in (error.context, error.problem) if part)
        problems.add(name, where, f"invalid YAML: {what}")
    except yaml.YAMLError as error:
        problems.add(name, "", f"invalid YAML: {error}")
    return None


def format_location(loc: tuple[int | str, ...]) -> str:
    """`('offerings', 'nvidia.com/a100', 'quota')` -> `offerings["nvidia.com/a100"].quota`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.replace("_", "").replace("-", "").isalnum():
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out


def _pydantic_message(error: Any) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown key (check the spelling; see the JSON schema for the keys allowed here)"
    if kind == "missing":
        return "required key is missing"
    message = str(error["msg"])
    # pydantic prefixes custom ValueError messages with "Value error, "; users need only the message.
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def validate_model(
    model: type[ModelT],
    data: Any,
    name: str,
    problems: Problems,
    prefix: tuple[str | int, ...] = (),
    locate: Callable[[tuple[str | int, ...]], str] = format_location,
) -> ModelT | None:
    """`model` validated from `data`, or None with every validation error recorded (at `locate(path)`)."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        for item in error.errors():
            # Discriminated unions add the tag as a location part; drop function-name noise.
            loc = tuple(p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            problems.add(name, locate(prefix + loc), _pydantic_message(item))
        return None
