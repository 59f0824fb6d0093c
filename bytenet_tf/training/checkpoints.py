"""Checkpoints of bytenet-train: what they hold, restoring them, averaging them, resuming.

A checkpoint holds the model (every variable by its path, `model_variables`), the optimizer,
the step, the training time, the dropout layers' seed states, the length filter's counts and,
where TensorFlow can save it, the data iterator (see `bytenet_tf.training.stream`).

- `restore_model(model, path)`: the weights of a checkpoint into a model built from the run's
  `config.json` (`model_config`).
- `average_checkpoints(model, paths)`: the mean of several checkpoints' weights.
- `stored_config(model_dir)`: the `config.json` an earlier run in `model_dir` wrote.
- `check_resumable(model_dir, stored, model_config, training)`: refuses to resume a `model_dir`
  as another model, or with other training settings or data.
"""

import json
import os

import tensorflow as tf
from absl import logging

from pipelines.options import ConfigError

# Settings of the model's config that may change between the runs of one model_dir: they
# change how it is computed, not what it is.
RESUMABLE_CHANGES = ("dtype",)

# Settings of the run's optimizer, objective and batch stream. A resumed run ends with the
# weights of one that never stopped only if they keep their values, so a changed one is refused
# as a changed model is. The budget (`time_budget_seconds`, `train_steps`) may change.
TRAINING_SETTINGS = ("learning_rate", "warmup_steps", "schedule", "learning_rate_floor",
                     "decay_learning_rate", "weight_decay", "adam_beta_2", "adam_epsilon",
                     "clip_norm", "label_smoothing", "ema_decay", "batch_size",
                     "tokens_per_batch", "train_max_length", "train_length_share", "bucketing",
                     "shuffle_buffer", "curriculum_epochs", "unicode_normalization")

# The training data, by `DataSpec` field: the settings every dataset has, and each dataset's
# own. A training file counts by its path, which the checkpointed data iterator reopens, and by
# its size in bytes where both runs record it, so a file rewritten in place is other data too.
DATA_SETTINGS = ("dataset", "source_lang", "target_lang")
DATASET_SETTINGS = {"text": ("source_file", "target_file"), "newstest": ("newstest_year",),
                    "digits": ("digits_config",)}


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


def restore_model(model, checkpoint_path):
    """Restores the weights of a bytenet-train checkpoint into a built `model` of its config.

    The variables are matched by path, so build the model with the run's zoo name and
    overrides (its `config.json`, `model_config`).

    Returns:
        `model`.

    Raises:
        ValueError: the checkpoint has no `model_variables`: it was not written by bytenet-train.
        AssertionError: (TensorFlow's) a variable of `model` has no value in the checkpoint:
            the model's config differs from the run's.
    """
    if not any(name.startswith("model_variables/")
               for name, _ in tf.train.list_variables(checkpoint_path)):
        raise ValueError(f"{checkpoint_path} has no `model_variables`, so it is not a "
                         "bytenet-train checkpoint; pass one from a run's model_dir.")
    tf.train.Checkpoint(model_variables=model_variables(model)).restore(
        checkpoint_path).expect_partial().assert_existing_objects_matched()
    return model


def run_checkpoint(model, optimizer, step, clock, stream, checkpoint_path=None, average=None):
    """The checkpoint of a training run, restored from `checkpoint_path` when one is given.

    Args:
        model, optimizer, step: the run's, built in its strategy's scope.
        clock: its `bytenet_tf.training.schedule.BudgetClock`.
        stream: its `bytenet_tf.training.stream.TrainingStream`.
        checkpoint_path: the checkpoint to resume from, or None.
        average: the run's `bytenet_tf.training.ema.WeightAverage`, or None. A checkpoint of a
            run that kept no average restarts it at the restored weights (logged).

    Returns:
        a `tf.train.Checkpoint` over everything above, for a `tf.train.CheckpointManager`.
    """
    parts = dict(model=model, model_variables=model_variables(model), optimizer=optimizer,
                 step=step, train_seconds=clock.seconds, finish_reserve=clock.reserve,
                 dropout_seeds=_dropout_seeds(model), **stream.trackables())
    checkpoint = tf.train.Checkpoint(**parts, **({"ema": average} if average else {}))
    if checkpoint_path:
        holds_average = any(name.startswith("ema/")
                            for name, _ in tf.train.list_variables(checkpoint_path))
        if average and not holds_average:
            tf.train.Checkpoint(**parts).restore(checkpoint_path).assert_existing_objects_matched()
            average.reset()
            logging.warning("%s holds no weight average: it starts at the restored weights.",
                            checkpoint_path)
        else:
            checkpoint.restore(checkpoint_path).assert_existing_objects_matched()
        logging.info("Resumed from %s at step %d.", checkpoint_path, int(step.numpy()))
    return checkpoint


