"""`train_and_evaluate(config)`: the one training function behind bytenet-train.

In: a `TrainConfig`. Out: checkpoints, TensorBoard logs and `config.json` in `model_dir`, a
SavedModel under `export_dir`, and a dict of results (also written to `model_dir/results.json`).

It reads as the run does:

    resolve the configuration, the strategy, the precision and the ops policy
      -> build the model and optimizer, refuse a model_dir that holds another model
      -> the training stream (`stream`), restore the checkpoint (`checkpoints`)
      -> the loop (`loop`: steps, logs, validation, checkpoints)
      -> choose the weights and the length penalty (`selection`), export (`finish`), inside
         the time budget (`BudgetClock` keeps what `EndPlan` says the end takes)

One custom training loop serves every strategy (`strategy.run` per step, `step`): Keras 3.15's
`model.fit` fails under MultiWorkerMirroredStrategy.
"""

import dataclasses
import json
import os
import time

import keras
import tensorflow as tf
from absl import logging

from bytenet_tf import inference, ops, zoo
from bytenet_tf.training import checkpoints, devices, loop, selection
from bytenet_tf.training.config import model_overrides, resolve
from bytenet_tf.training.ema import WeightAverage
from bytenet_tf.training.finish import INITIAL_RESERVE_SHARE, EndPlan, finish
from bytenet_tf.training.optimizer import make_optimizer
from bytenet_tf.training.schedule import BudgetClock
from bytenet_tf.training.step import make_train_step
from bytenet_tf.training.stream import TrainingStream, apply_length_share
from pipelines.options import ConfigError

TrainingDivergedError = loop.TrainingDivergedError


def _precision(config, strategy, stored):
    """`(policy, reason)`: `auto` reuses the precision an earlier run in the same `model_dir`
    recorded, and every worker of a multi-worker run takes the chief's choice."""
    if config.precision == "auto" and stored.get("effective_precision"):
        policy, reason = stored["effective_precision"], (
            "recorded in config.json when this model_dir's run began")
    else:
        policy, reason = devices.resolve_precision(config.precision)
    chosen = devices.chief_choice(strategy, policy, devices.PRECISIONS[1:])
    if chosen != policy:
        return chosen, f"the chief's choice (this worker would have chosen {policy}: {reason})"
    return policy, reason


def _build(config, policy, ops_policy):
    try:
        model = zoo.build_model(config.model, dtype=policy, ops_policy=ops_policy,
                                **model_overrides(config))
    except ValueError as error:
        raise ConfigError(f"The options do not make a {config.model}: {error}") from error
    budget = config.time_budget_seconds or 0.0
    clock = BudgetClock(budget, INITIAL_RESERVE_SHARE * budget)
    optimizer = make_optimizer(config, policy, clock.progress)
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    average = WeightAverage(model, config.ema_decay) if config.ema_decay else None
    return model, optimizer, step, clock, average


def _no_budget_across_workers(config, strategy, budget_from_preset):
    """A time budget stops workers by their own clocks, at different steps, and deadlocks
    their all-reduce: refused when asked for, and turned off (with a warning) when it comes
    from a preset."""
    if not (config.time_budget_seconds
            and isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)):
        return config
    if not budget_from_preset:
        raise ConfigError("`time_budget_seconds` would stop workers at different steps and "
                          "deadlock their all-reduce; use `train_steps` with "
                          "strategy='multi_worker'.")
    logging.warning("The %s preset's time budget (%g s) is off with strategy=multi_worker: "
                    "training runs to train_steps=%d; set --train_steps.",
                    config.data.dataset, config.time_budget_seconds, config.train_steps)
    return dataclasses.replace(config, time_budget_seconds=0.0)


