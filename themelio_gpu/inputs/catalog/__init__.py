"""The GPU catalog: products (facts in code) and offerings (the YAML users edit)."""
