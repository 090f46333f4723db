"""Every object the stack applies, checked against the cluster's Kubernetes version (kubernetes-validate,
strict: unknown fields are errors). Custom resources (ClusterPolicy, NodeFeatureRule, ...) have no
built-in schema: they are listed as skipped. A built-in API that the cluster's version does not serve
(resource.k8s.io/v1 before 1.34) is an error, not a skip."""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from themelio_gpu.k8s.version import parse_kubernetes_version
from themelio_gpu.verify.charts import VerifyError


@dataclass
class ValidationResult:
    version: str = ""
    """The schema version used (major.minor)."""
    valid: int = 0
    skipped: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)


def load_kubernetes_validate() -> ModuleType:
    try:
        return importlib.import_module("kubernetes_validate")
    except ImportError:
        raise VerifyError(
            "kubernetes-validate is not installed: verify checks every rendered object against the cluster's "
            "Kubernetes schemas with it. Install the project's packages (pipenv sync --dev)"
        ) from None


def describe(obj: Mapping[str, Any]) -> str:
    return f"{obj.get('kind')} {(obj.get('metadata') or {}).get('name')} ({obj.get('apiVersion')})"


def validate_objects(
    objects: Sequence[tuple[str, Mapping[str, Any]]], kubernetes_version: str, kv: ModuleType | None = None
) -> ValidationResult:
    """`objects` are (source, object) pairs; the source names the release (or `stack`) in messages."""
    kv = kv or load_kubernetes_validate()
    latest = str(kv.latest_version())
    result = ValidationResult()
    oldest = str(kv.utils.all_versions()[0])
    if _minor(kubernetes_version) < _minor(oldest):  # kubernetes-validate would fail with an IndexError
        result.invalid.append(
            f"kubernetes-validate {kv.__version__} has no schemas for Kubernetes {kubernetes_version} "
            f"(oldest: {oldest}): the objects cannot be checked against its API"
        )
        return result
    with _schemas_read_once(kv):
        _validate_each(kv, objects, kubernetes_version, latest, result)
    return result


@contextlib.contextmanager
def _schemas_read_once(kv: ModuleType) -> Iterator[None]:
    """kubernetes-validate parses its schema files (the definitions are megabytes) on every call; read
    each once per run. The parsed schemas are only read, never changed, by the validator."""
    original = kv.utils.schema_contents
    kv.utils.schema_contents = functools.lru_cache(maxsize=None)(original)
    try:
        yield
    finally:
        kv.utils.schema_contents = original


def _validate_each(
    kv: ModuleType,
    objects: Sequence[tuple[str, Mapping[str, Any]]],
    kubernetes_version: str,
    latest: str,
    result: ValidationResult,
) -> None:
    for source, obj in objects:
        try:
            result.version = str(kv.validate(dict(obj), kubernetes_version, strict=True))
            result.valid += 1
        except kv.ValidationError as error:
            path = ".".join(str(p) for p in error.path) or "(top)"
            result.invalid.append(f"{source}: {describe(obj)}: {path}: {error.message}")
        except kv.SchemaNotFoundError:
            if _known_to(kv, obj, latest):
                result.invalid.append(
                    f"{source}: {describe(obj)}: Kubernetes {kubernetes_version} does not serve this API"
                )
            else:
                result.skipped.append(describe(obj))
        except kv.utils.VersionNotSupportedError:
            result.invalid.append(
                f"{source}: kubernetes-validate {kv.__version__} has no schemas for Kubernetes "
                f"{kubernetes_version} (newest: {latest}); upgrade it"
            )
            break


def _minor(version: str) -> int:
    parsed = parse_kubernetes_version(version)
    if parsed is None:
        raise ValueError(f"not a Kubernetes version: {version!r}")
    return parsed.minor


def _known_to(kv: ModuleType, obj: Mapping[str, Any], latest: str) -> bool:
    """Whether any Kubernetes version kubernetes-validate knows serves this kind (built-in, not a CRD)."""
    try:
        kv.validate(dict(obj), latest, strict=False)
    except kv.SchemaNotFoundError:
        return False
    except kv.ValidationError:
        return True
    return True
