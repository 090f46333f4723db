"""The figures table of docs/day-two.md from the reports `make day-two` writes (bench-results/day-two.json):
`python scripts/day_two_table.py [FILE]` prints it as Markdown."""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path
from typing import Any

HEADER = (
    "| scenario | the real plan, per address | `changed` disagrees | running workloads disturbed | classes or names "
    "missing during the apply | second plan | seconds (of which the apply) |"
)


def row(name: str, report: dict[str, Any]) -> str:
    plan = report.get("plan", [])
    counts = collections.Counter(r["real"] for r in plan)
    actions = ", ".join(f"{n} {action}" for action, n in sorted(counts.items())) or "no changes"
    drifted = sum(1 for r in plan if r["drift"])
    if drifted:
        actions += f" ({drifted} drifted)"
    gaps = {k: v for k, v in report.get("class_gaps", {}).items() if v > 0}
    missing = ", ".join(f"{k} {v} s" for k, v in gaps.items()) or "none"
    shared = report.get("class_shared") or {}
    missing += "".join(f"; {name} served by two classes in {n} polls" for name, n in shared.items())
    seconds = report.get("seconds", {})
    return (
        f"| {name} | {actions} | {report['disagreements']} of {len(plan)} addresses | {report['disturbed']} of "
        f"{len(report.get('workloads', []))} | {missing} ({report.get('class_polls')} polls) | "
        f"{report['second_plan']} | {report.get('suite_seconds', 0):.0f} ({seconds.get('apply', 0):.0f}) |"
    )


def main(path: Path) -> str:
    reports = json.loads(path.read_text())
    lines = [HEADER, "|---|---|---|---|---|---|---|"]
    lines += [row(name, r) for name, r in reports.items() if "disagreements" in r]
    return "\n".join(lines)


if __name__ == "__main__":
    print(main(Path(sys.argv[1] if len(sys.argv) > 1 else "bench-results/day-two.json")))
