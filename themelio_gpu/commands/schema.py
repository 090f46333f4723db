"""`schema`: rewrite the JSON Schemas of the catalog and cluster files."""

from __future__ import annotations

import argparse

from themelio_gpu import exits
from themelio_gpu.commands.base import Commands, add_command


def register(commands: Commands) -> None:
    parser = add_command(
        commands,
        "schema",
        "rewrite the JSON Schemas of the catalog and cluster files",
        "Writes catalog/gpu-catalog.schema.json and stacks/cluster.schema.json.",
        exits="0 written, 2 a schema file cannot be written",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from themelio_gpu.render.schemas import schema_texts

    for path, text in schema_texts().items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return exits.OK
