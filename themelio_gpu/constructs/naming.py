"""Stable, readable Terraform addresses: plans and `terraform state` show these names."""

from __future__ import annotations

import re


def logical_id(*parts: str) -> str:
    """`("node_labels", "a100-mig")` -> `node_labels_a100-mig` (Terraform allows letters, digits, _ and -)."""
    return "_".join(re.sub(r"[^A-Za-z0-9_-]", "_", p) for p in parts)


# A node pool's resource ids: the pool's name is part of its addresses (docs/resource-addresses.md), so a
# renamed pool's addresses move (constructs/moved_blocks.py). One definition for both.
def node_labels_id(pool: str) -> str:
    return logical_id("node_labels", pool)


def node_taints_id(pool: str) -> str:
    return logical_id("node_taints", pool)


def karpenter_node_pool_id(pool: str) -> str:
    return logical_id("karpenter_node_pool", pool)
