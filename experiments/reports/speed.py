"""Speed: training throughput of every zoo model."""

from experiments.reports.common import load, provenance


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


def render():
    """The section's subsections, from speed.json."""
    result = load("speed")
    return (speed_section(result) if result else ["Not run yet."]) + [""]
