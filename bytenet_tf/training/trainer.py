"""`train_and_evaluate(config)`: the one training function behind bytenet-train.

In: a `TrainConfig`. Out: checkpoints, TensorBoard logs and `config.json` in `model_dir`, a
SavedModel under `export_dir`, and a dict of results (also written to `model_dir/results.json`).

One custom training loop serves every strategy (`strategy.run` per step): Keras 3.15's
`model.fit` fails under MultiWorkerMirroredStrategy. The loss is the cross-entropy summed over the
non-PAD target bytes of a replica, divided by the non-PAD count summed over all replicas, so the
gradients that Keras sums across replicas are those of the global per-byte mean.

A checkpoint holds the model, the optimizer, the step, the dropout layers' seed states, the
length filter's counts and, where
TensorFlow can save it (the default strategy, which `auto` picks on one CPU or one GPU), the
data iterator: a resumed run continues the same stream of batches, shuffle buffer included. A
mirrored or multi-worker iterator cannot be saved in TensorFlow 2.21; a resumed run then
reshuffles with seed `seed + step` rather than replay the first batches, and logs so.
"""

import dataclasses
import json
import math
import os
import sys
import time

import keras
import tensorflow as tf
from absl import logging
from tqdm import tqdm

from bytenet_tf import export, inference, ops, zoo
from bytenet_tf.training import devices, evaluation
from bytenet_tf.training.config import LENGTH_PENALTY_GRID, model_overrides, resolve
from bytenet_tf.training.optimizer import Adam
from bytenet_tf.training.schedule import WarmupCosineDecay, WarmupRsqrtDecay
from pipelines import datasets, preprocessing


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


def _config_dict(config, effective, model):
    values = dataclasses.asdict(config)
    values.update(effective)
    values["model_config"] = model.get_config()
    return values


def _check_resumable(model_dir, model_config):
    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(path):
        return
    with open(path) as f:
        stored = json.load(f).get("model_config", {})
    keys = ("hidden_size", "num_stacks", "kernel_size", "block", "normalization", "activation")
    different = {k: (stored.get(k), model_config[k]) for k in keys if stored.get(k) != model_config[k]}
    if stored and different:
        raise ValueError(f"model_dir={model_dir} holds a run with a different model "
                         f"({', '.join(f'{k}: {a} there, {b} now' for k, (a, b) in different.items())}). "
                         "Resume with the same settings, or choose a new `model_dir`.")


def make_schedule(config, progress=None):
    """The learning-rate schedule that a resolved `config` names.

    Args:
        progress: float32 scalar variable, the share of the time budget spent (for `cosine`).
    """
    warmup = max(config.warmup_steps, 1)
    if not config.decay_learning_rate:
        return WarmupRsqrtDecay(config.learning_rate, warmup, decay=False)
    if config.schedule == "cosine":
        return WarmupCosineDecay(config.learning_rate, warmup, config.train_steps,
                                 config.learning_rate_floor, progress)
    return WarmupRsqrtDecay(config.learning_rate, warmup)


def make_optimizer(config, policy, progress=None):
    """The binary's optimizer: Adam with warm-up and decay, clipping, and loss scaling for float16."""
    optimizer = Adam(
        make_schedule(config, progress),
        beta_2=config.adam_beta_2, epsilon=config.adam_epsilon, clipnorm=config.clip_norm or None)
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


class _Clock:
    """Training time over every run in a `model_dir`, and the share of the budget it is.

    `seconds` (float64, checkpointed) is the training time of the earlier runs plus this one's;
    `progress` (float32, not checkpointed) is `seconds / time_budget_seconds`, which the cosine
    schedule reads.
    """

    def __init__(self, budget):
        self.budget = budget
        self.seconds = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="train_seconds")
        self.progress = tf.Variable(0.0, dtype=tf.float32, trainable=False,
                                    name="budget_progress")
        self._base = 0.0
        self._start = None

    def start(self):
        self._base, self._start = float(self.seconds.numpy()), time.perf_counter()
        self.tick()

    def tick(self):
        """Brings `seconds` and `progress` up to now; returns the seconds."""
        seconds = self._base + time.perf_counter() - self._start
        self.seconds.assign(seconds)
        if self.budget:
            self.progress.assign(min(seconds / self.budget, 1.0))
        return seconds

    def spent(self):
        """Whether the budget is spent (never without one)."""
        return bool(self.budget) and float(self.seconds.numpy()) >= self.budget