def weights(model):
    """The values of `model_variables(model)`, as numpy arrays, in order."""
    return [variable.numpy() for variable in model_variables(model).values()]


def set_weights(model, values):
    """Assigns `values` (from `weights`) to `model_variables(model)`, in order."""
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
        values = weights(restore_model(model, path))
        if total is None:
            total = [value.astype("float64") if value.dtype.kind == "f" else value
                     for value in values]
        else:
            total = [t + v if v.dtype.kind == "f" else v for t, v in zip(total, values)]
    count = len(checkpoint_paths)
    set_weights(model, [t / count if t.dtype.kind == "f" else t for t in total])
    return model


def stored_config(model_dir):
    """The `config.json` of an earlier run in `model_dir` (a dict), or {} when there is none."""
    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def _changed(stored, now, keys):
    """The keys among `keys` whose values differ between the dicts `stored` and `now`, sorted."""
    return sorted(key for key in keys if stored.get(key) != now.get(key))


def _describe(stored, now, keys):
    """`key: <stored> there, <now> now` for each of `keys`."""
    return [f"{key}: {stored.get(key)!r} there, {now.get(key)!r} now" for key in keys]


def data_file_bytes(data):
    """`{field: size in bytes}` of the training files that `data` (a `DataSpec` as a dict) names
    and that exist: what `config.json` records as `data_file_bytes`."""
    return {key: os.path.getsize(data[key]) for key in DATASET_SETTINGS["text"]
            if data.get(key) and os.path.isfile(data[key])}


def _data_changes(stored, now):
    """`(changes, resume_values)`: how the training data of the run `now` (`TrainConfig` values
    with `data_file_bytes`) differs from the one `stored` records, and the stored values."""
    was, data = stored.get("data") or {}, now.get("data") or {}
    was_bytes, now_bytes = stored.get("data_file_bytes") or {}, now.get("data_file_bytes") or {}
    changes, values = [], []
    for key in DATA_SETTINGS + DATASET_SETTINGS.get(was.get("dataset"), ()):
        if key not in was:
            continue
        if key in was_bytes and key in now_bytes and was_bytes[key] != now_bytes[key]:
            changes.append(f"{key}: {was[key]!r} of {was_bytes[key]:,} bytes there, "
                           f"{data.get(key)!r} of {now_bytes[key]:,} bytes now")
        elif was[key] != data.get(key):
            changes += _describe(was, data, [key])
        else:
            continue
        values.append(f"{key}={was[key]}")
    return changes, values


def check_resumable(model_dir, stored, model_config, training=None):
    """Refuses to resume `model_dir` as another model, or with other training settings or data.

    Every setting of the model's config counts (the zoo name, sizes, dilations, dropout, the
    residual branch, the seed, ...), except `RESUMABLE_CHANGES`; so does every
    `TRAINING_SETTINGS` value that the earlier run's `config.json` records (one written before
    a setting existed does not record it, and that setting is not checked), and the training
    data (`DATA_SETTINGS`, `DATASET_SETTINGS`; its files by path, and by size where both runs
    record it).

    Args:
        model_dir: the run's folder, for the message.
        stored: its `stored_config`; nothing is checked when it records no model.
        model_config: `get_config()` of the model this run built.
        training: this run's resolved `TrainConfig` values by name (at least
            `TRAINING_SETTINGS` and `data`, with `data_file_bytes`), or None to check the
            model only.

    Raises:
        ConfigError: the settings differ; the message names every one, with both values, and
            the values that resume the run.
    """
    stored_model = stored.get("model_config")
    if not stored_model:
        return
    # JSON has no tuples: compare what both sides would write.
    now = json.loads(json.dumps(model_config, default=str))
    model_changes = _describe(stored_model, now, _changed(
        stored_model, now, (set(stored_model) | set(now)) - set(RESUMABLE_CHANGES)))
    training_changes, same = [], []
    if training is not None:
        now_training = json.loads(json.dumps(
            {key: training[key] for key in TRAINING_SETTINGS}, default=str))
        changed = _changed(stored, now_training, [key for key in TRAINING_SETTINGS
                                                   if key in stored])
        data_changes, data_values = _data_changes(stored, training)
        training_changes = _describe(stored, now_training, changed) + data_changes
        same = [f"{key}={stored[key]}" for key in changed
                if stored[key] is not None] + data_values
    if model_changes:
        raise ConfigError(f"model_dir={model_dir} holds a run of another model "
                          f"({'; '.join(model_changes + training_changes)}). Resume it with the "
                          "same settings, or choose a new `model_dir`.")
    if training_changes:
        raise ConfigError(f"model_dir={model_dir} holds a run trained with other settings "
                          f"({'; '.join(training_changes)}). A resumed run keeps the settings it "
                          f"began with: resume it with {' '.join(same) or 'those settings'}, or "
                          "choose a new `model_dir`.")
