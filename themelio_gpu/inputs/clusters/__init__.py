"""Cluster definitions (the YAML in the top-level stacks/ folder) and the stack built from each."""
