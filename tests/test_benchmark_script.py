"""The benchmark's fleet generator (scripts/bench_fleet.py): what it writes is a valid fleet of the promised shape.

The generator, and how the goals are derived from measured figures: no synthesis and no timing here
(those belong to `make bench`).
"""

from __future__ import annotations

import importlib
import importlib.util
import statistics
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from themelio_gpu.inputs.catalog.model import ServedBy
from themelio_gpu.plan.fleet import load_fleet

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "benchmark.py"


@cache
def benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve the script's annotations through sys.modules
    spec.loader.exec_module(module)  # puts scripts/ on sys.path, where its modules are
    return module


def script(name: str) -> ModuleType:
    """One of the benchmark's modules: bench_fleet (the fleet), bench_figures (the goals and the report)."""
    benchmark()
    return importlib.import_module(name)


def test_generated_catalog_loads_with_at_least_20_offerings(tmp_path: Path) -> None:
    catalog, stacks = script("bench_fleet").write_fleet(tmp_path, 1)
    fleet = load_fleet(catalog, stacks)
    offerings = list(fleet.catalog)
    assert len(offerings) >= 20
    whole = {o.product.key for o in offerings if o.product is not None and o.mig_profile is None}
    assert len(whole) >= 4
    mig = {o.product.key for o in offerings if o.mig_profile is not None and o.product is not None}
    assert mig == {"a100-40gb", "a100-80gb", "h100-80gb", "h200-141gb"}


def test_generated_fleet_of_three_clusters_has_the_promised_shape(tmp_path: Path) -> None:
    catalog, stacks = script("bench_fleet").write_fleet(tmp_path, 3)
    fleet = load_fleet(catalog, stacks)  # raises InputError listing every problem if the fleet is invalid
    assert [c.name for c in fleet.clusters] == ["bench-0001", "bench-0002", "bench-0003"]
    for plan in fleet.clusters:
        cluster = plan.definition
        assert cluster.kubernetes_version == "1.36"
        assert cluster.backend.type == "local"
        assert cluster.access.kubeconfig is not None
        assert len(plan.offerings) == 20
        assert len(cluster.node_pools) == 4
        for pool in cluster.node_pools:
            assert pool.provisioning.static is not None
            assert len(pool.provisioning.static.nodes) == 8
        # Every offering served by the catalog gets a DeviceClass (aliases add theirs).
        served = [o for o in plan.offerings if o.served_by is ServedBy.catalog]
        assert len(plan.device_classes) >= len(served)
        assert plan.dra_enabled


def test_generation_is_deterministic(tmp_path: Path) -> None:
    script("bench_fleet").write_fleet(tmp_path / "a", 3)
    script("bench_fleet").write_fleet(tmp_path / "b", 3)

    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    first = files(tmp_path / "a")
    assert len(first) == 4  # the catalog and three cluster definitions
    assert first == files(tmp_path / "b")


# --- the goals, from measured figures (no timing here: the figures are made up) ---------------------------


def _figures(*walls: float, cpu: float | None = None, peak_mib: int = 300, digest: str = "same") -> dict[str, Any]:
    return {
        "wall_s_all": list(walls),
        "wall_s_median": statistics.median(walls),
        "wall_s_min": min(walls),
        "cpu_s_median": statistics.median(walls) if cpu is None else cpu,
        "memory_kib": {"tree_peak_upper_bound": peak_mib * 1024},
        "output_identical_across_repeats": True,
        "output": {"digest": digest, "resource_blocks": 13},
    }


def _size(clusters: int, *walls: float, peak_mib: int = 300) -> dict[str, Any]:
    figures = _figures(*walls, peak_mib=peak_mib)
    return {"clusters": clusters, **figures, "output": {"resource_blocks": 13 * clusters}, "derived": {}}


def _goals(derived: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["name"]: g for g in derived["goals"]}


