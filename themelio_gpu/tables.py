"""Plain-text tables: each column as wide as its widest cell, two spaces between columns."""

from __future__ import annotations

from collections.abc import Sequence


def table_lines(rows: Sequence[Sequence[str]], *, rule: bool = False, pad_last: bool = True) -> list[str]:
    """The lines of a table whose first row is its header (`rule`: a line of dashes under it).

    Lines end without trailing spaces; `pad_last=False` leaves the last column as it is (a free-form column
    whose width does not count, and whose own spacing is kept).
    """
    padded = len(rows[0]) if pad_last else len(rows[0]) - 1
    widths = [max(len(row[i]) for row in rows) for i in range(padded)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:padded], widths, strict=True)]
        line = "  ".join([*cells, *row[padded:]])
        lines.append(line.rstrip() if pad_last else line)
    if rule:
        lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def table(rows: Sequence[Sequence[str]], *, rule: bool = False, pad_last: bool = True) -> str:
    """The table as one string (no final newline); see table_lines."""
    return "\n".join(table_lines(rows, rule=rule, pad_last=pad_last))
