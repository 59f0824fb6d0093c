"""Choosing what to export: the weights, and beam search's length penalty.

At the end of a run the chief exports the best, on the validation set, of: the last weights,
the mean of the last `average_last` checkpoints, the best checkpoint of the periodic
validation (`BestCheckpoint`, kept in `model_dir/best/`) and, with `ema_decay`, the moving
average of the weights, by `select_by` (`select_weights`).
With a beam, the length penalty is then tuned on the same set (`tune_length_penalty`).
"""

import json
import os

import tensorflow as tf
from absl import logging

from bytenet_tf import inference, scoring
from bytenet_tf.training import checkpoints, evaluation
from bytenet_tf.training.config import LENGTH_PENALTY_GRID
from pipelines import datasets


def selection_metric(config):
    """The validation score that selection maximizes (chrF when `select_by` is `last`)."""
    return "bleu" if config.select_by == "bleu" else "chrf"


class BestCheckpoint:
    """The model weights of the best validation so far, in `model_dir/best/`, with its scores.

    `best/best.json` holds the step and scores, so a resumed run keeps comparing against them.
    """

    def __init__(self, config, model, enabled):
        self.metric = selection_metric(config)
        self.directory = os.path.join(config.model_dir, "best")
        self.enabled = enabled
        self.manager = tf.train.CheckpointManager(
            tf.train.Checkpoint(model_variables=checkpoints.model_variables(model)), self.directory,
            max_to_keep=1)
        path = os.path.join(self.directory, "best.json")
        self.record = None
        if os.path.exists(path) and self.manager.latest_checkpoint:
            with open(path) as f:
                self.record = json.load(f)

    def offer(self, scores, step):
        """Saves the weights if `scores` beat the best so far."""
        if not self.enabled or (self.record and scores[self.metric] <= self.record[self.metric]):
            return
        path = self.manager.save(checkpoint_number=step)
        self.record = {"step": step, "bleu": scores["bleu"], "chrf": scores["chrf"], "path": path}
        with open(os.path.join(self.directory, "best.json"), "w") as f:
            json.dump(self.record, f, indent=2)

    @property
    def path(self):
        """The best checkpoint's path, found in `best/` even if the model_dir has moved."""
        if not self.record:
            return None
        return os.path.join(self.directory, os.path.basename(self.record["path"]))


def select_weights(config, model, translate_fn, manager, best, last_scores, average=None,
                   affordable=None, validate=None):
    """Loads the best of: the last weights, the mean of the last checkpoints, the best
    validated checkpoint and, with `average` (an `ema.WeightAverage`), the moving average of
    the weights (by `select_by` on the validation set).

    Args:
        config: a resolved `TrainConfig`.
        model, translate_fn, manager, best: the run's.
        last_scores: the validation scores of the last weights.
        average: the run's `ema.WeightAverage`, or None.
        affordable: optional callable, whether the time budget holds one more validation; a
            candidate it refuses is left out (`skipped` in its entry).
        validate: optional callable, the validation scores of the model's weights
            (default `evaluation.validation_scores`).

    Returns:
        `(selection, scores)`: the dict `{chosen, metric, candidates: {name: {step(s), bleu,
        chrf}}}`, and the full validation scores of the chosen weights.
    """
    metric = selection_metric(config)
    validate = validate or (lambda: evaluation.validation_scores(config, translate_fn))
    last = checkpoints.weights(model)
    candidates = {"last": {"bleu": last_scores["bleu"], "chrf": last_scores["chrf"]}}
    scored = {"last": last_scores}
    loaders = {"last": lambda: checkpoints.set_weights(model, last)}
    paths = manager.checkpoints[-config.average_last:] if config.average_last > 1 else []
    if len(paths) > 1:
        name = f"average_last_{len(paths)}"
        loaders[name] = lambda: checkpoints.average_checkpoints(model, paths)
        candidates[name] = {"checkpoints": [os.path.basename(path) for path in paths]}
    final_step = int(manager.checkpoints[-1].rsplit("-", 1)[1]) if manager.checkpoints else None
    if best.path and best.record["step"] != final_step:
        loaders["best_validated"] = lambda: checkpoints.restore_model(model, best.path)
        candidates["best_validated"] = {"step": best.record["step"]}
    if average is not None:
        loaders["ema"] = average.assign_to_model
        candidates["ema"] = {"decay": average.decay, "updates": int(average.updates.numpy())}
    if config.select_by == "last" or len(loaders) == 1:
        return {"chosen": "last", "metric": metric, "candidates": candidates}, last_scores
    for name, load in loaders.items():
        if name == "last":
            continue
        if affordable is not None and not affordable():
            candidates[name]["skipped"] = "time budget"
            logging.warning("Candidate %s left out: the time budget cannot hold its "
                            "validation.", name)
            continue
        load()
        scored[name] = validate()
        candidates[name].update(bleu=scored[name]["bleu"], chrf=scored[name]["chrf"])
        logging.info("Candidate %s: validation BLEU %.2f, chrF %.2f", name,
                     scored[name]["bleu"], scored[name]["chrf"])
    chosen = max(scored, key=lambda name: scored[name][metric])
    loaders[chosen]()
    logging.info("Exporting the %s weights (best validation %s).", chosen, metric)
    return {"chosen": chosen, "metric": metric, "candidates": candidates}, scored[chosen]


