"""The text preset by step on a GPU: trained for more steps (steps_limit_*.json, written by
experiments/steps_limit.py at a9b8f03) beside the CPU runs of the same preset, against its
cross-attention readout (attention_gpu_*.json, experiments/long_run.py), and with weight decay
(long_run_wd*.json, experiments/long_run.py)."""

import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments.reports.common import DOCS, results_named  # noqa: E402


def preset_cpu_runs(translator_runs):
    """The runs of the smoothed text preset without weight decay (hidden 256, 3 stacks, 2,560-byte
    batches, label smoothing 0.1, no dropout, reading the source), as the GPU runs trained,
    among `translator_runs` (translator_*.json by name without `translator_`)."""
    runs = {}
    for name, result in translator_runs.items():
        config = result.get("effective_config") or {}
        model = config.get("model_config") or {}
        if (result.get("test") and config.get("tokens_per_batch") == 2560
                and config.get("label_smoothing") == 0.1 and model.get("hidden_size") == 256
                and model.get("num_stacks") == 3 and not model.get("dropout_rate")
                and not model.get("source_blind") and model.get("cross_attention") == "none"
                and not config.get("weight_decay")):
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
             f"{first['commit']}. `python experiments/long_run.py train --steps=<steps> "
             "--weight_decay=0` trains the same way (with 4 padded shapes rather than 8, and "
             "greedy decoding on the device as it goes). Each run is the `text` preset's model, "
             "objective without its weight decay, schedule and batches under Keras's JAX "
             "backend in mixed_bfloat16; its cosine ends at its last step (the deadline's, "
             "where the deadline came first, as a time budget ends it). Held-out: the 477 of "
             "the 500 held-out pairs that fit 200 bytes, "
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
    lines += ["", "The CPU runs of the same settings, without weight decay "
              "(`experiments/translator.py`, "
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


def trained_flag(result, flag):
    """The number that the command that trained a long_run result gave `--<flag>` (0: none)."""
    found = re.search(rf"--{flag}=(\S+)", result["trained_by"])
    return float(found.group(1)) if found else 0.0


def weight_decay_section(results):
    """The preset with decoupled weight decay, one long_run_wd*.json per amount."""
    runs = sorted(results.items(), key=lambda item: trained_flag(item[1], "weight_decay"))
    lines = ["### Weight decay at the step count of a 2-hour CPU run, on a GPU", "",
             "`experiments/long_run.py train --weight_decay=<decay>`: the `text` preset's model, "
             "objective, schedule and batches under JAX in mixed_bfloat16, each weight shrunk "
             "by learning rate x decay of itself every step (Keras's `weight_decay=`, "
             "bytenet-train's `--weight_decay`), the cosine ending at the run's last step; "
             "scored on the CPU in float32 (beam 4 with the length penalty of the best BLEU on "
             "the 500 held-out pairs). Held-out: teacher-forced nats per byte on those 500 "
             "pairs (captions, Tatoeba, news). One seed (0) per row, the same batches for all.",
             "", "| run | weight decay | steps | train loss since the previous log | held-out "
             "loss: end (lowest, at step) | held-out BLEU, beam 4 | multi30k-test2016 BLEU "
             "(chrF), beam 4 | greedy |", "|---|---|---|---|---|---|---|---|"]
    figure, axes = plt.subplots(figsize=(6, 3.6), dpi=90)
    for name, result in runs:
        curve, decay = result["curve"], trained_flag(result, "weight_decay")
        lowest = min(curve, key=lambda point: point["valid_loss"])
        validation = result["validation_by_length_penalty"][
            str(result["test_beam4"]["length_penalty"])]
        asked = int(trained_flag(result, "steps"))
        cut = ("" if not asked or result["weights_step"] == asked else
               f" of {asked:,}, ended by its --minutes" if result["reached_budget"] else
               f" of {asked:,}, the last saved")
        lines.append(f"| `{name}` | {decay:g} | {result['weights_step']:,}{cut} | "
                     f"{curve[-1]['train_loss']:.3f} | {curve[-1]['valid_loss']:.4f} "
                     f"({lowest['valid_loss']:.4f}, {lowest['step']:,}) | "
                     f"{validation['bleu']:.2f} | {_bleu(result['test_beam4'])} | "
                     f"{_bleu(result['test_greedy'])} |")
        line, = axes.plot([p["step"] for p in curve], [p["valid_loss"] for p in curve],
                          label=f"decay {decay:g}, held-out")
        axes.plot([p["step"] for p in curve], [p["train_loss"] for p in curve], ":",
                  color=line.get_color())
    axes.set(xlabel="step", ylabel="nats/byte (dotted: train)", ylim=(0.7, 1.5))
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(os.path.join(DOCS, "results", "weight_decay_steps.png"))
    plt.close(figure)
    commits = sorted({f"{r['trained_at']} (trained), {r['commit']} (scored)" for _, r in runs})
    devices = sorted({r["trained_on"] for _, r in runs})
    return lines + ["", f"Trained on {', '.join(devices)} at {'; '.join(commits)}; each run's "
                    "command and curve are under \"Past the CPU budget\".", "",
                    "![held-out and training loss by step, by weight decay]"
                    "(results/weight_decay_steps.png)"]


def render(translator_runs):
    """The subsections of the runs by step; `translator_runs` are the CPU runs to set beside
    them (translator_*.json by name without `translator_`)."""
    lines = []
    results = results_named("steps_limit_")
    if results:
        lines += steps_limit_section(results, translator_runs) + [""]
    for name, result in results_named("attention_gpu_").items():
        lines += attention_steps_section(name, result) + [""]
    decays = results_named("long_run_wd")
    if decays:
        lines += weight_decay_section(decays) + [""]
    return lines
