"""The benchmark's goals, derived as ratios within one run from the measured figures, and its report."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from bench_fleet import EDIT_FLEET_SIZE, NODES_PER_POOL, OFFERINGS_PER_CLUSTER, POOLS_PER_CLUSTER

GOAL_EXAMPLE_RATIO = 2.5  # t(python main.py, example fleet) / t(python -c "import cdktf")
GOAL_SCALING = ((1, 100), 4.5)  # t(100 clusters) / t(1 cluster)
GOAL_LINEAR = ((100, 1000), 10.0)  # t(1000 clusters) / t(100 clusters): no faster than the fleet grows
GOAL_MEMORY_SIZE, GOAL_MEMORY_MIB = 1000, 1024  # peak of every process of the 1,000-cluster synthesis
GOAL_EDIT_RATIO = 3.0  # t(synth after a one-cluster edit) / t(synth of a one-cluster fleet)
GOAL_CHANGED_RATIO = 3.0  # t(`changed --base-ref --head` after that edit) / t(synth of a one-cluster fleet)
GOAL_CHANGED_MEMORY_MIB = 300  # and the same for `changed` without --head, in a fresh clone, no cache
GOAL_WORKFLOW_RATIO = 3.0  # t(the generated workflow's steps up to the matrix, cache hit) / t(one-cluster fleet)
CHANGED_TOOL_FLEET_SIZE = 100  # the tool-change goal: every stack of this many clusters synthesized by the base
PAYS_SHARE = 0.10  # a speed-up relying on a dependency's internals must save this share of CPU on one fleet
MIB = 1024 * 1024


def engine_import() -> str:
    """`import cdktf`, or the engine THEMELIO_ENGINE selects (`import cdktn`): the floor of the example goal."""
    from themelio_gpu.engine import selected

    return f"import {selected().core}"


def goal(
    name: str,
    measure: str,
    value: float | None,
    limit: float,
    *,
    ok: bool | None = None,
    digits: int = 2,
    details: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """One goal: `value` <= `limit` unless `ok` says otherwise; ok is None when not measured."""
    if ok is None and value is not None:
        ok = value <= limit
    return {
        "name": name,
        "measure": measure,
        "value": value,
        "limit": limit,
        "ok": ok,
        "digits": digits,
        "details": dict(details or {}),
    }


def ratio(numerator: Mapping[str, Any], denominator: Mapping[str, Any]) -> dict[str, float]:
    """numerator / denominator of wall time, as the median of the ratios within each repetition (the two ran one
    after the other in each, so a busy spell slows both); the ratios of medians, of the fastest runs and of CPU
    times beside it."""
    pairs = [a / b for a, b in zip(numerator["wall_s_all"], denominator["wall_s_all"], strict=True)]
    return {
        "median_of_paired": statistics.median(pairs),
        **{
            f"of_{what}": float(numerator[key]) / float(denominator[key])
            for what, key in (("medians", "wall_s_median"), ("fastest", "wall_s_min"), ("cpu", "cpu_s_median"))
        },
    }


def ratio_goal(name: str, measure: str, numerator: Any, denominator: Any, limit: float) -> dict[str, Any]:
    figures = ratio(numerator, denominator) if numerator is not None and denominator is not None else None
    value = None if figures is None else figures["median_of_paired"]
    return goal(name, measure, value, limit, details=figures)


def ablation(
    default: Mapping[str, Mapping[str, Any]], off: Mapping[str, Mapping[str, Mapping[str, Any]]]
) -> list[dict[str, Any]]:
    """Per speed-up: what switching it off alone costs on each ablation fleet, and whether it pays.

    `default`: fleet -> figures of the default run; `off`: speed-up -> fleet -> figures with it off. The
    saving is the share of CPU the speed-up saves: 1 - on/off, from the medians of the CPU times.
    """
    from themelio_gpu.speedups import INTERNALS, Speedup

    rows = []
    for name, fleets in off.items():
        per_fleet = {
            fleet: {
                "wall_s_median": figures["wall_s_median"],
                "cpu_s_median": figures["cpu_s_median"],
                "wall_ratio": ratio(figures, default[fleet])["median_of_paired"],
                "cpu_saved_share": 1 - float(default[fleet]["cpu_s_median"]) / float(figures["cpu_s_median"]),
                "same_output": figures["output"]["digest"] == default[fleet]["output"]["digest"],
            }
            for fleet, figures in fleets.items()
        }
        best = max(f["cpu_saved_share"] for f in per_fleet.values())
        internals = INTERNALS.get(Speedup(name))
        rows.append(
            {
                "speedup": name,
                "relies_on": internals or "public API only",
                "fleets": per_fleet,
                "best_cpu_saved_share": best,
                "pays": best >= PAYS_SHARE if internals else None,  # internals must pay for the risk they bring
                "same_output": all(f["same_output"] for f in per_fleet.values()),
            }
        )
    return rows


def _listed(item: Mapping[str, Any], key: str = "listed") -> int:
    return max((len(listed) for listed in item[key]), default=0)


def _edit_goals(edits: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The one-cluster edit's time, and that each edit wrote and listed exactly the stacks it changes."""
    goals = [
        ratio_goal(
            "edit",
            f"t(synth after a one-cluster edit of {EDIT_FLEET_SIZE} clusters) / t(synth of a one-cluster fleet)",
            edits["one_cluster"],
            edits["one_cluster_fleet"],
            GOAL_EDIT_RATIO,
        )
    ]
    for name, item in (("edit-listed", edits["one_cluster"]), ("catalog-edit-listed", edits["catalog"])):
        expected = len(item["expected"])
        exact = item["listed_by_changed"] == [item["expected"]] and item["stack_files_rewritten"] == [expected]
        measure = f"stacks written and listed by `changed --format json` (expected exactly {expected})"
        goals.append(
            goal(
                name,
                measure,
                float(max(item["stack_files_rewritten"], default=0)),
                float(expected),
                ok=exact,
                digits=0,
            )
        )
    return goals


