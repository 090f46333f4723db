"""`changed`: what a change to the fleet does to each stack, read from the two sides' synthesized stacks.

Per stack added, changed, removed or unchanged; per resource address (for_each instances included) create,
update, replace (an attribute the provider forces a new resource for, replacement.py), destroy or move (a
`moved` block, nothing else changes); and what would hurt a running cluster (dangerous.py). No Terraform
state is read: the base stands for what is deployed. A stack whose inputs are the same on both sides is
unchanged without being synthesized (sides.py, inputs_first.py); what is synthesized is kept (cache.py).
See docs/changed.md.
"""
