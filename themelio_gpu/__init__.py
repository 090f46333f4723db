"""Themelio GPU stacks: one GPU catalog, one Terraform stack per Kubernetes cluster (see README.md)."""

__version__ = "0.1.0"
"""The one place the version is written: `--version` prints it; package.json must carry the same."""
