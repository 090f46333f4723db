"""Kubernetes name rules, as the API server applies them (apimachinery validation).

Each function returns the list of problems with a value (empty when valid), so callers can report
all of them with the file and field they came from.
"""

from __future__ import annotations

import re

from themelio_gpu.k8s.quota import REQUESTS_PREFIX

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def dns1123_label(value: str) -> list[str]:
    if len(value) > 63:
        return [f"{value!r} is longer than 63 characters"]
    if not _DNS1123_LABEL.match(value):
        return [
            f"{value!r} is not a DNS-1123 label (lower-case letters, digits and '-', alphanumeric at both ends)"
        ]
    return []


def dns1123_subdomain(value: str, max_length: int = 253) -> list[str]:
    if len(value) > max_length:
        return [f"{value!r} is longer than {max_length} characters"]
    if not _DNS1123_SUBDOMAIN.match(value):
        return [
            f"{value!r} is not a DNS-1123 subdomain "
            "(lower-case letters, digits, '-' and '.', alphanumeric at both ends)"
        ]
    return []


def qualified_name(value: str) -> list[str]:
    """A label or annotation key: `[prefix/]name`, prefix a DNS subdomain, name 1-63 characters."""
    parts = value.split("/")
    if len(parts) > 2:
        return [f"{value!r} has more than one '/'"]
    if len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return [f"{value!r} has an empty prefix before '/'"]
        problems = [f"prefix of {value!r}: {p}" for p in dns1123_subdomain(prefix)]
    else:
        name, problems = parts[0], []
    if not name:
        problems.append(f"{value!r} has an empty name part")
    elif len(name) > 63:
        problems.append(f"name part of {value!r} is longer than 63 characters")
    elif not _QUALIFIED_NAME_PART.match(name):
        problems.append(
            f"name part of {value!r} must be letters, digits, '-', '_' and '.', alphanumeric at both ends"
        )
    return problems


def label_value(value: str) -> list[str]:
    if len(value) > 63:
        return [f"label value {value!r} is longer than 63 characters"]
    if not _LABEL_VALUE.match(value):
        return [f"label value {value!r} must be letters, digits, '-', '_' and '.', alphanumeric at both ends"]
    return []


def extended_resource_name(value: str) -> list[str]:
    """Kubernetes' `IsExtendedResourceName`, the rule `DeviceClass.spec.extendedResourceName` must pass."""
    if "/" not in value:
        return [f"{value!r} needs a domain prefix such as 'nvidia.com/' (names without '/' are native resources)"]
    if "kubernetes.io/" in value:
        return [f"{value!r} must not contain 'kubernetes.io/' (reserved for native resources)"]
    if value.startswith(REQUESTS_PREFIX):
        return [f"{value!r} must not start with '{REQUESTS_PREFIX}' (that prefix is for quota keys)"]
    prefix, _, name = value.partition("/")
    if "/" in name:
        return [f"{value!r} has more than one '/'"]
    # The quota key `requests.<name>` must stay a valid qualified name, so the prefix gets 9 fewer characters.
    problems = [
        f"domain of {value!r}: {p}" for p in dns1123_subdomain(prefix, max_length=253 - len(REQUESTS_PREFIX))
    ]
    if "+" in name:
        problems.append(
            f"{value!r}: '+' is not allowed in a resource name; spell a MIG profile like '1g.10gb+me' as "
            "'1g.10gb.me', the way the NVIDIA device plugin does"
        )
    elif not name or len(name) > 63 or not _QUALIFIED_NAME_PART.match(name):
        problems.append(
            f"name part of {value!r} must be 1 to 63 letters, digits, '-', '_' and '.', alphanumeric at both ends"
        )
    return problems


def device_class_name(value: str) -> list[str]:
    """DNS subdomain of at most 63 characters, so `deviceclass.resource.kubernetes.io/<name>` works too."""
    return dns1123_subdomain(value, max_length=63)
