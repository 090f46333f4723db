"""A run that skips says at its end, in one line, how many tests skipped and for want of what."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.skip_summary import reason_label, summary_line

SKIPPING_TESTS = """\
from tests.requirements import binary, shared_path


def test_needs_the_reference_files():
    shared_path("no-such-reference-folder")


def test_needs_a_tool():
    binary("no-such-tool-here")


def test_needs_the_tool_too():
    binary("no-such-tool-here")


def test_needs_nothing():
    pass
"""


def test_the_skip_reasons_are_summed_up_in_one_line_after_the_list(tmp_path: Path) -> None:
    (tmp_path / "test_skipping.py").write_text(SKIPPING_TESTS, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # under CI=true these would fail, not skip
    env.update(PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, "-m", "pytest", "-q", "-ra", "-p", "tests.skip_summary", "-p", "no:cacheprovider"]
    result = subprocess.run(
        [*command, "-c", str(tmp_path / "pytest.ini"), str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[-2] == (
        "3 skipped, for want of: no-such-tool-here on PATH (2), ../shared beside the checkout (this project's CI "
        "files) (1). tests/requirements.py says what each needs; under CI=true they fail instead"
    )
    assert lines[-3].startswith("SKIPPED [")  # after -ra's list of each skip
    assert lines[-1].startswith("1 passed, 3 skipped")


def test_an_unknown_reason_is_kept_short_and_nothing_skipped_says_nothing() -> None:
    assert reason_label("Skipped: the moon is not full") == "the moon is not full"
    assert len(reason_label("x" * 200)) == 80
    assert summary_line([]) is None
