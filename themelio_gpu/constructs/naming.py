"""Stable, readable Terraform addresses: plans and `terraform state` show these names."""

from __future__ import annotations

import re

FIELD_MANAGER = "themelio-gpu-stacks"


def logical_id(*parts: str) -> str:
    """`("node_labels", "a100-mig")` -> `node_labels_a100-mig` (Terraform allows letters, digits, _ and -)."""
    return "_".join(re.sub(r"[^A-Za-z0-9_-]", "_", p) for p in parts)
