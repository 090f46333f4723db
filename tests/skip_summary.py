"""One line at the end of a run: how many tests skipped, and for want of what.

A clone alone skips the tests that need what only this project's CI has beside the checkout (`../shared`),
helm or terraform (tests/requirements.py); `-ra` lists each skip, and this line sums them up by what is
missing. conftest.py writes it; `pytest -p tests.skip_summary` adds it to any run.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Generator, Iterable
from typing import Any

import pytest

_SHARED = re.compile(r"/shared/\S* is missing: the reference files exist only beside this project's CI checkout")
_BINARY = re.compile(r"^no (\S+) binary on ")


def reason_label(reason: str) -> str:
    """What a skip was for want of, in a few words."""
    reason = reason.removeprefix("Skipped: ").strip()
    if _SHARED.search(reason):
        return "../shared beside the checkout (this project's CI files)"
    binary = _BINARY.match(reason)
    if binary:
        return f"{binary.group(1)} on PATH"
    return reason if len(reason) <= 80 else reason[:77] + "..."


def summary_line(reasons: Iterable[str]) -> str | None:
    """`111 skipped, for want of: ../shared ... (80), helm on PATH (20), ...`; None when nothing skipped."""
    counts = Counter(reason_label(reason) for reason in reasons)
    if not counts:
        return None
    total = sum(counts.values())
    wants = ", ".join(f"{label} ({n})" for label, n in counts.most_common())
    return (
        f"{total} skipped, for want of: {wants}. tests/requirements.py says what each needs; "
        "under CI=true they fail instead"
    )


def _reason(report: Any) -> str:
    longrepr = getattr(report, "longrepr", None)
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr or "")


def write_skip_summary(terminalreporter: pytest.TerminalReporter) -> None:
    line = summary_line(_reason(r) for r in terminalreporter.stats.get("skipped", []))
    if line is not None:
        terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> Generator[None, None, None]:
    # A wrapper, written after the inner summaries: after `-ra`'s list, just before the final counts.
    yield
    write_skip_summary(terminalreporter)
