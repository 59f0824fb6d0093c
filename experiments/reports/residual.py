"""The residual branch of SELU ByteNet: sweeps on memorization and on real text."""

import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments.common import sweep_model  # noqa: E402
from experiments.reports.common import (DOCS, ema, load, mean,  # noqa: E402
                                        provenance, results_named)


# The results files of the residual sweep on memorization (experiments/residual_sweep.py).
SWEEPS = ("residual_screen_3min", "residual_optimizer_3min", "residual_seeds_3min")


def _settings_table(runs):
    """Mean (and per-seed) figures of each setting, settings in first-run order."""
    by_setting = {}
    for run in runs:
        by_setting.setdefault(run["setting"], []).append(run)
    lines = ["| setting | seeds | steps | final train loss (mean; per seed) | best BLEU (per seed) "
             "| final BLEU (per seed) | first second at BLEU >= 90 | max gradient norm |",
             "|---|---|---|---|---|---|---|---|"]
    for setting, rows in by_setting.items():
        mean_loss = sum(r["final_loss"] for r in rows) / len(rows)
        each = lambda key, form: ", ".join(format(r[key], form) for r in rows)  # noqa: E731
        seconds = ", ".join(str(r["first_seconds_at_bleu_90"]) for r in rows)
        lines.append(
            f"| {setting} | {each('seed', 'd')} | {each('steps', 'd')} "
            f"| {mean_loss:.3f}; {each('final_loss', '.3f')} | {each('best_bleu', '.1f')} "
            f"| {each('final_bleu', '.1f')} | {seconds} "
            f"| {max(r['max_gradient_norm'] for r in rows):.1f} |")
    return lines


def sweep_section(results):
    """The residual sweep on memorization (one or more results files, one table each)."""
    fig, (ax_loss, ax_norm) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=90)
    lines = ["### SELU ByteNet's residual branch: sweep on memorization", "",
             "bytenet_selu at its zoo size (hidden 400, 3 stacks, 15 blocks per side) on the "
             "first 100 pairs of newstest2013, scored on the same pairs; batch 16, Adam (Keras "
             "defaults unless `+snn_adam`: beta_2 0.99, epsilon 0.01), 1e-3 after 50 warm-up "
             "steps then 1/sqrt(step) decay (`+constant`: no decay), the zoo's AlphaDropout 0.05 "
             "(`+nodrop`: none), precision auto, a wall-clock budget per run. `w<x>`: blocks "
             "return `(x + w f(x)) / sqrt(1 + w^2)`; `gate`: w is a learnable scalar from 0. "
             "Final train loss: mean of the last three logged steps (nats per byte).", ""]
    colors = {}
    for name, result in results.items():
        lines += [f"#### `{name}`", "", provenance(result) + f" Budget {result['minutes']:g} "
                  "minutes per run.", ""] + _settings_table(result["runs"]) + [""]
        for run in result["runs"]:
            label = None if run["setting"] in colors else run["setting"]
            color = colors.setdefault(run["setting"], f"C{len(colors) % 10}")
            losses = [r for r in run["curve"] if "loss" in r]
            ax_loss.plot([r["train_seconds"] for r in losses], ema([r["loss"] for r in losses]),
                         color=color, lw=0.9, label=label)
            ax_norm.plot([r["step"] for r in losses], ema([r["gradient_norm"] for r in losses]),
                         color=color, lw=0.9)
    ax_loss.set(xlabel="training seconds", ylabel="train cross-entropy (nats/byte, EMA 0.8)",
                yscale="log")
    ax_norm.set(xlabel="step", ylabel="global gradient norm (EMA 0.8)", yscale="log")
    ax_loss.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(DOCS, "residual_sweep.png"))
    plt.close(fig)
    lines += ["![residual sweep](residual_sweep.png)"]
    return lines


def _precision_note(result):
    """Which precision a residual_text results file trained in, and on which CPU."""
    kinds = {(run.get("precision"), run.get("cpu")) for run in result["runs"]}
    if kinds == {(None, None)}:  # the 400-step sweep, before runs recorded it
        return ("Precision `auto`, which resolved to float32 on the 2-core Intel Xeon "
                "(avx512_bf16, no AMX) that ran it.")
    return "Precision and CPU: " + "; ".join(
        f"{precision} on {cpu}" for precision, cpu in sorted(kinds, key=str)) + "."


def _merged_note(result):
    """Where the runs that `residual_text.py --merge` moved into a results file came from."""
    notes = []
    for part in result.get("merged", []):
        runs = ", ".join(f"{setting} seed {seed}" for setting, seed in part["settings_and_seeds"])
        notes.append(f"Runs {runs}: `{part['command']}` at commit `{part['commit']}`"
                     + (f", block statistics `{part['block_statistics_command']}`"
                        if "block_statistics_command" in part else "")
                     + ", merged in with `--merge`. ")
    return "".join(notes)


