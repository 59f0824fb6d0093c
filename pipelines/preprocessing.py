"""The steps every dataset shares, each written once.

The training chain (`make_batches`) reads as:

    (source, target) strings
      -> shard per input pipeline (multi-worker)
      -> seeded shuffle, repeat (a permutation of each whole epoch when the buffer would hold
         every pair: see `permuted_epochs`, which can first draw a length curriculum)
      -> optional Unicode normalization (tensorflow-text; invalid UTF-8 passes unchanged)
      -> length filter (counted by `LengthFilter`)
      -> framing: source + EOS, target = BOS + bytes, labels = bytes + EOS
      -> bucketing by length, with a token budget or a fixed batch size
      -> prefetch

Each element it yields is `({"source": int32 (batch, S), "target": int32 (batch, T)}, labels
int32 (batch, T))`, padded with PAD_ID. `target` and `labels` have the same length: labels[:, i]
is the byte after target[:, i].

Bucketing example: with boundaries (16, 32, 64) and tokens_per_batch=1024, pairs whose longer
side frames to at most 16 ids go into batches of 64, up to 32 into batches of 32, up to 64 into
batches of 16, and longer ones into batches of 1024 // max_length.
"""

import dataclasses
import math

from absl import logging
import numpy as np
import tensorflow as tf

from pipelines import byte_codec
from pipelines.buckets import bucket_sizes, default_boundaries
from pipelines.byte_codec import DEFAULT_MAX_LENGTH
from pipelines.options import ConfigError


@dataclasses.dataclass
class PipelineConfig:
    """Options of `make_batches`.

    Attributes:
        max_length: int, longest framed sequence (bytes + EOS) kept; longer pairs are dropped.
        batch_size: int, pairs per batch when `tokens_per_batch` is 0.
        tokens_per_batch: int, the token budget per batch (padded ids of the longer side);
            0 to use `batch_size` for every bucket.
        bucket_boundaries: tuple of ints, or None for `default_boundaries(max_length)`.
        bucketing: bool, False pads every batch to its longest pair without buckets.
        unicode_normalization: None, or a Unicode form for tensorflow-text (`NFC`, `NFKC`, ...).
        shuffle_buffer: int, 0 for no shuffle. When `pairs` has a known cardinality no larger
            than this, each epoch is a seeded permutation of all of them (`permuted_epochs`),
            which is what a buffer of that size yields, without the buffer.
        repeat: bool, repeat forever (training) or make one pass.
        seed: int, seeds the shuffle.
        curriculum_epochs: float >= 0, draw this many epochs' worth of pairs from a length
            curriculum before the permuted epochs (`permuted_epochs`); needs the in-memory path
            (a `shuffle_buffer` at least the number of pairs). 0 for none.
        curriculum_optional: bool, on pairs that are not held in memory train without the
            curriculum and log a warning, instead of raising ConfigError (a preset's curriculum).
        deterministic: bool, same seed gives the same batches byte for byte.
    """
    max_length: int = DEFAULT_MAX_LENGTH
    batch_size: int = 32
    tokens_per_batch: int = 0
    bucket_boundaries: tuple = None
    bucketing: bool = True
    unicode_normalization: str = None
    shuffle_buffer: int = 10000
    repeat: bool = True
    seed: int = 0
    curriculum_epochs: float = 0.0
    curriculum_optional: bool = False
    deterministic: bool = True


class LengthFilter(tf.Module):
    """Drops pairs whose framed source or target exceeds `max_length`, and counts them.

    The counters are variables updated inside the tf.data graph; `counts()` reads them. It is a
    `tf.Module`, so a `tf.train.Checkpoint` can keep the counts across a resumed run (the
    pipeline's iterator state leaves them out: see `make_batches`).
    """

    def __init__(self, max_length):
        super().__init__(name="length_filter")
        if max_length < 2:
            raise ConfigError(f"`max_length` must be at least 2 (one byte and EOS). "
                             f"Received: max_length={max_length}")
        self.max_length = max_length
        with tf.init_scope():
            self.kept = tf.Variable(0, dtype=tf.int64, trainable=False, name="length_kept")
            self.dropped = tf.Variable(0, dtype=tf.int64, trainable=False, name="length_dropped")

    def __call__(self, source, target):
        fits = tf.logical_and(tf.strings.length(source) < self.max_length,
                              tf.strings.length(target) < self.max_length)
        with tf.control_dependencies([
                self.kept.assign_add(tf.cast(fits, tf.int64)),
                self.dropped.assign_add(tf.cast(tf.logical_not(fits), tf.int64))]):
            return tf.identity(fits)

    def counts(self):
        """`{"kept": int, "dropped": int}` so far."""
        return {"kept": int(self.kept.numpy()), "dropped": int(self.dropped.numpy())}


