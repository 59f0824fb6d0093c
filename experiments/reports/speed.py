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
             "| export | beam | sentences per batch | set | sentences/s | target bytes/s "
             "| share of float32 peak | speed vs the first export "
             "| outputs identical to the first of its beam |",
             "|---|---|---|---|---|---|---|---|---|"]
    names = result.get("names", {})
    for row in result["rows"]:
        # Older results timed every export at one batch size, recorded once.
        batch = row.get("batch_size", result.get("batch_size"))
        lines.append(f"| {names.get(row['saved_model'], row['saved_model'])} | "
                     f"{row['beam_size']} | {batch} | {row['set']} ({row['sentences']}) | "
                     f"{row['sentences_per_s']:.1f} | {row['target_bytes_per_s']:.0f} | "
                     f"{100 * row['fraction_of_float32_peak']:.1f}% | "
                     f"{row['speed_vs_first']:.2f}x | "
                     f"{100 * row['identical_to_first_of_its_beam']:.1f}% |")
    return lines


def pairs_section(result, title, column, setting):
    """Runs of translate_speed in separate processes, alternated in pairs: one row per run and
    set, `setting(run)` in the column `column`."""
    lines = [title, "", provenance(result),
             f"CPU: {result['cpu']}. Weights: {result['weights']}. {result['how']}.", "",
             f"| pair | {column} | set | sentences/s | share of float32 peak | "
             "float32 peak, GFLOP/s | outputs |", "|---|---|---|---|---|---|---|"]
    first = {row["set"]: row["outputs_sha256"] for row in result["runs"][0]["rows"]}
    for run in result["runs"]:
        for row in run["rows"]:
            same = "same as the first run" if row["outputs_sha256"] == first[row["set"]] else \
                "differ from the first run"
            lines.append(f"| {run['pair']} | {setting(run)} | {row['set']} ({row['sentences']}) "
                         f"| {row['sentences_per_s']:.1f} | "
                         f"{100 * row['fraction_of_float32_peak']:.1f}% | "
                         f"{run['matmul_peak_gflop_per_s']:.0f} | {same} |")
    return lines


def threads_section(result):
    """Decoding with one thread per op against TensorFlow's default, process against process."""
    return pairs_section(result, "### Threads per op while two batches decode", "intra-op threads",
                         lambda run: run["intra_op_threads"] or "TensorFlow's default")


def schedule_section(result):
    """Batches cut by count in ascending length against longest first by bytes."""
    beam = result["runs"][0]["rows"][0]["beam_size"]
    return pairs_section(result, f"### Which batches decode first, and how large (beam {beam})",
                         "batches", lambda run: run["batches"])


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


def checkpoint_section(result):
    """What the data stream adds to each training checkpoint (benchmarks/checkpoint_cost.py)."""
    lines = ["### The data stream in each checkpoint", "", provenance(result),
             f"CPU: {result['cpu']}. {result['pairs']:,} training pairs, shuffle buffer "
             f"{result['shuffle_buffer']:,}, {result['tokens_per_batch']:,} bytes per batch; "
             f"{result['rounds']} alternated writes of the iterator alone, each after "
             f"{result['batches_between_writes']} batches.", "",
             "| stream | first batch after | iterator write, median | per round | bytes written |",
             "|---|---|---|---|---|"]
    for name, label in (("buffer", "a shuffle buffer holding every pair"),
                        ("permuted", "the pairs in memory, each epoch permuted")):
        rounds = ", ".join(f"{s:.3f}" for s in result["write_seconds_per_round"][name])
        lines.append(f"| {label} | {result['seconds_to_first_batch'][name]:.1f} s | "
                     f"{result['write_seconds_median'][name]:.3f} s | {rounds} | "
                     f"{result['checkpoint_bytes'][name]:,} |")
    return lines


def _step_cells(row):
    """The first cells of a backend_throughput row: shape, batch, precision, ms/step, bytes/s."""
    return (f"| {row['model']} h{row['hidden_size']} x{row['num_stacks']} | "
            f"{row['batch_size']} x {row['length']} | {row['precision']} | "
            f"{row['seconds_per_step'] * 1000:.1f} | {row['target_bytes_per_s']:.0f} |")


def gpu_section(result):
    """Training step under JAX on a GPU, with its share of the matmul peak measured there."""
    lines = ["### Training on a GPU under JAX", "", provenance(result),
             f"Device: {result['device']}. {result['how']}", "",
             "| model | batch x bytes | precision | ms/step | target bytes/s | GFLOP/s (analytic) "
             "| matmul peak, GFLOP/s | share of peak |", "|---|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        lines.append(_step_cells(row) + f" {row['gflop_per_s']:.0f} | "
                     f"{row['matmul_peak_gflop_per_s']:.0f} | {100 * row['fraction_of_peak']:.1f}% |")
    other = result["other_machine"]
    lines += ["", f"{other['how']}, at commit {other['commit']}:", "",
              "| model | batch x bytes | precision | ms/step | target bytes/s |",
              "|---|---|---|---|---|"]
    lines += [_step_cells(row) for row in other["rows"]]
    return lines


def backends_section(result):
    """One weights file written under TensorFlow on the CPU, read on a GPU by other backends."""
    lines = ["### One weights file on other backends, on a GPU", "", provenance(result),
             f"Device: {result['device']}. {result['how']}", "",
             "| backend and precision | largest logit difference from TensorFlow (all zoo "
             "models) | seed 0 draws the same weights | causal leak | receptive-field positions "
             "that respond |", "|---|---|---|---|---|"]
    for row in result["rows"]:
        models = row["models"].values()
        lines.append(
            f"| {row['setting']} | {max(m['max_abs_logit_difference'] for m in models):.2g} | "
            f"{'yes' if all(m['seed0_weights_equal'] for m in models) else 'no'} | "
            f"{max(m['largest_causal_leak'] for m in models):g} | "
            f"{row['positions_touched']} of {row['receptive_field']} |")
    return lines


def render():
    """The section's subsections, from speed.json, translate_speed*.json, decode_threads.json,
    decode_schedule.json, decode_schedule_greedy.json, recipe_budget.json, checkpoint_cost.json
    and the GPU files backend_throughput_h200.json and backend_logits_h200.json."""
    result = load("speed")
    lines = (speed_section(result) if result else ["Not run yet."]) + [""]
    for result in results_named("translate_speed").values():
        lines += translation_section(result) + [""]
    for name, section in (("decode_threads", threads_section),
                          ("decode_schedule", schedule_section),
                          ("decode_schedule_greedy", schedule_section)):
        result = load(name)
        if result:
            lines += section(result) + [""]
    result = load("recipe_budget")
    if result:
        lines += budget_section(result) + [""]
    result = load("checkpoint_cost")
    if result:
        lines += checkpoint_section(result) + [""]
    for name, section in (("backend_throughput_h200", gpu_section),
                          ("backend_logits_h200", backends_section)):
        result = load(name)
        if result:
            lines += section(result) + [""]
    return lines