def _build(config, policy, ops_policy):
    model = zoo.build_model(config.model, dtype=policy, ops_policy=ops_policy,
                            **model_overrides(config))
    clock = _Clock(config.time_budget_seconds)
    optimizer = make_optimizer(config, policy, clock.progress)
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    return model, optimizer, step, clock


def _loss_scale(optimizer):
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return tf.cast(optimizer.dynamic_scale, tf.float32)
    return tf.constant(1.0)


def make_train_step(strategy, model, optimizer, step):
    """The binary's training step: one `tf.function` that takes an iterator of batches.

    Args:
        strategy: a `tf.distribute.Strategy`; `model`, `optimizer` and `step` were built in its
            scope.
        model: a `ByteNet`.
        optimizer: a Keras optimizer, built on `model.trainable_variables`.
        step: an int64 `tf.Variable`, incremented once per call.

    Returns:
        `train_step(iterator)` -> `(loss, byte_accuracy, target_bytes, gradient_norm)` float32
        scalars: the mean cross-entropy per non-PAD target byte of the global batch, the share
        of those bytes predicted right, their count, and the global norm of the gradient before
        clipping (unscaled under loss scaling; with several replicas, the square root of the
        sum of the replicas' squared norms, which is not the norm of their summed gradient).
    """
    def replica_step(features, labels):
        with tf.GradientTape() as tape:
            logits = model(features, training=True)
            local_sum, mask = evaluation.masked_cross_entropy(labels, logits)
            local_count = tf.reduce_sum(mask)
            global_count = tf.distribute.get_replica_context().all_reduce("sum", local_count)
            loss = local_sum / tf.maximum(global_count, 1.0)
            scaled_loss = optimizer.scale_loss(loss)
        gradients = tape.gradient(scaled_loss, model.trainable_variables)
        squared_norm = tf.square(tf.linalg.global_norm(gradients) / _loss_scale(optimizer))
        optimizer.apply(gradients, model.trainable_variables)
        predictions = tf.argmax(logits, axis=-1, output_type=labels.dtype)
        correct = tf.reduce_sum(tf.cast(tf.equal(predictions, labels), tf.float32) * mask)
        return local_sum, local_count, correct, squared_norm

    @tf.function
    def train_step(iterator):
        features, labels = next(iterator)
        per_replica = strategy.run(replica_step, args=(features, labels))
        loss_sum, count, correct, squared_norm = (strategy.reduce("sum", value, axis=None)
                                                  for value in per_replica)
        step.assign_add(1)
        return (loss_sum / tf.maximum(count, 1.0), correct / tf.maximum(count, 1.0), count,
                tf.sqrt(squared_norm))

    return train_step


class _Data:
    """The training stream: its iterator, length filter, file counts, and how it resumes."""

    def __init__(self, config, strategy, checkpoint_path):
        replicas = strategy.num_replicas_in_sync
        if config.batch_size % replicas:
            raise ValueError(f"batch_size={config.batch_size} must be a multiple of the "
                             f"{replicas} replicas in sync.")
        with tf.init_scope():
            self.length_filter = preprocessing.LengthFilter(config.train_max_length)
        self.stats = []
        resumed_step, self.has_saved_stream = _stream_position(checkpoint_path)
        # Without a saved stream, a resumed run reshuffles instead of replaying the first batches.
        seed = config.seed if self.has_saved_stream else config.seed + resumed_step
        pipeline = preprocessing.PipelineConfig(
            max_length=config.train_max_length, batch_size=config.batch_size // replicas,
            tokens_per_batch=config.tokens_per_batch // replicas, bucketing=config.bucketing,
            shuffle_buffer=config.shuffle_buffer,
            unicode_normalization=config.unicode_normalization, seed=seed)

        def dataset_fn(input_context):
            pairs, stats = datasets.load_pairs_with_stats(config.data, "train")
            if stats is not None:
                self.stats.append(stats)
            return preprocessing.make_batches(pairs, pipeline, input_context, self.length_filter)

        self.iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
        self.savable = isinstance(self.iterator, tf.__internal__.tracking.Trackable)
        if resumed_step and not self.has_saved_stream:
            logging.info("The checkpoint holds no data-iterator state (%s); the data is "
                         "reshuffled with seed %d.", "this strategy's iterator cannot be saved"
                         if not self.savable else "an older checkpoint", seed)
        for stats in self.stats:
            logging.info("Training data: %d lines, %d pairs kept, %d pairs with an empty side "
                         "skipped.", stats.lines, stats.kept, stats.empty)

    def trackables(self):
        """What a checkpoint keeps of the stream."""
        values = {"length_filter": self.length_filter}
        if self.savable:
            values["iterator"] = self.iterator
        return values

    def summary(self):
        stats = self.stats[0] if self.stats else None
        return {"train_files": dataclasses.asdict(stats) if stats else None,
                "length_filter": self.length_filter.counts()}


