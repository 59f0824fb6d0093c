"""Writes docs/results.md and the PNG figures from docs/results/*.json.

    python experiments/report.py

Each section names the command and the commit that produced its numbers. Sections whose JSON
is missing say so rather than show stale figures.
"""

import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from experiments.common import RESULTS, ROOT, sweep_model  # noqa: E402

DOCS = os.path.join(ROOT, "docs")
# Residual sweep results files (experiment 6), and memorization-check labels (experiment 7).
SWEEPS = ("residual_screen_3min", "residual_optimizer_3min", "residual_seeds_3min")
CHECKS = ("default", "default_seed1", "w1", "default_s7", "default_s11", "gate_s11", "default_s13",
          "default_s13_seeded", "w1_s13_seeded")
# The news and FLORES test sets that experiments/translator.py scores beside multi30k-test2016.
NEWS_SETS = ("newstest2015", "newstest2016", "newstest2017", "newstest2018", "flores200-devtest")
THESIS_DIGITS = {"bytenet": "about 0.30", "bytenet_simplified": "0.25",
                 "bytenet_selu": "0.30-0.40"}


def load(name):
    path = os.path.join(RESULTS, f"{name}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def ema(values, weight=0.8):
    smoothed, last = [], None
    for value in values:
        last = value if last is None else weight * last + (1 - weight) * value
        smoothed.append(last)
    return smoothed


def provenance(result, seeds=None):
    """The command and commit of a results file, and its seeds when the table does not show them."""
    line = f"Command: `{result['command']}` at commit `{result['commit']}`."
    return line + (f" Seeds: {seeds} (one run per row)." if seeds is not None else "")


def digits_section(result):
    lines = ["## 1. Synthetic digits (thesis sizes, our clean split, exact match)", "",
             "> Data note (added with the faithful `thesis` digits config): the runs below used "
             "128 distinct", "> training numbers and 128 distinct test numbers that never occur "
             "in training, now called", "> `--digits_config=thesis_clean`. The thesis itself "
             "drew both sets with replacement from", "> `RandomState(10)` / `RandomState(11)`, "
             "so 28 of its 128 test items (22%) are training items, and", "> it scored a "
             "per-character error, not exact match; `--digits_config=thesis` now rebuilds its",
             "> data exactly. The comparison with the thesis below is therefore not like for "
             "like.", "", provenance(result, seeds="0"), "",
             "Hidden 20, 128 training numbers of 2-3 digits, 300 epochs, Adam 1e-3 (constant), "
             "batch 16; misclassification = 1 - exact match on the 128 held-out numbers.", "",
             "| model | misclassification | thesis (per-character error on its own data: not "
             "comparable, see experiment 8) | seconds |", "|---|---|---|---|"]
    for name, row in result["thesis_config"].items():
        lines.append(f"| {name} | {row['misclassification']:.3f} | {THESIS_DIGITS.get(name, '-')} "
                     f"| {row['seconds']:.0f} |")
    lines += ["", "Recipes on the same 128 training numbers:", "",
              "| recipe | model | misclassification |", "|---|---|---|"]
    for name, row in result["recipes"].items():
        lines.append(f"| `{name}` | {row['model']} | {row['misclassification']:.3f} |")
    return lines


def memorize_section(result):
    runs = result["runs"]
    fig, (ax_loss, ax_bleu) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=90)
    for label, run in runs.items():
        losses = [r for r in run["curve"] if "loss" in r]
        bleus = [r for r in run["curve"] if "valid_bleu" in r]
        epochs = lambda rows: [r["step"] * result["batch_size"] / result["pairs"] for r in rows]  # noqa: E731
        ax_loss.plot(epochs(losses), ema([r["loss"] for r in losses]), label=label)
        ax_bleu.plot(epochs(bleus), [r["valid_bleu"] for r in bleus], label=label)
    ax_loss.set(xlabel="epoch", ylabel="train cross-entropy (nats/byte, EMA 0.8)", yscale="log")
    ax_bleu.set(xlabel="epoch", ylabel="BLEU on the 100 pairs")
    ax_bleu.axhline(90, color="gray", lw=0.8, ls="--")
    ax_bleu.legend(title="variant", fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(DOCS, "memorize.png"))
    plt.close(fig)
    lines = ["## 2. Memorizing 100 newstest2013 pairs", "", provenance(result, seeds="0"), "",
             f"Each variant trains for {result['minutes']:g} minutes of wall-clock (validation "
             "included) on the first 100 pairs of dev.* and is scored on the same pairs. "
             f"Variants run: {', '.join(runs)}.", "",
             "| variant | model | final BLEU | final chrF | BLEU >= 90 | first epoch at >= 90 | seconds to >= 90 | steps | commit |",
             "|---|---|---|---|---|---|---|---|---|"]
    for label, run in runs.items():
        lines.append(f"| {label} | {run['model']} | {run['final_bleu']:.1f} | {run['final_chrf']:.1f} "
                     f"| {'yes' if run['passed_bleu_90'] else 'no'} | {run['first_epoch_at_bleu_90']} "
                     f"| {run['first_seconds_at_bleu_90']} | {run['steps']} "
                     f"| {run.get('commit', result['commit'])} |")
    lines += ["", "![memorize](memorize.png)"]
    return lines