def test_goals_are_ratios_within_each_repetition() -> None:
    # Repetition 2 ran in a busy spell that slowed everything: its ratios are like the others.
    floors = {"cdktf": _figures(0.5, 1.0, 0.5), "app": _figures(0.8, 1.6, 0.8)}
    example = _figures(1.0, 2.2, 1.1, cpu=0.9, peak_mib=260)
    sizes = [
        _size(1, 1.0, 2.0, 1.0),
        _size(100, 2.9, 5.6, 3.0),
        _size(1000, 20.0, 44.0, 21.0, peak_mib=700),
    ]
    derived = script("bench_figures").derive(floors, example, sizes)
    goals = _goals(derived)
    assert goals["example"]["value"] == pytest.approx(2.2)  # median of 2.0, 2.2, 2.2
    assert goals["example"]["ok"] is True
    assert goals["example"]["details"]["of_medians"] == pytest.approx(1.1 / 0.5)
    assert goals["example"]["details"]["of_fastest"] == pytest.approx(1.0 / 0.5)
    assert goals["example"]["details"]["of_cpu"] == pytest.approx(0.9 / 0.5)
    assert goals["scaling"]["value"] == pytest.approx(2.9)  # median of 2.9, 2.8, 3.0
    assert goals["scaling"]["ok"] is True
    assert goals["linear"]["value"] == pytest.approx(7.0)  # median of 6.9, 7.86, 7.0
    assert goals["memory"]["value"] == 700  # of the 1,000-cluster synthesis
    assert goals["memory"]["ok"] is True
    assert derived["all_goals_met"] is True
    assert sizes[1]["derived"]["per_cluster_beyond_floor_ms"] == pytest.approx(1000 * (3.0 - 0.8) / 100)


def test_each_goal_is_missed_on_its_own() -> None:
    floors = {"cdktf": _figures(0.5), "app": _figures(0.8)}
    sizes = [_size(1, 1.0), _size(100, 4.6), _size(1000, 46.5, peak_mib=1025)]
    derived = script("bench_figures").derive(floors, _figures(1.3), sizes)
    goals = _goals(derived)
    assert goals["example"]["ok"] is False  # 2.6 > 2.5
    assert goals["scaling"]["ok"] is False  # 4.6 > 4.5
    assert goals["linear"]["ok"] is False  # 10.1 > 10
    assert goals["memory"]["ok"] is False  # 1025 MiB > 1 GiB
    assert derived["all_goals_met"] is False
    lines = [script("bench_figures").render_goal(g).splitlines()[0] for g in derived["goals"]]
    assert lines == [
        'goal example: python main.py (example fleet) / python -c "import cdktf" = 2.60 (<= 2.5: MISSED)',
        "goal scaling: t(100 clusters) / t(1 cluster) = 4.60 (<= 4.5: MISSED)",
        "goal linear: t(1000 clusters) / t(100 clusters) = 10.11 (<= 10: MISSED)",
        "goal memory: peak MiB of the 1000-cluster synthesis (every process's peak, summed) = 1025 (<= 1024: MISSED)",
    ]
    assert "of the fastest runs 2.60, of CPU times 2.60" in script("bench_figures").render_goal(goals["example"])


def test_a_goal_without_its_fleet_sizes_is_not_measured() -> None:
    floors = {"cdktf": _figures(0.5), "app": _figures(0.8)}
    derived = script("bench_figures").derive(floors, _figures(1.0), [_size(1, 1.0), _size(50, 2.0)])
    goals = _goals(derived)
    assert [(goals[n]["value"], goals[n]["ok"]) for n in ("scaling", "linear", "memory")] == [(None, None)] * 3
    assert derived["all_goals_met"] is False
    assert "not measured" in script("bench_figures").render_goal(goals["scaling"])


