"""Self-normalization: block statistics through depth, and per unit with an attraction test."""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments.reports.common import DOCS, load, provenance  # noqa: E402


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
    lines = ["### Self-normalization through depth", "",
             "> Only the `initial` rows hold: the `trained` rows were measured on models whose "
             "blocks had not", "> been restored from the checkpoint (only the embeddings and the "
             "output projection were),", "> so they are not the statistics of trained models. "
             "\"Self-normalization per unit\" below", "> measures trained models, restored in "
             "full.", "", provenance(result, seeds="0"), "",
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


def self_normalization_section(result):
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), dpi=90, sharey=True)
    lines = ["### Self-normalization per unit, and attraction", "",
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


def render():
    """The section's subsections, from depth_statistics.json and self_normalization.json."""
    lines = []
    for name, section in (("depth_statistics", depth_section),
                          ("self_normalization", self_normalization_section)):
        result = load(name)
        lines += (section(result) if result else [f"### `{name}`", "", "Not run yet."]) + [""]
    return lines
