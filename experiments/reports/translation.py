"""Real translation: small-scale runs, the text recipe's screens and runs, SELU against layer norm."""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from experiments.reports import steps  # noqa: E402
from experiments.reports.common import DOCS, ema, load, mean, provenance, results_named  # noqa: E402


# The news and FLORES test sets that experiments/translator.py scores beside multi30k-test2016.
NEWS_SETS = ("newstest2015", "newstest2016", "newstest2017", "newstest2018", "flores200-devtest")
# How the selection metrics' keys are written in the tables.
METRIC_NAMES = {"bleu": "BLEU", "chrf": "chrF"}


def _translator_runs(prefix):
    """docs/results/translator_<prefix>*.json, by name (without `translator_`)."""
    return {name[len("translator_"):]: result
            for name, result in results_named(f"translator_{prefix}").items()}


def translation_section(results):
    fig, (ax_loss, ax_bleu) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=90)
    lines = ["### Real translation at small scale (60k pairs)", ""]
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


def recipe_screen_section(screens):
    """The text recipe's screen: short runs of the text preset with one value changed each."""
    lines = ["### The text recipe: screening runs", "",
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


# The runs written before translator.py recorded its machine: all on this one (findings).
EARLIER_CPU = "Intel Xeon, AVX512-BF16, no AMX"


def rescored_text(result):
    """Names the command that scored a run's export again, when one did."""
    again = result.get("rescored")
    if not again:
        return ""
    before = again["previous_test_sentences"] or "all"
    return (f" Test sets scored again (news and FLORES had {before} sentences each before) by "
            f"`{again['command']}` at commit `{again['commit']}`, on {again['cpu']}.")


def _candidate_text(name, scores):
    """One export candidate's validation scores, or why the selection left it out."""
    if "skipped" in scores:
        return f"{name} left out ({scores['skipped']}: not validated)"
    return f"{name} BLEU {scores['bleu']:.2f} chrF {scores['chrf']:.2f}"


def translator_section(runs):
    """The text recipe and its source-blind baseline, scored on every test set."""
    lines = ["### The text recipe: a German-English translator on the 2-core CPU", "",
             "`python experiments/translator.py`: the `text` preset of bytenet-train for a time "
             "budget, trained alone on the machine on ../shared/data/deen/train.* less 500 "
             "pairs held out at random (seed 13) as the validation set, which chose the "
             "exported weights and the beam's length penalty. The exported SavedModel (beam 4) "
             "then translates multi30k-test2016 in full and, as the `sentences` column says, the "
             "first 200 sentences or all of each newstest and FLORES set (sacreBLEU 2.6.0, 13a, "
             "mixed case; chrF nc 6). "
             "`bound`: share of outputs that reached the length bound without emitting EOS "
             "(runaway repetition). `blind`: the same model with the decoder seeing zeros in "
             "place of the encoder output (`source_blind`), given the real sources at test "
             "time so its length bound is the same.", ""]
    sets = ("multi30k-test2016",) + NEWS_SETS
    lines += ["| run | CPU, precision | steps | exported weights | length penalty | news and "
              "FLORES sentences | " + " | ".join(f"{s} BLEU / chrF / bound" for s in sets) + " |",
              "|---|---|---|---|---|---|" + "---|" * len(sets)]
    for name, result in runs.items():
        test = result["test"]
        selection = result["results"]["selection"]
        cells = [f"{test[s]['bleu']:.2f} / {test[s]['chrf']:.1f} / {test[s]['reached_bound']:.3f}"
                 for s in sets]
        sentences = result.get("test_sentences", 200)
        lines.append(f"| {name} | {result.get('cpu', EARLIER_CPU)}, "
                     f"{result.get('precision') or 'float32'} | {result['steps']} | "
                     f"{selection['chosen']} | {result['results']['length_penalty']['value']} | "
                     f"{sentences or 'all'} | " + " | ".join(cells) + " |")
    lines += [""]
    for name, result in runs.items():
        greedy = (result.get("test_greedy_same_weights") or {}).get("multi30k-test2016")
        beam = result["test"]["multi30k-test2016"]
        selection = result["results"]["selection"]["candidates"]
        selection_metric = result["results"]["selection"]["metric"]
        lines += [f"#### `{name}`", "", provenance(result, seeds=str(result["seed"]))
                  + rescored_text(result), ""]
        if greedy:
            lines += [f"- multi30k-test2016, the same weights decoded greedily: BLEU "
                      f"{greedy['bleu']:.2f}, chrF {greedy['chrf']:.1f}, reached the bound "
                      f"{greedy['reached_bound']:.3f}; with the exported beam: "
                      f"{beam['bleu']:.2f}, {beam['chrf']:.1f}, {beam['reached_bound']:.3f}."]
        lines += ["- Validation (held-out, greedy) of each candidate: " + "; ".join(
            _candidate_text(name, scores) for name, scores in selection.items()) + "."]
        tried = result["results"]["length_penalty"]["tuned_on_validation"] or {}
        if tried:
            # `std` and `wins` are of the metric that chose the penalty.
            metric = METRIC_NAMES[selection_metric]
            lines += ["- Length penalty on validation (beam 4): " + "; ".join(
                f"{k}: BLEU {v['bleu']:.2f}, chrF {v['chrf']:.2f}"
                + (f" ({metric} std {v['std']:.2f}, best in {100 * v['wins']:.0f}% of bootstrap "
                   "resamples)" if "wins" in v else "")
                + f", bound {v['reached_bound']:.3f}" for k, v in tried.items()) + "."]
        lines += ["", f"![{name}](results/translator_{name}.png)", "",
                  "| source (multi30k-test2016) | this model | reference |", "|---|---|---|"]
        for example in beam["examples"]:
            lines.append("| " + " | ".join(example[k].replace("|", "\\|") for k in
                                             ("source", "hypothesis", "reference")) + " |")
        lines += [""]
    return lines


# Settings that differ between two runs of one configuration: where they ran, what they chose
# at the end, and why the binary picked its precision and ops.
_NOT_THE_RECIPE = ("model_dir", "export_dir", "exported_weights", "length_penalty_scores",
                   "effective_length_penalty", "precision_reason", "ops_policy_reason",
                   "data_file_bytes", "source_blind", "model_config")


def _trained_alike(one, other):
    """Whether two translator runs trained the same configuration on the same seed, budget and
    CPU kind, apart from `source_blind` (another CPU fits another number of steps)."""
    def recipe(result):
        config = result["effective_config"]
        model = {k: v for k, v in config["model_config"].items() if k != "source_blind"}
        return ({k: v for k, v in config.items() if k not in _NOT_THE_RECIPE}, model,
                result["seed"], result["minutes"], result.get("cpu"))
    return recipe(one) == recipe(other)


def source_gap_pairs(runs):
    """`(reading, blind)` name pairs of translator runs that trained alike but for
    `source_blind`: the same seed, and so the same batches where the data code is the same."""
    blind = {n: r for n, r in runs.items()
             if r["effective_config"]["model_config"].get("source_blind")}
    return [(name, blind_name) for blind_name, b in sorted(blind.items())
            for name, r in sorted(runs.items()) if name not in blind and _trained_alike(r, b)]


def _in_window(curve, key, start, end):
    """The values of `key` in the points of `curve` after step `start` and up to `end`."""
    return [p[key] for p in curve if key in p and start < p["step"] <= end]


def _last_validation(result, start, end):
    """Validation BLEU of the last validation after step `start` and up to `end`, or "-"."""
    points = _in_window(result["curve"], "valid_bleu", start, end)
    return f"{points[-1]:.1f}" if points else "-"


def source_gap_section(runs, window=1000):
    """What reading the source is worth by step: the training loss of each source-blind run less
    that of the run that trained alike and read its source."""
    pairs = source_gap_pairs(runs)
    if not pairs:
        return []
    lines = ["### What the source is worth, by step, on the CPU", "",
             "Pairs of `python experiments/translator.py` runs above that trained the same "
             "configuration on the same seed and budget, one reading its source and one with "
             "`--set source_blind=true` (the decoder sees zeros for the encoder output). Loss: "
             "the unsmoothed training cross-entropy that bytenet-train logs every 50 steps, in "
             f"nats per target byte, averaged over each {window:,} steps; `gap`: the blind "
             "run's less the reading run's. Validation: greedy BLEU on the 200 held-out pairs at "
             "the last validation inside the window.", ""]
    for name, blind_name in pairs:
        reading, blind = runs[name], runs[blind_name]
        lines += [f"`{name}` ({reading['commit']}) against `{blind_name}` ({blind['commit']}); "
                  f"{reading['minutes']:g}-minute budget, {reading['steps']:,} and "
                  f"{blind['steps']:,} steps.", "",
                  "| steps | loss, reading | loss, blind | gap | validation BLEU, reading / "
                  "blind |", "|---|---|---|---|---|"]
        last = min(reading["steps"], blind["steps"])
        for start in range(0, last, window):
            end = min(start + window, last)
            with_source = _in_window(reading["curve"], "loss", start, end)
            without = _in_window(blind["curve"], "loss", start, end)
            if not with_source or not without:
                continue
            a, b = mean(with_source), mean(without)
            lines.append(f"| {start + 1:,}-{end:,} | {a:.3f} | {b:.3f} | {b - a:.3f} | "
                         f"{_last_validation(reading, start, end)} / "
                         f"{_last_validation(blind, start, end)} |")
        lines += [""]
    return lines


def fair_comparison_section(runs):
    """bytenet_selu against bytenet_small at equal steps, dropout and seeds."""
    fig, (ax_loss, ax_bleu) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=90)
    lines = ["### SELU against layer-norm ByteNet on real text, equal steps", "",
             "`python experiments/translator.py` with the `text` preset changed only where the "
             "comparison needs it: a fixed step count (`train_steps`, the cosine decay ends "
             "there; the time budget is far from binding), the same dropout for both models "
             "(0), the last weights exported and greedy decoding (no selection, averaging or "
             "beam, so nothing but the training differs). Each model at its residual default: "
             "`bytenet_selu` with w = 1/sqrt(15) (the residual sweep), `bytenet_small` with the "
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


def attention_section(results):
    """bytenet_selu with and without a cross-attention readout, at equal steps (residual_text.py
    runs, one results file per variant)."""
    lines = ["### Reading the source: a cross-attention readout, equal steps", "",
             "`python experiments/residual_text.py` (the residual sweep's runner: the `text` "
             "preset at a fixed step count, the cosine ending there, the same batches per seed) "
             "with `--model` and `--precision` as each command says. Held-out: teacher-forced "
             "nats per target byte on the 500 held-out pairs; greedy BLEU and chrF on the first "
             "100 of them; the last weights, no selection or beam. Training seconds come from runs "
             "made one after the other, not alternated: an indication of cost, not a "
             "measurement of it.", "",
             "| results file | model at its commit, setting | steps | seed | precision, CPU | "
             "held-out nats/byte | greedy BLEU / chrF | train loss (last 10 logs) | training "
             "seconds |", "|---|---|---|---|---|---|---|---|---|"]
    for name, result in results.items():
        for run in result["runs"]:
            lines.append(
                f"| `{name}` | {result.get('model', 'bytenet_selu')} at {result['commit']}, "
                f"`{run['setting']}` | "
                f"{result['steps']} | {run['seed']} | {run['precision']}, {run['cpu']} | "
                f"{run['heldout_nats']:.4f} | {run['valid_bleu']:.2f} / {run['valid_chrf']:.1f} | "
                f"{run['train_loss_last_10_logs']:.3f} | {run['train_seconds']:.0f} |")
    lines += [""] + [f"- `{name}`: `{result['command']}`" for name, result in results.items()]
    return lines


def lever_screen_section(result):
    """The text recipe's levers at the steps a 30-minute CPU budget holds, on a GPU under JAX
    (lever_screen.json, written by experiments/lever_screen.py)."""
    runs = {run["name"]: run for run in result["settings"]}
    lines = ["### The text recipe's levers at the real step count", "",
             f"`{result['command']}` at {result['commit']}, on {result['device']}. "
             f"Steps: 3,000 is what the 30-minute recipe trains on a 2-core Zen 4 in bf16; a "
             f"shape gets the steps its measured step time allows in the same time "
             f"({result['steps_for_equal_cpu_time']}). Metric: {result['metric']}. "
             "The batches differ from bytenet-train's (a length-sorted window shuffle padded to "
             "64, 128 or 208 ids, not tf.data buckets) and the GPU's bf16 kernels round "
             "differently, so this ranks settings; the recipe's own figures are the CPU runs of "
             "the recipe table. Label smoothing raises the unsmoothed cross-entropy by construction, so its "
             "row does not say what it does to BLEU.", "",
             "| setting | overrides of the recipe | steps | held-out nats/byte (captions) | "
             "moving average (captions) | train loss |", "|---|---|---|---|---|---|"]
    for name, run in runs.items():
        changed = {k: v for k, v in run["setting"].items()
                   if k not in ("steps", "ema_decay") and run["setting"][k] != result["recipe"].get(k)}
        last = run["curve"][-1]
        steps = f"{run['steps']:,} of {run['setting']['steps']:,}" if run["stopped_early"] \
            else f"{run['steps']:,}"
        train = f"{last['train_loss']:.3f}" if last["train_loss"] is not None else "-"
        lines.append(
            f"| `{name}` | {', '.join(f'{k}={v}' for k, v in changed.items()) or '-'} | {steps} | "
            f"{last['held_out']['all']:.4f} ({last['held_out']['captions']:.4f}) | "
            f"{last['held_out_ema']['all']:.4f} ({last['held_out_ema']['captions']:.4f}) | "
            f"{train} |")
    if {"base", "seed1", "blind"} <= set(runs):
        lines += ["", "What the source is worth, by step: the held-out loss of the source-blind "
                  "model less the mean of `base` and `seed1` (nats/byte, all held-out pairs / "
                  "captions).", "", "| step | " + " | ".join(
                      str(p["step"]) for p in runs["blind"]["curve"]) + " |",
                  "|---|" + "---|" * len(runs["blind"]["curve"])]
        gaps = []
        for point in runs["blind"]["curve"]:
            with_source = [next(p for p in runs[n]["curve"] if p["step"] == point["step"])
                           for n in ("base", "seed1")]
            gaps.append(" / ".join(
                f"{point['held_out'][part] - mean([p['held_out'][part] for p in with_source]):.3f}"
                for part in ("all", "captions")))
        lines.append("| gap | " + " | ".join(gaps) + " |")
    return lines


def examples_section(results):
    """What exported translators write (examples_*.json, experiments/examples.py)."""
    lines = ["### Example translations", ""]
    for name, result in results.items():
        lines += [f"`{result['command']}`", "", "| source | output | reference |",
                  "|---|---|---|"]
        cell = lambda text: text.replace('|', '\\|')  # noqa: E731
        lines += [f"| {cell(row['source'])} | {cell(row['output'])} | {cell(row['reference'])} |"
                  for row in result["rows"]] + [""]
    return lines[:-1]


def beam_width_section(results):
    """Beam 4 against wider beams on the same exported weights, with the length penalty chosen
    by validation chrF or BLEU (beam_width_*.json, written by experiments/beam_width.py)."""
    lines = ["### Beam width and the length penalty's metric", "",
             "`python experiments/beam_width.py`: the exported weights of a translator run, one "
             "beam search per width over all 500 held-out validation pairs (captions, Tatoeba "
             "and news), the length penalty chosen per width by validation chrF or by "
             "validation BLEU (the text recipe's `select_by`, chrF before, BLEU now), then all "
             "of multi30k-test2016 at that penalty (float32 decoding, batches of 256, every "
             "final beam kept). Wins: the share of 1,000 paired bootstrap resamples of the "
             "validation pairs in which one of the width's (width, penalty) outputs scores "
             "best of all by that metric.", "",
             "| run, commit, CPU | width | chosen by | penalty | validation BLEU / chrF | "
             "wins | test BLEU / chrF | test sentences/s |", "|---|---|---|---|---|---|---|---|"]
    for name, result in results.items():
        for width, valid in result["validation"].items():
            test = result["test"][width]
            for metric in ("chrf", "bleu"):
                alpha = valid[f"chosen_by_{metric}"]
                row = valid["by_length_penalty"][str(alpha)]
                scored = test[f"chosen_by_{metric}"]
                lines.append(
                    f"| `{result['run']}`, {result['commit']}, {result['cpu']} | {width} | "
                    f"{METRIC_NAMES[metric]} | {alpha} | "
                    f"{row['bleu']:.2f} / {row['chrf']:.2f} | "
                    f"{valid[f'{metric}_wins_any_penalty']:.2f} | "
                    f"{scored['bleu']:.2f} / {scored['chrf']:.2f} | "
                    f"{test['sentences_per_second']:.1f} |")
    lines += [""] + [f"- `{name}`: `{result['command']}`" for name, result in results.items()]
    return lines


def long_run_section(results):
    """The recipe's math past a CPU budget, on a GPU under JAX (long_run_*.json, written by
    experiments/long_run.py)."""
    lines = ["### Past the CPU budget", "",
             "`experiments/long_run.py`: the text preset's model and training math (its "
             "token-budget batches, Adam, a cosine decay that ends with the time budget, "
             "mixed_bfloat16, and the dropout, label smoothing and weight decay of long_run.py's "
             "defaults at the commit that trained it unless its command sets others) under JAX "
             "on a GPU, for more steps than 2 CPU hours "
             "hold; held-out loss on the 500 held-out pairs (captions, Tatoeba, news), greedy "
             "BLEU on the device on the way (read only), and the weights scored afterwards on "
             "the CPU with TensorFlow as bytenet-train scores its export (beam 4, the length "
             "penalty with the best BLEU on the 500 held-out pairs, float32)."]
    for name, result in results.items():
        stopped = "" if result["reached_budget"] else (
            f"; stopped at step {result['last_logged_step']:,}, before its "
            f"{result['budget_seconds'] / 60:.1f}-minute budget ended, so the scored weights "
            "are the last ones saved")
        lines += ["", f"#### `{name}`", "",
                  f"Trained by `{result['trained_by']}` at {result['trained_at']} on "
                  f"{result['trained_on']}; scored by `{result['command']}` at "
                  f"{result['commit']} on {result['scored_on']}. {result['parameters']:,} "
                  f"parameters. Weights of step {result['weights_step']:,} "
                  f"(epochs done: {result['weights_epochs']}, learning rate "
                  f"{result['weights_learning_rate']:.2e}){stopped}.", "",
                  f"- {result['test_set']}, beam 4, length penalty "
                  f"{result['test_beam4']['length_penalty']}: BLEU "
                  f"{result['test_beam4']['bleu']:.2f}, chrF {result['test_beam4']['chrf']:.2f}; "
                  f"greedy: BLEU {result['test_greedy']['bleu']:.2f}, chrF "
                  f"{result['test_greedy']['chrf']:.2f}.", "",
                  "| step | epochs done | learning rate | train loss | held-out loss | greedy BLEU "
                  "held-out / test (device) |", "|---|---|---|---|---|---|"]
        for point in result["curve"]:
            greedy = (f"{point['valid_greedy']['bleu']:.2f} / {point['test_greedy']['bleu']:.2f}"
                      if "test_greedy" in point else "")
            lines.append(f"| {point['step']:,} | {point['epochs']} | "
                         f"{point['learning_rate']:.2e} | {point['train_loss']:.3f} | "
                         f"{point['valid_loss']:.3f} | {greedy} |")
        lines += ["", f"![{name}](results/long_run_{name[len('long_run_'):]}.png)"]
    return lines


def render():
    """The section's subsections, from real_translation_*.json and translator_*.json."""
    lines = []
    translations = {m: load(f"real_translation_{m}") for m in ("bytenet_small", "bytenet_selu")}
    translations = {m: r for m, r in translations.items() if r}
    if translations:
        lines += translation_section(translations) + [""]
    screens = _translator_runs("screen")
    if screens:
        lines += recipe_screen_section(screens) + [""]
    recipes = {name: r for name, r in _translator_runs("").items()
               if not name.startswith(("screen", "fair")) and r.get("test")}
    if recipes:
        lines += translator_section(recipes) + [""]
        lines += source_gap_section(recipes)
    fair = _translator_runs("fair")
    if fair:
        lines += fair_comparison_section(fair) + [""]
    levers = load("lever_screen")
    if levers:
        lines += lever_screen_section(levers) + [""]
    lines += steps.render(_translator_runs(""))
    examples = results_named("examples")
    if examples:
        lines += examples_section(examples) + [""]
    widths = results_named("beam_width")
    if widths:
        lines += beam_width_section(widths) + [""]
    long_runs = results_named("long_run")
    if long_runs:
        lines += long_run_section(long_runs) + [""]
    attention = results_named("attention_screen")
    if attention:
        lines += attention_section(attention) + [""]
    return lines or ["Not run yet.", ""]