def framed_length_counts(pairs, unicode_normalization=None, chunk=8192):
    """How many pairs frame to each length, in one pass over `pairs`.

    A pair's framed length is its longer side's bytes plus EOS, the length that `LengthFilter`
    and the buckets see (after Unicode normalization, when the pipeline applies it).

    Args:
        pairs: `tf.data.Dataset` of scalar tf.string `(source, target)` pairs.
        unicode_normalization: None, or the form `make_batches` applies before its filter.
        chunk: int, pairs measured per batch of the pass.

    Returns:
        int64 numpy array `counts` of shape (longest + 1,): `counts[n]` pairs frame to n ids.
    """
    dataset = pairs
    if unicode_normalization:
        _tensorflow_text()
        dataset = dataset.map(lambda s, t: normalize_unicode(s, t, unicode_normalization))
    lengths = dataset.batch(chunk).map(
        lambda s, t: tf.maximum(tf.strings.length(s), tf.strings.length(t)) + 1)
    counts = np.zeros(0, np.int64)
    for batch_lengths in lengths.as_numpy_iterator():
        found = np.bincount(batch_lengths)
        if len(found) > len(counts):
            counts = np.pad(counts, (0, len(found) - len(counts)))
        counts[:len(found)] += found
    return counts


def check_length_share(share):
    """Raises ConfigError unless `share` (bytenet-train's `train_length_share`) is in (0, 1]."""
    if not 0 < share <= 1:
        raise ConfigError(f"`train_length_share` must be in (0, 1] (1 keeps every pair). "
                          f"Received: train_length_share={share}")


def share_length_bound(counts, share):
    """The shortest framed length that at least `share` of the pairs fit.

    Args:
        counts: the `framed_length_counts` of the pairs.
        share: float in (0, 1].

    Returns:
        int L >= 2: the smallest L with at least `ceil(share * pairs)` pairs of framed length at
        most L. With lengths 3, 5, 5, 9 a share of 0.5 gives 5, 0.75 gives 5 and 0.8 gives 9.

    Raises:
        ConfigError: `share` is outside (0, 1], or there are no pairs.
    """
    check_length_share(share)
    cumulative = np.cumsum(counts)
    total = int(cumulative[-1]) if len(cumulative) else 0
    if not total:
        raise ConfigError("`train_length_share` ranks the training pairs by length, and there "
                          "are none.")
    # The tolerance keeps 0.3 * 10 (3.0000000000000004 in floating point) at 3 pairs.
    wanted = max(1, math.ceil(share * total - 1e-9))
    return max(2, int(np.searchsorted(cumulative, wanted)))


def _tensorflow_text():
    """tensorflow-text, an optional dependency that only Unicode normalization needs."""
    try:
        import tensorflow_text
    except ImportError as error:
        raise ConfigError("`unicode_normalization` needs tensorflow-text, which is not installed; "
                          "pip install 'bytenet_tf[text]', or leave unicode_normalization "
                          "unset.") from error
    return tensorflow_text


def normalize_unicode(source, target, form):
    """Applies Unicode normalization `form` to both sides; invalid UTF-8 passes unchanged.

    Raises:
        ConfigError: tensorflow-text is not installed.
    """
    tensorflow_text = _tensorflow_text()
    return (tensorflow_text.normalize_utf8(source, form),
            tensorflow_text.normalize_utf8(target, form))


def frame(source, target):
    """Frames one pair of strings as model inputs and labels.

    Returns:
        `({"source": bytes + [EOS_ID], "target": [BOS_ID] + bytes}, bytes + [EOS_ID])`, int32.
    """
    source_ids = byte_codec.encode(source)
    target_ids = byte_codec.encode(target)
    eos = tf.constant([byte_codec.EOS_ID], tf.int32)
    bos = tf.constant([byte_codec.BOS_ID], tf.int32)
    features = {"source": tf.concat([source_ids, eos], 0),
                "target": tf.concat([bos, target_ids], 0)}
    return features, tf.concat([target_ids, eos], 0)


