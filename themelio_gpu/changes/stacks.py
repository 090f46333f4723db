"""A synthesized output folder read as Terraform sees it: one configuration per stack, each resource expanded
into its instances (`for_each` keys, `count` indexes), with `each.key`/`each.value` put in, plus the stack's
`moved` blocks and its other settings (outputs, providers, the `terraform` block).

Only what this tool writes is evaluated: `for_each` as a literal map or `${toset([...])}` of strings, `count`
as a number. Anything else is a problem (exit 2), not a guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from themelio_gpu.inputs.problems import Problems
from themelio_gpu.inputs.yaml_input import display_path
from themelio_gpu.outputs.stack_folders import MANIFEST, STACK_FILE, STACKS_FOLDER, synthesized_stacks

# Terraform meta-arguments and cdktf's metadata: they say how Terraform handles the object, not what it is,
# so a change to them plans no update of the object.
META_ARGUMENTS = frozenset(
    {"//", "for_each", "count", "depends_on", "lifecycle", "provider", "provisioner", "connection"}
)
_TOSET = re.compile(r"^\$\{toset\((\[.*\])\)\}$", re.DOTALL)
InstanceKey = str | int | None


@dataclass(frozen=True)
class Instance:
    address: str
    """As Terraform prints it: `type.name`, `type.name["key"]` or `type.name[0]`."""
    resource: str
    """`type.name`: the address without the instance key."""
    type: str
    key: InstanceKey
    config: Any
    """The instance's arguments, meta-arguments removed, `each.key`/`each.value`/`count.index` put in."""


@dataclass(frozen=True)
class StackConfig:
    name: str
    file: str
    """The stack file as shown in messages."""
    instances: Mapping[str, Instance]
    moves: tuple[tuple[str, str], ...]
    """The `moved` blocks: (from, to)."""
    settings: Mapping[str, Any]
    """Every other top-level block (output, provider, terraform, data, ...), cdktf's `//` metadata removed."""


def instance_address(resource: str, key: InstanceKey) -> str:
    if key is None:
        return resource
    return f"{resource}[{json.dumps(key) if isinstance(key, str) else key}]"


def read_output_folder(folder: Path, problems: Problems) -> dict[str, StackConfig]:
    """Every stack of a synthesized folder (`stacks/<name>/cdk.tf.json`); an empty folder has none."""
    stacks = {}
    for path in stack_files(folder, problems).values():
        stack = read_stack(path, problems)
        if stack is not None:
            stacks[stack.name] = stack
    return stacks


def stack_files(folder: Path, problems: Problems) -> dict[str, Path]:
    """The stack file of every stack of a synthesized folder, by name, unread; an empty folder has none."""
    shown = display_path(folder)
    if not folder.is_dir():
        problems.add(shown, "", "folder not found" if not folder.exists() else "not a folder")
        return {}
    stacks_folder = folder / STACKS_FOLDER
    if not stacks_folder.is_dir():
        if any(folder.iterdir()):
            problems.add(
                shown,
                "",
                f"not a synthesized output folder: it has no {STACKS_FOLDER}/ folder (an empty folder stands for "
                "a fleet without stacks)",
            )
        return {}
    files = synthesized_stacks(folder)
    if not files and not (folder / MANIFEST).is_file() and any(stacks_folder.iterdir()):
        problems.add(shown, "", f"no stack files ({STACKS_FOLDER}/<name>/{STACK_FILE}) in this folder")
    return files


def read_stack(path: Path, problems: Problems, raw: bytes | None = None) -> StackConfig | None:
    """The stack in `path` (`raw`: its bytes, read already), or None with a problem."""
    shown = display_path(path)
    data = _json_of(path, shown, problems, raw)
    if data is None:
        return None
    before = len(problems)
    instances = _instances(data.get("resource", {}), shown, problems)
    moves = _moves(data.get("moved", []), shown, problems)
    if len(problems) > before:
        return None
    settings = {k: _without_metadata(v) for k, v in data.items() if k not in ("//", "resource", "moved")}
    return StackConfig(path.parent.name, shown, instances, moves, settings)


def instance_count(path: Path, problems: Problems, raw: bytes | None = None) -> int | None:
    """How many instances the stack in `path` has, `len(read_stack(...).instances)`, without building them."""
    shown = display_path(path)
    data = _json_of(path, shown, problems, raw)
    if data is None:
        return None
    before = len(problems)
    count = sum(
        len(_keys(body, shown, where, problems))
        for _, _, body, where in _resource_bodies(data.get("resource", {}), shown, problems)
    )
    return count if len(problems) == before else None


