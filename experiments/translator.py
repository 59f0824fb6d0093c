"""Real translation: the text recipe (bytenet-train's `text` preset) for a time budget, scored everywhere.

    python experiments/translator.py --minutes=30 --name=recipe_30min
    python experiments/translator.py --minutes=30 --name=blind_30min --set source_blind=true
    python experiments/translator.py --minutes=4 --name=screen_small --set model=bytenet_small \\
        --screen

Trains with every `TrainConfig` field left to the `text` preset, except `time_budget_seconds`
(`--minutes`), `seed` and the `--set KEY=VALUE` overrides. The training data is
../shared/data/deen/train.* less 500 pairs drawn at random (seed 13) and held out as the
validation set (checkpoint selection, length-penalty tuning and the validation curve); the
held-out pairs keep the training mix of captions, Tatoeba and news, but they are written in
`train`'s order, which is sorted by origin, so the trainer's validation (the first
`valid_size`, 200, of them) is all Multi30k captions. None of the test sets is ever read
before the end. The exported SavedModel (what a user gets) then translates
multi30k-test2016 in full and the first `--test_sentences` sentences of newstest2015-2018 and
FLORES-200 devtest; BLEU and chrF come from sacrebleu, with the share of outputs that reached
the length bound (runaway repetition). A source-blind model (`--set source_blind=true`) sees
zeros in place of the encoder output and is given the real sources at test time, so its output
bound is the same.

`--screen` scores nothing but training loss (no validation, no test sets), for choosing the
recipe's values. `--rescore=EXPORT` scores a reported run's export again, with another
`--test_sentences` (0: every sentence), after checking that it reproduces the run's
multi30k-test2016 score; it replaces the result's test scores and records how.
Writes docs/results/translator_<name>.json and, for full runs, a PNG of
validation BLEU/chrF against training time (docs/results/translator_<name>.png).
"""

import argparse
import dataclasses
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bytenet_tf  # noqa: E402,F401  (before TensorFlow: the binaries' oneDNN setting)
import tensorflow as tf  # noqa: E402
from absl import logging  # noqa: E402

from bytenet_tf import decoding, inference, scoring  # noqa: E402
from bytenet_tf.training import checkpoints, evaluation, trainer  # noqa: E402
from bytenet_tf.training.config import TrainConfig  # noqa: E402
from experiments.common import (RESULTS, RUNS, commit, cpu_name, mean_last_loss,  # noqa: E402
                                read_metrics, write_pairs, write_results)
from pipelines import datasets, text  # noqa: E402
from shared_data import deen  # noqa: E402

TEST_SETS = ("multi30k-test2016", "newstest2015", "newstest2016", "newstest2017",
             "newstest2018", "flores200-devtest")
VALID_PAIRS = 500
SPLIT_SEED = 13


def held_out_split(folder):
    """Writes train.{de,en} less `VALID_PAIRS` random pairs, and those pairs as valid.{de,en}.

    Returns `(train_de, train_en, valid_de, valid_en, counts)`: paths and the held-out count
    per origin (train.origin).
    """
    # pipelines.text's reader: lines split on b"\n" only, a trailing CR removed, and files of
    # different lengths refused with both names and counts (train.* has no CR, so the split is
    # the one every earlier run used).
    sources, targets, _ = text.read_aligned_lines(deen("train.de"), deen("train.en"))
    _, origins, _ = text.read_aligned_lines(deen("train.de"), deen("train.origin"))
    held = set(random.Random(SPLIT_SEED).sample(range(len(sources)), VALID_PAIRS))
    keep = [i for i in range(len(sources)) if i not in held]
    held = sorted(held)
    train = write_pairs(os.path.join(folder, "train"), [sources[i] for i in keep],
                        [targets[i] for i in keep])
    valid = write_pairs(os.path.join(folder, "valid"), [sources[i] for i in held],
                        [targets[i] for i in held])
    counts = {}
    for i in held:
        name = origins[i].decode()
        counts[name] = counts.get(name, 0) + 1
    return (*train, *valid, counts)