def _stream_position(checkpoint_path):
    """`(step, holds_iterator)` of a checkpoint, read once; `(0, False)` when there is none."""
    if not checkpoint_path:
        return 0, False
    reader = tf.train.load_checkpoint(checkpoint_path)
    keys = reader.get_variable_to_shape_map()
    step_key = "step/.ATTRIBUTES/VARIABLE_VALUE"
    step = int(reader.get_tensor(step_key)) if step_key in keys else 0
    return step, any(key.startswith("iterator/") for key in keys)


def _summaries(writer, step, values, metrics_path=None):
    """Writes TensorBoard scalars, and one JSON line to `metrics_path` (for plots)."""
    with writer.as_default(step=step):
        for name, value in values.items():
            tf.summary.scalar(name, value)
    writer.flush()
    if metrics_path:
        with open(metrics_path, "a") as f:
            f.write(json.dumps(dict(values, step=step, time=time.time())) + "\n")


def _train_loop(config, model, optimizer, step, clock, train_step, data, manager, writer, chief,
                translate_fn, best):
    start = int(step.numpy())
    last = {"loss": float("nan"), "byte_accuracy": float("nan")}
    window_bytes, window_start = 0.0, time.perf_counter()
    clock.start()
    metrics_path = os.path.join(config.model_dir, "metrics.jsonl") if chief else None
    bar = tqdm(total=config.train_steps, initial=start, desc="train", unit="step",
               file=sys.stderr, disable=not (config.progress and chief), dynamic_ncols=True)
    for current in range(start + 1, config.train_steps + 1):
        # The clock was brought up to now by `clock.start()` or by the previous step's end.
        loss, accuracy, count, gradient_norm = train_step(data.iterator)
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
                _summaries(writer, current, {
                    "loss": loss, "bits_per_byte": loss / math.log(2), "byte_accuracy": accuracy,
                    "gradient_norm": float(gradient_norm),
                    "learning_rate": float(optimizer.learning_rate), "bytes_per_second": rate,
                    "train_seconds": clock.tick()}, metrics_path)
            window_bytes, window_start = 0.0, time.perf_counter()
        if chief and config.eval_every and current % config.eval_every == 0:
            last["valid"] = _validate_and_log(config, translate_fn, writer, current)
            last["valid_step"] = current
            best.offer(last["valid"], current)
        clock.tick()
        if current % config.checkpoint_every == 0:
            manager.save(checkpoint_number=current)
        if clock.spent():
            logging.info("Time budget of %.0f s reached at step %d.", config.time_budget_seconds,
                         current)
            break
    bar.close()
    final = int(step.numpy())
    clock.tick()
    if final > start and final % config.checkpoint_every:
        manager.save(checkpoint_number=final)
    logging.info("Length filter: %s", data.length_filter.counts())
    return last


def _validate_and_log(config, translate_fn, writer, current):
    results = evaluation.validation_scores(config, translate_fn)
    _summaries(writer, current, {"valid_bleu": results["bleu"], "valid_chrf": results["chrf"],
                                 "valid_exact_match": results["exact_match"],
                                 "valid_reached_bound": results.get("reached_bound", 0.0)},
               os.path.join(config.model_dir, "metrics.jsonl"))
    logging.info("Step %d validation: BLEU %.2f, chrF %.2f, exact match %.4f on %d sentences%s",
                 current, results["bleu"], results["chrf"], results["exact_match"],
                 results["sentences"], results["bleu_caveat"])
    return results


def _metric(config):
    """The validation score that selection maximizes (chrF when `select_by` is `last`)."""
    return "bleu" if config.select_by == "bleu" else "chrf"


