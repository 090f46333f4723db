"""manifest.json, written as each engine writes it: the list of every stack of the output folder.

A synthesis that writes only the stacks whose inputs changed (stack_inputs.py) still lists every stack: the
entries of the others come from the manifest already there. The text is the engine's own, byte for byte
(tests/test_incremental.py compares both engines' files): cdktf 0.21 uses json-stable-stringify (keys
sorted, and an empty list or object still opens a line), CDK Terrain safe-stable-stringify (keys sorted,
`[]` and `{}`, as JSON.stringify with two spaces).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from themelio_gpu.engine import Engine


def stable_stringify(value: Any, level: int = 0) -> str:
    """JSON as json-stable-stringify writes it with two spaces (cdktf's manifest.json)."""
    space = "  "
    indent = "\n" + space * level
    if isinstance(value, dict):
        items = [
            f"{indent}{space}{json.dumps(key, ensure_ascii=False)}: {stable_stringify(value[key], level + 1)}"
            for key in sorted(value)
        ]
        return "{" + ",".join(items) + indent + "}"
    if isinstance(value, list):
        return "[" + ",".join(f"{indent}{space}{stable_stringify(v, level + 1)}" for v in value) + indent + "]"
    return json.dumps(value, ensure_ascii=False)


def manifest_text(data: Mapping[str, Any], engine: Engine) -> str:
    if engine.name == "cdktf":
        return stable_stringify(dict(data))
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest's data, or None when there is none or it is not one (every stack is then written)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("stacks"), dict) or "version" not in data:
        return None
    return data
