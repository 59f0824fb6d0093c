"""The training loop of bytenet-train: steps, logs, periodic validation and checkpoints."""

import json
import math
import os
import sys
import time

import tensorflow as tf
from absl import logging
from tqdm import tqdm

from bytenet_tf.training import evaluation


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


def summaries(writer, step, values, metrics_path=None):
    """Writes TensorBoard scalars, and one JSON line to `metrics_path` (for plots)."""
    with writer.as_default(step=step):
        for name, value in values.items():
            tf.summary.scalar(name, value)
    writer.flush()
    if metrics_path:
        with open(metrics_path, "a") as f:
            f.write(json.dumps(dict(values, step=step, time=time.time())) + "\n")


def train_loop(config, model, optimizer, step, clock, train_step, stream, manager, writer, chief,
               translate_fn, best, plan):
    """Trains from `step` to `train_steps` or the end of the time budget, and checkpoints.

    Logs every `log_every` steps (TensorBoard and, on the chief, `metrics.jsonl`), validates
    every `eval_every` steps (offering the scores to `best`), and checkpoints every
    `checkpoint_every` steps and at the last one.

    Args:
        config: a resolved `TrainConfig`.
        model, optimizer, step: the run's.
        clock: its `BudgetClock`.
        train_step: from `bytenet_tf.training.step.make_train_step`.
        stream: its `TrainingStream`.
        manager: a `tf.train.CheckpointManager` of the run's checkpoint.
        writer: a summary writer.
        chief: bool, whether this process writes summaries and validates.
        translate_fn: the `Translator` that validation uses.
        best: a `BestCheckpoint`.
        plan: the run's `finish.EndPlan`: each validation's seconds re-plan what the clock keeps
            for the end of the run.

    Returns:
        dict: the last `loss` and `byte_accuracy`, and `valid` and `valid_step` when it
        validated.

    Raises:
        TrainingDivergedError: the loss became NaN or infinite.
    """
    start = int(step.numpy())
    last = {"loss": float("nan"), "byte_accuracy": float("nan")}
    window_bytes, window_start = 0.0, time.perf_counter()
    metrics_path = os.path.join(config.model_dir, "metrics.jsonl") if chief else None
    bar = tqdm(total=config.train_steps, initial=start, desc="train", unit="step",
               file=sys.stderr, disable=not (config.progress and chief), dynamic_ncols=True)
    for current in range(start + 1, config.train_steps + 1):
        # The clock was brought up to now by `clock.start()` or by the previous step's end.
        loss, accuracy, count, gradient_norm, objective = train_step(stream.iterator)
        loss, accuracy = float(loss), float(accuracy)
        if not math.isfinite(loss):
            bar.close()
            good = manager.latest_checkpoint or "none (no checkpoint was saved yet)"
            raise TrainingDivergedError(
                f"The loss became {loss} at step {current}; training stopped and the last good "
                f"checkpoint is kept: {good}. Lower `learning_rate`, set `clip_norm`, or use "
                "precision='float32'.")
        window_bytes += float(count)
        last.update(loss=loss, byte_accuracy=accuracy)
        bar.update(1)
        if current % config.log_every == 0 or current == config.train_steps:
            elapsed = time.perf_counter() - window_start
            rate = window_bytes / max(elapsed, 1e-9)
            bar.set_postfix(loss=f"{loss:.3f}", acc=f"{accuracy:.3f}", bytes_s=f"{rate:.0f}")
            if chief:
                # `loss` and `bits_per_byte` are the plain cross-entropy whatever the label
                # smoothing; `smoothed_loss` is the objective the gradient follows.
                values = {"loss": loss, "bits_per_byte": loss / math.log(2),
                          "byte_accuracy": accuracy, "gradient_norm": float(gradient_norm),
                          "learning_rate": float(optimizer.learning_rate),
                          "bytes_per_second": rate, "train_seconds": clock.tick()}
                if config.label_smoothing:
                    values.update(smoothed_loss=float(objective),
                                  label_smoothing=config.label_smoothing)
                summaries(writer, current, values, metrics_path)
            window_bytes, window_start = 0.0, time.perf_counter()
        if chief and config.eval_every and current % config.eval_every == 0:
            last["valid"] = validate_and_log(config, translate_fn, writer, current, plan)
            clock.plan(plan.seconds())
            last["valid_step"] = current
            best.offer(last["valid"], current)
        clock.tick()
        if current % config.checkpoint_every == 0:
            manager.save(checkpoint_number=current)
        if clock.spent():
            logging.info("Training's part of the %.0f s time budget reached at step %d; %.0f s "
                         "are kept for validation, selection and export.",
                         config.time_budget_seconds, current, float(clock.reserve.numpy()))
            break
    bar.close()
    final = int(step.numpy())
    clock.tick()
    if final > start and final % config.checkpoint_every:
        manager.save(checkpoint_number=final)
    logging.info("Length filter: %s", stream.length_filter.counts())
    return last


def timed_validation(config, translate_fn, plan=None):
    """`evaluation.validation_scores`; its seconds go to `plan` (a `finish.EndPlan`) when one is
    given."""
    start = time.perf_counter()
    results = evaluation.validation_scores(config, translate_fn)
    if plan is not None:
        plan.measured_validation(time.perf_counter() - start)
    return results


def validate_and_log(config, translate_fn, writer, current, plan=None):
    """`timed_validation`, written to TensorBoard, `metrics.jsonl` and the log."""
    results = timed_validation(config, translate_fn, plan)
    summaries(writer, current, {"valid_bleu": results["bleu"], "valid_chrf": results["chrf"],
                                 "valid_exact_match": results["exact_match"],
                                 "valid_reached_bound": results.get("reached_bound", 0.0)},
               os.path.join(config.model_dir, "metrics.jsonl"))
    logging.info("Step %d validation: BLEU %.2f, chrF %.2f, exact match %.4f on %d sentences%s",
                 current, results["bleu"], results["chrf"], results["exact_match"],
                 results["sentences"], results["bleu_caveat"])
    return results
