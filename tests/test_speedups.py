"""Every speed-up synthesizes the same bytes as without it, and the switch refuses what is not one
(themelio_gpu/speedups.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_provider_loading import _env_without_preload, _files, _fleet_using_every_binding_class
from themelio_gpu.speedups import ENV, ONLY_UNDER, Speedup, SpeedupsSettingError, switched_off


def _synthesized(catalog: Path, stacks: Path, out: Path, off: str) -> dict[str, bytes]:
    command = [sys.executable, "main.py", "--catalog", str(catalog), "--stacks-dir", str(stacks)]
    result = subprocess.run(
        [*command, "--outdir", str(out), "--quiet"],
        cwd=ROOT,
        env={**_env_without_preload(), **({ENV: off} if off else {})},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return _files(out)


@pytest.fixture(scope="module")
def fleet_and_default(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, bytes]]:
    folder = tmp_path_factory.mktemp("speedups")
    catalog, stacks = _fleet_using_every_binding_class(folder)
    return catalog, stacks, _synthesized(catalog, stacks, folder / "default", "")


@pytest.mark.parametrize("off", [s.value for s in Speedup if ONLY_UNDER.get(s, "cdktf") == "cdktf"] + ["all"])
def test_each_speedup_switched_off_gives_the_same_bytes(
    fleet_and_default: tuple[Path, Path, dict[str, bytes]], tmp_path: Path, off: str
) -> None:
    catalog, stacks, default = fleet_and_default
    assert len([f for f in default if f.endswith("cdk.tf.json")]) == 4
    assert _synthesized(catalog, stacks, tmp_path / "out", off) == default


def test_the_switch_takes_names_and_all() -> None:
    assert switched_off("") == frozenset()
    assert switched_off(" lazy-index , Shared-Values ") == {Speedup.LAZY_INDEX, Speedup.SHARED_VALUES}
    assert switched_off("all") == frozenset(Speedup)


def test_a_name_that_is_no_speedup_is_refused_naming_what_is_allowed() -> None:
    with pytest.raises(SpeedupsSettingError) as error:
        switched_off("lazy-index,fast,faster")
    assert str(error.value).startswith(
        "THEMELIO_SPEEDUPS_OFF: fast, faster are not a speed-up; allowed: lazy-bindings,"
    )


def test_every_command_refuses_a_wrong_switch_before_any_work(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "themelio_gpu", "validate"],
        cwd=ROOT,
        env={**_env_without_preload(), ENV: "turbo"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("THEMELIO_SPEEDUPS_OFF: turbo is not a speed-up;")


def test_the_fleet_is_read_with_the_collector_paused_and_it_runs_again_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Speedup.PAUSED_COLLECTOR: paused while the fleet is read and planned, as it was after (also on a
    problem), left alone when the caller paused it or the switch turns the speed-up off."""
    import gc

    import themelio_gpu.plan.fleet as fleet
    from tests.conftest import FIXTURES
    from themelio_gpu.inputs.problems import InputError

    seen: list[bool] = []
    real = fleet._load_fleet

    def spying(*args: object) -> object:
        seen.append(gc.isenabled())
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(fleet, "_load_fleet", spying)
    example = FIXTURES / "fleets" / "example"
    assert gc.isenabled()
    fleet.load_fleet(example / "catalog" / "gpu-catalog.yaml", example / "stacks")
    with pytest.raises(InputError):
        fleet.load_fleet(example / "catalog" / "no-such-catalog.yaml", example / "stacks")
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        fleet.load_fleet(example / "catalog" / "gpu-catalog.yaml", example / "stacks")
        assert not gc.isenabled()
    finally:
        gc.enable()
    monkeypatch.setenv(ENV, Speedup.PAUSED_COLLECTOR.value)
    fleet.load_fleet(example / "catalog" / "gpu-catalog.yaml", example / "stacks")
    assert seen == [False, False, False, True]
