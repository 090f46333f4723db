"""The exit codes of every command: one table, the same numbers as ever.

Each command's --help lists the codes it can end with, in its own words (its epilog).
"""

from __future__ import annotations

OK = 0
"""Success: written, shown, or every check passed."""
FAILED = 1
"""A check found a problem (drift, a failed proof or probe, a dangerous change, a stale file), or a step failed."""
BAD_INPUT = 2
"""Bad input (every problem is listed), a missing tool, or a folder that cannot be read or written."""
CHANGES = 2
"""`sandbox plan` only: the plan shows changes (terraform plan -detailed-exitcode)."""
INTERRUPTED = 128
"""Interrupted: 128 + the signal's number, 130 for SIGINT and 143 for SIGTERM (interrupts.Interrupted)."""
