"""Themelio GPU stacks: one GPU catalog, one Terraform stack per Kubernetes cluster (see README.md)."""

from themelio_gpu.bindings_loader import preload_into_node

__version__ = "0.1.0"
"""The one place the version is written: `--version` prints it; package.json must carry the same."""

# Here, ahead of any cdktf import (which starts jsii's node process): see bindings_loader.py.
preload_into_node()
