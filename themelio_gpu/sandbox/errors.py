"""The sandbox's two kinds of failure, each one message for the user (the command turns them into exit codes)."""

from __future__ import annotations


class SandboxError(Exception):
    """A sandbox step failed: the message says which and what to do."""


class SandboxUsageError(SandboxError):
    """The command cannot start: no sandbox of that cluster, one up already, a port in use (exit 2)."""


class MissingToolError(SandboxUsageError):
    """A tool the sandbox needs is not built; the message names the target that builds it."""
