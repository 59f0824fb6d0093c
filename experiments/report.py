"""Writes docs/results.md and the PNG figures from docs/results/*.json.

    python experiments/report.py

Each section names the command and the commit that produced its numbers. Sections whose JSON
is missing say so rather than show stale figures.
"""

import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from experiments.common import ROOT, RESULTS  # noqa: E402

DOCS = os.path.join(ROOT, "docs")
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


def provenance(result):
    return f"Command: `{result['command']}` at commit `{result['commit']}`."


def digits_section(result):
    lines = ["## 1. Synthetic digits (thesis configuration)", "",
             "> Data note (added with the faithful `thesis` digits config): the runs below used "
             "128 distinct", "> training numbers and 128 distinct test numbers that never occur "
             "in training, now called", "> `--digits_config=thesis_clean`. The thesis itself "
             "drew both sets with replacement from", "> `RandomState(10)` / `RandomState(11)`, "
             "so 28 of its 128 test items (22%) are training items, and", "> it scored a "
             "per-character error, not exact match; `--digits_config=thesis` now rebuilds its",
             "> data exactly. The comparison with the thesis below is therefore not like for "
             "like.", "", provenance(result), "",
             "Hidden 20, 128 training numbers of 2-3 digits, 300 epochs, Adam 1e-3 (constant), "
             "batch 16; misclassification = 1 - exact match on the 128 held-out numbers.", "",
             "| model | misclassification | thesis | seconds |", "|---|---|---|---|"]
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
    lines = ["## 2. Memorizing 100 newstest2013 pairs", "", provenance(result), "",
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
    lines = ["## 3. Self-normalization through depth", "", provenance(result), "",
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
        lines.append(provenance(result))
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
    lines = ["## 5. Training speed per variant", "", provenance(result), "",
             "Hidden 256, 2 stacks, batch 16 x 128 bytes; median step of 10, fastest of the passes "
             "(every pass's ms/step in the last column).", "",
             "| model | precision | target bytes/s | ms/step | GFLOP/s (analytic) | ms/step per pass |",
             "|---|---|---|---|---|---|"]
    for row in result["rows"]:
        passes = ", ".join(f"{s * 1000:.0f}" for s in row.get("seconds_per_step_per_pass", []))
        lines.append(f"| {row['model']} | {row['precision']} | {row['target_bytes_per_s']:.0f} "
                     f"| {row['seconds_per_step'] * 1000:.1f} | {row['gflop_per_s']:.1f} | {passes} |")
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
    translations = {m: load(f"real_translation_{m}") for m in ("bytenet_small", "bytenet_selu")}
    translations = {m: r for m, r in translations.items() if r}
    lines += translation_section(translations) if translations else ["## 4. Real translation", "", "Not run yet."]
    notes = os.path.join(DOCS, "results_notes.md")
    if os.path.exists(notes):
        with open(notes) as f:
            lines += ["", f.read()]
    with open(os.path.join(DOCS, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote docs/results.md")


if __name__ == "__main__":
    main()
