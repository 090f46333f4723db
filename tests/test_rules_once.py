"""Every Kubernetes and NVIDIA rule lives in one module of themelio_gpu/k8s/: a second copy anywhere else fails.

Each rule has a fingerprint read from the code's syntax tree (string constants outside docstrings, comparisons,
calls, definitions), so messages and docstrings may name what they like; only code that re-implements a rule
(compares a minor against a release number, matches a toleration operator, picks the newest class, spells an
NVIDIA name or a quota key, parses a version) is found. The scanner's own test shows each fingerprint fires.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from themelio_gpu.k8s import nvidia

PACKAGE = Path(__file__).parent.parent / "themelio_gpu"
K8S = PACKAGE / "k8s"

NVIDIA_NAMES = {
    value
    for name, value in vars(nvidia).items()
    if name.isupper() and isinstance(value, str) and value.count(".") and name != "DEPLOY"
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
        # An attribute docstring: a bare string right after an assignment.
        if isinstance(node, ast.Module | ast.ClassDef):
            for statement in node.body:
                if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
                    found.add(id(statement.value))
    return found


def _strings(tree: ast.AST) -> Iterator[tuple[ast.Constant, str]]:
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield node, node.value


def _names_minor(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Name) and "minor" in n.id) or (isinstance(n, ast.Attribute) and "minor" in n.attr)
        for n in ast.walk(node)
    )


def _release_number(node: ast.AST) -> bool:
    values = node.elts if isinstance(node, ast.Tuple) else [node]
    return any(isinstance(v, ast.Constant) and type(v.value) is int and 20 <= v.value <= 60 for v in values)


def nvidia_names(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node, value in _strings(tree):
        if value in NVIDIA_NAMES or value.startswith("nvidia.com/mig-"):
            yield node.lineno, f"NVIDIA name {value!r} spelled out (themelio_gpu/k8s/nvidia.py has it)"


def quota_keys(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node, value in _strings(tree):
        if value.startswith(("requests.", "deviceclass.resource.kubernetes.io/")) or value.endswith(
            ".deviceclass.resource.k8s.io/devices"
        ):
            yield (
                node.lineno,
                f"quota key or implicit name {value!r} built here (themelio_gpu/k8s/quota.py, dra.py)",
            )


def version_gates(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_names_minor(s) for s in sides) and any(_release_number(s) for s in sides):
                yield node.lineno, "a Kubernetes minor compared with a release number (themelio_gpu/k8s/dra.py)"
    for node, value in _strings(tree):
        if value == "DRAExtendedResource":
            yield node.lineno, "the DRAExtendedResource gate named here (themelio_gpu/k8s/dra.py)"


def placement(tree: ast.AST) -> Iterator[tuple[int, str]]:
    predicates = {"tolerates", "untolerated", "requirement_matches", "selector_mismatches", "toleration_covers"}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.lstrip("_") in predicates:
            yield node.lineno, f"scheduling predicate {node.name} defined here (themelio_gpu/k8s/scheduling.py)"
        if isinstance(node, ast.Compare) and all(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops):
            text = ast.unparse(node)
            if "operator" in text and any(op in text for op in ("'Exists'", "'In'", "'NotIn'", "'DoesNotExist'")):
                yield (
                    node.lineno,
                    "a toleration or selector operator matched here (themelio_gpu/k8s/scheduling.py)",
                )


def class_choice(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "sorted"):
            text = ast.unparse(node)
            if "created" in text or "creationTimestamp" in text:
                yield node.lineno, "the newest DeviceClass chosen here (themelio_gpu/k8s/dra.py serving_class)"


def version_parsing(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and node.value.func.attr == "split"
            and [ast.unparse(a) for a in node.value.args][:1] == ["'.'"]
        ):
            yield node.lineno, "a version split by hand (themelio_gpu/k8s/version.py)"
    for node, value in _strings(tree):
        if r"(\d+)\.(\d+)" in value:
            yield node.lineno, "a version pattern (themelio_gpu/k8s/version.py)"


def quantities(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if {"Ki", "Mi"} <= keys or {"k", "M", "G"} <= keys:
                yield node.lineno, "quantity suffixes (themelio_gpu/k8s/quantity.py)"


Fingerprint = Callable[[ast.AST], Iterator[tuple[int, str]]]
RULES: dict[str, Fingerprint] = {
    "NVIDIA names": nvidia_names,
    "quota charging": quota_keys,
    "DRA gate table": version_gates,
    "scheduling predicates": placement,
    "class choice": class_choice,
    "version parsing": version_parsing,
    "quantities": quantities,
}


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if K8S not in p.parents)


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_lives_only_in_k8s(rule: str) -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
        for path in _modules()
        for line, what in RULES[rule](ast.parse(path.read_text()))
    ]
    assert not found, "\n".join(found)


COPIES = {
    "NVIDIA names": 'taint = {"key": "nvidia.com/gpu"}',
    "quota charging": 'key = f"requests.deviceclass.resource.kubernetes.io/{name}"',
    "DRA gate table": "if cluster.minor_version in (34, 35):\n    pass",
    "scheduling predicates": 'ok = toleration.get("operator") == "Exists"',
    "class choice": "newest = max(c.created for c in classes)",
    "version parsing": 'minor = int(version.split(".")[1])',
    "quantities": 'suffixes = {"Ki": 10, "Mi": 20}',
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_the_scanner_finds_a_second_copy_of_each_rule(rule: str) -> None:
    assert list(RULES[rule](ast.parse(COPIES[rule])))


def test_messages_and_docstrings_may_name_what_the_rules_name() -> None:
    text = '"""Charged to requests.nvidia.com/gpu when DRAExtendedResource is on."""\nmessage = f"{name} is not nvidia.com/gpu"'
    assert not [hit for rule in RULES.values() for hit in rule(ast.parse(text))]
