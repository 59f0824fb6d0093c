"""The text preset by step on a GPU: trained for more steps (steps_limit_*.json, written by
experiments/steps_limit.py at a9b8f03) beside the CPU runs of the same preset, and against its
cross-attention readout (attention_gpu_*.json, experiments/long_run.py)."""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments.reports.common import DOCS, results_named  # noqa: E402


def preset_cpu_runs(translator_runs):
    """The runs of the smoothed text preset (hidden 256, 3 stacks, 2,560-byte batches, label
    smoothing 0.1, no dropout, reading the source) among `translator_runs` (translator_*.json
    by name without `translator_`)."""
    runs = {}
    for name, result in translator_runs.items():
        config = result.get("effective_config") or {}
        model = config.get("model_config") or {}
        if (result.get("test") and config.get("tokens_per_batch") == 2560
                and config.get("label_smoothing") == 0.1 and model.get("hidden_size") == 256
                and model.get("num_stacks") == 3 and not model.get("dropout_rate")
                and not model.get("source_blind") and model.get("cross_attention") == "none"):
            runs[name] = result
    return runs


def _bleu(scores):
    return f"{scores['bleu']:.2f} ({scores['chrf']:.1f})"


def steps_limit_section(results, translator_runs):
    runs = sorted(results.values(), key=lambda r: r["steps"])
    first = runs[0]
    trained_by, scored_by = first["trained_by"], first["scored_by"]
    for flag, value in (("name", first["name"]), ("steps", first["steps_asked"]),
                        ("dropout", f"{first['dropout_rate']:g}")):
        trained_by = trained_by.replace(f"--{flag}={value}", f"--{flag}=<{flag}>")
    scored_by = scored_by.replace(f"--name={first['name']}", "--name=<name>")
    lines = ["### How BLEU moves with steps: the preset trained further on a GPU", "",
             f"`{trained_by}` per run, on {first['training_machine']}; then "
             f"`{scored_by}` on the {first['scored_on']}, in float32, at "
             f"{first['commit']}. `python experiments/long_run.py train --steps=<steps>` "
             "trains the same way (with 4 padded shapes rather than 8, and greedy decoding on "
             "the device as it goes). Each run is the `text` preset's model, objective, schedule "
             "and batches under Keras's JAX backend in mixed_bfloat16; its cosine ends at its "
             "last step (the deadline's, where the deadline came first, as a time budget ends "
             "it). Held-out: the 477 of the 500 held-out pairs that fit 200 bytes, "
             "teacher-forced, unsmoothed nats per byte, as the training backend logged it and "
             "as TensorFlow computes it for the reloaded weights. One seed (0) per row.", "",
             "| run | steps (asked) | dropout | train loss, last logged 1,000 steps | "
             "held-out loss (JAX bf16 / TF float32) | length penalty | multi30k-test2016 BLEU "
             "(chrF), beam 4 | greedy |", "|---|---|---|---|---|---|---|---|"]
    for run in runs:
        train = [row["train_loss"] for row in run["curve"] if row.get("train_loss")]
        test = run["test"]["multi30k-test2016"]
        lines.append(
            f"| `{run['name']}` | {run['steps']:,} ({run['steps_asked']:,}"
            f"{', ended by the deadline' if run['cut_by_deadline'] else ''}) | "
            f"{run['dropout_rate']:g} | {train[-1]:.3f} | {run['final_held_out_loss']:.4f} / "
            f"{run['held_out_loss_tensorflow_float32']:.4f} | "
            f"{run['length_penalty']['value']:g} | {_bleu(test['beam4'])} | "
            f"{_bleu(test['greedy'])} |")
    cpu = preset_cpu_runs(translator_runs)
    lines += ["", "The CPU runs of the same preset (`experiments/translator.py`, "
              "bytenet-train itself, on the CPU named; its findings entry says what, if "
              "anything, ran beside each):", "",
              "| run | steps | CPU, precision | BLEU (chrF), beam 4 | greedy |",
              "|---|---|---|---|---|"]
    for name, result in sorted(cpu.items(), key=lambda item: item[1]["steps"]):
        greedy = (result.get("test_greedy_same_weights") or {}).get("multi30k-test2016")
        lines.append(f"| `{name}` | {result['steps']:,} | {result['cpu']}, "
                     f"{result['precision']} | {_bleu(result['test']['multi30k-test2016'])} | "
                     f"{_bleu(greedy) if greedy else '-'} |")
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=90)
    for run in runs:
        rows = [row for row in run["curve"] if row.get("train_loss")]
        line, = left.plot([r["step"] for r in run["curve"]],
                          [r["held_out_loss"] for r in run["curve"]],
                          label=f"{run['name']} held-out")
        left.plot([r["step"] for r in rows], [r["train_loss"] for r in rows], ":",
                  color=line.get_color())
    left.set(xlabel="step", ylabel="nats/byte (dotted: train)", ylim=(0.8, 1.5))
    left.legend(fontsize=7)
    plain = [r for r in runs if not r["dropout_rate"]]
    right.plot([r["steps"] for r in plain],
               [r["test"]["multi30k-test2016"]["beam4"]["bleu"] for r in plain], "o-",
               label="GPU, JAX, bf16 (dropout 0)")
    right.plot([r["steps"] for r in cpu.values()],
               [r["test"]["multi30k-test2016"]["bleu"] for r in cpu.values()], "s",
               label="CPU, bytenet-train")
    right.set(xlabel="steps", ylabel="multi30k-test2016 BLEU, beam 4")
    right.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(os.path.join(DOCS, "results", "steps_limit.png"))
    plt.close(figure)
    return lines + ["", "![held-out and training loss by step; BLEU by steps]"
                    "(results/steps_limit.png)"]


def attention_steps_section(name, result):
    """The preset against its cross-attention readout on the same batches, by step."""
    base, readout = result["runs"]["none"]["curve"], result["runs"]["branch_positions"]["curve"]
    lines = ["### The cross-attention readout at a 30-minute CPU step count, on a GPU", "",
             f"`{result['command']}` with `--cross_attention=none` and `branch_positions`, side "
             f"by side on {result['device']}, seed {result['seed']} (the same batches for both), "
             f"at {result['commit']} (`{name}`). Asked: {result['steps_asked']:,} steps; stopped "
             f"at {result['stopped_at_step']:,} by {result['stopped_by']}. Held-out: "
             f"{result['held_out']}.", "",
             "| step | preset: held-out (train) | readout: held-out (train) | readout - preset, "
             "held-out |", "|---|---|---|---|"]
    for a, b in zip(base, readout):
        lines.append(f"| {a['step']:,} | {a['valid_loss']:.4f} ({a['train_loss']:.3f}) | "
                     f"{b['valid_loss']:.4f} ({b['train_loss']:.3f}) | "
                     f"{b['valid_loss'] - a['valid_loss']:+.4f} |")
    return lines


def render(translator_runs):
    """The subsections of the runs by step; `translator_runs` are the CPU runs to set beside
    them (translator_*.json by name without `translator_`)."""
    lines = []
    results = results_named("steps_limit_")
    if results:
        lines += steps_limit_section(results, translator_runs) + [""]
    for name, result in results_named("attention_gpu_").items():
        lines += attention_steps_section(name, result) + [""]
    return lines
