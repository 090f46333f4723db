"""Semantic versions as Kubernetes' CEL library reads them (blang/semver/v4 strict parsing, with the
normalization of k8s.io/apiserver/pkg/cel/library/semverlib.go), and the Kubernetes release a version names."""

from __future__ import annotations

from typing import final

__all__ = ["Semver", "SemverError", "parse_semver"]

_U64_MAX = 2**64 - 1
_DIGITS = frozenset("0123456789")


class SemverError(ValueError):
    """The string is not a semantic version (blang/semver strict parsing, as Kubernetes uses)."""


_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")


@final
class Semver:
    """A semantic version; equality and ordering follow semver 2.0.0 (build metadata ignored)."""

    __slots__ = ("build", "major", "minor", "patch", "prerelease")

    def __init__(
        self,
        major: int,
        minor: int,
        patch: int,
        prerelease: tuple[int | str, ...] = (),
        build: tuple[str, ...] = (),
    ) -> None:
        self.major = major
        self.minor = minor
        self.patch = patch
        self.prerelease = prerelease
        self.build = build

    def compare(self, other: Semver) -> int:
        mine = (self.major, self.minor, self.patch)
        theirs = (other.major, other.minor, other.patch)
        if mine != theirs:
            return -1 if mine < theirs else 1
        if not self.prerelease or not other.prerelease:
            # A version without pre-release identifiers has higher precedence.
            return (not self.prerelease) - (not other.prerelease)
        for left, right in zip(self.prerelease, other.prerelease, strict=False):
            if left == right:
                continue
            if isinstance(left, int) != isinstance(right, int):
                # Numeric identifiers sort before alphanumeric ones.
                return -1 if isinstance(left, int) else 1
            return -1 if left < right else 1  # type: ignore[operator]
        return (len(self.prerelease) > len(other.prerelease)) - (len(self.prerelease) < len(other.prerelease))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Semver):
            return self.compare(other) == 0
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.prerelease))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(str(p) for p in self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self) -> str:
        return f"Semver({str(self)!r})"


def _parse_version_number(part: str, what: str) -> int:
    if not part or not set(part) <= _DIGITS:
        raise SemverError(f"Invalid character(s) found in {what} number {part!r}")
    if len(part) > 1 and part[0] == "0":
        raise SemverError(f"{what.capitalize()} number must not contain leading zeroes {part!r}")
    number = int(part)
    if number > _U64_MAX:
        raise SemverError(f"{what.capitalize()} number out of range {part!r}")
    return number


def _normalize_semver(text: str) -> str:
    """normalizeAndParse from semverlib.go: strip one 'v', drop leading zeros, fill minor/patch."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for index, part in enumerate(parts):
        if len(part) > 1:
            stripped = part.lstrip("0")
            if not stripped or stripped[0] not in _DIGITS:
                stripped = "0" + stripped
            parts[index] = stripped
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise SemverError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def parse_semver(text: str, normalize: bool = False) -> Semver:
    """semver.Parse (strict semver 2.0.0), optionally after Kubernetes' normalization."""
    if normalize:
        text = _normalize_semver(text)
    if not text:
        raise SemverError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise SemverError("No Major.Minor.Patch elements found")
    major = _parse_version_number(parts[0], "major")
    minor = _parse_version_number(parts[1], "minor")
    rest = parts[2]
    build: tuple[str, ...] = ()
    prerelease: list[int | str] = []
    if "+" in rest:
        rest, _, build_text = rest.partition("+")
        build = tuple(build_text.split("."))
        for item in build:
            if not item:
                raise SemverError("Build meta data is empty")
            if not set(item) <= _ALNUM:
                raise SemverError(f"Invalid character(s) found in build meta data {item!r}")
    if "-" in rest:
        rest, _, pre_text = rest.partition("-")
        for item in pre_text.split("."):
            if not item:
                raise SemverError("Prerelease is empty")
            if set(item) <= _DIGITS:
                if len(item) > 1 and item[0] == "0":
                    raise SemverError(f"Numeric PreRelease version must not contain leading zeroes {item!r}")
                prerelease.append(int(item))
            elif set(item) <= _ALNUM:
                prerelease.append(item)
            else:
                raise SemverError(f"Invalid character(s) found in prerelease {item!r}")
    patch = _parse_version_number(rest, "patch")
    return Semver(major, minor, patch, tuple(prerelease), build)
