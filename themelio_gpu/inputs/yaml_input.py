"""Reading user YAML, turning every failure to read or parse it into `Problems`.

The YAML node tree is kept beside the data, so every problem can give the line and column of the key it
is about as well as its path (`add_positions`), and a value YAML read as a number can be quoted back as the
user wrote it. `validation` turns what pydantic refuses in the data into problems.
"""

from __future__ import annotations

import codecs
import dataclasses
import functools
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from themelio_gpu.inputs.problems import KeyPath, Location, Mark, Problems, format_location

# libyaml's parser when PyYAML has it (its wheels do): the same documents, several times faster.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """SafeLoader that refuses duplicate mapping keys.

    Plain PyYAML keeps the last of two equal keys, so a pasted offering would silently replace another.
    """

    def resolve(self, kind: Any, value: str | None, implicit: Any) -> str:
        return _resolved_tag(kind, value, implicit)


_RESOLVER = yaml.resolver.Resolver()


# The tag a node gets depends only on these arguments (SafeLoader's implicit resolvers are fixed; it has no
# path resolvers), and keys and common values recur in every file: remembered instead of matched again.
@functools.lru_cache(maxsize=4096)
def _resolved_tag(kind: Any, value: str | None, implicit: Any) -> str:
    return str(_RESOLVER.resolve(kind, value, implicit))  # type: ignore[no-untyped-call]


def _construct_unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError(
                None,
                None,
                "a key must be a plain value such as a name, not a list or a mapping",
                key_node.start_mark,
            )
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


def display_path(path: Path, cwd: Path | None = None) -> str:
    """A path as users typed it, relative to the working directory when possible (no machine paths).

    `cwd`: the resolved working directory, from a caller showing many paths (resolving it costs syscalls).
    """
    try:
        return str(path.resolve().relative_to(cwd or Path.cwd().resolve()))
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class YamlDocument:
    """Parsed YAML with its node tree: where each key and value stands in the file."""

    data: Any
    root: yaml.Node | None

    def node_at(self, path: Sequence[str | int]) -> tuple[yaml.Node | None, bool]:
        """The node of the deepest part of `path` found (the key node for a mapping entry), and whether all was.

        Parts the file does not have (a discriminator tag pydantic adds, a missing key) are skipped, so a
        problem about a missing key points at the mapping that lacks it.
        """
        node, found, complete = self.root, self.root, True
        for part in path:
            if isinstance(node, yaml.MappingNode):
                entry = next((kv for kv in node.value if _key_matches(kv[0], part)), None)
                if entry is None:
                    complete = False
                    continue
                found, node = entry[0], entry[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                found = node = node.value[part]
            else:
                complete = False
        return found, complete

    def value_node(self, path: Sequence[str | int]) -> yaml.Node | None:
        node = self.root
        for part in path:
            if isinstance(node, yaml.MappingNode):
                node = next((v for k, v in node.value if _key_matches(k, part)), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                node = node.value[part]
            else:
                return None
        return node

    def position(self, path: Sequence[str | int]) -> Mark | None:
        node, _ = self.node_at(path)
        return _mark(node.start_mark) if node is not None else None


def _mark(mark: yaml.Mark) -> Mark:
    return Mark(mark.line + 1, mark.column + 1)


def _key_matches(key: yaml.Node, part: str | int) -> bool:
    return isinstance(key, yaml.ScalarNode) and key.value == str(part)


MAX_FILE_BYTES = 1024 * 1024
"""The size limit of a catalog or cluster file, 1 MiB: the example catalog is 4 KB, a cluster file 1 to 2 KB,
and a catalog with an offering for every built-in product and MIG profile (39, the benchmark's) 15 KB. A
bigger file is the wrong file (a dump, a log, an archive): refused before it is parsed, which would take
minutes and gigabytes."""

MAX_VALUES = 100_000
"""More values than any catalog or fleet file has; a document with more (written out or through aliases) is
refused."""


def read_input_text(path: Path, problems: Problems, name: str) -> str | None:
    """The text of an input file, or None with a problem saying why it cannot be one."""
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        problems.add(name, (), "file not found")
        return None
    except IsADirectoryError:
        problems.add(name, (), "is a folder, not a YAML file")
        return None
    except OSError as error:
        problems.add(name, (), f"cannot read file: {error.strerror or error}")
        return None
    if len(raw) > MAX_FILE_BYTES:
        try:
            size = f"{path.stat().st_size / 1_000_000:.1f} MB, "
        except OSError:
            size = ""
        problems.add(
            name,
            (),
            f"the file is too large ({size}over the 1 MiB limit for a catalog or cluster file, which takes a few "
            "KB): is it the right file?",
        )
        return None
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        problems.add(name, (), "the file is UTF-16 text: save it as UTF-8")
        return None
    if b"\0" in raw:
        problems.add(name, (), "a binary file, not YAML text (it holds NUL bytes): is it the right file?")
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        problems.add(
            name,
            Mark(line),
            f"the file is not UTF-8 text (byte 0x{raw[error.start]:02X} is not UTF-8): save it as UTF-8",
        )
        return None


def load_yaml_document(path: Path, problems: Problems, shown_as: str | None = None) -> YamlDocument | None:
    """The parsed YAML of `path` with its node tree, or None with a problem recorded."""
    name = shown_as or display_path(path)
    text = read_input_text(path, problems, name)
    return parse_yaml_document(text, name, problems) if text is not None else None


class _AliasError(Exception):
    pass


def _check_aliases(root: yaml.Node) -> None:
    """Refuse a document of more than MAX_VALUES values, and one whose aliases (`*name`) refer to themselves."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    aliased = False

    def size(node: yaml.Node) -> int:
        nonlocal aliased
        key = id(node)
        if key in sizes:
            aliased = True  # a node met twice: an alias refers to it
            return sizes[key]
        if key in open_nodes:
            raise _AliasError(_mark(node.start_mark), "an alias refers to a value containing it")
        open_nodes.add(key)
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = []
        total = 1 + sum(size(child) for child in children)
        open_nodes.discard(key)
        if total > MAX_VALUES:
            if aliased:
                raise _AliasError(
                    (), f"aliases expand the document to more than {MAX_VALUES} values; write them out"
                )
            raise _AliasError(
                (),
                f"more than {MAX_VALUES} values, far more than any catalog or cluster file: is it the right file?",
            )
        sizes[key] = total
        return total

    size(root)


def _constructed_data(root: yaml.Node, loader: _UniqueKeyLoader) -> Any:
    """The document's data, after refusing aliases that would expand it without bound."""
    _check_aliases(root)
    return loader.construct_document(root)


_TAG_MISMATCH = (ValueError, TypeError, AttributeError, LookupError, OverflowError)
"""What PyYAML's scalar constructors raise, instead of a YAMLError, for a value its explicit tag cannot hold
(`!!int x`, `!!float y`, `!!bool maybe`, `!!timestamp z`)."""


def _tag_mismatch(root: yaml.Node) -> tuple[Location, str]:
    """(location, message) of the first scalar that its tag's constructor rejects with a _TAG_MISMATCH."""
    loader = _UniqueKeyLoader("")
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            try:
                loader.construct_object(node, deep=True)
            except _TAG_MISMATCH:
                kind = node.tag.rpartition(":")[2]
                return _mark(node.start_mark), f"{node.value!r} is not a valid !!{kind}"
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
        elif isinstance(node, yaml.MappingNode):
            stack.extend(reversed([part for pair in node.value for part in pair]))
    return (), "a value does not match its tag"


def parse_yaml_document(text: str, name: str, problems: Problems) -> YamlDocument | None:
    loader = _UniqueKeyLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return YamlDocument(None, None)
        try:
            return YamlDocument(_constructed_data(root, loader), root)
        except _TAG_MISMATCH:
            where, what = _tag_mismatch(root)
            problems.add(name, where, f"invalid YAML: {what}")
    except _AliasError as error:
        where, what = error.args
        problems.add(name, where, f"invalid YAML: {what}")
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        problems.add(name, _mark(mark) if mark else (), _syntax_message(error, text))
    except yaml.YAMLError as error:
        problems.add(name, (), f"invalid YAML: {error}")
    except RecursionError:
        problems.add(name, (), "invalid YAML: nested too deeply")
    finally:
        loader.dispose()
    return None


_SYNTAX_HINTS = (
    (
        "mapping values are not allowed",
        "a `key: value` where none can start: is this line indented deeper than the key above it, or does a "
        "value hold ': ' unquoted (quote it)?",
    ),
    (
        "expected '-' indicator",
        "this line is indented differently from the list's `- ` items: align it with the item it belongs to, or "
        "start a new item with `- `",
    ),
    (
        "expected key",
        "this line is indented differently from the keys of the mapping it belongs to: align it with them",
    ),
    (
        "expected <block end>",
        "this line is indented differently from the lines before it: align it with the keys (or `- ` items) it "
        "belongs with",
    ),
)
"""The parser's words for indentation mistakes (libyaml's and PyYAML's), and what they mean to the user."""


def _syntax_message(error: yaml.MarkedYAMLError, text: str) -> str:
    """The parser's complaint in a user's words: a tab called a tab, an indentation mistake explained, and the
    key path the parser had read up to."""
    words = " ".join(part for part in (error.context, error.problem) if part)
    path = _path_before_error(text)
    after = f" after {path}" if path else ""
    mark = error.problem_mark or error.context_mark
    lines = text.splitlines()
    if mark is not None and mark.line < len(lines):
        line = lines[mark.line]
        if "\t" in line[: mark.column + 1] and not line[: mark.column + 1].replace("\t", " ").strip(" -"):
            return (
                f"invalid YAML{after}: a tab character indents this line; YAML indents with spaces only: "
                "replace the tab with spaces"
            )
        if mark.column < len(line) and line[mark.column] == "\t":
            return f"invalid YAML{after}: a tab character where YAML allows none: replace it with spaces"
    hint = next((meaning for found, meaning in _SYNTAX_HINTS if found in words), None)
    if hint is None:
        return f"invalid YAML{after}: {words}"
    return f"invalid YAML{after}: {hint} (the parser: {words})"


def _path_before_error(text: str) -> str:
    """The key path (`nodePools[0].product`) of the last key the parser read before it stopped, or ""."""
    loader = _UniqueKeyLoader(text)
    # One entry per open collection: [is_mapping, key or index, expects a key next].
    stack: list[list[Any]] = []

    def node_starts(is_scalar: bool, value: Any = None) -> bool:
        """Account for a node beginning in its parent; True when it is a mapping key."""
        if not stack:
            return False
        parent = stack[-1]
        if parent[0]:
            if parent[2]:
                parent[1], parent[2] = value if is_scalar else None, False
                return True
            if is_scalar:
                parent[2] = True  # the value is done: a key comes next
            return False
        parent[1] += 1
        return False

    try:
        while True:
            event = loader.get_event()
            if isinstance(event, yaml.ScalarEvent | yaml.AliasEvent):
                node_starts(True, getattr(event, "value", None))
            elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                node_starts(False)
                stack.append(
                    [
                        isinstance(event, yaml.MappingStartEvent),
                        None if isinstance(event, yaml.MappingStartEvent) else -1,
                        True,
                    ]
                )
            elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                stack.pop()
                if stack and stack[-1][0]:
                    stack[-1][2] = True
            elif isinstance(event, yaml.StreamEndEvent):
                return ""
    except yaml.YAMLError:
        pass
    finally:
        loader.dispose()
    parts: KeyPath = ()
    for is_mapping, part, _ in stack:
        if part is None or (not is_mapping and part < 0):
            break
        parts += (part if is_mapping else int(part),)
    return format_location(parts)


def parse_yaml_text(text: str, name: str, problems: Problems) -> Any:
    document = parse_yaml_document(text, name, problems)
    return document.data if document is not None else None


def add_positions(problems: Problems, documents: Mapping[str, YamlDocument]) -> None:
    """Give every problem about a path in one of `documents` the line and column of its key."""
    for index, problem in enumerate(problems.items):
        document = documents.get(problem.file)
        if document is None or problem.position or not isinstance(problem.location, tuple) or not problem.location:
            continue
        position = document.position(problem.location)
        if position:
            problems.items[index] = dataclasses.replace(problem, position=position)
    # Within a file, in the order of its lines (file-wide problems first); files keep their order.
    files = {p.file: i for i, p in reversed(list(enumerate(problems.items)))}
    problems.items.sort(key=lambda p: (files[p.file], p.position.line if p.position else 0))