def _element_length(features, labels):
    return tf.maximum(tf.shape(features["source"])[0], tf.shape(labels)[0])


def batch(dataset, config):
    """Pads framed examples into batches, by length buckets when `config.bucketing`."""
    padding = ({"source": byte_codec.PAD_ID, "target": byte_codec.PAD_ID}, byte_codec.PAD_ID)
    if not config.bucketing:
        return dataset.padded_batch(config.batch_size, padding_values=padding)
    boundaries = list(config.bucket_boundaries or default_boundaries(config.max_length))
    sizes = bucket_sizes(boundaries, config.max_length, config.batch_size,
                         config.tokens_per_batch)
    # bucket_by_sequence_length puts length L in the bucket whose boundary exceeds L.
    return dataset.bucket_by_sequence_length(
        _element_length, [edge + 1 for edge in boundaries], sizes, padded_shapes=None,
        padding_values=padding, drop_remainder=False)


# The competence at the curriculum's first pair: the shortest 1% of the pairs (Platanios et
# al., 2019).
CURRICULUM_START = 0.01


def curriculum_competence(drawn, curriculum_pairs, start=CURRICULUM_START):
    """The fraction of the pairs, shortest first, that the curriculum draws from after `drawn`
    pairs: `min(1, sqrt(start**2 + (1 - start**2) * drawn / curriculum_pairs))`, the square-root
    competence of Platanios et al. (2019), "Competence-based Curriculum Learning for Neural
    Machine Translation". Returns a float64 tensor of `drawn`'s shape."""
    fraction = tf.cast(drawn, tf.float64) / float(curriculum_pairs)
    competence = tf.sqrt(start ** 2 + (1 - start ** 2) * fraction)
    return tf.minimum(tf.constant(1.0, tf.float64), competence)


def permuted_epochs(pairs, count, seed, repeat=True, curriculum_pairs=0):
    """The `count` elements of `pairs`, each epoch in its own seeded random order, optionally
    after a length curriculum.

    A shuffle buffer that holds every pair yields the same kind of stream, but a checkpoint of
    its iterator stores the whole buffer (39 MB and 1.4 s per write for the 60k pairs of
    ../shared/data/deen/train on a Zen 4: benchmarks/checkpoint_cost.py). Here the pairs are
    held as two tensors and epoch e reads them in the order of a stateless permutation
    (`tf.random.experimental.index_shuffle` seeded by `(seed, e)`), so the iterator's state is
    a counter.

    With `curriculum_pairs` = N > 0, the stream first draws N pairs, each uniformly (and with
    replacement) from the shortest `curriculum_competence(i, N)` fraction of all pairs for the
    i-th draw, by the longer side's length in bytes (ties in input order), seeded by
    `(seed, i)`; then the permuted epochs follow. With 1,000 pairs and N = 500, draw 0 picks one
    of the 10 shortest, draw 125 one of the shortest 501, and from draw 500 on every pair is
    read once per epoch. The state is still a counter, so a checkpoint resumes it exactly.

    Args:
        pairs: a `tf.data.Dataset` of `count` elements, each a tuple of scalar tensors; with a
            curriculum, the first two are the (source, target) strings.
        count: int > 0, its cardinality.
        seed: int, the permutations' and the curriculum's seed.
        repeat: bool, epochs forever, or one epoch.
        curriculum_pairs: int >= 0, the pairs drawn by the curriculum first; 0 for none.

    Returns:
        A `tf.data.Dataset` of the same elements.
    """
    columns = pairs.batch(count).get_single_element()
    seed = tf.constant(seed, tf.int64)
    last = tf.constant(count - 1, tf.int64)

    def element(i):
        epoch, position = i // count, i % count
        index = tf.random.experimental.index_shuffle(position, tf.stack([seed, epoch]), last)
        return tuple(tf.gather(column, index) for column in columns)

    epochs = tf.data.Dataset.range(tf.int64.max if repeat else count).map(element)
    if not curriculum_pairs:
        return epochs
    lengths = tf.maximum(tf.strings.length(columns[0]), tf.strings.length(columns[1]))
    shortest_first = tf.argsort(lengths, stable=True)

    def curriculum_element(i):
        competence = curriculum_competence(i, curriculum_pairs)
        pool = tf.clip_by_value(tf.cast(tf.math.ceil(competence * count), tf.int64), 1, count)
        rank = tf.random.stateless_uniform([], tf.stack([seed, i]), minval=0, maxval=pool,
                                           dtype=tf.int64)
        return tuple(tf.gather(column, shortest_first[rank]) for column in columns)

    curriculum = tf.data.Dataset.range(curriculum_pairs).map(curriculum_element)
    return curriculum.concatenate(epochs)


