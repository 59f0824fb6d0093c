"""The end of a run, inside its time budget: validate, choose the weights and the length
penalty, export.

`EndPlan` says how long the end takes, from the measured seconds of a greedy validation; the
training loop keeps that much of the budget (`BudgetClock.plan`). `finish` then runs the end
and leaves out what the rest of the budget cannot hold (a selection candidate, the length
penalty's search), saying so in the log and in `results.json`.
"""

import json
import os
import time

from absl import logging

from bytenet_tf import decoding, export
from bytenet_tf.training import evaluation, loop, selection

# The seconds of a beam search of the validation set per beam, as a share of a greedy one's:
# 30.4 s against 8.6 s for beam 4 on 200 newstest2013 sentences at the end of a 30-minute text
# recipe run (docs/results.md, "The time budget in wall-clock time"). `EndPlan` uses it until
# the run has measured its own.
BEAM_COST_PER_BEAM = 0.9
# Writing the SavedModel with a beam: a fixed part, and tracing the decoder, which grows with
# the blocks. Measured on a 2-core AMD EPYC Zen 4: 6.5 s for the text recipe's 30 blocks in
# that run, 5.8-6.3 s alone, and 2.4-4.3 s for a model of 10 blocks at hidden 16.
EXPORT_SECONDS = 3.5
EXPORT_SECONDS_PER_BLOCK = 0.1
# Loading a selection candidate's weights before its validation (reading and averaging the
# last 5 checkpoints, or reading the best one). In three 30-minute hidden-256 text runs on the
# Zen 4, the end took about 4-5 s more than its validations, its search and the planned export,
# for two candidates; in one of them the length penalty's search then missed the budget by
# under a second and the export took the untuned default.
CANDIDATE_LOAD_SECONDS = 1.5
# The plan's allowance for what it does not time: a share and seconds (the last checkpoint,
# config.json: 1.8 s in that run).
MARGIN = 1.15
OVERHEAD_SECONDS = 2.0
# What the end is planned to take before any validation was measured, as a share of the budget.
INITIAL_RESERVE_SHARE = 0.05


class EndPlan:
    """The seconds the end of a run takes: its greedy validations, the beam search of the
    length penalty and the export.

    Args:
        config: a resolved `TrainConfig`.
        average: whether the run keeps a moving average of the weights (one more candidate).
        blocks: the model's residual blocks, encoder and decoder (what the export traces).
    """

    def __init__(self, config, average=False, blocks=30):
        self.config = config
        self.blocks = blocks
        # Greedy validations at the end: the last weights (when the loop has not just validated
        # them) and every candidate of `selection.select_weights` besides them.
        self.validations = 1
        if config.select_by != "last":
            self.validations += (config.average_last > 1) + 1 + bool(average)
        self.validation_seconds = None
        self.beam_seconds = None

    def measured_validation(self, seconds):
        self.validation_seconds = seconds

    def validation(self):
        """The seconds of one greedy validation (0 until one was measured)."""
        return self.validation_seconds or 0.0

    def candidate(self):
        """The seconds of one selection candidate: loading its weights and validating them."""
        return CANDIDATE_LOAD_SECONDS + self.validation()

    def tuning(self):
        """The seconds of the length penalty's beam search (0 when there is none)."""
        config = self.config
        if config.beam_size == 1 or config.length_penalty is not None or not config.export:
            return 0.0
        return self.beam_seconds or self.validation() * BEAM_COST_PER_BEAM * config.beam_size

    def export(self):
        if not self.config.export:
            return 0.0
        return EXPORT_SECONDS + EXPORT_SECONDS_PER_BLOCK * self.blocks

    def seconds(self):
        """The whole end, as planned now, with the allowance for what it does not time."""
        timed = (self.validation() + (self.validations - 1) * self.candidate() + self.tuning()
                 + self.export())
        return MARGIN * timed + OVERHEAD_SECONDS


def finish(config, model, translate_fn, manager, best, writer, results, clock, plan,
           validated=None, average=None):
    """The chief's end of a run: validate, choose the weights and the length penalty, export.

    Fills `valid` (of the exported weights, greedy), `selection`, `length_penalty`,
    `exact_match_by_length`, `export_path` and `budget` of `results`, and records the length
    penalty in `config.json`. `validated`: the scores of the last weights when the loop has
    just validated them. With a time budget, a selection candidate or the length penalty's
    search is left out when the rest of the budget cannot hold it (and the export).
    """
    last_scores = validated or loop.validate_and_log(config, translate_fn, writer,
                                                     results["step"], plan)

    def affordable(seconds):
        return clock.remaining() >= seconds + plan.tuning() + plan.export()

    results["selection"], results["valid"] = selection.select_weights(
        config, model, translate_fn, manager, best, last_scores, average,
        affordable=lambda: affordable(plan.candidate()),
        validate=lambda: loop.timed_validation(config, translate_fn, plan))
    if config.data.dataset == "digits":
        results["exact_match_by_length"] = evaluation.digits_exact_match_by_length(
            config, translate_fn)
    alpha, tried = config.length_penalty, None
    if plan.tuning():
        if clock.remaining() >= plan.tuning() + plan.export():
            start = time.perf_counter()
            alpha, tried = selection.tune_length_penalty(config, model)
            plan.beam_seconds = time.perf_counter() - start
        else:
            logging.warning("The time budget leaves %.0f s, too few for the length penalty's "
                            "beam search (about %.0f s) and the export: exporting with the "
                            "default length penalty %.2f.", clock.remaining(), plan.tuning(),
                            decoding.DEFAULT_LENGTH_PENALTY)
    alpha = decoding.DEFAULT_LENGTH_PENALTY if alpha is None else alpha
    results["length_penalty"] = {"value": alpha, "tuned_on_validation": tried}
    config_path = os.path.join(config.model_dir, "config.json")
    with open(config_path) as f:
        stored = json.load(f)
    stored.update(effective_length_penalty=alpha, length_penalty_scores=tried,
                  exported_weights=results["selection"]["chosen"])
    with open(config_path, "w") as f:
        json.dump(stored, f, indent=2, default=str)
    if config.export:
        results["export_path"] = export.export_saved_model(
            model, config.export_dir, beam_size=config.beam_size, length_alpha=alpha,
            jit_compile=config.jit_compile_decode, precision=config.export_precision)
        logging.info("SavedModel: %s", results["export_path"])
    seconds = clock.tick() if clock.budget else None
    results["budget"] = {"time_budget_seconds": clock.budget, "seconds": seconds,
                         "reserved_for_the_end": float(clock.reserve.numpy()),
                         "validation_seconds": plan.validation_seconds,
                         "beam_search_seconds": plan.beam_seconds}
    if clock.budget:
        logging.info("Time budget: %.0f s of %.0f s spent, the end included (%.0f s were kept "
                     "for it).", seconds, clock.budget, float(clock.reserve.numpy()))
