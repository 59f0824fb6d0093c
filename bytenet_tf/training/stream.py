"""`TrainingStream`: the training batches of a run, and how they resume.

In: a resolved `TrainConfig`, a `tf.distribute.Strategy` and the checkpoint a run resumes from.
Out: a distributed iterator of `pipelines.preprocessing.make_batches` batches, the length filter
that counts dropped pairs, and the training files' counts. `apply_length_share` sets the length
filter's bound from the data before a run is built, when `train_length_share` asks for one.

Where TensorFlow can save the iterator (the default strategy, which `auto` picks on one CPU or
one GPU), a checkpoint holds it, and a resumed run continues the same stream of batches, shuffle
buffer included. Training data that `shuffle_buffer` would hold whole is read into memory and
permuted epoch by epoch instead (`pipelines.preprocessing.permuted_epochs`), so that state is a
counter, not the buffer. A mirrored or multi-worker iterator cannot be saved in TensorFlow 2.21; a
resumed run then reshuffles with seed `seed + step` rather than replay the first batches, and
logs so.
"""

import dataclasses

import tensorflow as tf
from absl import logging

from pipelines import datasets, preprocessing
from pipelines.options import ConfigError


class TrainingStream:
    """The training stream: its iterator, length filter, file counts, and how it resumes.

    Args:
        config: a resolved `TrainConfig`.
        strategy: the run's `tf.distribute.Strategy`.
        checkpoint_path: the checkpoint the run resumes from, or None.

    Raises:
        ConfigError: `batch_size` is not a multiple of the replicas in sync.
    """

    def __init__(self, config, strategy, checkpoint_path):
        replicas = strategy.num_replicas_in_sync
        if config.batch_size % replicas:
            raise ConfigError(f"batch_size={config.batch_size} must be a multiple of the "
                             f"{replicas} replicas in sync.")
        with tf.init_scope():
            self.length_filter = preprocessing.LengthFilter(config.train_max_length)
        self.stats = []
        resumed_step, self.has_saved_stream = _stream_position(checkpoint_path)
        # Without a saved stream, a resumed run reshuffles instead of replaying the first batches.
        seed = config.seed if self.has_saved_stream else config.seed + resumed_step
        pipeline = pipeline_config(config, replicas, seed)

        def dataset_fn(input_context):
            # Training files the shuffle buffer would hold whole are read into memory, where
            # each epoch is permuted without a buffer (`preprocessing.permuted_epochs`).
            pairs, stats = datasets.load_pairs_with_stats(
                config.data, "train", in_memory_up_to=config.shuffle_buffer)
            if stats is not None:
                self.stats.append(stats)
            return preprocessing.make_batches(pairs, pipeline, input_context, self.length_filter)

        self.iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
        self.savable = isinstance(self.iterator, tf.__internal__.tracking.Trackable)
        if resumed_step and not self.has_saved_stream:
            logging.info("This strategy's data iterator cannot be saved, so the checkpoint "
                         "holds none; the data is reshuffled with seed %d.", seed)
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
        """The training files' counts and the length filter's, for `results.json`."""
        stats = self.stats[0] if self.stats else None
        return {"train_files": dataclasses.asdict(stats) if stats else None,
                "length_filter": self.length_filter.counts()}


def apply_length_share(config):
    """`config` with `train_max_length` lowered to the bound that `train_length_share` asks for.

    With a share below 1, reads the training pairs once (`preprocessing.framed_length_counts`)
    and lowers `train_max_length` to `preprocessing.share_length_bound` when that is shorter.
    The bound depends on the data alone, so a resumed run finds the same one.

    Args:
        config: a resolved `TrainConfig`.

    Returns:
        A resolved `TrainConfig`: `config` itself when the share is 1.
    """
    if config.train_length_share >= 1:
        return config
    logging.info("Measuring the training pairs' lengths for train_length_share=%g (one pass "
                 "over the training data).", config.train_length_share)
    pairs, _ = datasets.load_pairs_with_stats(config.data, "train")
    counts = preprocessing.framed_length_counts(pairs, config.unicode_normalization)
    bound = min(preprocessing.share_length_bound(counts, config.train_length_share),
                config.train_max_length)
    total, kept = int(counts.sum()), int(counts[:bound + 1].sum())
    logging.info("Training length bound: %d bytes (EOS included), which %d of the %d training "
                 "pairs (%.1f%%) fit: train_length_share=%g, train_max_length=%d.",
                 bound, kept, total, 100 * kept / total, config.train_length_share,
                 config.train_max_length)
    return dataclasses.replace(config, train_max_length=bound)


def pipeline_config(config, replicas=1, seed=None):
    """The `preprocessing.PipelineConfig` of each input pipeline of a run's training batches.

    Args:
        config: a resolved `TrainConfig`.
        replicas: the replicas in sync; each pipeline batches its share of `batch_size` and
            `tokens_per_batch`.
        seed: the stream's seed; None for `config.seed`.
    """
    return preprocessing.PipelineConfig(
        max_length=config.train_max_length, batch_size=config.batch_size // replicas,
        tokens_per_batch=config.tokens_per_batch // replicas, bucketing=config.bucketing,
        shuffle_buffer=config.shuffle_buffer, curriculum_epochs=config.curriculum_epochs,
        curriculum_optional=config.curriculum_optional,
        unicode_normalization=config.unicode_normalization,
        seed=config.seed if seed is None else seed)


def _stream_position(checkpoint_path):
    """`(step, holds_iterator)` of a checkpoint, read once; `(0, False)` when there is none."""
    if not checkpoint_path:
        return 0, False
    reader = tf.train.load_checkpoint(checkpoint_path)
    keys = reader.get_variable_to_shape_map()
    step_key = "step/.ATTRIBUTES/VARIABLE_VALUE"
    step = int(reader.get_tensor(step_key)) if step_key in keys else 0
    return step, any(key.startswith("iterator/") for key in keys)
