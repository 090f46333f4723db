"""Version numbers, read once: a Kubernetes release (`1.34`, `1.34.2`, a server's `v1.34.2-gke.1200`, a
distribution's minor `34+`) and the dotted numbers of a chart or operator release (`v26.7.0`).

Kubernetes compares releases by major.minor for its rules (feature gates and API versions follow the minor,
k8s.io/apimachinery/pkg/util/version); the patch release, where given, only orders fixes within a minor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_KUBERNETES = re.compile(r"v?(\d+)\.(\d+)\+?(?:\.(\d+))?")


@dataclass(frozen=True)
class KubernetesVersion:
    major: int
    minor: int
    patch: int | None
    """None where only major.minor is known (`1.34`)."""

    @property
    def release(self) -> tuple[int, int]:
        return (self.major, self.minor)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}" + ("" if self.patch is None else f".{self.patch}")


def parse_kubernetes_version(text: str) -> KubernetesVersion | None:
    """The release a version string names (anything after major.minor[.patch] ignored); None if it names none."""
    match = _KUBERNETES.match(text.strip())
    if match is None:
        return None
    major, minor, patch = match.groups()
    return KubernetesVersion(int(major), int(minor), None if patch is None else int(patch))


def release_numbers(version: str) -> tuple[int, ...]:
    """`v26.7.0` -> (26, 7, 0): a chart's or operator's release compared as numbers."""
    return tuple(int(n) for n in re.findall(r"\d+", version)[:3])


_STRICT_RELEASE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def strict_release(version: str) -> tuple[int, int, int] | None:
    """`v26.7.0` -> (26, 7, 0); None unless the text is exactly [v]major.minor.patch (no pre-release)."""
    match = _STRICT_RELEASE.fullmatch(version)
    if match is None:
        return None
    major, minor, patch = match.groups()
    return (int(major), int(minor), int(patch))
