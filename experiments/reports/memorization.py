"""Memorization: newstest pairs learned by heart, the zoo-default check, the thesis's scale."""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments.reports.common import (DOCS, command_flags, ema, load,  # noqa: E402
                                        provenance, results_named, seconds_text)


# The labels of the zoo-default check (experiments/memorize_check.py): each names its setting
# and the commit it ran.
CHECKS = ("default_391b05c", "default_seed1_aa1f521", "w1_ccd47b9", "default_5a8558a",
          "default_64a7664", "gate_64a7664", "default_6b613ca", "default_5ef92f5", "w1_5ef92f5")
# The news and FLORES test sets that experiments/translator.py scores beside multi30k-test2016.


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
    lines = ["### Memorizing 100 newstest2013 pairs", "", provenance(result, seeds="0"), "",
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


def check_section(results):
    """The zoo-default memorization check through the binary. The table's header command is the
    words that every run's command shares; each row names the rest of its own."""
    commands = {label: command_flags(result["command"]) for label, result in results.items()}
    shared = [word for word in next(iter(commands.values()))
              if all(word in words for words in commands.values())]
    lines = ["### Zoo-default check: 64 unseen newstest2017 pairs in 10 minutes", "",
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
                     f"| {result['steps']} | {seconds_text(result['first_seconds_at_bleu_90'])} "
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


def thesis_memorize_section(results):
    """Memorization nearer the thesis's scale (memorize.py with --pairs etc.)."""
    fig, (ax_loss, ax_bleu) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=90)
    lines = ["### Memorization nearer the thesis's scale", "",
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


def render():
    """The section's subsections, from memorize*.json and memorize_check_*.json."""
    result = load_memorize()
    lines = (memorize_section(result) if result else ["### memorize", "", "Not run yet."]) + [""]
    checks = {label: load(f"memorize_check_{label}") for label in CHECKS}
    checks = {label: result for label, result in checks.items() if result}
    if checks:
        lines += check_section(checks) + [""]
    thesis_scale = results_named("memorize_thesis_scale")
    if thesis_scale:
        lines += thesis_memorize_section(thesis_scale) + [""]
    return lines
