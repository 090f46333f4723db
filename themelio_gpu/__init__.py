"""Themelio GPU stacks: one GPU catalog and cluster definitions in, one Terraform stack per cluster out."""

from themelio_gpu.bindings_loader import preload_into_node

# Here, ahead of any cdktf import (which starts jsii's node process): see bindings_loader.py.
preload_into_node()