def depth_section(result):
    variants = result["variants"]
    fig, (ax_mean, ax_var) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=90)
    for (label, stats), color in zip(variants.items(), ("C0", "C1", "C2", "C3")):
        for phase, style in (("initial", "--"), ("trained", "-")):
            rows = stats[phase]
            if rows is None:
                continue
            ax_mean.plot([r["mean"] for r in rows], style, color=color, label=f"{label} {phase}")
            ax_var.plot([r["variance"] for r in rows], style, color=color, label=f"{label} {phase}")
    for ax, name in ((ax_mean, "mean"), (ax_var, "variance")):
        ax.axvline(len(stats["initial"]) / 2 - 0.5, color="gray", lw=0.8)
        ax.set(xlabel="block (encoder | decoder)", ylabel=f"block output {name}")
    ax_var.set_yscale("log")
    ax_var.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(DOCS, "depth_statistics.png"))
    plt.close(fig)
    lines = ["## 3. Self-normalization through depth", "",
             "> Withdrawn in part: the `trained` rows below were measured on models whose blocks "
             "had not been", "> restored from the checkpoint (only the embeddings and the output "
             "projection were; see the", "> corrections at the end). They are not the statistics "
             "of trained models. The `initial` rows", "> stand. Experiment 9 measures per unit, "
             "with the restore fixed.", "", provenance(result, seeds="0"), "",
             "| variant | phase | max abs mean | variance range |", "|---|---|---|---|"]
    for label, stats in variants.items():
        for phase in ("initial", "trained"):
            rows = stats[phase]
            if rows is None:
                lines.append(f"| {label} | {phase} | not run | not run |")
                continue
            lines.append(f"| {label} | {phase} | {max(abs(r['mean']) for r in rows):.3f} | "
                         f"[{min(r['variance'] for r in rows):.3f}, {max(r['variance'] for r in rows):.3f}] |")
    lines += ["", "![depth](depth_statistics.png)"]
    return lines


def translation_section(results):
    fig, (ax_loss, ax_bleu) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=90)
    lines = ["## 4. Real translation at small scale (60k pairs)", ""]
    for model, result in results.items():
        losses = [r for r in result["curve"] if "loss" in r]
        bleus = [r for r in result["curve"] if "valid_bleu" in r]
        ax_loss.plot([r["train_seconds"] / 60 for r in losses], ema([r["loss"] for r in losses]), label=model)
        ax_bleu.plot([r["step"] for r in bleus], [r["valid_bleu"] for r in bleus], "o-", label=model)
        lines.append(provenance(result, seeds="0"))
    ax_loss.set(xlabel="minutes", ylabel="train cross-entropy (nats/byte, EMA)")
    ax_bleu.set(xlabel="step", ylabel="BLEU, 100 newstest2013 sentences")
    ax_loss.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(DOCS, "real_translation.png"))
    plt.close(fig)
    lines += ["", "| model | minutes | steps | precision | final train loss | test set | BLEU | chrF |",
              "|---|---|---|---|---|---|---|---|"]
    signature = None
    for model, result in results.items():
        for test_set, score in result["test"].items():
            signature = score["signature"], score["chrf_signature"]
            lines.append(f"| {model} | {result['minutes']:g} | {result['steps']} | {result['precision']} "
                         f"| {result['train_loss']:.3f} | {test_set} | {score['bleu']:.2f} | {score['chrf']:.2f} |")
    if signature:
        lines += ["", f"BLEU signature `{signature[0]}`; chrF signature `{signature[1]}`."]
    lines += ["", "![real translation](real_translation.png)"]
    return lines


