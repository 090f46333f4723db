"""Counts in messages: `1 cluster`, `2 clusters`, never `1 clusters`."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`3 pools`, `1 pool`; `plural` where adding an s is not it (`DeviceClasses`)."""
    return f"{n} {noun if n == 1 else plural or f'{noun}s'}"