def test_the_ablation_says_what_each_speed_up_saves_and_whether_one_on_internals_pays() -> None:
    default = {"example": _figures(1.0, 1.0, cpu=1.0), "100": _figures(3.0, 3.0, cpu=3.0)}
    off = {
        # Relies on internals and saves 12 % of CPU on 100 clusters: pays.
        "lazy-bindings": {"example": _figures(1.0, 1.0, cpu=1.02), "100": _figures(3.4, 3.4, cpu=3.4)},
        # Relies on internals and saves under 10 % on both: does not pay.
        "lazy-index": {"example": _figures(1.05, 1.05, cpu=1.05), "100": _figures(3.1, 3.1, cpu=3.2)},
        # Public API: no verdict needed; a different output is flagged whatever it saves.
        "shared-values": {
            "example": _figures(1.0, 1.0, cpu=1.0, digest="other"),
            "100": _figures(3.6, 3.6, cpu=3.6),
        },
    }
    rows = {row["speedup"]: row for row in script("bench_figures").ablation(default, off)}
    assert rows["lazy-bindings"]["pays"] is True
    assert rows["lazy-bindings"]["fleets"]["100"]["cpu_saved_share"] == pytest.approx(1 - 3.0 / 3.4)
    assert rows["lazy-index"]["pays"] is False
    assert rows["shared-values"]["pays"] is None and rows["shared-values"]["relies_on"] == "public API only"
    assert rows["shared-values"]["same_output"] is False
    derived = script("bench_figures").derive(
        {"cdktf": _figures(0.5), "app": _figures(0.8)}, _figures(1.0), [_size(1, 1.0)], list(rows.values())
    )
    assert derived["every_speedup_on_internals_pays"] is False
    assert derived["every_speedup_same_output"] is False
    table = "\n".join(script("bench_figures").render_ablation(list(rows.values()), ["example", "100"]))
    assert "DOES NOT PAY" in table and "OUTPUT DIFFERS" in table and "12 %" in table


def test_the_ablation_switches_off_every_speed_up_of_the_engine_and_names_the_others() -> None:
    from themelio_gpu.speedups import ONLY_UNDER, Speedup

    speedups, notes = benchmark().ablated_speedups("cdktf")
    assert speedups == [s.value for s in Speedup if ONLY_UNDER.get(s) != "cdktn"]
    assert notes == ["no-creation-stacks is not used under cdktf (only under cdktn): not measured"]


def test_measured_processes_run_the_default_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_OPTIONS", "--max-semi-space-size=64")
    monkeypatch.setenv("CDKTF_OUTDIR", "elsewhere")
    monkeypatch.setenv("THEMELIO_SPEEDUPS_OFF", "all")
    env = benchmark().child_env()
    assert env["NODE_OPTIONS"] == "--max-semi-space-size=64"  # the user's own options stay
    assert "CDKTF_OUTDIR" not in env and "THEMELIO_SPEEDUPS_OFF" not in env


def test_the_edit_goals_need_the_time_and_exactly_the_expected_stacks() -> None:
    one = {
        **_figures(1.1, 1.3),
        "expected": ["bench-0007"],
        "listed_by_changed": [["bench-0007"]],
        "stack_files_rewritten": [1],
    }
    catalog = {
        **_figures(9.0, 9.0),
        "expected": ["bench-0001", "bench-0011"],
        "listed_by_changed": [["bench-0001", "bench-0011", "bench-0021"]],  # one more than the edit changes
        "stack_files_rewritten": [3],
    }
    edits = {"one_cluster": one, "catalog": catalog, "one_cluster_fleet": _figures(1.0, 0.4)}
    goals = {g["name"]: g for g in script("bench_figures")._edit_goals(edits)}
    assert goals["edit"]["value"] == pytest.approx(statistics.median([1.1, 3.25]))
    assert goals["edit"]["ok"] is True  # 2.175 <= 3
    assert goals["edit-listed"]["ok"] is True
    assert goals["catalog-edit-listed"]["ok"] is False


def _changed(listed: list[list[str]], synthesized: list[dict[str, int]], **more: Any) -> dict[str, Any]:
    return {
        **_figures(2.0, 2.0),
        "listed": listed,
        "synthesized": synthesized,
        "base_by_its_own_code": [False],
        **more,
    }


