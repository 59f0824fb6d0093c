"""`train_and_evaluate(config)`: the one training function behind bytenet-train.

In: a `TrainConfig`. Out: checkpoints, TensorBoard logs and `config.json` in `model_dir`, a
SavedModel under `export_dir`, and a dict of results (also written to `model_dir/results.json`).

One custom training loop serves every strategy (`strategy.run` per step): Keras 3.15's
`model.fit` fails under MultiWorkerMirroredStrategy. The loss is the cross-entropy summed over the
non-PAD target bytes of a replica, divided by the non-PAD count summed over all replicas, so the
gradients that Keras sums across replicas are those of the global per-byte mean.
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

from bytenet_tf import export, scoring, zoo
from bytenet_tf.training import devices
from bytenet_tf.training.config import model_overrides, resolve
from bytenet_tf.training.optimizer import Adam
from bytenet_tf.training.schedule import WarmupRsqrtDecay
from pipelines import byte_codec, datasets, preprocessing


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


def _config_dict(config, policy, strategy_description, model):
    values = dataclasses.asdict(config)
    values["effective_precision"] = policy
    values["effective_strategy"] = strategy_description
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
        raise ValueError(f"--model_dir={model_dir} holds a run with a different model "
                         f"({', '.join(f'{k}: {a} there, {b} now' for k, (a, b) in different.items())}). "
                         "Resume with the same flags, or choose a new --model_dir.")


def make_translate_fn(model, beam_size=1):
    """A function from a list of bytes to a list of translated bytes, with `model`.

    It runs the exporter's `Translator`, so validation decodes exactly as the SavedModel will.
    """
    translator = export.Translator(model, beam_size=beam_size)

    def translate(sources):
        outputs = translator.translate(tf.constant(sources, tf.string))["translation"]
        return list(outputs.numpy())

    return translate


def validate(translate_fn, sources, references, progress=False):
    """Translates `sources` with `translate_fn` (see `make_translate_fn`) and scores them.

    Returns:
        `(scores, hypotheses)`; see `bytenet_tf.scoring.score`.
    """
    hypotheses = scoring.translate_batches(translate_fn, sources, batch_size=64,
                                           progress=progress, description="validate")
    return scoring.score(hypotheses, references), hypotheses


def make_optimizer(config, policy):
    """The binary's optimizer: Adam with warm-up and decay, clipping, and loss scaling for float16."""
    optimizer = Adam(
        WarmupRsqrtDecay(config.learning_rate, max(config.warmup_steps, 1),
                         decay=config.decay_learning_rate),
        clipnorm=config.clip_norm or None)
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def _build(config, policy):
    model = zoo.build_model(config.model, dtype=policy, **model_overrides(config))
    optimizer = make_optimizer(config, policy)
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    return model, optimizer, step


def _make_train_step(strategy, model, optimizer, step):
    def replica_step(features, labels):
        with tf.GradientTape() as tape:
            logits = model(features, training=True)
            mask = tf.cast(tf.not_equal(labels, byte_codec.PAD_ID), tf.float32)
            cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
            local_sum = tf.reduce_sum(cross_entropy * mask)
            local_count = tf.reduce_sum(mask)
            global_count = tf.distribute.get_replica_context().all_reduce("sum", local_count)
            loss = local_sum / tf.maximum(global_count, 1.0)
            scaled_loss = optimizer.scale_loss(loss)
        gradients = tape.gradient(scaled_loss, model.trainable_variables)
        optimizer.apply(gradients, model.trainable_variables)
        predictions = tf.argmax(logits, axis=-1, output_type=labels.dtype)
        correct = tf.reduce_sum(tf.cast(tf.equal(predictions, labels), tf.float32) * mask)
        return local_sum, local_count, correct

    @tf.function
    def train_step(iterator):
        features, labels = next(iterator)
        per_replica = strategy.run(replica_step, args=(features, labels))
        loss_sum, count, correct = (strategy.reduce("sum", value, axis=None) for value in per_replica)
        step.assign_add(1)
        return loss_sum / tf.maximum(count, 1.0), correct / tf.maximum(count, 1.0), count

    return train_step


