"""Beam width: the exported weights of a finished translator run, decoded with several beams.

    python experiments/beam_width.py --name=h256_ls10_30min_s1 --beams=4,8

Rebuilds the weights that `experiments/translator.py --name=NAME` exported (its selection's
choice) and, for each beam width, runs one beam search over all the run's held-out validation
pairs (`VALID_PAIRS`: captions, Tatoeba and news; the trainer validated on the first
`valid_size` of them, which are all captions, since the held-out file keeps train's order).
Every length penalty of the grid then chooses among the final beams, as the trainer's tuning
does; each width keeps the penalty with the best validation chrF and, separately, the one with
the best validation BLEU (the text recipe's `select_by`, chrF before, BLEU now). The widths
are compared on validation with a paired bootstrap over every (width, penalty) output, by each
metric, and each width is then scored with each chosen penalty on all of multi30k-test2016,
with its decoding time (one beam search of the whole set per width; `BeamCandidates.choose`
at a penalty returns what a `Translator` with that penalty does). The test scores at every
other penalty are recorded for reading only: nothing is chosen on the test set.

Writes docs/results/beam_width_<name>.json.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import logging  # noqa: E402

from bytenet_tf import inference, scoring  # noqa: E402
from bytenet_tf.training import selection  # noqa: E402
from experiments.common import RUNS, cpu_name, write_results  # noqa: E402
from experiments.translator import exported_weights  # noqa: E402
from pipelines import text  # noqa: E402
from shared_data import deen  # noqa: E402

TEST_SET = "multi30k-test2016"
# Each width's length penalty is chosen by each of these validation metrics.
METRICS = ("chrf", "bleu")
# The scores kept for every penalty (the chosen ones keep all of them).
SUMMARY = ("bleu", "chrf", "reached_bound")


def beam_outputs(model, beam_size, sources, references, bound):
    """One timed beam search: `({alpha: (hypotheses, scores)}, seconds)` for every grid
    penalty (`selection.penalty_outputs`)."""
    started = time.time()
    candidates = inference.translate_batches(inference.BeamCandidates(model, beam_size), sources,
                                             progress=True, description=f"beam {beam_size}")
    seconds = time.time() - started
    return selection.penalty_outputs(candidates, sources, references, bound), seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--name", required=True, help="a finished translator.py run")
    parser.add_argument("--model_dir", default=None,
                        help="its run folder (default: runs/experiments/translator/NAME)")
    parser.add_argument("--beams", default="4,8", help="comma-separated beam widths")
    args = parser.parse_args()
    logging.set_verbosity(logging.INFO)
    beams = [int(width) for width in args.beams.split(",")]
    if any(width < 1 for width in beams):
        raise SystemExit(f"--beams must be widths >= 1. Received: --beams={args.beams}")
    model_dir = args.model_dir or os.path.join(RUNS, "translator", args.name)
    with open(os.path.join(model_dir, "results.json")) as f:
        results = json.load(f)
    with open(os.path.join(model_dir, "config.json")) as f:
        model_config = json.load(f)["model_config"]
    model = exported_weights(model_dir, results, model_config)
    bound = inference.Translator(model).output_bound
    # translator.py's held-out split, next to the run folder.
    valid = os.path.join(os.path.dirname(model_dir), "data", "valid")
    valid_sources, valid_references, _ = text.read_parallel_lines(
        os.path.join(valid, "pairs.de"), os.path.join(valid, "pairs.en"))
    test_sources, test_references, _ = text.read_parallel_lines(deen(f"{TEST_SET}.de"),
                                                                deen(f"{TEST_SET}.en"))

    validation, outputs, labels = {}, [], []
    for width in beams:
        by_alpha, seconds = beam_outputs(model, width, valid_sources, valid_references, bound)
        rows = {alpha: scores for alpha, (_, scores) in by_alpha.items()}
        outputs += [hypotheses for hypotheses, _ in by_alpha.values()]
        labels += [(width, alpha) for alpha in by_alpha]
        validation[width] = {"decode_seconds": seconds,
                             "by_length_penalty": {alpha: {k: row[k] for k in SUMMARY}
                                                   for alpha, row in rows.items()}}
        for metric in METRICS:
            chosen = max(rows, key=lambda alpha: rows[alpha][metric])
            validation[width][f"chosen_by_{metric}"] = chosen
            print(f"beam {width}, by validation {metric}: length penalty {chosen}, BLEU "
                  f"{rows[chosen]['bleu']:.2f} chrF {rows[chosen]['chrf']:.2f}", flush=True)
    for metric in METRICS:
        spread = scoring.bootstrap_spread(outputs, valid_references, metric)
        for (width, alpha), std, wins in zip(labels, spread["std"], spread["wins"]):
            validation[width]["by_length_penalty"][alpha].update(
                {f"{metric}_std": std, f"{metric}_wins": wins})
        for width in beams:
            validation[width][f"{metric}_wins_any_penalty"] = round(sum(
                wins for (w, _), wins in zip(labels, spread["wins"]) if w == width), 4)

    test = {}
    for width in beams:
        by_alpha, seconds = beam_outputs(model, width, test_sources, test_references, bound)
        rows = {alpha: scores for alpha, (_, scores) in by_alpha.items()}
        test[width] = {"decode_seconds": seconds,
                       "sentences_per_second": len(test_sources) / seconds,
                       "every_length_penalty_not_chosen_on": {
                           alpha: {k: row[k] for k in SUMMARY} for alpha, row in rows.items()}}
        for metric in METRICS:
            alpha = validation[width][f"chosen_by_{metric}"]
            test[width][f"chosen_by_{metric}"] = dict(rows[alpha], length_penalty=alpha)
            print(f"{TEST_SET}, beam {width}, length penalty {alpha} (validation {metric}): "
                  f"BLEU {rows[alpha]['bleu']:.2f} chrF {rows[alpha]['chrf']:.2f} "
                  f"({test[width]['sentences_per_second']:.1f} sentences/s)", flush=True)

    command = f"python experiments/beam_width.py --name={args.name} --beams={args.beams}"
    path = write_results(f"beam_width_{args.name}", {
        "command": command, "run": args.name, "cpu": cpu_name(), "decoding_precision": "float32",
        "selection": results["selection"]["chosen"], "validation_pairs": len(valid_sources),
        "validation": validation, "test_set": TEST_SET, "test": test})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