def _json_of(path: Path, shown: str, problems: Problems, raw: bytes | None) -> dict[str, Any] | None:
    try:
        data = json.loads((path.read_bytes() if raw is None else raw).decode("utf-8"))
    except json.JSONDecodeError as error:
        problems.add(shown, "", f"not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})")
        return None
    except (OSError, UnicodeDecodeError) as error:
        problems.add(shown, "", f"cannot be read: {error}")
        return None
    if not isinstance(data, dict):
        problems.add(shown, "", "not a Terraform JSON configuration (the top level must be an object)")
        return None
    return data


def _without_metadata(value: Any) -> Any:
    """cdktf writes a `//` key (construct path, ids) into blocks; it is not configuration."""
    if isinstance(value, dict):
        return {k: _without_metadata(v) for k, v in value.items() if k != "//"}
    if isinstance(value, list):
        return [_without_metadata(v) for v in value]
    return value


def _instances(resources: Any, file: str, problems: Problems) -> dict[str, Instance]:
    found: dict[str, Instance] = {}
    for type_name, name, body, where in _resource_bodies(resources, file, problems):
        resource = f"{type_name}.{name}"
        config = {k: v for k, v in body.items() if k not in META_ARGUMENTS}
        for key, each_value in _keys(body, file, where, problems):
            instance = Instance(
                instance_address(resource, key),
                resource,
                type_name,
                key,
                _put_in(config, key, each_value),
            )
            found[instance.address] = instance
    return found


def _resource_bodies(
    resources: Any, file: str, problems: Problems
) -> Iterator[tuple[str, str, dict[str, Any], str]]:
    """(type, name, body, where) of every resource block, sorted; a problem for every block of another shape."""
    if not isinstance(resources, dict):
        problems.add(file, "resource", "must be an object of resource types")
        return
    for type_name, by_name in sorted(resources.items()):
        if not isinstance(by_name, dict):
            problems.add(file, f"resource.{type_name}", "must be an object of resource names")
            continue
        for name, body in sorted(by_name.items()):
            where = f"resource.{type_name}.{name}"
            if not isinstance(body, dict):
                problems.add(file, where, "must be an object of arguments")
                continue
            yield type_name, name, body, where


def _keys(body: dict[str, Any], file: str, where: str, problems: Problems) -> list[tuple[InstanceKey, Any]]:
    """(instance key, each.value) for every instance of the resource."""
    if "for_each" in body:
        for_each = body["for_each"]
        if isinstance(for_each, dict):
            return sorted(for_each.items())
        if isinstance(for_each, str):
            literal = _TOSET.match(for_each)
            if literal:
                try:
                    keys = json.loads(literal.group(1))
                except json.JSONDecodeError:
                    keys = None
                if isinstance(keys, list) and all(isinstance(k, str) for k in keys):
                    return [(k, k) for k in sorted(set(keys))]
        problems.add(
            file,
            f"{where}.for_each",
            "changed reads for_each as a literal map or ${toset([...])} of strings (what this tool writes); it "
            f"cannot evaluate {str(for_each)[:80]!r}",
        )
        return []
    if "count" in body:
        count = body["count"]
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            return [(index, None) for index in range(count)]
        problems.add(
            file, f"{where}.count", f"changed reads count as a whole number; it cannot evaluate {count!r}"
        )
        return []
    return [(None, None)]


def _put_in(config: Any, key: InstanceKey, each_value: Any) -> Any:
    """The instance's configuration: `${each.value}` (a whole value), `${each.key}` and `${count.index}`."""
    if key is None:
        return _without_metadata(config)
    if isinstance(config, dict):
        return {k: _put_in(v, key, each_value) for k, v in config.items() if k != "//"}
    if isinstance(config, list):
        return [_put_in(v, key, each_value) for v in config]
    if isinstance(config, str):
        if config == "${each.value}":
            return _without_metadata(each_value)
        if config in ("${each.key}", "${count.index}"):
            return key
        if isinstance(key, str):
            config = config.replace("${each.key}", key)
        if isinstance(each_value, str):
            config = config.replace("${each.value}", each_value)
        return config.replace("${count.index}", str(key))
    return config


def _moves(moved: Any, file: str, problems: Problems) -> tuple[tuple[str, str], ...]:
    blocks = [moved] if isinstance(moved, dict) else moved
    if not isinstance(blocks, list):
        problems.add(file, "moved", "must be a list of {from, to} blocks")
        return ()
    moves = []
    for index, block in enumerate(blocks):
        if isinstance(block, dict) and isinstance(block.get("from"), str) and isinstance(block.get("to"), str):
            moves.append((block["from"], block["to"]))
        else:
            problems.add(file, f"moved[{index}]", "must have a from and a to address")
    return tuple(moves)
