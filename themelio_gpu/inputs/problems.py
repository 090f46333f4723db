"""Input problems, collected and reported together.

Every check in the app appends to a `Problems` list instead of raising at the first issue, so a user
fixing a catalog or a cluster definition sees everything that is wrong in one run, each as
`file: location: message`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class Problem:
    file: str
    location: str
    message: str
    position: str = ""
    """`line L, column C` of the key the problem is about, when the file is YAML and has it."""

    def __str__(self) -> str:
        where = f"{self.file}: {self.location}" if self.location else self.file
        return f"{where}: {self.message}" + (f" ({self.position})" if self.position else "")


@dataclass
class Problems:
    items: list[Problem] = field(default_factory=list)

    def add(self, file: str, location: str, message: str, position: str = "") -> None:
        self.items.append(Problem(file, location, message, position))

    def redact(self, secrets: Iterable[str]) -> None:
        """Replace every occurrence of `secrets` in locations and messages: a problem must not leak one."""
        for secret in {s for s in secrets if s}:
            self.items = [
                Problem(
                    p.file,
                    p.location.replace(secret, "<redacted>"),
                    p.message.replace(secret, "<redacted>"),
                    p.position,
                )
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
