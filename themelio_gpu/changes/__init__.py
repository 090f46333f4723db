"""`changed`: what a change to the fleet does to each stack, read from two synthesized output folders.

Per stack added, changed, removed or unchanged; per resource address (for_each instances included) create,
update, replace (an attribute the provider forces a new resource for, replacement.py), destroy or move (a
`moved` block, nothing else changes); and what would hurt a running cluster (dangerous.py). No Terraform
state is read: the base folder stands for what is deployed. See docs/changed.md.
"""