def speed_section(result):
    lines = ["## 5. Training speed per variant", "", provenance(
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
    """Experiment 6: the residual sweep (one or more results files, one table each)."""
    fig, (ax_loss, ax_norm) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=90)
    lines = ["## 6. SELU ByteNet's residual branch: sweep on memorization", "",
             "bytenet_selu at its zoo size (hidden 400, 3 stacks, 15 blocks per side) on the "
             "first 100 pairs of newstest2013, scored on the same pairs; batch 16, Adam (Keras "
             "defaults unless `+snn_adam`: beta_2 0.99, epsilon 0.01), 1e-3 after 50 warm-up "
             "steps then 1/sqrt(step) decay (`+constant`: no decay), the zoo's AlphaDropout 0.05 "
             "(`+nodrop`: none), precision auto, a wall-clock budget per run. `w<x>`: blocks "
             "return `(x + w f(x)) / sqrt(1 + w^2)`; `gate`: w is a learnable scalar from 0. "
             "Final train loss: mean of the last three logged steps (nats per byte).", ""]
    colors = {}
    for name, result in results.items():
        lines += [f"### `{name}`", "", provenance(result) + f" Budget {result['minutes']:g} "
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


def _seconds(value):
    return "never" if value is None else f"{value:.0f}"


def _command_flags(command):
    """The words of a recorded command, without its model_dir (which names the run)."""
    return [word for word in command.split() if not word.startswith("--model_dir=")]


def check_section(results):
    """The zoo-default memorization check through the binary. The table's header command is the
    words that every run's command shares; each row names the rest of its own."""
    commands = {label: _command_flags(result["command"]) for label, result in results.items()}
    shared = [word for word in next(iter(commands.values()))
              if all(word in words for words in commands.values())]
    lines = ["## 7. Zoo-default check: 64 unseen newstest2017 pairs in 10 minutes", "",
             "`python experiments/memorize_check.py` draws 64 newstest2017 pairs (both sides "
             "at most 190 bytes; newstest2017 was never used while developing) and runs "
             "bytenet-train on them as a user would, 600 s of training (validation included), "
             "BLEU on the 64 pairs every 10 epochs: `python experiments/memorize_check.py "
             "--label=L [-- extra flags]` runs", "",
             f"`{' '.join(shared)}`", "",
             "with the flags of each row added (seed 0 unless they say `--seed`); the runs "
             "differ in those flags and in the code of their commit. Passed: BLEU >= 90 within "
             "the 600 s and at the end. Seconds hold for the CPU kind of their row.", "",
             "| label | flags added | commit | precision | CPU | steps "
             "| first second at BLEU >= 90 | best BLEU | final BLEU | final chrF | passed |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    fig, ax = plt.subplots(figsize=(5, 3.4), dpi=90)
    for label, result in results.items():
        added = [word for word in commands[label] if word not in shared]
        lines.append(f"| {label} | `{' '.join(added) or '(none)'}` | {result['commit']} "
                     f"| {result.get('precision', 'not recorded')} "
                     f"| {result.get('cpu', 'not recorded')} "
                     f"| {result['steps']} | {_seconds(result['first_seconds_at_bleu_90'])} "
                     f"| {result['best_bleu']:.1f} | {result['final_bleu']:.1f} "
                     f"| {result['final_chrf']:.1f} | {'yes' if result['passed'] else 'no'} |")
        seconds = {r["step"]: r["train_seconds"] for r in result["curve"] if "train_seconds" in r}
        bleus = [r for r in result["curve"] if "valid_bleu" in r and r["step"] in seconds]
        ax.plot([seconds[r["step"]] for r in bleus], [r["valid_bleu"] for r in bleus], "o-",
                ms=3, label=label)
    ax.axhline(90, color="gray", lw=0.8, ls="--")
    ax.set(xlabel="training seconds", ylabel="BLEU on the 64 pairs")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(DOCS, "memorize_check.png"))
    plt.close(fig)
    lines += ["", "![memorize check](memorize_check.png)"]
    return lines


def thesis_digits_section(result):
    lines = ["## 8. Digits as the thesis ran and scored it", "", provenance(result), "",
             "`--digits_config=thesis` (the thesis's RandomState draws: 28 of the 128 test items "
             "are training items), the thesis code's architecture (`bytenet_thesis` = its `v1`, "
             "`bytenet_selu_thesis` = its `v1-selu`) at hidden 20 and 3 stacks, batch 16, 2400 "
             "steps (300 epochs), Adam at a constant 1e-3, float32, no dropout. Character error "
             "= the thesis's per-character misclassification rate (wrong greedy output bytes "
             "over reference bytes plus EOS); exact match over whole strings. The thesis "
             "reported a misclassification rate of about 0.30 for ByteNet and 0.30-0.40 for "
             "SELU ByteNet (read from its plots).", "",
             "| model | seed | train loss | char. error, test (all 128) | char. error, test "
             "overlap (28) | char. error, test clean (100) | exact match, test | exact match, "
             "train | seconds |", "|---|---|---|---|---|---|---|---|---|"]
    by_model = {}
    for run in result["runs"]:
        by_model.setdefault(run["model"], []).append(run)
        lines.append(f"| {run['model']} | {run['seed']} | {run['train_loss']:.4f} "
                     f"| {run['test']['character_error']:.3f} "
                     f"| {run['test_overlap']['character_error']:.3f} "
                     f"| {run['test_clean']['character_error']:.3f} "
                     f"| {run['test']['exact_match']:.3f} | {run['train']['exact_match']:.3f} "
                     f"| {run['seconds']:.0f} |")
    for model, runs in by_model.items():
        mean = lambda key, part: sum(r[part][key] for r in runs) / len(runs)  # noqa: E731
        lines.append(f"| **{model} mean** | {len(runs)} seeds | | "
                     f"**{mean('character_error', 'test'):.3f}** "
                     f"| {mean('character_error', 'test_overlap'):.3f} "
                     f"| {mean('character_error', 'test_clean'):.3f} "
                     f"| {mean('exact_match', 'test'):.3f} | {mean('exact_match', 'train'):.3f} | |")
    return lines


def self_normalization_section(result):
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), dpi=90, sharey=True)
    lines = ["## 9. Self-normalization per unit, and attraction", "",
             provenance(result, seeds="0"), "",
             "Per unit (channel) of each selu input inside the residual branches of "
             "bytenet_selu (zoo defaults), over real positions of the 100 memorization pairs: "
             "the 5%/50%/95% quantiles over units of each unit's variance, in the first and the "
             "last block of each side; act0 reads the block input (the residual stream), act1 "
             "and act2 follow the branch's first two convolutions. `scale`: both embeddings "
             "multiplied by it at initialization (the attraction test). Kernel change: "
             "`||W_trained - W_init|| / ||W_init||` per encoder block.", "",
             "| scale | phase | selu input | unit variance q05/q50/q95, first block | unit "
             "variance q05/q50/q95, last block | max abs unit mean (any block) |",
             "|---|---|---|---|---|---|"]
    for run in result["runs"]:
        for phase in ("initial", "trained"):
            for key, value in run[f"{phase}_summary"].items():
                first = "/".join(f"{v:.2f}" for v in value["first_block_variance_q"])
                last = "/".join(f"{v:.2f}" for v in value["last_block_variance_q"])
                lines.append(f"| {run['scale']:g} | {phase} | {key} | {first} | {last} "
                             f"| {value['max_abs_unit_mean']:.2f} |")
        change = [v for k, v in run["kernel_change"].items() if "encoder" in k]
        lines.append(f"| {run['scale']:g} | after {run['steps']} steps | loss "
                     f"{run['train_loss']:.3f}, BLEU {run['valid_bleu']:.1f} | encoder kernel "
                     f"change {min(change):.3f}-{max(change):.3f} | | |")
    for ax, phase in zip(axes, ("initial", "trained")):
        for index, run in enumerate(result["runs"]):
            rows = [r for r in run[phase] if r["activation"] == 0]
            ax.plot([r["variance_q"][1] for r in rows], color=f"C{index}",
                    label=f"scale {run['scale']:g} median unit")
            ax.fill_between(range(len(rows)), [r["variance_q"][0] for r in rows],
                            [r["variance_q"][2] for r in rows], color=f"C{index}", alpha=0.2)
        ax.axvline(len(rows) / 2 - 0.5, color="gray", lw=0.8)
        ax.set(xlabel="block (encoder | decoder)", title=phase, yscale="log")
    axes[0].set_ylabel("variance of the stream's units (act0)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(DOCS, "self_normalization.png"))
    plt.close(fig)
    lines += ["", "![self-normalization](self_normalization.png)"]
    return lines


def _results_named(prefix):
    """docs/results/<prefix>*.json, by file name without `.json`, sorted."""
    names = sorted(f[:-len(".json")] for f in os.listdir(RESULTS)
                   if f.startswith(prefix) and f.endswith(".json"))
    return {name: load(name) for name in names}


def _translator_runs(prefix):
    """docs/results/translator_<prefix>*.json, by name (without `translator_`)."""
    return {name[len("translator_"):]: result
            for name, result in _results_named(f"translator_{prefix}").items()}


def recipe_screen_section(screens):
    """Issue 13's screen: short runs of the text preset with one value changed each."""
    lines = ["## 10. The text recipe: screening runs", "",
             "Each row trains the `text` preset of bytenet-train with one value changed, for the "
             "same wall-clock budget, alone on the machine, on ../shared/data/deen/train.* less "
             "500 held-out pairs, then stops (`--screen`: no validation, selection or test "
             "sets). The cosine schedule reaches its floor at the budget's end in every run. "
             "Loss: mean training cross-entropy (nats per byte) over the last 10 logged steps "
             "(every 10 steps); within the first pass over the data every batch is new, so it "
             "estimates held-out loss. Same data order (seed 0) in every row.", "",
             "| run | changed | steps | loss (last 100 steps) | target bytes/s | precision | command, commit |",
             "|---|---|---|---|---|---|---|"]
    for name, result in screens.items():
        changed = ", ".join(f"{k}={v}" for k, v in result["overrides"].items()
                            if k not in ("eval_every", "valid_size", "select_by", "average_last",
                                         "beam_size", "export", "log_every")) or "(the preset)"
        rates = [r["bytes_per_second"] for r in result["curve"] if "bytes_per_second" in r]
        rate = sorted(rates)[len(rates) // 2] if rates else float("nan")
        lines.append(f"| {name} | {changed} | {result['steps']} "
                     f"| {result['train_loss_last_10_logs']:.3f} | {rate:.0f} "
                     f"| {result['results']['precision']} | `{result['command']}`, "
                     f"`{result['commit']}` |")
    return lines


def translator_section(runs):
    """Issue 13: the recipe and its source-blind baseline, scored on every test set."""
    lines = ["## 11. The text recipe: a German-English translator on the 2-core CPU", "",
             "`python experiments/translator.py`: the `text` preset of bytenet-train for a time "
             "budget, trained alone on the machine on ../shared/data/deen/train.* less 500 "
             "pairs held out at random (seed 13) as the validation set, which chose the "
             "exported weights and the beam's length penalty. The exported SavedModel (beam 4) "
             "then translates multi30k-test2016 in full and the first `--test_sentences` sentences "
             "of each newstest and FLORES set (200 in the commands below) (sacreBLEU 2.6.0, 13a, mixed case; chrF nc 6). "
             "`bound`: share of outputs that reached the length bound without emitting EOS "
             "(runaway repetition). `blind`: the same model with the decoder seeing zeros in "
             "place of the encoder output (`source_blind`), given the real sources at test "
             "time so its length bound is the same.", ""]
    sets = ("multi30k-test2016",) + NEWS_SETS
    lines += ["| run | steps | exported weights | length penalty | "
              + " | ".join(f"{s} BLEU / chrF / bound" for s in sets) + " |",
              "|---|---|---|---|" + "---|" * len(sets)]
    for name, result in runs.items():
        test = result["test"]
        selection = result["results"]["selection"]
        cells = [f"{test[s]['bleu']:.2f} / {test[s]['chrf']:.1f} / {test[s]['reached_bound']:.3f}"
                 for s in sets]
        lines.append(f"| {name} | {result['steps']} | {selection['chosen']} | "
                     f"{result['results']['length_penalty']['value']} | " + " | ".join(cells) + " |")
    lines += [""]
    for name, result in runs.items():
        greedy = (result.get("test_greedy_same_weights") or {}).get("multi30k-test2016")
        beam = result["test"]["multi30k-test2016"]
        selection = result["results"]["selection"]["candidates"]
        lines += [f"### `{name}`", "", provenance(result, seeds=str(result["seed"])), ""]
        if greedy:
            lines += [f"- multi30k-test2016, the same weights decoded greedily: BLEU "
                      f"{greedy['bleu']:.2f}, chrF {greedy['chrf']:.1f}, reached the bound "
                      f"{greedy['reached_bound']:.3f}; with the exported beam: "
                      f"{beam['bleu']:.2f}, {beam['chrf']:.1f}, {beam['reached_bound']:.3f}."]
        lines += ["- Validation (held-out, greedy) of each candidate: " + "; ".join(
            f"{k} BLEU {v.get('bleu', float('nan')):.2f} chrF {v.get('chrf', float('nan')):.2f}"
            for k, v in selection.items()) + "."]
        tried = result["results"]["length_penalty"]["tuned_on_validation"] or {}
        if tried:
            lines += ["- Length penalty on validation (beam 4): " + "; ".join(
                f"{k}: chrF {v['chrf']:.2f}, bound {v['reached_bound']:.3f}"
                for k, v in tried.items()) + "."]
        lines += ["", f"![{name}](results/translator_{name}.png)", "",
                  "| source (multi30k-test2016) | this model | reference |", "|---|---|---|"]
        for example in beam["examples"]:
            lines.append("| " + " | ".join(example[k].replace("|", "\\|") for k in
                                             ("source", "hypothesis", "reference")) + " |")
        lines += [""]
    return lines


def fair_comparison_section(runs):
    """Issue 12, part 4: bytenet_selu against bytenet_small at equal steps, dropout and seeds."""
    fig, (ax_loss, ax_bleu) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=90)
    lines = ["## 12. SELU against layer-norm ByteNet on real text, equal steps", "",
             "`python experiments/translator.py` with the `text` preset changed only where the "
             "comparison needs it: a fixed step count (`train_steps`, the cosine decay ends "
             "there; the time budget is far from binding), the same dropout for both models "
             "(0), the last weights exported and greedy decoding (no selection, averaging or "
             "beam, so nothing but the training differs). Each model at its residual default: "
             "`bytenet_selu` with w = 1/sqrt(15) (experiment 6), `bytenet_small` with the "
             "paper's plain pre-norm sum (not swept). Same data, held-out split, learning rate "
             "(2e-3), batch (32) and data order per seed for both. Validation: 200 held-out "
             "pairs, greedy. Test: multi30k-test2016 in full and the first 100 sentences of "
             "each news and FLORES set, greedy. `(source-blind)`: the SELU run with the decoder "
             "seeing zeros in place of the encoder output, given the real sources at test "
             "time.", "",
             "| run | model | seed | steps | train loss (last 10 logs) | validation BLEU / chrF "
             "| multi30k-test2016 BLEU / chrF / bound | news + FLORES BLEU (mean of 5) "
             "| target bytes/s (median) | command, commit |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    by_model = {}
    for name, result in runs.items():
        model = result["effective_config"]["model_config"]["name"]
        if result["effective_config"]["model_config"].get("source_blind"):
            model += " (source-blind)"
        test = result["test"]["multi30k-test2016"]
        valid = result["results"]["valid"]
        news = sum(result["test"][s]["bleu"] for s in NEWS_SETS) / len(NEWS_SETS)
        rates = sorted(r["bytes_per_second"] for r in result["curve"] if "bytes_per_second" in r)
        rate = rates[len(rates) // 2] if rates else float("nan")
        by_model.setdefault(model, []).append(
            (result["train_loss_last_10_logs"], valid["bleu"], test["bleu"], test["chrf"], rate))
        lines.append(f"| {name} | {model} | {result['seed']} | {result['steps']} "
                     f"| {result['train_loss_last_10_logs']:.3f} "
                     f"| {valid['bleu']:.2f} / {valid['chrf']:.1f} "
                     f"| {test['bleu']:.2f} / {test['chrf']:.1f} / {test['reached_bound']:.3f} "
                     f"| {news:.2f} | {rate:.0f} | `{result['command']}`, `{result['commit']}` |")
        color = {"bytenet_selu": "C0", "bytenet_small": "C1"}.get(model, "C2")
        style = "-" if result["seed"] == 0 else "--"
        losses = [r for r in result["curve"] if "loss" in r]
        bleus = [r for r in result["curve"] if "valid_bleu" in r]
        ax_loss.plot([r["step"] for r in losses], ema([r["loss"] for r in losses]), color=color,
                     ls=style, lw=0.9, label=f"{model} seed {result['seed']}")
        ax_bleu.plot([r["step"] for r in bleus], [r["valid_bleu"] for r in bleus], color=color,
                     ls=style, marker="o", label=f"{model} seed {result['seed']}")
    ax_loss.set(xlabel="step", ylabel="train cross-entropy (nats/byte, EMA 0.8)")
    ax_bleu.set(xlabel="step", ylabel="validation BLEU (greedy, 200 held-out pairs)")
    ax_bleu.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(DOCS, "fair_comparison.png"))
    plt.close(fig)
    lines += ["", "| model | seeds | train loss | validation BLEU | multi30k-test2016 BLEU "
              "| multi30k-test2016 chrF | target bytes/s |", "|---|---|---|---|---|---|---|"]
    for model, rows in by_model.items():
        means = [sum(column) / len(rows) for column in zip(*rows)]
        spread = lambda i: f"{min(r[i] for r in rows):.2f}-{max(r[i] for r in rows):.2f}"  # noqa: E731
        lines.append(f"| {model} | {len(rows)} | {means[0]:.3f} ({spread(0)}) "
                     f"| {means[1]:.2f} ({spread(1)}) | {means[2]:.2f} ({spread(2)}) "
                     f"| {means[3]:.1f} | {means[4]:.0f} |")
    lines += ["", "Means over seeds, with the range in brackets.", "",
              "![fair comparison](fair_comparison.png)"]
    return lines


def thesis_memorize_section(results):
    """Issue 12, part 2: memorization nearer the thesis's scale (memorize.py with --pairs etc.)."""
    fig, (ax_loss, ax_bleu) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=90)
    lines = ["## 13. Memorization nearer the thesis's scale", "",
             "`python experiments/memorize.py` with the thesis's batch, learning rate and "
             "precision, on as many pairs and steps as the budget allows. The thesis: all 3003 "
             "pairs of newstest2014, batch 64, Adam 3e-4, float32, 4 GPUs, its own architecture, "
             "5.6k-14k steps. Here: the first `pairs` pairs of newstest2013, batch 64, Adam 3e-4 "
             "after 50 warm-up steps (constant), float32, dropout 0, the zoo's `bytenet_small` "
             "(hidden 400, 3 stacks) with the normalization named, a wall-clock budget, scored "
             "(greedy BLEU) on the same pairs. Seed 0 (one run per row: memorize.py seeds "
             "every run with 0).", "",
             "| variant | pairs | batch | learning rate | minutes | steps | epochs | final train "
             "loss | final BLEU / chrF | command, commit |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, result in results.items():
        for label, run in result["runs"].items():
            losses = [r for r in run["curve"] if "loss" in r]
            bleus = [r for r in run["curve"] if "valid_bleu" in r]
            epochs = lambda rows: [r["step"] * result["batch_size"] / result["pairs"] for r in rows]  # noqa: E731
            final_loss = sum(r["loss"] for r in losses[-3:]) / max(len(losses[-3:]), 1)
            lines.append(f"| {label} | {result['pairs']} | {result['batch_size']} "
                         f"| {result['learning_rate']:g} | {result['minutes']:g} | {run['steps']} "
                         f"| {run['steps'] * result['batch_size'] / result['pairs']:.1f} "
                         f"| {final_loss:.3f} | {run['final_bleu']:.1f} / {run['final_chrf']:.1f} "
                         f"| `{result['command']}`, `{result['commit']}` |")
            ax_loss.plot(epochs(losses), ema([r["loss"] for r in losses]), label=label)
            ax_bleu.plot(epochs(bleus), [r["valid_bleu"] for r in bleus], marker="o", label=label)
    ax_loss.set(xlabel="epoch", ylabel="train cross-entropy (nats/byte, EMA 0.8)")
    ax_bleu.set(xlabel="epoch", ylabel="BLEU on the training pairs")
    ax_bleu.legend(title="normalization", fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(DOCS, "memorize_thesis_scale.png"))
    plt.close(fig)
    lines += ["", "Final train loss: mean of the last three logs (one per epoch).", "",
              "![memorization at the thesis's scale](memorize_thesis_scale.png)"]
    return lines


def _mean(values):
    return sum(values) / len(values)


def _precision_note(result):
    """Which precision a residual_text results file trained in, and on which CPU."""
    kinds = {(run.get("precision"), run.get("cpu")) for run in result["runs"]}
    if kinds == {(None, None)}:  # the 400-step sweep, before runs recorded it
        return ("Precision `auto`, which resolved to float32 on that session's 2-core Intel Xeon "
                "(avx512_bf16, no AMX).")
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
            cells = [f"{_mean(values):.3f} ({min(values):.3f}-{max(values):.3f})"
                     for values in (shares["encoder"], shares["decoder"])]
            lines.append(f"| {setting} | {seed} | {cells[0]} | {cells[1]} |")
        lines += [""]
    return lines


# The setting that is each model's zoo default, the reference of its `vs` column.
TEXT_SWEEP_DEFAULTS = {"bytenet_selu": "w_invsqrtL", "bytenet_small": "w1"}


def text_sweep_section(results):
    """Issue 12, part 1 on real text: experiments/residual_text.py, one table and plot row per
    results file."""
    fig, axes = plt.subplots(len(results), 3, figsize=(13, 3.8 * len(results)), dpi=90,
                             squeeze=False)
    lines = ["## 14. SELU ByteNet's residual branch: sweep on real text, equal steps", "",
             "`python experiments/residual_text.py`: experiment 6's settings on the translation "
             "data instead of memorization. `bytenet_selu` at its zoo size (hidden 400, 3 "
             "stacks) with bytenet-train's `text` preset (batch 32, Adam 2e-3 after 200 warm-up "
             "steps, cosine to 5% at the last step, AlphaDropout 0.05, pairs up to 200 bytes) "
             "on ../shared/data/deen/train.* less the 500 held-out pairs of "
             "section 11, for a fixed number of steps, so each seed gives every setting the "
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
        heading = f"### `{name}`: {result['steps']} steps"
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
        ranked = sorted(by_setting.items(), key=lambda item: _mean(
            [r["heldout_nats"] for r in item[1]]))
        for rank, (setting, rows) in enumerate(ranked, 1):
            each = lambda key, form: ", ".join(format(r[key], form) for r in rows)  # noqa: E731
            paired = [r["heldout_nats"] - reference[r["seed"]] for r in rows
                      if r["seed"] in reference]
            versus = ("-" if setting == default or not paired else
                      f"{_mean(paired):+.4f} ({', '.join(f'{d:+.4f}' for d in paired)})")
            lines.append(
                f"| {rank} | {setting} | {len(rows)} "
                f"| {_mean([r['heldout_nats'] for r in rows]):.4f} ({each('heldout_nats', '.4f')}) "
                f"| {versus} "
                f"| {_mean([r['valid_bleu'] for r in rows]):.2f} ({each('valid_bleu', '.2f')}) "
                f"| {_mean([r['valid_chrf'] for r in rows]):.1f} "
                f"| {_mean([r['train_loss_last_10_logs'] for r in rows]):.3f} "
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


def load_memorize():
    """memorize.json, or the per-variant memorize_<variant>.json files merged."""
    merged = load("memorize")
    if merged:
        return merged
    parts = [load(f"memorize_{v}") for v in ("layer", "batch", "none", "selu", "selu_branch0.3",
                                                 "selu_branch0.3_clip1")]
    parts = [p for p in parts if p]
    if not parts:
        return None
    merged = dict(parts[0], runs={})
    merged["command"] = "; ".join(p["command"] for p in parts)
    merged["commit"] = ", ".join(sorted({p["commit"] for p in parts}))
    for part in parts:
        for label, run in part["runs"].items():
            merged["runs"][label] = dict(run, commit=part["commit"])
    return merged


def main():
    sections = [("digits", digits_section), ("memorize", memorize_section),
                ("depth_statistics", depth_section), ("speed", speed_section)]
    lines = ["# Experiments", "", "Generated by `python experiments/report.py` from "
             "`docs/results/*.json`. Every number below was produced by the command named in its "
             "section, on the project's 2-core CPU.", ""]
    for name, section in sections:
        result = load_memorize() if name == "memorize" else load(name)
        lines += section(result) if result else [f"## {name}", "", "Not run yet.", ""]
        lines.append("")
    sweeps = {name: load(name) for name in SWEEPS}
    sweeps = {name: result for name, result in sweeps.items() if result}
    if sweeps:
        lines += sweep_section(sweeps) + [""]
    checks = {label: load(f"memorize_check_{label}") for label in CHECKS}
    checks = {label: result for label, result in checks.items() if result}
    if checks:
        lines += check_section(checks) + [""]
    for name, section in (("digits_thesis", thesis_digits_section),
                          ("self_normalization", self_normalization_section)):
        result = load(name)
        lines += (section(result) if result else [f"## {name}", "", "Not run yet."]) + [""]
    translations = {m: load(f"real_translation_{m}") for m in ("bytenet_small", "bytenet_selu")}
    translations = {m: r for m, r in translations.items() if r}
    lines += translation_section(translations) if translations else ["## 4. Real translation", "", "Not run yet."]
    screens = _translator_runs("screen")
    if screens:
        lines += [""] + recipe_screen_section(screens)
    recipes = {name: r for name, r in _translator_runs("").items()
               if not name.startswith(("screen", "fair")) and r.get("test")}
    if recipes:
        lines += [""] + translator_section(recipes)
    fair = _translator_runs("fair")
    if fair:
        lines += [""] + fair_comparison_section(fair)
    thesis_scale = _results_named("memorize_thesis_scale")
    if thesis_scale:
        lines += [""] + thesis_memorize_section(thesis_scale)
    text_sweeps = _results_named("residual_text")
    if text_sweeps:
        lines += [""] + text_sweep_section(text_sweeps)
    notes = os.path.join(DOCS, "results_notes.md")
    if os.path.exists(notes):
        with open(notes) as f:
            lines += ["", f.read()]
    with open(os.path.join(DOCS, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote docs/results.md")


if __name__ == "__main__":
    main()
