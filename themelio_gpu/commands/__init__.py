"""One module per top-level command of `python -m themelio_gpu`: each has `register(commands)`, which adds its
parser (help, description, and an epilog with its own exit codes), and `run(args) -> int`.

The command list is in themelio_gpu/cli.py; the exit codes every command uses are in exits.py. Argument
parsing lives here; what a command does lives in the package it belongs to.
"""