def held_out_data(folder):
    """`(DataSpec, counts)`: the `text` data of `held_out_split(folder)`, validating on the
    held-out pairs, and their count per origin."""
    train_de, train_en, valid_de, valid_en, counts = held_out_split(folder)
    return datasets.DataSpec(dataset="text", source_file=train_de, target_file=train_en,
                             valid_source_file=valid_de, valid_target_file=valid_en), counts


def parse_overrides(pairs):
    """`{field: value}` of `--set KEY=VALUE` strings, each value in its `TrainConfig` field's
    type; exits naming a key that is not a field."""
    fields = {field.name: field for field in dataclasses.fields(TrainConfig)}
    overrides = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        if key not in fields or key == "data":
            raise SystemExit(f"--set {pair}: {key!r} is not a TrainConfig field.")
        kind = fields[key].type
        overrides[key] = (value.lower() in ("1", "true", "yes")) if kind is bool else kind(value)
    return overrides


def score_test_sets(export_path, model_config, test_sentences, test_sets=TEST_SETS):
    """Translates `test_sets` with the SavedModel; BLEU, chrF, bound share and 5 examples."""
    signature, _ = inference.load_saved_model(export_path)
    translate_fn = inference.as_translate_fn(signature)

    def bound(source):  # the SavedModel has no Translator.output_bound: rebuild it
        return decoding.output_bound(len(source), model_config["unfold_a"],
                                     model_config["unfold_b"], model_config["max_length"])

    scores = {}
    for test_set in test_sets:
        sources, references, _ = text.read_parallel_lines(deen(f"{test_set}.de"),
                                                          deen(f"{test_set}.en"))
        if test_sentences and not test_set.startswith("multi30k"):
            sources, references = sources[:test_sentences], references[:test_sentences]
        started = time.time()
        hypotheses = inference.translate_batches(translate_fn, sources, batch_size=64)
        result = scoring.score(hypotheses, references)
        result.update(reached_bound=evaluation.reached_bound(sources, hypotheses, bound),
                      decode_seconds=time.time() - started, examples=[
                          {"source": s.decode("utf-8", "replace"),
                           "hypothesis": h.decode("utf-8", "replace"),
                           "reference": r.decode("utf-8", "replace")}
                          for s, h, r in list(zip(sources, hypotheses, references))[:5]])
        scores[test_set] = result
        print(f"{test_set} ({len(sources)} sentences): BLEU {result['bleu']:.2f} chrF "
              f"{result['chrf']:.2f}, reached the bound {result['reached_bound']:.3f}", flush=True)
    return scores


def rescore(name, export_path, test_sentences):
    """Scores the export of the reported run `name` again; returns the updated results dict.

    Raises:
        SystemExit: no such result, or the export does not reproduce its multi30k-test2016 BLEU
            (then it is another run's export).
    """
    path = os.path.join(RESULTS, f"translator_{name}.json")
    if not os.path.exists(path):
        raise SystemExit(f"--rescore needs a reported run, and {path} does not exist.")
    with open(path) as f:
        result = json.load(f)
    stored = result["test"]["multi30k-test2016"]["bleu"]
    model_config = result["effective_config"]["model_config"]
    # The check first, so that a wrong export is refused before minutes of news decoding.
    tests = score_test_sets(export_path, model_config, test_sentences, TEST_SETS[:1])
    if abs(tests["multi30k-test2016"]["bleu"] - stored) > 0.01:
        raise SystemExit(f"{export_path} scores {tests['multi30k-test2016']['bleu']:.2f} BLEU on "
                         f"multi30k-test2016 where {name} reported {stored:.2f}: it is not that "
                         "run's export. Nothing was written.")
    tests.update(score_test_sets(export_path, model_config, test_sentences, TEST_SETS[1:]))
    return dict(result, test=tests, test_sentences=test_sentences, rescored={
        "command": f"python experiments/translator.py --name={name} --rescore=<its export> "
                   f"--test_sentences={test_sentences}",
        "commit": commit(), "cpu": cpu_name(),
        "previous_test_sentences": result.get("test_sentences", 200)})