def penalty_outputs(candidates, sources, references, output_bound, grid=None):
    """What each length penalty chooses among the final beams of one search, and its scores.

    Args:
        candidates: `inference.BeamCandidates`'s output for `sources`.
        sources, references: lists of bytes.
        output_bound: callable, a source's output bound (`Translator.output_bound`).
        grid: the penalties (default `config.LENGTH_PENALTY_GRID`).

    Returns:
        `{alpha: (hypotheses, scores)}` in the order of `grid`, with
        `evaluation.score_translations`'s scores.
    """
    by_alpha = {}
    for alpha in grid or LENGTH_PENALTY_GRID:
        hypotheses = inference.BeamCandidates.choose(candidates, alpha)
        by_alpha[alpha] = hypotheses, evaluation.score_translations(sources, hypotheses,
                                                                    references, output_bound)
    return by_alpha


def tune_length_penalty(config, model, grid=None):
    """Beam search's length-normalization exponent that scores best on the validation set.

    One beam search (`config.beam_size`) of the validation set gives every final beam; each
    value of `grid` (default `config.LENGTH_PENALTY_GRID`) then chooses among them, as a
    `Translator` with that `length_alpha` would.

    Each value's entry also says how firmly the validation set ranks it
    (`scoring.bootstrap_spread` of the selection metric over 1,000 paired resamples): `std`,
    the standard deviation of its score, and `wins`, the share of resamples in which it scores
    highest. A chosen value that wins few resamples was chosen by the sample, not the model.

    Returns:
        `(best_alpha, {alpha: {bleu, chrf, reached_bound, std, wins}})`.
    """
    metric = selection_metric(config)
    sources, references = datasets.take_pairs(config.data, "validation", config.valid_size)
    candidates = inference.translate_batches(
        inference.BeamCandidates(model, config.beam_size), sources,
        progress=config.progress, description=f"beam {config.beam_size}")
    bound = inference.Translator(model).output_bound
    by_alpha = penalty_outputs(candidates, sources, references, bound, grid)
    results = {alpha: {key: scores[key] for key in ("bleu", "chrf", "reached_bound")}
               for alpha, (_, scores) in by_alpha.items()}
    outputs = [hypotheses for hypotheses, _ in by_alpha.values()]
    spread = scoring.bootstrap_spread(outputs, references, metric)
    for index, (alpha, scores) in enumerate(results.items()):
        scores.update(std=spread["std"][index], wins=spread["wins"][index])
        logging.info("Beam %d, length penalty %.2f: validation BLEU %.2f, chrF %.2f (%s std "
                     "%.2f, best in %.0f%% of bootstrap resamples)", config.beam_size, alpha,
                     scores["bleu"], scores["chrf"], metric, scores["std"], 100 * scores["wins"])
    return max(results, key=lambda alpha: results[alpha][metric]), results