class _BestCheckpoint:
    """The model weights of the best validation so far, in `model_dir/best/`, with its scores.

    `best/best.json` holds the step and scores, so a resumed run keeps comparing against them.
    """

    def __init__(self, config, model, enabled):
        self.metric = _metric(config)
        self.directory = os.path.join(config.model_dir, "best")
        self.enabled = enabled
        self.manager = tf.train.CheckpointManager(
            tf.train.Checkpoint(model_variables=model_variables(model)), self.directory,
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


def _weights(model):
    return [variable.numpy() for variable in model_variables(model).values()]


def _set_weights(model, values):
    for variable, value in zip(model_variables(model).values(), values):
        variable.assign(value)


def average_checkpoints(model, checkpoint_paths):
    """Sets `model`'s variables to their mean over `checkpoint_paths` (bytenet-train checkpoints).

    Integer variables take the last checkpoint's value. Returns `model`.
    """
    if not checkpoint_paths:
        raise ValueError("average_checkpoints needs at least one checkpoint path.")
    total = None
    for path in checkpoint_paths:
        values = _weights(restore_model(model, path))
        if total is None:
            total = [value.astype("float64") if value.dtype.kind == "f" else value
                     for value in values]
        else:
            total = [t + v if v.dtype.kind == "f" else v for t, v in zip(total, values)]
    count = len(checkpoint_paths)
    _set_weights(model, [t / count if t.dtype.kind == "f" else t for t in total])
    return model


def _select_weights(config, model, translate_fn, manager, best, last_scores):
    """Loads the best of: the last weights, the mean of the last checkpoints, the best
    validated checkpoint (by `select_by` on the validation set).

    Returns:
        dict `{chosen, candidates: {name: {step(s), bleu, chrf}}}`.
    """
    metric = _metric(config)
    last = _weights(model)
    candidates = {"last": {"bleu": last_scores["bleu"], "chrf": last_scores["chrf"]}}
    loaders = {"last": lambda: _set_weights(model, last)}
    paths = manager.checkpoints[-config.average_last:] if config.average_last > 1 else []
    if len(paths) > 1:
        name = f"average_last_{len(paths)}"
        loaders[name] = lambda: average_checkpoints(model, paths)
        candidates[name] = {"checkpoints": [os.path.basename(path) for path in paths]}
    final_step = int(manager.checkpoints[-1].rsplit("-", 1)[1]) if manager.checkpoints else None
    if best.path and best.record["step"] != final_step:
        loaders["best_validated"] = lambda: restore_model(model, best.path)
        candidates["best_validated"] = {"step": best.record["step"]}
    if config.select_by == "last" or len(loaders) == 1:
        return {"chosen": "last", "metric": metric, "candidates": candidates}
    for name, load in loaders.items():
        if name == "last":
            continue
        load()
        scores = evaluation.validation_scores(config, translate_fn)
        candidates[name].update(bleu=scores["bleu"], chrf=scores["chrf"])
        logging.info("Candidate %s: validation BLEU %.2f, chrF %.2f", name, scores["bleu"],
                     scores["chrf"])
    chosen = max(candidates, key=lambda name: candidates[name][metric])
    loaders[chosen]()
    logging.info("Exporting the %s weights (best validation %s).", chosen, metric)
    return {"chosen": chosen, "metric": metric, "candidates": candidates}


def tune_length_penalty(config, model, grid=None):
    """Beam search's length-normalization exponent that scores best on the validation set.

    Tries each value of `grid` (default `config.LENGTH_PENALTY_GRID`) with `config.beam_size`.

    Returns:
        `(best_alpha, {alpha: {bleu, chrf, reached_bound}})`.
    """
    metric = _metric(config)
    results = {}
    for alpha in grid or LENGTH_PENALTY_GRID:
        translator = inference.Translator(model, beam_size=config.beam_size, length_alpha=alpha)
        scores = evaluation.validation_scores(config, translator)
        results[alpha] = {key: scores[key] for key in ("bleu", "chrf", "reached_bound")}
        logging.info("Beam %d, length penalty %.2f: validation BLEU %.2f, chrF %.2f",
                     config.beam_size, alpha, scores["bleu"], scores["chrf"])
    return max(results, key=lambda alpha: results[alpha][metric]), results


def _dropout_seeds(model):
    """The dropout layers' seed-generator states, which `model.weights` leaves out.

    Without them in the checkpoint, a resumed run would draw the masks of its first steps again.
    """
    return [v for v in model.variables if "seed_generator_state" in v.path]


def model_variables(model):
    """Every variable of `model` by its path: what a checkpoint needs to rebuild the model.

    Keras 3 layers kept in Python lists (ByteNet's blocks) are not children of the model in
    TensorFlow's object graph, so `tf.train.Checkpoint(model=model)` alone saves only the
    embeddings and the output projection. The blocks' trainable weights then reach a training
    checkpoint only through the optimizer, and their non-trainable ones (batch norm's moving
    statistics) not at all. Checkpoints therefore also hold this dict. The dropout layers'
    seed-generator states are left out: their paths carry a counter that runs over the whole
    process (`seed_generator_33/...` in the second model built), so they are checkpointed by
    their order instead (`_dropout_seeds`).
    """
    return {variable.path: variable for variable in model.variables
            if "seed_generator_state" not in variable.path}


def _holds_model_variables(checkpoint_path):
    return any(name.startswith("model_variables/")
               for name, _ in tf.train.list_variables(checkpoint_path))


def restore_model(model, checkpoint_path):
    """Restores the weights of a bytenet-train checkpoint into a built `model` of its config.

    The variables are matched by path, so build the model with the run's zoo name and
    overrides (its `config.json`, `model_config`).

    Raises:
        ValueError: the checkpoint predates `model_variables` (and so lacks batch norm's
            moving statistics).
        AssertionError: (TensorFlow's) a variable of `model` has no value in the checkpoint:
            the model's config differs from the run's.
    """
    if not _holds_model_variables(checkpoint_path):
        raise ValueError(f"{checkpoint_path} has no `model_variables` (written before they "
                         "were saved); resume it with bytenet-train, which restores its "
                         "weights through the optimizer.")
    tf.train.Checkpoint(model_variables=model_variables(model)).restore(
        checkpoint_path).expect_partial().assert_existing_objects_matched()
    return model


def _restore(model, optimizer, step, clock, data, checkpoint_path):
    """Restores a checkpoint; one without the stream's state restores the model alone."""
    full = tf.train.Checkpoint(model=model, model_variables=model_variables(model),
                               optimizer=optimizer, step=step, train_seconds=clock.seconds,
                               dropout_seeds=_dropout_seeds(model), **data.trackables())
    if not checkpoint_path:
        return full
    parts = dict(model=model, optimizer=optimizer, step=step)
    if any(name.startswith("train_seconds/") for name, _ in tf.train.list_variables(checkpoint_path)):
        parts["train_seconds"] = clock.seconds
    else:
        logging.warning("%s predates `train_seconds`: its training time is not known, so the "
                        "time budget counts from this run.", checkpoint_path)
    if _holds_model_variables(checkpoint_path):
        parts["model_variables"] = model_variables(model)
    else:
        logging.warning("%s predates `model_variables`: the weights come back through the "
                        "optimizer, but batch norm's moving statistics were never saved.",
                        checkpoint_path)
    if data.has_saved_stream or not data.savable:
        parts.update(dropout_seeds=_dropout_seeds(model), **data.trackables())
    tf.train.Checkpoint(**parts).restore(checkpoint_path).assert_existing_objects_matched()
    logging.info("Resumed from %s at step %d.", checkpoint_path, int(step.numpy()))
    return full


def train_and_evaluate(config):
    """Trains, validates and exports as `config` says; resumes from `model_dir` if it can.

    Returns:
        dict with `step`, `train_loss`, `train_byte_accuracy`, `train_seconds`, `precision`,
        `ops_policy`, `data` (training-file counts and the length filter's), `valid` (the
        `scoring.score` dict and its `bleu_caveat`), `exact_match_by_length` (digits only:
        see `evaluation.digits_exact_match_by_length`) and `export_path` (or None).

    Raises:
        TrainingDivergedError: the loss became NaN or infinite.
        ValueError: a bad option; the message names the `TrainConfig` field.
    """
    budget_from_preset = config.time_budget_seconds is None
    config = resolve(config)
    strategy, strategy_description = devices.resolve_strategy(config.strategy)
    policy, reason = devices.resolve_precision(config.precision)
    ops_policy, ops_reason = ops.resolve_policy(config.ops_policy)
    logging.info("Precision: %s (%s). Strategy: %s. Ops policy: %s (%s).", policy, reason,
                 strategy_description, ops_policy, ops_reason)
    keras.utils.set_random_seed(config.seed)
    chief = devices.is_chief(strategy)
    if config.time_budget_seconds and isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        # Workers that stopped by their own clocks could stop at different steps and deadlock
        # their all-reduce.
        if not budget_from_preset:
            raise ValueError("`time_budget_seconds` would stop workers at different steps and "
                             "deadlock their all-reduce; use `train_steps` with "
                             "strategy='multi_worker'.")
        logging.warning("The %s preset's time budget (%g s) is off with strategy=multi_worker: "
                        "training runs to train_steps=%d; set --train_steps.",
                        config.data.dataset, config.time_budget_seconds, config.train_steps)
        config = dataclasses.replace(config, time_budget_seconds=0.0)
    checkpoint_dir = config.model_dir if chief else os.path.join(
        config.model_dir, f"worker_{devices.worker_index()}")
    with strategy.scope():
        model, optimizer, step, clock = _build(config, policy, ops_policy)
    if chief:
        _check_resumable(config.model_dir, model.get_config())
        os.makedirs(config.model_dir, exist_ok=True)
        effective = {"effective_precision": policy, "effective_strategy": strategy_description,
                     "effective_ops_policy": ops_policy, "ops_policy_reason": ops_reason}
        with open(os.path.join(config.model_dir, "config.json"), "w") as f:
            json.dump(_config_dict(config, effective, model), f, indent=2, default=str)
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    data = _Data(config, strategy, latest)
    checkpoint = _restore(model, optimizer, step, clock, data, latest)
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir,
                                         max_to_keep=max(3, config.average_last))
    best = _BestCheckpoint(config, model, enabled=chief and config.select_by != "last")
    writer = tf.summary.create_file_writer(os.path.join(config.model_dir, "train")) if chief \
        else tf.summary.create_noop_writer()
    started = time.perf_counter()
    # One traced decoder per run: each new tf.function would trace the decoding loop again.
    translate_fn = inference.Translator(model)
    if int(step.numpy()) < config.train_steps and not clock.spent():
        train_step = make_train_step(strategy, model, optimizer, step)
        last = _train_loop(config, model, optimizer, step, clock, train_step, data, manager,
                           writer, chief, translate_fn, best)
    else:
        logging.info("Step %d of train_steps=%d, %.0f s of time_budget_seconds=%g: this run is "
                     "finished; not training again.", int(step.numpy()), config.train_steps,
                     float(clock.seconds.numpy()), config.time_budget_seconds)
        last = {"loss": None, "byte_accuracy": None}
    results = {"step": int(step.numpy()), "train_loss": last["loss"],
               "train_byte_accuracy": last["byte_accuracy"],
               "train_seconds": time.perf_counter() - started,
               "total_train_seconds": float(clock.seconds.numpy()), "precision": policy,
               "ops_policy": ops_policy, "data": data.summary(), "valid": None,
               "selection": None, "length_penalty": None, "exact_match_by_length": None,
               "export_path": None}
    if chief:
        validated = last.get("valid") if last.get("valid_step") == results["step"] else None
        _finish(config, model, translate_fn, manager, best, writer, results, validated)
        with open(os.path.join(config.model_dir, "results.json"), "w") as f:
            json.dump(results, f, indent=2)
    return results


