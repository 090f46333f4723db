"""The preflight report: one `OK`/`WARN`/`FAIL <check>: <detail>` line per result, then a summary line.

Lines are printed as they come, so a slow request shows where it waits; a FAIL makes the exit code 1.
"""

from __future__ import annotations

from typing import Literal, TextIO

Status = Literal["OK", "WARN", "FAIL"]


class Report:
    """Prints each result as it comes, so a slow request shows where it waits, and counts them."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.counts: dict[Status, int] = {"OK": 0, "WARN": 0, "FAIL": 0}

    def line(self, status: Status, check: str, detail: str) -> None:
        self.counts[status] += 1
        print(f"{status:<4} {check}: {detail}", file=self.out, flush=True)

    def ok(self, check: str, detail: str) -> None:
        self.line("OK", check, detail)

    def warn(self, check: str, detail: str) -> None:
        self.line("WARN", check, detail)

    def fail(self, check: str, detail: str) -> None:
        self.line("FAIL", check, detail)

    @property
    def failed(self) -> bool:
        return self.counts["FAIL"] > 0

    def summary(self, cluster: str) -> None:
        verdict = f"cluster {cluster} is NOT ready" if self.failed else f"cluster {cluster} passed"
        counts = ", ".join(f"{n} {s}" for s, n in self.counts.items())
        print(f"Summary: {counts}: {verdict}", file=self.out, flush=True)
