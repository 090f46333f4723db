"""scripts/setup.sh, the one installer behind `make`: never the system Python, one install at a time, and
clear messages. (The full bootstrap, which downloads pipenv and the locked packages, is exercised by a fresh
clone's `make test`; these tests need no network.)"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT

SETUP = ROOT / "scripts" / "setup.sh"


def project(tmp_path: Path) -> Path:
    """The files setup.sh reads, in a folder of their own (never the project's .venv)."""
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(SETUP, root / "scripts" / "setup.sh")
    shutil.copy2(ROOT / "Pipfile.lock", root / "Pipfile.lock")
    shutil.copy2(ROOT / "package-lock.json", root / "package-lock.json")
    (root / ".venv").mkdir()
    return root


def stamp(root: Path, lock: str = "Pipfile.lock") -> str:
    digest = subprocess.run(["sha256sum", lock], cwd=root, capture_output=True, text=True, check=True).stdout
    return f"{lock} sha256 {digest.split()[0]}\n"


def setup(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "scripts/setup.sh", *args], cwd=root, capture_output=True, text=True, check=False, env=env
    )


def test_an_up_to_date_venv_is_left_alone(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / ".venv" / ".synced").write_text(stamp(root))
    result = setup(root, "python")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "setup: .venv is up to date with Pipfile.lock\n"
    assert not (root / ".tools" / "venv").exists()


def test_the_checkout_goes_on_the_venvs_import_path_so_the_commands_run_from_anywhere(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "themelio_gpu").symlink_to(ROOT / "themelio_gpu")  # the package, as in a checkout
    site = root / ".venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (root / ".venv" / ".synced").write_text(stamp(root))
    assert setup(root, "python").returncode == 0
    assert (site / "themelio-gpu-stacks.pth").read_text() == f"{root}\n"
    # What the venv's python does at start with that file, from a folder that is not the checkout.
    elsewhere = tmp_path / "fleet-repository"
    elsewhere.mkdir()
    run_module = (
        "import runpy, site, sys; site.addsitedir(sys.argv[1]); sys.argv = ['themelio_gpu', '--help']; "
        "runpy.run_module('themelio_gpu', run_name='__main__')"
    )
    result = subprocess.run(
        [sys.executable, "-c", run_module, str(site)], cwd=elsewhere, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m themelio_gpu")


def test_a_python_without_venv_gets_the_debian_package_named(tmp_path: Path) -> None:
    root = project(tmp_path)
    # A stand-in for Debian's python3 without python3-venv: `-m venv` fails the way it does there.
    fake = tmp_path / "python3"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in --version) echo "Python 3.11.2";; -m) echo "The virtual environment was not created '
        'successfully because ensurepip is not available."; mkdir -p "$3/bin"; exit 1;; esac\n'
    )
    fake.chmod(0o755)
    result = setup(root, "python", env={"PATH": "/usr/bin:/bin", "PYTHON": str(fake)})
    assert result.returncode == 1
    assert "ensurepip is not available" in result.stderr  # venv's own words are shown
    assert "install python3-venv (as root: apt-get install python3-venv), then run make again" in result.stderr
    assert "setup: [1/3] creating .tools/venv" in result.stdout
    assert not (root / ".tools" / "venv").exists()  # no half-made virtualenv left behind
    assert not (root / ".venv" / ".synced").exists()


def test_a_missing_python_is_named(tmp_path: Path) -> None:
    root = project(tmp_path)
    result = setup(root, "tools", env={"PATH": "/usr/bin:/bin", "PYTHON": "python3.99"})
    assert result.returncode == 1
    assert "setup: python3.99 not found: install Python 3.11" in result.stderr


def test_a_second_setup_waits_for_the_first_and_does_not_install_again(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / ".venv" / ".synced").write_text("Pipfile.lock sha256 of-an-older-lock\n")
    (root / ".tools").mkdir()
    with (root / ".tools" / "python.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another setup is installing
        second = subprocess.Popen(
            ["bash", "scripts/setup.sh", "python"],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.5)
        assert second.poll() is None, "the second setup did not wait for the lock"
        (root / ".venv" / ".synced").write_text(stamp(root))  # the first one finishes
    out, err = second.communicate(timeout=20)
    assert second.returncode == 0, err
    assert out.splitlines() == [
        "setup: another setup is installing python right now; waiting for it to finish",
        "setup: .venv was brought up to date with Pipfile.lock meanwhile",
    ]
    assert not (root / ".tools" / "venv").exists()


def test_node_modules_follow_their_lock_the_same_way(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "node_modules").mkdir()
    (root / "node_modules" / ".synced").write_text(stamp(root, "package-lock.json"))
    result = setup(root, "node")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "setup: node_modules is up to date with package-lock.json\n"
