"""The package's layers hold (pyproject.toml [tool.importlinter], CONTRIBUTING.md): k8s, inputs, plan, render,
constructs, outputs, the tools, the command line; an import goes down, never up, and no package's modules
import each other in a cycle. And no module grows past MAX_LINES.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.requirements import ROOT

PACKAGE = ROOT / "themelio_gpu"

# What `make lint` runs (lint-imports), in a fresh interpreter: import-linter reads the package from the working
# folder, so a copy of the project is checked the same way.
LINT = (
    "import sys\nfrom importlinter.cli import lint_imports\nsys.exit(lint_imports(no_cache=True, no_logo=True))\n"
)

MAX_LINES = 500
EXEMPT = {
    "dryrun/cel_kubernetes.py",  # Kubernetes' CEL library, one function per upstream one
}
"""Never held to MAX_LINES. Generated tables (plan/helm/tables/*.json) are data, not modules: not counted."""
MAX_CLI_LINES = 150
"""cli.py only builds the parser from commands/ and dispatches: what a command does lives elsewhere."""


def _lint(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", LINT], cwd=project, capture_output=True, text=True, timeout=300, check=False
    )


def _copy_project(into: Path) -> Path:
    """The contract and the package's Python modules, in `into` (nothing else is read)."""
    shutil.copy(ROOT / "pyproject.toml", into / "pyproject.toml")
    shutil.copytree(
        PACKAGE,
        into / "themelio_gpu",
        ignore=lambda folder, names: [
            n for n in names if n == "__pycache__" or not (n.endswith(".py") or (Path(folder) / n).is_dir())
        ],
    )
    return into


def _add_import(project: Path, module: str, line: str) -> None:
    path = project / "themelio_gpu" / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")


def test_the_layers_hold() -> None:
    done = _lint(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 2 kept, 0 broken." in done.stdout, done.stdout


def test_an_import_up_a_layer_breaks_the_contract(tmp_path: Path) -> None:
    project = _copy_project(tmp_path)
    assert _lint(project).returncode == 0  # the copy holds as the project does
    _add_import(project, "plan/manifests.py", "from themelio_gpu.outputs import synth  # noqa: E402")
    done = _lint(project)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "themelio_gpu.plan.manifests -> themelio_gpu.outputs.synth" in done.stdout, done.stdout


def test_a_cycle_inside_a_layer_breaks_the_contract(tmp_path: Path) -> None:
    # quota.py is imported by kueue.py: kueue's types in quota would close a cycle within plan/.
    project = _copy_project(tmp_path)
    _add_import(project, "plan/quota.py", "from themelio_gpu.plan import kueue  # noqa: E402")
    done = _lint(project)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "No import cycle" in done.stdout and "BROKEN" in done.stdout, done.stdout


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
        if "__pycache__" not in path.parts
    }
    oversized = {module: lines for module, lines in sizes.items() if lines > MAX_LINES and module not in EXEMPT}
    assert not oversized, f"over {MAX_LINES} lines: {oversized}; split them (CONTRIBUTING.md)"
    assert sizes["cli.py"] <= MAX_CLI_LINES, f"cli.py has {sizes['cli.py']} lines: move what it does to commands/"