def test_the_changed_goals_need_the_time_the_memory_and_exactly_what_each_scenario_promises() -> None:
    tool_note = (
        "every stack compared address by address: the tool differs between git HEAD (commit 0) and this checkout"
    )
    changed = {
        "one_cluster_fleet": _figures(1.0, 1.0),
        "one_cluster": {
            **_changed([["bench-0007"]], [{"base": 1}]),
            **_figures(2.5, 3.5, peak_mib=280),
            "expected": ["bench-0007"],
        },
        "one_cluster_no_head": _figures(2.0, 3.2, peak_mib=290),
        # The head's 2 stacks were synthesized, but the base's 3: one more than the edit changes.
        "catalog": {
            **_changed([["bench-0001", "bench-0011"]], [{"base": 3, "head": 2}]),
            "expected": ["bench-0001", "bench-0011"],
        },
        "tool": {
            **_changed([[]], [{}], base_by_its_own_code=[True, True]),
            "stacks": [100],
            "notes": [tool_note],
            "expected_stacks": 100,
        },
    }
    goals = {g["name"]: g for g in script("bench_figures")._changed_goals(changed)}
    assert goals["changed"]["value"] == pytest.approx(3.0) and goals["changed"]["ok"] is True  # median of 2.5, 3.5
    assert goals["changed-memory"]["value"] == 280 and goals["changed-memory"]["ok"] is True
    assert goals["changed-no-head"]["value"] == pytest.approx(2.6) and goals["changed-no-head"]["ok"] is True
    assert goals["changed-no-head-memory"]["value"] == 290 and goals["changed-no-head-memory"]["ok"] is True
    assert goals["changed-edit-listed"]["ok"] is True
    assert goals["changed-catalog-listed"]["ok"] is False
    assert goals["changed-tool"]["ok"] is True
    changed["tool"]["notes"] = ["3 of 100 stacks have the same inputs on both sides"]  # not every stack compared
    changed["one_cluster"]["synthesized"] = [{"base": 1, "head": 1}]  # the head folder was not read
    changed["one_cluster"] = {**changed["one_cluster"], **_figures(3.1, 3.2, peak_mib=301)}
    changed["one_cluster_no_head"] = _figures(3.1, 3.5, peak_mib=301)
    goals = {g["name"]: g for g in script("bench_figures")._changed_goals(changed)}
    names = ("changed", "changed-memory", "changed-no-head", "changed-no-head-memory", "changed-edit-listed")
    assert [goals[n]["ok"] for n in (*names, "changed-tool")] == [False] * 6


def _workflow(hit: bool, walls: tuple[float, ...], **more: Any) -> dict[str, Any]:
    summary = "Synthesis: cache hit: ..." if hit else "Synthesis: cache miss (nothing kept for 0 with this tool)"
    return {
        **_figures(*walls),
        "expected": ["bench-0007"],
        "matrix_size": [1],
        "stack_files_written": [1 if hit else 1000],
        "changed_synthesis_lines": [0 if hit else 1],
        "summary": [summary],
        **more,
    }


def test_the_workflow_goals_need_the_time_and_the_matrix_and_a_hit_that_synthesizes_the_edit_alone() -> None:
    figures = script("bench_figures")
    changed = {
        "one_cluster_fleet": _figures(1.0, 1.0),
        "workflow_hit": _workflow(True, (2.0, 3.0)),
        "workflow_miss": _workflow(False, (40.0, 50.0)),
    }
    goals = {g["name"]: g for g in figures._workflow_goals(changed)}
    assert goals["workflow"]["value"] == pytest.approx(2.5) and goals["workflow"]["ok"] is True
    assert goals["workflow-listed"]["ok"] is True
    for key, wrong in (
        ("workflow_hit", {"stack_files_written": [2]}),  # the hit synthesized more than the edit
        ("workflow_hit", {"changed_synthesis_lines": [1]}),  # changed synthesized a stack of the base
        ("workflow_miss", {"matrix_size": [0]}),
        ("workflow_miss", {"summary": ["Synthesis: cache hit: ..."]}),  # a miss said to be a hit
    ):
        broken = {**changed, key: {**changed[key], **wrong}}
        assert {g["name"]: g for g in figures._workflow_goals(broken)}["workflow-listed"]["ok"] is False, wrong
    slow = {**changed, "workflow_hit": _workflow(True, (3.1, 3.2))}
    assert {g["name"]: g for g in figures._workflow_goals(slow)}["workflow"]["ok"] is False
