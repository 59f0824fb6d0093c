"""Speed: training throughput of every zoo model, translation speed, and the wall-clock budget."""

from experiments.reports.common import load, provenance, results_named


def speed_section(result):
    lines = ["### Training speed per variant", "", provenance(
        result, seeds="0, as benchmarks/train_throughput.py seeds every model"), "",
             "Hidden 256, 2 stacks, batch 16 x 128 bytes; median step of 10, fastest of the passes "
             "(every pass's ms/step in the last column).", "",
             "| model | precision | target bytes/s | ms/step | GFLOP/s (analytic) | ms/step per pass |",
             "|---|---|---|---|---|---|"]
    for row in result["rows"]:
        passes = ", ".join(f"{s * 1000:.0f}" for s in row.get("seconds_per_step_per_pass", []))
        lines.append(f"| {row['model']} | {row['precision']} | {row['target_bytes_per_s']:.0f} "
                     f"| {row['seconds_per_step'] * 1000:.1f} | {row['gflop_per_s']:.1f} | {passes} |")
    return lines


def translation_section(result):
    lines = ["### Translation speed", "", provenance(result), f"CPU: {result['cpu']}. Weights: "
             f"{result['weights']}.", "",
             f"Exports of one model's weights, each timed in turn, {result['rounds']} rounds, "
             "median; the share of the float32 matmul peak "
             f"({result['matmul_peak_gflop_per_s']:.0f} GFLOP/s, measured in the same run) that "
             "the translations' analytic FLOPs reach.", "",
             "| export | beam | set | sentences/s | target bytes/s | share of float32 peak "
             "| speed vs the first export | outputs identical to the first of its beam |",
             "|---|---|---|---|---|---|---|---|"]
    names = result.get("names", {})
    for row in result["rows"]:
        lines.append(f"| {names.get(row['saved_model'], row['saved_model'])} | "
                     f"{row['beam_size']} | {row['set']} ({row['sentences']}) | "
                     f"{row['sentences_per_s']:.1f} | {row['target_bytes_per_s']:.0f} | "
                     f"{100 * row['fraction_of_float32_peak']:.1f}% | "
                     f"{row['speed_vs_first']:.2f}x | "
                     f"{100 * row['identical_to_first_of_its_beam']:.1f}% |")
    return lines


def budget_section(result):
    budget = result["budget"]
    return ["### The time budget in wall-clock time", "", provenance(result),
            f"CPU: {result['cpu']}.", "",
            "| time_budget_seconds | wall-clock, process start to exit | start-up before "
            "training | first step to written export | kept for the end | training stopped at "
            "| steps |", "|---|---|---|---|---|---|---|",
            f"| {budget['time_budget_seconds']:.0f} | {result['wall_seconds']:.0f} s | "
            f"{result['wall_seconds'] - budget['seconds']:.0f} s | {budget['seconds']:.0f} s "
            f"| {budget['reserved_for_the_end']:.0f} s | {result['total_train_seconds']:.0f} s "
            f"| {result['step']} |"]


def render():
    """The section's subsections, from speed.json, translate_speed*.json and recipe_budget.json."""
    result = load("speed")
    lines = (speed_section(result) if result else ["Not run yet."]) + [""]
    for result in results_named("translate_speed").values():
        lines += translation_section(result) + [""]
    result = load("recipe_budget")
    if result:
        lines += budget_section(result) + [""]
    return lines
