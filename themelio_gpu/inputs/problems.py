"""Input problems, collected and reported together.

Every check in the app appends to a `Problems` list instead of raising at the first issue, so a user
fixing a catalog or a cluster definition sees everything that is wrong in one run, each as
`file: location: message`.

A problem's location is kept structured (a `KeyPath` into the file, or a `Mark` in its text) and is turned into
words only when the problem is shown, by `format_location`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

Key = str | int
"""A mapping key or a list index."""

KeyPath = tuple[Key, ...]
"""Where a value sits in a file's data: `('offerings', 'nvidia.com/a100', 'quota')`; `()` is the whole file."""


class Bracketed(str):
    """A mapping key shown in brackets as written, `labels[nvidia.com/gpu.product]` (as a label key reads)."""

    __slots__ = ()


@dataclass(frozen=True)
class Mark:
    """A place in a file's text: 1-based line, and column when known."""

    line: int
    column: int | None = None

    def __str__(self) -> str:
        return f"line {self.line}" if self.column is None else f"line {self.line}, column {self.column}"


Location = KeyPath | Mark | str
"""Where in its file a problem is: a path into the file's data, a place in its text where no path is known (a
YAML syntax error), or a label shown as written: a command-line argument, an environment variable, an address in a
synthesized Terraform JSON file (`resource.<type>.<name>`, never given a line)."""


def format_location(location: Location) -> str:
    """The location as shown: `offerings["nvidia.com/a100"].quota`, `line 3, column 5`, a label as it is."""
    if isinstance(location, Mark):
        return str(location)
    if isinstance(location, str):
        return location
    out = ""
    for part in location:
        if isinstance(part, int | Bracketed):
            out += f"[{part}]"
        elif part.replace("_", "").replace("-", "").isalnum():
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out


def _redacted(location: Location, secret: str) -> Location:
    if isinstance(location, Mark):
        return location
    if isinstance(location, str):
        return location.replace(secret, "<redacted>")
    return tuple(type(p)(p.replace(secret, "<redacted>")) if isinstance(p, str) else p for p in location)


@dataclass(frozen=True)
class Problem:
    file: str
    location: Location
    message: str
    position: Mark | None = None
    """The line and column of the key at `location`, when the file is YAML and has it."""

    def __str__(self) -> str:
        shown = format_location(self.location)
        where = f"{self.file}: {shown}" if shown else self.file
        return f"{where}: {self.message}" + (f" ({self.position})" if self.position else "")


@dataclass
class Problems:
    items: list[Problem] = field(default_factory=list)

    def add(self, file: str, location: Location, message: str, position: Mark | None = None) -> None:
        self.items.append(Problem(file, location if location != "" else (), message, position))

    def redact(self, secrets: Iterable[str]) -> None:
        """Replace every occurrence of `secrets` in locations and messages: a problem must not leak one."""
        for secret in {s for s in secrets if s}:
            self.items = [
                Problem(p.file, _redacted(p.location, secret), p.message.replace(secret, "<redacted>"), p.position)
                for p in self.items
            ]

    def extend(self, other: Problems) -> None:
        self.items.extend(other.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.items)

    def raise_if_any(self) -> None:
        if self.items:
            raise InputError(self)


class InputError(Exception):
    """Bad input: the CLI prints every problem and exits non-zero, never a traceback."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        # De-duplicated, in the order found: the order follows the files, which reads naturally.
        seen: set[Problem] = set()
        lines = []
        for problem in self.problems:
            if problem not in seen:
                seen.add(problem)
                lines.append(str(problem))
        return "\n".join(lines)