def exported_weights(model_dir, results, model_config, candidate=None):
    """Rebuilds the exported model in Keras from its checkpoints (as `results["selection"]`
    chose it, or its `candidate`: "last", "average_last_K", "best_validated" or "ema", the
    moving average that the last checkpoint holds), to decode it in other ways than the
    SavedModel does."""
    from bytenet_tf import zoo
    config = {k: v for k, v in model_config.items() if k not in ("name", "trainable", "dtype")}
    # Every constructor argument is given; the zoo name also names the model, and so the
    # variable paths that the checkpoint stores.
    model = zoo.build_model(model_config["name"], **config)
    model({"source": tf.constant([[65, 2]]), "target": tf.constant([[1, 66]])})
    selection = results["selection"]
    chosen = candidate or selection["chosen"]
    if chosen not in selection["candidates"]:
        raise ValueError(f"`candidate` must be one of this run's selection candidates, "
                         f"{sorted(selection['candidates'])}. Received: candidate={chosen!r}")
    if chosen == "ema":
        from bytenet_tf.training import ema
        average = ema.WeightAverage(model, selection["candidates"]["ema"]["decay"])
        tf.train.Checkpoint(ema=average).restore(
            tf.train.latest_checkpoint(model_dir)).expect_partial()
        average.assign_to_model()
    elif chosen.startswith("average_last"):
        checkpoints.average_checkpoints(model, [os.path.join(model_dir, name) for name in
                                            selection["candidates"][chosen]["checkpoints"]])
    elif chosen == "best_validated":
        with open(os.path.join(model_dir, "best", "best.json")) as f:
            name = os.path.basename(json.load(f)["path"])
        checkpoints.restore_model(model, os.path.join(model_dir, "best", name))
    else:
        checkpoints.restore_model(model, tf.train.latest_checkpoint(model_dir))
    return model


def greedy_scores(model, test_set):
    """Greedy decoding of the exported weights on a whole test set: the 'before' of beam search."""
    translator = inference.Translator(model)
    sources, references, _ = text.read_parallel_lines(deen(f"{test_set}.de"),
                                                      deen(f"{test_set}.en"))
    # validate scores with sacrebleu and counts the outputs at the Translator's bound.
    result, _ = evaluation.validate(translator, sources, references)
    print(f"{test_set}, greedy: BLEU {result['bleu']:.2f} chrF {result['chrf']:.2f}, reached "
          f"the bound {result['reached_bound']:.3f}", flush=True)
    return result