def train_and_evaluate(config, prepare_model=None):
    """Trains, validates and exports as `config` says; resumes from `model_dir` if it can.

    Args:
        config: a `TrainConfig`; fields left None take the presets and defaults (`resolve`).
        prepare_model: optional callable, run on the freshly built model before a checkpoint is
            restored (an experiment's change of the initialization, say).

    Returns:
        dict with `step`, `train_loss`, `train_byte_accuracy`, `train_seconds`, `precision`,
        `ops_policy`, `data` (training-file counts and the length filter's), `valid` (the
        `scoring.score` dict and its `bleu_caveat`), `selection`, `length_penalty`,
        `exact_match_by_length` (digits only: see `evaluation.digits_exact_match_by_length`)
        and `export_path` (or None).

    Raises:
        TrainingDivergedError: the loss became NaN or infinite.
        ConfigError: a bad option or data file, or a `model_dir` that holds another model;
            the message names the `TrainConfig` field.
    """
    budget_from_preset = config.time_budget_seconds is None
    config = resolve(config)
    strategy, strategy_description = devices.resolve_strategy(config.strategy)
    stored = checkpoints.stored_config(config.model_dir)
    policy, reason = _precision(config, strategy, stored)
    try:
        ops_policy, ops_reason = ops.resolve_policy(config.ops_policy)
    except ValueError as error:
        raise ConfigError(str(error)) from error
    logging.info("Precision: %s (%s). Strategy: %s. Ops policy: %s (%s). TensorFlow's oneDNN "
                 "CPU kernels: %s.", policy, reason, strategy_description, ops_policy, ops_reason,
                 devices.onednn_description())
    if config.data.dataset == "newstest":
        logging.warning("dataset=newstest trains, validates and tests on the one set "
                        "newstest%d: its scores measure memorization, not translation.",
                        config.data.newstest_year)
    keras.utils.set_random_seed(config.seed)
    chief = devices.is_chief(strategy)
    config = _no_budget_across_workers(config, strategy, budget_from_preset)
    config = apply_length_share(config)
    checkpoint_dir = config.model_dir if chief else os.path.join(
        config.model_dir, f"worker_{devices.worker_index()}")
    with strategy.scope():
        model, optimizer, step, clock, average = _build(config, policy, ops_policy)
    if chief:
        values = dataclasses.asdict(config)
        values["data_file_bytes"] = checkpoints.data_file_bytes(values["data"])
        checkpoints.check_resumable(config.model_dir, stored, model.get_config(), values)
        os.makedirs(config.model_dir, exist_ok=True)
        values.update(effective_precision=policy, precision_reason=reason,
                      effective_strategy=strategy_description, effective_ops_policy=ops_policy,
                      ops_policy_reason=ops_reason, model_config=model.get_config())
        with open(os.path.join(config.model_dir, "config.json"), "w") as f:
            json.dump(values, f, indent=2, default=str)
    if prepare_model:
        prepare_model(model)
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    stream = TrainingStream(config, strategy, latest)
    checkpoint = checkpoints.run_checkpoint(model, optimizer, step, clock, stream, latest,
                                            average)
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir,
                                         max_to_keep=max(3, config.average_last))
    best = selection.BestCheckpoint(config, model, enabled=chief and config.select_by != "last")
    writer = tf.summary.create_file_writer(os.path.join(config.model_dir, "train")) if chief \
        else tf.summary.create_noop_writer()
    started = time.perf_counter()
    # One traced decoder per run: each new tf.function would trace the decoding loop again.
    translate_fn = inference.Translator(model)
    plan = EndPlan(config, average is not None,
                   len(model.encoder_blocks) + len(model.decoder_blocks))
    clock.start()
    if int(step.numpy()) < config.train_steps and not clock.spent():
        train_step = make_train_step(strategy, model, optimizer, step, config.label_smoothing,
                                     average)
        last = loop.train_loop(config, model, optimizer, step, clock, train_step, stream,
                               manager, writer, chief, translate_fn, best, plan)
    else:
        logging.info("Step %d of train_steps=%d, %.0f s of time_budget_seconds=%g: this run is "
                     "finished; not training again.", int(step.numpy()), config.train_steps,
                     float(clock.seconds.numpy()), config.time_budget_seconds)
        last = {"loss": None, "byte_accuracy": None}
    results = {"step": int(step.numpy()), "train_loss": last["loss"],
               "train_byte_accuracy": last["byte_accuracy"],
               "train_seconds": time.perf_counter() - started,
               "total_train_seconds": float(clock.seconds.numpy()), "precision": policy,
               "ops_policy": ops_policy, "data": stream.summary(), "valid": None,
               "selection": None, "length_penalty": None, "exact_match_by_length": None,
               "export_path": None, "budget": None}
    if chief:
        validated = last.get("valid") if last.get("valid_step") == results["step"] else None
        finish(config, model, translate_fn, manager, best, writer, results, clock, plan,
               validated, average)
        with open(os.path.join(config.model_dir, "results.json"), "w") as f:
            json.dump(results, f, indent=2)
    return results

