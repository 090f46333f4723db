"""JSON Schemas of the two files users edit, for editor completion and review.

Generated from the pydantic models, so they cannot drift from what the app accepts; a test fails when
the committed copies are stale (`python -m themelio_gpu schema` rewrites them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from themelio_gpu.inputs.catalog.model import CatalogFile
from themelio_gpu.inputs.clusters.definition import ClusterDefinition
from themelio_gpu.settings import InputPaths

CATALOG_SCHEMA = Path("catalog/gpu-catalog.schema.json")
CLUSTER_SCHEMA = Path("stacks/cluster.schema.json")


def _schema(model: type[CatalogFile] | type[ClusterDefinition], title: str) -> dict[str, Any]:
    schema = model.model_json_schema(by_alias=True)
    schema["title"] = title
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def schema_texts() -> dict[Path, str]:
    return {
        CATALOG_SCHEMA: json.dumps(_schema(CatalogFile, "Themelio GPU catalog"), indent=2, sort_keys=True) + "\n",
        CLUSTER_SCHEMA: json.dumps(
            _schema(ClusterDefinition, "Themelio GPU cluster definition"), indent=2, sort_keys=True
        )
        + "\n",
    }


def schema_warnings(paths: InputPaths) -> list[str]:
    """What is wrong with the schemas beside the inputs: missing (`rm stacks/*` takes the cluster schema too) or
    older than this tool. Only where `schema` writes them: the catalog/ and stacks/ of the working directory."""
    cwd = Path.cwd()
    read_from = {CATALOG_SCHEMA: paths.catalog.parent, CLUSTER_SCHEMA: paths.stacks_dir}
    warnings = []
    for path, text in schema_texts().items():
        if (cwd / read_from[path]).resolve() != (cwd / path.parent).resolve():
            continue
        try:
            current = (cwd / path).read_text(encoding="utf-8")
        except FileNotFoundError:
            what = "is missing"
        except (OSError, UnicodeDecodeError) as error:
            what = f"cannot be read ({getattr(error, 'strerror', None) or error})"
        else:
            if current == text:
                continue
            what = "is out of date (this version of the tool accepts other keys)"
        warnings.append(
            f"{path} {what}: editors check and complete the files beside it with it (their $schema line names "
            "it). `make schemas` writes it again; keep it when you replace the example files"
        )
    return warnings
