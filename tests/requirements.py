"""What a test needs from outside the project: the reference files in ../shared, helm, terraform.

A clone alone has none of them: those tests skip, with the reason printed (`-ra` in pytest's options).
In CI (`CI=true`) nothing may skip: a missing requirement fails the test instead, so a broken CI setup
cannot pass by skipping.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(reason: str) -> None:
    """Skip (or fail, in CI) the calling test for want of `reason`."""
    if in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def shared_path(*parts: str) -> Path:
    """A path under ../shared; skips (fails in CI) when it is not there."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        unavailable(f"{path} is missing: the reference files exist only beside this project's CI checkout")
    return path


def binary(name: str, env_var: str | None = None) -> str:
    """A tool on PATH (or named by `env_var`); skips (fails in CI) when it cannot be found."""
    found = os.environ.get(env_var) if env_var else None
    found = found or shutil.which(name)
    if not found:
        where = f"${env_var} or PATH" if env_var else "PATH"
        unavailable(f"no {name} binary on {where}")
    assert found is not None
    return found