def _changed_goals(changed: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The goals of `changed --base-ref`: the one-cluster edit's time and memory, and what each scenario
    synthesized, listed and said."""
    one, catalog, tool = changed["one_cluster"], changed["catalog"], changed["tool"]
    n_one, n_catalog, n_tool = len(one["expected"]), len(catalog["expected"]), tool["expected_stacks"]
    note = tool["notes"][0] if len(tool["notes"]) == 1 else ""
    return [
        ratio_goal(
            "changed",
            f"t(changed --base-ref --head, one-cluster edit of {EDIT_FLEET_SIZE} clusters) / "
            "t(synth of a one-cluster fleet)",
            one,
            changed["one_cluster_fleet"],
            GOAL_CHANGED_RATIO,
        ),
        goal(
            "changed-memory",
            "peak MiB of that changed (every process's peak, summed)",
            int(one["memory_kib"]["tree_peak_upper_bound"]) / 1024,
            GOAL_CHANGED_MEMORY_MIB,
            digits=0,
        ),
        ratio_goal(
            "changed-no-head",
            f"t(changed --base-ref, no --head, no cache, one-cluster edit of {EDIT_FLEET_SIZE} clusters) / "
            "t(synth of a one-cluster fleet)",
            changed["one_cluster_no_head"],
            changed["one_cluster_fleet"],
            GOAL_CHANGED_RATIO,
        ),
        goal(
            "changed-no-head-memory",
            "peak MiB of that changed (every process's peak, summed)",
            int(changed["one_cluster_no_head"]["memory_kib"]["tree_peak_upper_bound"]) / 1024,
            GOAL_CHANGED_MEMORY_MIB,
            digits=0,
        ),
        goal(
            "changed-edit-listed",
            f"stacks listed (expected exactly {n_one}), and synthesized here: the base's alone",
            float(_listed(one)),
            float(n_one),
            digits=0,
            ok=one["listed"] == [one["expected"]]
            and all(c == {"base": n_one} for c in one["synthesized"])
            and not any(one["base_by_its_own_code"]),
        ),
        goal(
            "changed-catalog-listed",
            f"stacks listed, and synthesized on each side (expected exactly {n_catalog})",
            float(_listed(catalog)),
            float(n_catalog),
            digits=0,
            ok=catalog["listed"] == [catalog["expected"]]
            and all(c == {"base": n_catalog, "head": n_catalog} for c in catalog["synthesized"]),
        ),
        goal(
            "changed-tool",
            f"stacks compared, the base synthesized by its own code, the report saying why (expected {n_tool})",
            float(max(tool["stacks"], default=0)),
            float(n_tool),
            digits=0,
            ok=tool["stacks"] == [n_tool]
            and all(tool["base_by_its_own_code"])
            and note.startswith("every stack compared")
            and "the tool differs" in note,
        ),
    ]


def _workflow_goals(changed: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The generated workflow's `changed` job in a fresh clone after a one-cluster edit: its steps up to the
    matrix with a cache hit, against a one-cluster fleet's synthesis; what each run synthesized and said."""
    hit, miss = changed["workflow_hit"], changed["workflow_miss"]
    n = len(hit["expected"])
    return [
        ratio_goal(
            "workflow",
            f"t(the workflow's steps up to the matrix, cache hit, one-cluster edit of {EDIT_FLEET_SIZE} clusters, "
            "fresh clone) / t(synth of a one-cluster fleet)",
            hit,
            changed["one_cluster_fleet"],
            GOAL_WORKFLOW_RATIO,
        ),
        goal(
            "workflow-listed",
            f"the matrix's size with and without a cache hit (expected exactly {n}); with a hit, the stack files "
            "written and `changed` synthesizing nothing; each summary saying hit or miss",
            float(max([*hit["matrix_size"], *miss["matrix_size"]], default=0)),
            float(n),
            digits=0,
            ok=hit["matrix_size"] == [n]
            and miss["matrix_size"] == [n]
            and hit["stack_files_written"] == [n]
            and hit["changed_synthesis_lines"] == [0]
            and len(hit["summary"]) == 1
            and hit["summary"][0].startswith("Synthesis: cache hit")
            and len(miss["summary"]) == 1
            and miss["summary"][0].startswith("Synthesis: cache miss"),
        ),
    ]


def pull_request_goals(changed: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The goals of a pull request's review: `changed --base-ref`'s, and the generated workflow's job's."""
    return [*_changed_goals(changed), *(_workflow_goals(changed) if "workflow_hit" in changed else [])]


def derive(
    floors: Mapping[str, Mapping[str, Any]],
    example: Mapping[str, Any],
    sizes: Sequence[dict[str, Any]],
    ablated: list[dict[str, Any]] | None = None,
    edits: Mapping[str, Mapping[str, Any]] | None = None,
    changed: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The goals, as ratios within this run, and the per-cluster figures behind them.

    `floors`: "cdktf" (python -c "import cdktf") and "app" (the app's import floor); `example`: the example
    fleet's `python main.py`; `sizes`: one entry per fleet size, smallest first; `ablated`: `ablation`'s rows.
    """
    t_floor, cpu_floor = float(floors["app"]["wall_s_median"]), float(floors["app"]["cpu_s_median"])
    for item in sizes:
        beyond, n = float(item["wall_s_median"]) - t_floor, item["clusters"]
        item["derived"].update(
            {
                "beyond_floor_s": beyond,
                "per_cluster_beyond_floor_ms": 1000 * beyond / n,
                "per_resource_block_beyond_floor_ms": 1000 * beyond / max(item["output"]["resource_blocks"], 1),
                # CPU time (Python + node) is far less sensitive to a busy machine than wall time.
                "cpu_per_cluster_beyond_floor_ms": 1000 * (float(item["cpu_s_median"]) - cpu_floor) / n,
            }
        )
    by_size = {int(s["clusters"]): s for s in sizes}
    memory = by_size.get(GOAL_MEMORY_SIZE)
    goals = [
        ratio_goal(
            "example",
            f'python main.py (example fleet) / python -c "{engine_import()}"',
            example,
            floors["cdktf"],
            GOAL_EXAMPLE_RATIO,
        ),
        *(
            ratio_goal(
                name,
                f"t({large} clusters) / t({small} cluster{'s' if small != 1 else ''})",
                by_size.get(large),
                by_size.get(small),
                limit,
            )
            for name, ((small, large), limit) in (("scaling", GOAL_SCALING), ("linear", GOAL_LINEAR))
        ),
        goal(
            "memory",
            f"peak MiB of the {GOAL_MEMORY_SIZE}-cluster synthesis (every process's peak, summed)",
            None if memory is None else int(memory["memory_kib"]["tree_peak_upper_bound"]) / 1024,
            GOAL_MEMORY_MIB,
            digits=0,
        ),
        *(_edit_goals(edits) if edits is not None else []),
        *(pull_request_goals(changed) if changed is not None else []),
    ]
    rows = ablated or []
    derived: dict[str, Any] = {
        "goals": goals,
        "all_goals_met": all(g["ok"] for g in goals),
        "identical_output_across_repeats": all(s["output_identical_across_repeats"] for s in [example, *sizes]),
        "ablation": rows,
        "every_speedup_same_output": all(r["same_output"] for r in rows),
        "every_speedup_on_internals_pays": all(r["pays"] is not False for r in rows),
    }
    if len(by_size) > 1:  # least-squares fit of wall time over cluster count
        xs, ys = [float(n) for n in by_size], [float(s["wall_s_median"]) for s in by_size.values()]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
        derived |= {"marginal_s_per_cluster": slope, "fitted_fixed_s": my - slope * mx}
        derived["fitted_fixed_beyond_floor_s"] = derived["fitted_fixed_s"] - t_floor
    return derived


# --- the report ---------------------------------------------------------------------------------------------


def render_goal(item: Mapping[str, Any]) -> str:
    if item["value"] is None:
        return f"goal {item['name']}: {item['measure']} not measured (needs those --sizes)"
    verdict = "met" if item["ok"] else "MISSED"
    line = f"goal {item['name']}: {item['measure']} = {item['value']:.{item['digits']}f} (<= {item['limit']:g}: {verdict})"
    if d := item["details"]:
        line += (
            f"\n  median of the ratios within each repetition; of medians {d['of_medians']:.2f}, "
            f"of the fastest runs {d['of_fastest']:.2f}, of CPU times {d['of_cpu']:.2f}"
        )
    return line


def _mib(kib: int) -> str:
    return f"{kib / 1024:.0f}"


def _run_line(label: str, item: Mapping[str, Any]) -> str:
    peaks = item["memory_kib"]["peaks_by_name"]
    return (
        f"{label}: {item['wall_s_median']:.2f} s wall (runs {', '.join(f'{w:.2f}' for w in item['wall_s_all'])}), "
        f"{item['cpu_s_median']:.2f} s CPU, peak python {_mib(peaks.get('python', 0))} MiB "
        f"+ node {_mib(peaks.get('node', 0))} MiB"
    )


def _columns(rows: Sequence[Sequence[str]], left: int = 0) -> list[str]:
    """Rows as aligned columns (the first `left` columns left-aligned), a rule under the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]
    return [lines[0], "  ".join("-" * w for w in widths), *lines[1:]]


def render_ablation(rows: Sequence[Mapping[str, Any]], fleets: Sequence[str]) -> list[str]:
    table: list[Sequence[str]] = [
        ["speed-up switched off", *(f"{f}: wall s, CPU s, saves" for f in fleets), "relies on", "verdict"]
    ]
    for row in rows:
        verdict = {True: "pays", False: "DOES NOT PAY", None: "public API"}[row["pays"]]
        figures = [row["fleets"][f] for f in fleets]
        table.append(
            [
                row["speedup"],
                *(
                    f"{f['wall_s_median']:.2f}, {f['cpu_s_median']:.2f}, {100 * f['cpu_saved_share']:.0f} %"
                    for f in figures
                ),
                row["relies_on"],
                verdict + ("" if row["same_output"] else "; OUTPUT DIFFERS"),
            ]
        )
    return _columns(table, left=1)


def render_changed(changed: Mapping[str, Mapping[str, Any]]) -> list[str]:
    labels = {
        "one_cluster": "one-cluster edit, --head (as the generated pipeline runs it)",
        "one_cluster_no_head": "one-cluster edit, no --head (the head's files checked and planned)",
        "one_cluster_no_head_warm": "one-cluster edit, no --head, warm cache",
        "catalog": f"catalog edit served by {len(changed['catalog']['expected'])} clusters, no --head",
        "tool": f"another tool in the base commit, {CHANGED_TOOL_FLEET_SIZE} clusters, --head",
    }
    lines = [
        f"changed --base-ref HEAD, {EDIT_FLEET_SIZE} clusters (each run with an empty cache unless warm):",
        *("  " + _run_line(label, changed[key]) for key, label in labels.items() if key in changed),
    ]
    steps = {
        "workflow_hit": "cache hit: restore, synthesize, changed",
        "workflow_miss": "cache miss: synthesize, changed",
    }
    if "workflow_hit" in changed:
        lines.append(
            f"the generated workflow's changed job, fresh clone, one-cluster edit of {EDIT_FLEET_SIZE} clusters:"
        )
        for key, label in steps.items():
            item = changed[key]
            walls = "; ".join(", ".join(f"{w:.2f}" for w in run) for run in item["steps_wall_s"])
            lines.append(f"  {_run_line(label, item)}; steps s: {walls}; matrix {item['matrix_size']}")
    return lines


def render_table(result: Mapping[str, Any]) -> str:
    machine, floors, derived, settings = result["machine"], result["floors"], result["derived"], result["settings"]
    commit = (machine["git_commit"] or "unknown")[:12] + (" (dirty)" if machine["git_dirty"] else "")
    lines = [
        f"Synthesis benchmark  {machine['date']}  {machine['cpu_count']} CPUs  Python {machine['python']}  "
        f"node {machine['node']}  commit {commit}  load average {machine['load_average']}",
        f"repeats: {settings['repeat']} (medians); cluster: {OFFERINGS_PER_CLUSTER} offerings, "
        f"{POOLS_PER_CLUSTER} static pools x {NODES_PER_POOL} nodes",
        "",
        _run_line(f'python -c "{engine_import()}"', floors["cdktf"]),
        _run_line("app import floor", floors["app"]),
        _run_line("example fleet (python main.py)", result["example"]),
        "",
    ]
    header = "clusters|wall s|min s|CPU s|beyond floor s|ms/cluster|CPU ms/cluster|blocks|instances|ms/block|"
    rows: list[Sequence[str]] = [(header + "py MiB|node MiB|tree MiB|output MiB").split("|")]
    for s in result["sizes"]:
        mem, out, d = s["memory_kib"], s["output"], s["derived"]
        rows.append(
            (
                str(s["clusters"]),
                *(f"{s[k]:.2f}" for k in ("wall_s_median", "wall_s_min", "cpu_s_median")),
                f"{d['beyond_floor_s']:.2f}",
                f"{d['per_cluster_beyond_floor_ms']:.0f}",
                f"{d['cpu_per_cluster_beyond_floor_ms']:.0f}",
                str(out["resource_blocks"]),
                str(out["resource_instances"]),
                f"{d['per_resource_block_beyond_floor_ms']:.1f}",
                _mib(mem["peaks_by_name"].get("python", 0)),
                _mib(mem["peaks_by_name"].get("node", 0)),
                _mib(mem["tree_peak_upper_bound"]),
                f"{out['bytes'] / MIB:.2f}",
            )
        )
    lines += [*_columns(rows), "", *render_changed(result["changed"]), ""]
    lines += [render_goal(g) for g in derived["goals"]]
    if "marginal_s_per_cluster" in derived:
        lines.append(
            f"fit: {1000 * derived['marginal_s_per_cluster']:.0f} ms per cluster, fixed {derived['fitted_fixed_s']:.2f} s "
            f"({derived['fitted_fixed_beyond_floor_s']:+.2f} s beyond the app import floor)"
        )
    lines.append(
        "output identical across repeats: " + ("yes" if derived["identical_output_across_repeats"] else "NO")
    )
    if derived["ablation"]:
        lines += ["", f"ablation (each speed-up off alone; saves = share of CPU it saves; {settings['engine']}):"]
        lines += render_ablation(derived["ablation"], settings["ablation_fleets"])
        lines += [f"note: {note}" for note in result["ablation_notes"]]
    if result["source_changed_during_run"]:
        lines.append("WARNING: main.py or themelio_gpu/ changed while the benchmark ran; the figures mix versions")
    return "\n".join(lines)