def plot_curve(name, curve, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    valid = [row for row in curve if "valid_bleu" in row]
    train = [row for row in curve if "loss" in row and "train_seconds" in row]
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    if train:
        left.plot([row["train_seconds"] / 60 for row in train], [row["loss"] for row in train])
    left.set(xlabel="training minutes", ylabel="train loss (nats/byte)", title=name)
    # Validation rows carry the step, not the time: place them at the last logged time at or
    # before their step.
    def minutes(step):
        times = [row["train_seconds"] for row in train if row["step"] <= step]
        return times[-1] / 60 if times else None

    for key, label in (("valid_bleu", "BLEU"), ("valid_chrf", "chrF")):
        points = [(minutes(row["step"]), row[key]) for row in valid]
        points = [(t, v) for t, v in points if t is not None]
        if points:
            right.plot(*zip(*points), marker="o", label=label)
    right.set(xlabel="training minutes", ylabel="validation score (held-out train pairs)")
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--name", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a TrainConfig field to override, e.g. model=bytenet_small")
    parser.add_argument("--test_sentences", type=int, default=500,
                        help="sentences of each newstest and FLORES set (0: all); "
                             "multi30k-test2016 is always scored in full")
    parser.add_argument("--screen", action="store_true",
                        help="train only: no validation, selection, beam tuning or test sets")
    parser.add_argument("--finish", action="store_true",
                        help="score a run whose training finished (its results.json exists) but "
                             "whose scoring stopped, without training again")
    parser.add_argument("--rescore", metavar="EXPORT",
                        help="score this export of the reported run --name again, on "
                             "--test_sentences (0: all); no training")
    args = parser.parse_args()
    logging.set_verbosity(logging.INFO)
    if args.rescore:
        result = rescore(args.name, args.rescore, args.test_sentences)
        commit_text = result.pop("commit")
        print(f"wrote {write_results(f'translator_{args.name}', result, commit_text)}")
        return
    data_dir = os.path.join(RUNS, "translator", "data")
    data, held_out = held_out_data(data_dir)
    overrides = parse_overrides(args.set)
    if args.screen:
        overrides = dict(dict(eval_every=0, valid_size=1, select_by="last", average_last=0,
                              beam_size=1, export=False), **overrides)
    model_dir = os.path.join(RUNS, "translator", args.name)
    finished = os.path.join(model_dir, "results.json")
    if args.finish and not os.path.exists(finished):
        raise SystemExit(f"--finish needs a finished run, and {finished} does not exist.")
    if os.path.exists(model_dir) and not args.finish:
        raise SystemExit(f"{model_dir} exists; remove it or choose another --name (this script "
                         "reports fresh runs only; --finish scores a finished one).")
    config = TrainConfig(data=data, model_dir=model_dir, export_dir=os.path.join(model_dir, "export"),
                         time_budget_seconds=60 * args.minutes, seed=args.seed, progress=False,
                         **overrides)
    started = time.time()
    trained_at = os.path.join(model_dir, "trained_at_commit.txt")
    if args.finish:
        with open(finished) as f:
            results = json.load(f)
        trained = open(trained_at).read().strip() if os.path.exists(trained_at) else "unknown"
        commit_text = f"{trained} (trained); scored at {commit()} by --finish"
    else:
        os.makedirs(model_dir)
        with open(trained_at, "w") as f:
            f.write(commit() + "\n")
        results = trainer.train_and_evaluate(config)
        commit_text = None
    with open(os.path.join(model_dir, "config.json")) as f:
        effective = json.load(f)
    curve = read_metrics(model_dir)
    tests = greedy = None
    if not args.screen:
        tests = score_test_sets(results["export_path"], effective["model_config"],
                                args.test_sentences)
        greedy = {"multi30k-test2016": greedy_scores(
            exported_weights(model_dir, results, effective["model_config"]), "multi30k-test2016")}
        plot_curve(args.name, curve, os.path.join(RESULTS, f"translator_{args.name}.png"))
    command = (f"python experiments/translator.py --minutes={args.minutes:g} --name={args.name}"
               + "".join(f" --set {pair}" for pair in args.set)
               + (f" --seed={args.seed}" if args.seed else "") + (" --screen" if args.screen else "")
               + (f" --test_sentences={args.test_sentences}" if args.test_sentences != 500 else ""))
    path = write_results(f"translator_{args.name}", {
        "command": command, "minutes": args.minutes, "seed": args.seed, "overrides": overrides,
        "cpu": cpu_name(), "precision": effective.get("effective_precision"),
        "test_sentences": args.test_sentences,
        "held_out_validation": held_out, "steps": results["step"],
        "train_loss_last_10_logs": mean_last_loss(curve),
        "effective_config": {key: value for key, value in effective.items()
                             if key not in ("data",)},
        "results": results, "test": tests, "test_greedy_same_weights": greedy, "curve": curve,
        "wall_seconds": None if args.finish else time.time() - started,
        "scored_by": command + " --finish" if args.finish else command}, commit_text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