def _block_lines(result):
    """The learned branch weights of the `gate` runs and, where recorded, every run's branch
    shares (`residual_text.branch_shares`), after training and at initialization."""
    runs, lines = result["runs"], []
    gated = sorted((run for run in runs if run.get("learned_gates")), key=lambda run: run["seed"])
    if gated:
        lines += ["Learned branch weights w of the `gate` runs, by block from the input side "
                  "(encoder | decoder):", ""]
        for run in gated:
            gates = run["learned_gates"]
            lines.append(f"- seed {run['seed']}: " + " | ".join(
                ", ".join(f"{w:.2f}" for w in gates[side]) for side in ("encoder", "decoder")))
        lines += [""]
    shared = sorted((run for run in runs if run.get("branch_shares")),
                    key=lambda run: (run["setting"], run["seed"]))
    if shared:
        lines += [f"Branch share of each block: the mean square of its weighted branch "
                  f"`w f(x)` over that of its input `x`, on the first "
                  f"{shared[0]['branch_share_pairs']} held-out pairs, no dropout, after "
                  "training and at initialization (seed 0). Mean over the blocks of a side, and "
                  "its smallest and largest block.", "",
                  "| setting | seed | encoder: mean (min-max) | decoder: mean (min-max) |",
                  "|---|---|---|---|"]
        initial = [(setting, "init", shares) for setting, shares
                   in sorted(result.get("initial_branch_shares", {}).items())]
        for setting, seed, shares in initial + [(run["setting"], run["seed"],
                                                 run["branch_shares"]) for run in shared]:
            cells = [f"{mean(values):.3f} ({min(values):.3f}-{max(values):.3f})"
                     for values in (shares["encoder"], shares["decoder"])]
            lines.append(f"| {setting} | {seed} | {cells[0]} | {cells[1]} |")
        lines += [""]
    return lines


# The setting that is each model's zoo default, the reference of its `vs` column.


# The setting that is each model's zoo default, the reference of its `vs` column.
TEXT_SWEEP_DEFAULTS = {"bytenet_selu": "w_invsqrtL", "bytenet_small": "w1"}