def make_batches(pairs, config, input_context=None, length_filter=None):
    """Runs the shared chain from `(source, target)` strings to padded batches.

    Args:
        pairs: `tf.data.Dataset` of scalar tf.string `(source, target)` pairs.
        config: `PipelineConfig`.
        input_context: `tf.distribute.InputContext` or None; shards per input pipeline.
        length_filter: a `LengthFilter` that counts the pairs it drops, or None for an
            uncounted one.

    Returns:
        A `tf.data.Dataset` of padded batches (see the module docstring).
    """
    options = tf.data.Options()
    options.deterministic = config.deterministic
    # The length filter's counters are variables (state outside the pipeline): a checkpoint of
    # the iterator leaves them out, and the trainer checkpoints the filter itself.
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    dataset = pairs
    if input_context is not None and input_context.num_input_pipelines > 1:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    count = int(dataset.cardinality())
    if config.curriculum_epochs < 0:
        raise ConfigError(f"`curriculum_epochs` must be >= 0 (0: no curriculum). Received: "
                          f"curriculum_epochs={config.curriculum_epochs}")
    if config.shuffle_buffer and 0 < count <= config.shuffle_buffer:
        dataset = permuted_epochs(dataset, count, config.seed, config.repeat,
                                  curriculum_pairs=round(config.curriculum_epochs * count))
    elif config.curriculum_epochs and not config.curriculum_optional:
        raise ConfigError(
            f"`curriculum_epochs={config.curriculum_epochs}` ranks every training pair by length, "
            "so it needs the pairs in memory: set `shuffle_buffer` to at least their number "
            f"(shuffle_buffer={config.shuffle_buffer}, pairs: "
            f"{'unknown' if count < 0 else count}), or curriculum_epochs=0.")
    else:
        if config.curriculum_epochs:
            logging.warning(
                "Training without the preset's length curriculum (curriculum_epochs=%s): it "
                "needs the training pairs in memory, and they are more than shuffle_buffer=%d "
                "(pairs: %s). Set shuffle_buffer to at least their number to keep it.",
                config.curriculum_epochs, config.shuffle_buffer,
                "unknown" if count < 0 else count)
        if config.shuffle_buffer:
            dataset = dataset.shuffle(config.shuffle_buffer, seed=config.seed,
                                      reshuffle_each_iteration=True)
        if config.repeat:
            dataset = dataset.repeat()
    if config.unicode_normalization:
        form = config.unicode_normalization
        _tensorflow_text()  # a missing install fails here, not inside the traced map
        dataset = dataset.map(lambda s, t: normalize_unicode(s, t, form),
                              num_parallel_calls=tf.data.AUTOTUNE,
                              deterministic=config.deterministic)
    length_filter = length_filter or LengthFilter(config.max_length)
    dataset = dataset.filter(length_filter)
    dataset = dataset.map(frame, num_parallel_calls=tf.data.AUTOTUNE,
                          deterministic=config.deterministic)
    dataset = batch(dataset, config)
    return dataset.prefetch(tf.data.AUTOTUNE).with_options(options)


def padding_fraction(dataset, num_batches):
    """Fraction of PAD ids among all source and target ids of the first `num_batches` batches."""
    pads = total = 0
    for features, _ in dataset.take(num_batches):
        for key in ("source", "target"):
            ids = features[key]
            pads += int(tf.reduce_sum(tf.cast(tf.equal(ids, byte_codec.PAD_ID), tf.int64)))
            total += int(tf.size(ids, out_type=tf.int64))
    return pads / max(total, 1)
