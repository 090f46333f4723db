"""Kubernetes' own rules, each written once, with the upstream file it follows named in its docstring."""