def _distributed_dataset(strategy, config, start_step, length_filter):
    replicas = strategy.num_replicas_in_sync
    if config.batch_size % replicas:
        raise ValueError(f"--batch_size={config.batch_size} must be a multiple of the "
                         f"{replicas} replicas in sync.")
    pipeline = preprocessing.PipelineConfig(
        max_length=config.max_length, batch_size=config.batch_size // replicas,
        tokens_per_batch=config.tokens_per_batch // replicas, bucketing=config.bucketing,
        shuffle_buffer=config.shuffle_buffer, normalization=config.unicode_normalization,
        # A resumed run reshuffles with a new seed instead of replaying the first batches.
        seed=config.seed + start_step)

    def dataset_fn(input_context):
        pairs = datasets.load_pairs(config.data, "train")
        dataset, _ = preprocessing.make_batches(pairs, pipeline, input_context, length_filter)
        return dataset

    return strategy.distribute_datasets_from_function(dataset_fn)


def _summaries(writer, step, values, metrics_path=None):
    """Writes TensorBoard scalars, and one JSON line to `metrics_path` (for plots)."""
    with writer.as_default(step=step):
        for name, value in values.items():
            tf.summary.scalar(name, value)
    writer.flush()
    if metrics_path:
        with open(metrics_path, "a") as f:
            f.write(json.dumps(dict(values, step=step, time=time.time())) + "\n")


def _train_loop(config, strategy, model, optimizer, step, manager, writer, chief, translate_fn):
    start = int(step.numpy())
    with tf.init_scope():
        length_filter = preprocessing.LengthFilter(config.max_length)
    iterator = iter(_distributed_dataset(strategy, config, start, length_filter))
    train_step = _make_train_step(strategy, model, optimizer, step)
    last = {"loss": float("nan"), "byte_accuracy": float("nan")}
    window_bytes, window_start = 0.0, time.perf_counter()
    loop_start = time.perf_counter()
    metrics_path = os.path.join(config.model_dir, "metrics.jsonl") if chief else None
    bar = tqdm(total=config.train_steps, initial=start, desc="train", unit="step",
               file=sys.stderr, disable=not (config.progress and chief), dynamic_ncols=True)
    for current in range(start + 1, config.train_steps + 1):
        loss, accuracy, count = train_step(iterator)
        loss, accuracy = float(loss), float(accuracy)
        if not math.isfinite(loss):
            bar.close()
            good = manager.latest_checkpoint or "none (no checkpoint was saved yet)"
            raise TrainingDivergedError(
                f"The loss became {loss} at step {current}; training stopped and the last good "
                f"checkpoint is kept: {good}. Lower --learning_rate, set --clip_norm, or use "
                "--precision=float32.")
        window_bytes += float(count)
        last = {"loss": loss, "byte_accuracy": accuracy}
        bar.update(1)
        if current % config.log_every == 0 or current == config.train_steps:
            elapsed = time.perf_counter() - window_start
            rate = window_bytes / max(elapsed, 1e-9)
            bar.set_postfix(loss=f"{loss:.3f}", acc=f"{accuracy:.3f}", bytes_s=f"{rate:.0f}")
            if chief:
                _summaries(writer, current, {
                    "loss": loss, "bits_per_byte": loss / math.log(2), "byte_accuracy": accuracy,
                    "learning_rate": float(optimizer.learning_rate), "bytes_per_second": rate,
                    "train_seconds": time.perf_counter() - loop_start}, metrics_path)
            window_bytes, window_start = 0.0, time.perf_counter()
        if current % config.checkpoint_every == 0:
            manager.save(checkpoint_number=current)
        if chief and config.eval_every and current % config.eval_every == 0:
            _validate_and_log(config, translate_fn, writer, current)
        if config.time_budget_seconds and time.perf_counter() - loop_start > config.time_budget_seconds:
            logging.info("Time budget of %.0f s reached at step %d.", config.time_budget_seconds,
                         current)
            break
    bar.close()
    final = int(step.numpy())
    if final > start and final % config.checkpoint_every:
        manager.save(checkpoint_number=final)
    logging.info("Length filter: %s", length_filter.counts())
    return last


