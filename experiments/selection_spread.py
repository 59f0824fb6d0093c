"""What the end's choice of weights puts at stake, and how firmly a validation set makes it.

    python experiments/selection_spread.py --names=preset_30min_s0_zen4_4e6d11e,...

For each finished `experiments/translator.py` run, rebuilds every weights candidate that its
selection scored (the last weights, the mean of the last checkpoints, the best validated
checkpoint and, with `ema_decay`, the moving average; `exported_weights`) and decodes it:
- greedily, on all of the run's held-out validation pairs (`VALID_PAIRS`: captions, Tatoeba and
  news, in train's order, so the first `valid_size` are the captions the trainer chose on);
- with the run's beam on the same pairs, every length penalty of the grid choosing among the
  final beams, as the trainer's tuning does;
- with the same beam on all of multi30k-test2016, at every penalty.

Then, on the trainer's validation set (the first `valid_size` pairs) and on all held-out pairs,
each candidate's greedy BLEU, the paired bootstrap share of resamples in which each candidate
scores highest (`scoring.bootstrap_spread`), the candidate each set chooses, and the penalty
each set chooses for it by beam BLEU. The test scores are recorded for reading only, to show
how much BLEU the choice moves: nothing is chosen on the test set. The candidates are rebuilt
in float32, as the export is; the trainer validated them in the run's own precision, so the
greedy scores on its validation set are recorded beside the run's own.

Writes docs/results/selection_spread_<label>.json.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import logging  # noqa: E402

from bytenet_tf import inference, scoring  # noqa: E402
from bytenet_tf.training import evaluation  # noqa: E402
from experiments.beam_width import beam_outputs  # noqa: E402
from experiments.common import RUNS, cpu_name, write_results  # noqa: E402
from experiments.translator import exported_weights  # noqa: E402
from pipelines import text  # noqa: E402
from shared_data import deen  # noqa: E402

TEST_SET = "multi30k-test2016"
METRIC = "bleu"


def candidates_of(results):
    """The candidates a run's selection scored, in its order (not the ones the budget left
    out)."""
    return [name for name, entry in results["selection"]["candidates"].items()
            if "skipped" not in entry]


def chosen_by(scores):
    """The key of `scores` ({key: {METRIC: float}}) with the highest METRIC, the first on ties."""
    return max(scores, key=lambda key: scores[key][METRIC])


def subset_scores(sources, references, outputs, size):
    """The scores of the first `size` outputs, as the trainer's validation set sees them."""
    return evaluation.score_translations(sources[:size], outputs[:size], references[:size])


def run_spread(name, model_dir):
    with open(os.path.join(model_dir, "results.json")) as f:
        results = json.load(f)
    with open(os.path.join(model_dir, "config.json")) as f:
        run_config = json.load(f)
    valid_size, beam_size = run_config["valid_size"], run_config["beam_size"]
    valid = os.path.join(os.path.dirname(model_dir), "data", "valid")
    valid_sources, valid_references, _ = text.read_parallel_lines(
        os.path.join(valid, "pairs.de"), os.path.join(valid, "pairs.en"))
    test_sources, test_references, _ = text.read_parallel_lines(deen(f"{TEST_SET}.de"),
                                                                deen(f"{TEST_SET}.en"))
    sets = {"trainer_validation": valid_size, "all_held_out": len(valid_sources)}
    entry = {"exported": results["selection"]["chosen"], "candidates": {}}
    greedy_outputs = {}
    for candidate in candidates_of(results):
        model = exported_weights(model_dir, results, run_config["model_config"], candidate)
        translator = inference.Translator(model)
        greedy = inference.translate_batches(translator, valid_sources, progress=True,
                                             description="greedy")
        by_alpha, _ = beam_outputs(model, beam_size, valid_sources, valid_references,
                                   translator.output_bound)
        test_by_alpha, _ = beam_outputs(model, beam_size, test_sources, test_references,
                                        translator.output_bound)
        greedy_outputs[candidate] = greedy
        row = {"run_validation_bleu": results["selection"]["candidates"][candidate]["bleu"]}
        for label, size in sets.items():
            penalties = {alpha: subset_scores(valid_sources, valid_references, hypotheses, size)
                         for alpha, (hypotheses, _) in by_alpha.items()}
            alpha = chosen_by(penalties)
            row[label] = {
                "greedy": subset_scores(valid_sources, valid_references, greedy, size),
                "length_penalty": alpha, "beam": penalties[alpha],
                "test_at_that_penalty": test_by_alpha[alpha][1]}
        row["test_every_penalty_not_chosen_on"] = {
            alpha: {key: scores[key] for key in ("bleu", "chrf")}
            for alpha, (_, scores) in test_by_alpha.items()}
        entry["candidates"][candidate] = row
        trainer, held_out = row["trainer_validation"], row["all_held_out"]
        print(f"{name} {candidate}: greedy validation BLEU {trainer['greedy']['bleu']:.2f} "
              f"(the run's {row['run_validation_bleu']:.2f}), all held-out "
              f"{held_out['greedy']['bleu']:.2f}; test at the trainer set's penalty "
              f"{trainer['test_at_that_penalty']['bleu']:.2f}", flush=True)
    names = list(greedy_outputs)
    for label, size in sets.items():
        spread = scoring.bootstrap_spread([greedy_outputs[n][:size] for n in names],
                                          valid_references[:size], METRIC)
        scores = {n: entry["candidates"][n][label]["greedy"] for n in names}
        chosen = chosen_by(scores)
        test = entry["candidates"][chosen][label]["test_at_that_penalty"][METRIC]
        best_test = max(entry["candidates"][n][label]["test_at_that_penalty"][METRIC]
                        for n in names)
        entry[label] = {"pairs": size, "chosen": chosen,
                        "wins": dict(zip(names, spread["wins"])),
                        "std": dict(zip(names, spread["std"])),
                        "test_of_the_chosen": test,
                        "test_best_candidate_minus_chosen": round(best_test - test, 4)}
        print(f"{name}, {label} ({size} pairs): chooses {chosen} (wins "
              f"{entry[label]['wins']}); test {test:.2f}, best candidate +"
              f"{best_test - test:.2f}", flush=True)
    return entry


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--names", required=True, help="comma-separated finished translator.py "
                        "runs, each in runs/experiments/translator/NAME")
    parser.add_argument("--label", required=True, help="names the result file")
    args = parser.parse_args()
    logging.set_verbosity(logging.WARNING)
    names = [name for name in args.names.split(",") if name]
    folders = {name: os.path.join(RUNS, "translator", name) for name in names}
    missing = [name for name, folder in folders.items()
               if not os.path.exists(os.path.join(folder, "results.json"))]
    if missing:
        raise SystemExit(f"--names: no finished run (results.json) for {missing} under "
                         f"{os.path.join(RUNS, 'translator')}. Run experiments/translator.py "
                         f"--name=NAME first.")
    runs = {name: run_spread(name, folder) for name, folder in folders.items()}
    command = (f"python experiments/selection_spread.py --names={args.names} "
               f"--label={args.label}")
    path = write_results(f"selection_spread_{args.label}", {
        "command": command, "cpu": cpu_name(), "decoding_precision": "float32",
        "metric": METRIC, "test_set": TEST_SET, "runs": runs})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