def text_sweep_section(results):
    """The residual sweep on real text: experiments/residual_text.py, one table and plot row per
    results file."""
    fig, axes = plt.subplots(len(results), 3, figsize=(13, 3.8 * len(results)), dpi=90,
                             squeeze=False)
    lines = ["### SELU ByteNet's residual branch: sweep on real text, equal steps", "",
             "`python experiments/residual_text.py`: the memorization sweep's settings on the translation "
             "data instead of memorization. `bytenet_selu` at its zoo size (hidden 400, 3 "
             "stacks) with bytenet-train's `text` preset (batch 32, Adam 2e-3 after 200 warm-up "
             "steps, cosine to 5% at the last step, AlphaDropout 0.05, pairs up to 200 bytes) "
             "on ../shared/data/deen/train.* less the 500 held-out pairs of "
             "the text recipe's runs, for a fixed number of steps, so each seed gives every setting the "
             "same batches. `w<x>`: blocks return `(x + w f(x)) / sqrt(1 + w^2)` (`w_invsqrtL` "
             "= 1/sqrt(15), the zoo default); `gate`: w learnable from 0; `+snn_adam`: beta_2 "
             "0.99, epsilon 0.01; `+constant`: no decay after the warm-up; `+lr<rate>`: that peak "
             "learning rate. Scored on the last "
             "weights: held-out loss = teacher-forced cross-entropy per target byte (EOS "
             "included) on all 500 held-out pairs without dropout; greedy BLEU and chrF on the "
             "first 100 held-out pairs. Lower held-out loss is better; the settings are ranked "
             "by its mean over seeds. `vs <default>`: the setting's held-out loss minus that of "
             "the model's zoo default (w_invsqrtL for bytenet_selu) on the same seed (the same "
             "batches), mean and per seed; negative means the setting is better. A file of "
             "another model says so in its heading.", ""]
    colors = {}  # shared by the rows, so a setting keeps its color
    for row_axes, (name, result) in zip(axes, sorted(results.items(),
                                                     key=lambda item: item[1]["steps"])):
        ax_loss, ax_norm, ax_held = row_axes
        model = sweep_model(result)
        default = TEXT_SWEEP_DEFAULTS.get(model, "w1")
        by_setting = {}
        for run in result["runs"]:
            by_setting.setdefault(run["setting"], []).append(run)
        for rows in by_setting.values():
            rows.sort(key=lambda run: run["seed"])
        seeds = sorted({run["seed"] for run in result["runs"]})
        reference = {r["seed"]: r["heldout_nats"] for r in by_setting.get(default, [])}
        heading = f"#### `{name}`: {result['steps']} steps"
        if model != "bytenet_selu":
            heading += (f", `{model}` (its zoo residual is the plain `x + w f(x)`, with no "
                        "rescale, so `w<x>` weighs the branch of that sum; its zoo dropout)")
        lines += [heading, "", provenance(result) + f" Seeds: "
                  f"{', '.join(map(str, seeds))} (a setting's runs are listed in seed order). "
                  + _merged_note(result) + _precision_note(result)
                  + (f" Block statistics: `{result['block_statistics_command']}`, from the "
                     "runs' last checkpoints." if "block_statistics_command" in result else ""),
                  "",
                  "| rank | setting | seeds | held-out loss, mean (per seed) "
                  f"| vs {default}, mean (per seed) "
                  "| greedy BLEU, mean (per seed) | chrF, mean | train loss (last 10 logs), mean "
                  "| max gradient norm |", "|---|---|---|---|---|---|---|---|---|"]
        ranked = sorted(by_setting.items(), key=lambda item: mean(
            [r["heldout_nats"] for r in item[1]]))
        for rank, (setting, rows) in enumerate(ranked, 1):
            each = lambda key, form: ", ".join(format(r[key], form) for r in rows)  # noqa: E731
            paired = [r["heldout_nats"] - reference[r["seed"]] for r in rows
                      if r["seed"] in reference]
            versus = ("-" if setting == default or not paired else
                      f"{mean(paired):+.4f} ({', '.join(f'{d:+.4f}' for d in paired)})")
            lines.append(
                f"| {rank} | {setting} | {len(rows)} "
                f"| {mean([r['heldout_nats'] for r in rows]):.4f} ({each('heldout_nats', '.4f')}) "
                f"| {versus} "
                f"| {mean([r['valid_bleu'] for r in rows]):.2f} ({each('valid_bleu', '.2f')}) "
                f"| {mean([r['valid_chrf'] for r in rows]):.1f} "
                f"| {mean([r['train_loss_last_10_logs'] for r in rows]):.3f} "
                f"| {max(r['max_gradient_norm'] for r in rows):.2f} |")
        lines += [""] + _block_lines(result)
        lowest = math.inf  # the lowest smoothed training loss, for the axis
        for setting, rows in by_setting.items():
            color = colors.setdefault(setting, f"C{len(colors) % 10}")  # one color per setting
            for i, run in enumerate(rows):
                logs = [r for r in run["curve"] if "loss" in r]
                label = setting if i == 0 else None
                style = "--" if setting == "gate" else "-"  # red and brown look alike
                smoothed = ema([r["loss"] for r in logs])
                lowest = min(lowest, min(smoothed))
                ax_loss.plot([r["step"] for r in logs], smoothed,
                             color=color, ls=style, lw=0.8, label=label)
                ax_norm.plot([r["step"] for r in logs], ema([r["gradient_norm"] for r in logs]),
                             color=color, ls=style, lw=0.8)
            ax_held.scatter([list(by_setting).index(setting)] * len(rows),
                            [r["heldout_nats"] for r in rows], color=color, s=14)
        # The top cuts the first steps' unigram plateau; the bottom follows the longest runs.
        ax_loss.set(xlabel="step", ylabel="train cross-entropy (nats/byte, EMA 0.8)",
                    ylim=(min(1.0, lowest - 0.05), 3.2),
                    title=f"{name}: {result['steps']} steps"
                    + ("" if model == "bytenet_selu" else f", {model}"))
        ax_norm.set(xlabel="step", ylabel="global gradient norm (EMA 0.8)", yscale="log")
        ax_held.set(ylabel="held-out nats/byte (a dot per seed)", xticks=range(len(by_setting)))
        ax_held.set_xticklabels(list(by_setting), rotation=45, ha="right", fontsize=7)
        ax_loss.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(os.path.join(DOCS, "residual_text.png"))
    plt.close(fig)
    lines += ["![residual sweep on real text](residual_text.png)"]
    return lines


def render():
    """The section's subsections, from residual_*_3min.json and residual_text_*.json."""
    lines = []
    sweeps = {name: load(name) for name in SWEEPS}
    sweeps = {name: result for name, result in sweeps.items() if result}
    if sweeps:
        lines += sweep_section(sweeps) + [""]
    text_sweeps = results_named("residual_text")
    if text_sweeps:
        lines += text_sweep_section(text_sweeps) + [""]
    return lines or ["Not run yet.", ""]