def _validation_pairs(config):
    return datasets.take_pairs(config.data, "validation", config.valid_size)


def _validate_and_log(config, translate_fn, writer, current):
    sources, references = _validation_pairs(config)
    results, _ = validate(translate_fn, sources, references, progress=config.progress)
    _summaries(writer, current, {"valid_bleu": results["bleu"], "valid_chrf": results["chrf"],
                                 "valid_exact_match": results["exact_match"]},
               os.path.join(config.model_dir, "metrics.jsonl"))
    results["bleu_caveat"] = scoring.bleu_caveat(references)
    logging.info("Step %d validation: BLEU %.2f, chrF %.2f, exact match %.4f on %d sentences%s",
                 current, results["bleu"], results["chrf"], results["exact_match"],
                 results["sentences"], results["bleu_caveat"])
    return results


def train_and_evaluate(config):
    """Trains, validates and exports as `config` says; resumes from `model_dir` if it can.

    Returns:
        dict with `step`, `train_loss`, `train_byte_accuracy`, `train_seconds`, `valid` (the
        `scoring.score` dict and its `bleu_caveat`), `export_path` (or None) and `precision`.

    Raises:
        TrainingDivergedError: the loss became NaN or infinite.
    """
    config = resolve(config)
    strategy, strategy_description = devices.resolve_strategy(config.strategy)
    policy, reason = devices.resolve_precision(config.precision)
    logging.info("Precision: %s (%s). Strategy: %s.", policy, reason, strategy_description)
    keras.utils.set_random_seed(config.seed)
    chief = devices.is_chief(strategy)
    if config.time_budget_seconds and isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        raise ValueError("--time_budget_seconds would stop workers at different steps and "
                         "deadlock their all-reduce; use --train_steps with --strategy=multi_worker.")
    checkpoint_dir = config.model_dir if chief else os.path.join(
        config.model_dir, f"worker_{devices.worker_index()}")
    with strategy.scope():
        model, optimizer, step = _build(config, policy)
    if chief:
        _check_resumable(config.model_dir, model.get_config())
        os.makedirs(config.model_dir, exist_ok=True)
        with open(os.path.join(config.model_dir, "config.json"), "w") as f:
            json.dump(_config_dict(config, policy, strategy_description, model), f, indent=2,
                      default=str)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=3)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
        logging.info("Resumed from %s at step %d.", manager.latest_checkpoint, int(step.numpy()))
    writer = tf.summary.create_file_writer(os.path.join(config.model_dir, "train")) if chief \
        else tf.summary.create_noop_writer()
    started = time.perf_counter()
    # One traced decoder per run: each new tf.function would trace the decoding loop again.
    translate_fn = make_translate_fn(model)
    if int(step.numpy()) < config.train_steps:
        last = _train_loop(config, strategy, model, optimizer, step, manager, writer, chief,
                           translate_fn)
    else:
        logging.info("Step %d >= --train_steps=%d: this run is finished; not training again.",
                     int(step.numpy()), config.train_steps)
        last = {"loss": None, "byte_accuracy": None}
    results = {"step": int(step.numpy()), "train_loss": last["loss"],
               "train_byte_accuracy": last["byte_accuracy"],
               "train_seconds": time.perf_counter() - started, "precision": policy,
               "valid": None, "export_path": None}
    if chief:
        results["valid"] = _validate_and_log(config, translate_fn, writer, results["step"])
        if config.export:
            results["export_path"] = export.export_saved_model(
                model, config.export_dir, beam_size=config.beam_size,
                jit_compile=config.jit_compile)
            logging.info("Exported the SavedModel to %s", results["export_path"])
        with open(os.path.join(config.model_dir, "results.json"), "w") as f:
            json.dump(results, f, indent=2)
    return results
