"""The results as Markdown and as a chart (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

KIND_COLOURS = {
    "raw": "#7f7f7f",
    "hpcbridge": "#1f77b4",
    "peer": "#ff7f0e",
    "other": "#2ca02c",
}


def fmt(value: Optional[float]) -> str:
    if value is None:
        return "-"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    if magnitude >= 0.01:
        return f"{value:.3f}"
    return f"{value:.2g}"


def fmt_ratio(value: Optional[float]) -> str:
    if value is None:
        return "-"
    if value >= 10:
        return f"{value:.0f}x"
    if value >= 0.1:
        return f"{value:.2f}x"
    return f"{value:.3f}x"


def _value(value: Any) -> str:
    """An extra column's cell: numbers as the table's numbers, text as it is."""
    if value is None or value == "":
        return "-"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return str(value)
    return fmt(value) if isinstance(value, float) else str(value)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def why_for(scenario: Dict[str, Any], item: Dict[str, Any]) -> str:
    """The reason a losing hpcbridge row gives: ``why["GROUP-PREFIX|contender"]``
    (the group starting with that prefix) before ``why["contender"]``."""
    why = scenario.get("why", {})
    group = item.get("group") or ""
    for key, text in why.items():
        prefix, bar, contender = key.partition("|")
        if bar and contender == item["contender"] and group.startswith(prefix):
            return text
    return why.get(item["contender"], "")


def _row_note(item: Dict[str, Any], scenario: Dict[str, Any]) -> str:
    parts = []
    if item.get("skipped"):
        return f"skipped: {item['skipped']}"
    if item.get("loses_to"):
        why = why_for(scenario, item)
        parts.append(
            f"**hpcbridge loses** to {', '.join(item['loses_to'])}" + (f": {why}" if why else "")
        )
    if item.get("reference_only"):
        parts.append("reference only")
    if item.get("note"):
        parts.append(item["note"])
    return "; ".join(parts)


def scenario_markdown(index: int, scenario: Dict[str, Any]) -> List[str]:
    lines = [f"### {index}. {scenario['title']} (`{scenario['name']}`)", ""]
    if scenario.get("status") == "skipped":
        return lines + [f"Skipped: {scenario.get('reason')}", ""]
    if scenario.get("status") == "error":
        return lines + [f"Failed: {scenario.get('reason')}", ""]
    params = scenario.get("params", {})
    if params:
        shown = ", ".join(f"{key}={value}" for key, value in params.items())
        lines += [f"Parameters: {_cell(shown)}.", ""]
    rows = scenario["rows"]
    unit = scenario["unit"]
    better = "higher is better" if scenario["higher_is_better"] else "lower is better"
    with_groups = any(item.get("group") for item in rows)
    with_commands = any("commands" in item for item in rows)
    with_seen = any("answered" in item for item in rows)
    columns = scenario.get("columns", [])
    header = (["group"] if with_groups else []) + [
        "contender",
        f"median {unit}",
        "min-max",
        "speed vs baseline",
    ]
    header += [title for _, title in columns]
    if with_commands:
        header.append("commands / refresh")
    if with_seen:
        header.append("answered")
    header.append("note")
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for item in rows:
        cells = [item.get("group", "")] if with_groups else []
        name = item["contender"]
        if item.get("kind") == "hpcbridge":
            name = f"**{name}**"
        cells += [
            name,
            fmt(item.get("median")),
            f"{fmt(item.get('min'))}-{fmt(item.get('max'))}" if item.get("median") else "-",
            fmt_ratio(item.get("speed_vs_baseline")),
        ]
        cells += [_value(item.get(key)) for key, _ in columns]
        if with_commands:
            by_name = item.get("commands_by_name") or {}
            detail = ", ".join(f"{count} {name}" for name, count in sorted(by_name.items()))
            cells.append(f"{item['commands']} ({detail})" if "commands" in item and detail else "-")
        if with_seen:
            seen = item.get("answered")
            tracked = item.get("tracked")
            cells.append(f"{seen}/{tracked}" if seen is not None else "-")
        cells.append(_row_note(item, scenario))
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    lines.append("")
    lines.append(
        f"{unit}, {better}; speed vs baseline = how many times faster than the group's "
        + (f"baseline (`{scenario['baseline']}`)" if scenario.get("baseline") else "raw line")
        + ", > 1 is faster."
    )
    lines.append("")
    losses = [item for item in rows if item.get("loses_to")]
    if losses:
        lines.append("Where hpcbridge loses:")
        for item in losses:
            why = why_for(scenario, item)
            lines.append(
                f"- {item.get('group') + ': ' if item.get('group') else ''}{item['contender']} "
                f"is slower than {', '.join(item['loses_to'])}" + (f" - {why}." if why else ".")
            )
        lines.append("")
    if scenario.get("goal"):
        goal = scenario["goal"]
        achieved = goal.get("achieved_text") or f"{goal['achieved']}x"
        lines.append(
            f"Goal: {goal['target']} - achieved {achieved}: "
            f"**{'met' if goal['met'] else 'NOT met'}**."
        )
        lines.append("")
    for note in scenario.get("notes", []):
        if scenario.get("goal") and note.startswith("Issue 9 goal"):
            continue
        lines.append(f"- {note}")
    lines.append("")
    return lines


def skipped_lines(results: Dict[str, Any]) -> List[str]:
    lines = []
    for scenario in results["scenarios"]:
        if scenario.get("status") in ("skipped", "error"):
            lines.append(f"- scenario `{scenario['name']}`: {scenario.get('reason')}")
            continue
        for item in scenario.get("rows", []):
            if item.get("skipped"):
                where = f"{scenario['name']}" + (f", {item['group']}" if item.get("group") else "")
                lines.append(f"- {item['contender']} ({where}): {item['skipped']}")
    return lines


def markdown(results: Dict[str, Any]) -> str:
    machine = results["machine"]
    versions = results["versions"]
    shown_versions = ", ".join(
        f"{name} {value}" for name, value in versions.items() if value and name != "openssh"
    )
    load = ", ".join(f"{x:.2f}" for x in machine.get("load_average") or [])
    end_load = ", ".join(f"{x:.2f}" for x in results.get("load_average_at_end") or [])
    lines = [
        "## Results",
        "",
        f"Run {results['started_at']} by `{results['command']}`"
        f"{' (quick: tiny counts, not for comparison)' if results.get('quick') else ''}; "
        f"total runtime {results['runtime_s'] / 60:.1f} min.",
        "",
        f"Machine: {machine['cpu_count']} CPUs ({machine.get('cpu_model') or '?'}), "
        f"{machine.get('memory_gib')} GiB, Python {machine['python']}, {machine['os']}; "
        f"load average (1, 5, 15 min) at start {load}"
        + (f", at the end {end_load}." if end_load else "."),
        "",
        f"Versions: {shown_versions}"
        + (f"; {versions['openssh']}" if versions.get("openssh") else "")
        + ".",
        "",
        "Every comparison ran its contenders interleaved (A B C, B C A, ...) for the rounds "
        "shown; median and min-max over the rounds. hpcbridge rows are in bold.",
        "",
    ]
    for rerun in results.get("reruns", []):
        lines += [
            f"Re-run {rerun['at']} by `{rerun['command']}`: "
            f"{', '.join(rerun['selected'])} (in place of that run's).",
            "",
        ]
    for index, scenario in enumerate(results["scenarios"], 1):
        lines += scenario_markdown(index, scenario)
    skipped = skipped_lines(results)
    lines += ["### Skipped", ""] + (skipped or ["Nothing was skipped."]) + [""]
    return "\n".join(lines)


# -- the chart ------------------------------------------------------------------------


def chart(results: Dict[str, Any], path: Path) -> Optional[str]:
    """Write the PNG; return why not when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"matplotlib is not installed ({exc})"
    panels = [
        scenario
        for scenario in results["scenarios"]
        if scenario.get("status") == "ok"
        and any(item.get("median") for item in scenario.get("rows", []))
    ]
    if not panels:
        fig, axis = plt.subplots(figsize=(8, 2))
        axis.axis("off")
        axis.text(0.5, 0.5, "no scenario measured", ha="center", va="center")
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return None
    heights = [max(1.6, 0.32 * sum(1 for r in s["rows"] if r.get("median")) + 0.9) for s in panels]
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(11, sum(heights)),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    for axis, scenario in zip(axes[:, 0], panels):
        rows = [item for item in scenario["rows"] if item.get("median")]
        labels = [
            (f"{item['group']}: " if item.get("group") else "") + item["contender"] for item in rows
        ]
        medians = [item["median"] for item in rows]
        low = [item["median"] - (item.get("min") or item["median"]) for item in rows]
        high = [(item.get("max") or item["median"]) - item["median"] for item in rows]
        colours = [KIND_COLOURS.get(item.get("kind", "other"), "#2ca02c") for item in rows]
        positions = list(range(len(rows)))[::-1]
        axis.barh(positions, medians, color=colours, xerr=[low, high], capsize=3)
        axis.set_yticks(positions)
        axis.set_yticklabels(labels, fontsize=8)
        spread = max(medians) / max(min(medians), 1e-9)
        if spread > 30:
            axis.set_xscale("log")
        better = "higher is better" if scenario["higher_is_better"] else "lower is better"
        axis.set_title(f"{scenario['title']} - {better}", fontsize=10)
        axis.set_xlabel(scenario["unit"], fontsize=8)
        for position, value, item in zip(positions, medians, rows):
            right = max(value, item.get("max") or value)
            axis.text(right, position, f"  {fmt(value)}", va="center", fontsize=7)
        axis.margins(x=0.15)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colour) for colour in KIND_COLOURS.values()]
    fig.legend(
        handles,
        ["raw scheduler", "hpcbridge", "peer (PSI/J, submitit, Maestro)", "other"],
        loc="lower center",
        ncol=4,
        fontsize=8,
    )
    stamp = f"{results['started_at']} - {results['machine']['cpu_count']} CPUs"
    fig.suptitle(f"hpcbridge benchmarks ({stamp}); bars: median, whiskers: min-max", fontsize=11)
    total = sum(heights)
    fig.tight_layout(rect=(0, 0.5 / total, 1, 1 - 0.45 / total))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return None
