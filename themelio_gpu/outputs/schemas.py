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
