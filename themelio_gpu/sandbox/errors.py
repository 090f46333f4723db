"""The sandbox's two kinds of failure, each one message for the user (the command turns them into exit codes)."""

from __future__ import annotations


class SandboxError(Exception):
    """A sandbox step failed: the message says which and what to do."""


class MissingToolError(SandboxError):
    """A tool the sandbox needs is not built; the message names the target that builds it."""