def _finish(config, model, translate_fn, manager, best, writer, results, validated=None):
    """The chief's end of a run: validate, choose the weights and the length penalty, export.

    Fills `valid` (of the exported weights, greedy), `selection`, `length_penalty`,
    `exact_match_by_length` and `export_path` of `results`, and records the length penalty in
    `config.json`. `validated`: the scores of the last weights when the loop has just
    validated them.
    """
    last_scores = validated or _validate_and_log(config, translate_fn, writer, results["step"])
    results["selection"] = _select_weights(config, model, translate_fn, manager, best,
                                           last_scores)
    chosen = results["selection"]["chosen"]
    results["valid"] = last_scores if chosen == "last" else evaluation.validation_scores(
        config, translate_fn)
    if config.data.dataset == "digits":
        results["exact_match_by_length"] = evaluation.digits_exact_match_by_length(
            config, translate_fn)
    alpha, tried = config.length_penalty, None
    if config.beam_size > 1 and alpha is None and config.export:
        alpha, tried = tune_length_penalty(config, model)
    alpha = 0.6 if alpha is None else alpha
    results["length_penalty"] = {"value": alpha, "tuned_on_validation": tried}
    config_path = os.path.join(config.model_dir, "config.json")
    with open(config_path) as f:
        stored = json.load(f)
    stored.update(effective_length_penalty=alpha, length_penalty_scores=tried,
                  exported_weights=chosen)
    with open(config_path, "w") as f:
        json.dump(stored, f, indent=2, default=str)
    if config.export:
        results["export_path"] = export.export_saved_model(
            model, config.export_dir, beam_size=config.beam_size, length_alpha=alpha,
            jit_compile=config.jit_compile_decode)
        logging.info("SavedModel: %s", results["export_path"])
