"""Validation during and after training: BLEU, chrF and exact match, and the digits check.

In: a translate function (list of bytes -> list of bytes, `bytenet_tf.inference`) and a
resolved `TrainConfig`. Out: score dicts, written to TensorBoard and `metrics.jsonl` by the
trainer.
"""

import collections
import math

import tensorflow as tf
from absl import logging

from bytenet_tf import inference, scoring, vocabulary
from pipelines import datasets, digits, preprocessing


def reached_bound(sources, hypotheses, output_bound):
    """The share of `hypotheses` as long as their bound: runaway outputs that never emitted EOS.

    Args:
        sources, hypotheses: lists of bytes, aligned.
        output_bound: callable, source bytes -> the output length at which decoding stops
            (`bytenet_tf.inference.Translator.output_bound`).
    """
    if not sources:
        return 0.0
    return sum(len(h) >= output_bound(s) for s, h in zip(sources, hypotheses)) / len(sources)


def validate(translate_fn, sources, references, progress=False):
    """Translates `sources` with `translate_fn` and scores them against `references`.

    Returns:
        `(scores, hypotheses)`; see `bytenet_tf.scoring.score`. `scores` also holds
        `bleu_caveat` (see `bytenet_tf.scoring.bleu_caveat`) and, when `translate_fn` has an
        `output_bound` (a `Translator`), `reached_bound` (see `reached_bound`).
    """
    hypotheses = inference.translate_batches(translate_fn, sources,
                                             progress=progress, description="validate")
    return score_translations(sources, hypotheses, references,
                              getattr(translate_fn, "output_bound", None)), hypotheses


def score_translations(sources, hypotheses, references, output_bound=None):
    """`scoring.score` with its `bleu_caveat`, and `reached_bound` when `output_bound` is
    given (see `reached_bound`)."""
    scores = scoring.score(hypotheses, references)
    scores["bleu_caveat"] = scoring.bleu_caveat(references)
    if output_bound is not None:
        scores["reached_bound"] = reached_bound(sources, hypotheses, output_bound)
    return scores


def masked_cross_entropy(labels, logits):
    """The cross-entropy summed over the non-PAD ids of `labels`, and the float32 mask of them.

    The training step and `cross_entropy` both score bytes this way.

    Args:
        labels: int32 `(batch, T)`, PAD_ID where there is no byte.
        logits: `(batch, T, VOCAB_SIZE)`.

    Returns:
        `(summed, mask)`: a scalar, and a float32 `(batch, T)` mask (1 at real ids).
    """
    mask = tf.cast(tf.not_equal(labels, vocabulary.PAD_ID), tf.float32)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)
    return tf.reduce_sum(losses * mask), mask


def smoothed_cross_entropy(labels, logits, label_smoothing):
    """The label-smoothed cross-entropy summed over the non-PAD ids of `labels`: the training
    objective, beside the plain cross-entropy that every reported loss uses.

    With smoothing e the target distribution gives `1 - e` to the label and `e / VOCAB_SIZE` to
    every id (the label included), so the loss of one byte is
    `(1 - e) * -log p(label) + e * mean over ids of -log p(id)`.

    Args:
        labels: int32 `(batch, T)`, PAD_ID where there is no byte.
        logits: `(batch, T, VOCAB_SIZE)`.
        label_smoothing: Python float in [0, 1).

    Returns:
        `(smoothed, plain, mask)`: two scalars (equal when `label_smoothing` is 0) and the
        float32 `(batch, T)` mask of `masked_cross_entropy`.
    """
    if not label_smoothing:
        plain, mask = masked_cross_entropy(labels, logits)
        return plain, plain, mask
    # One log-softmax serves both terms: the training step's largest tensor, not taken twice.
    mask = tf.cast(tf.not_equal(labels, vocabulary.PAD_ID), tf.float32)
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))
    nll = -tf.gather(log_probs, labels, batch_dims=2)
    uniform = -tf.reduce_mean(log_probs, axis=-1)
    plain = tf.reduce_sum(nll * mask)
    smoothed = (1.0 - label_smoothing) * plain + label_smoothing * tf.reduce_sum(uniform * mask)
    return smoothed, plain, mask


def cross_entropy(model, sources, targets, batch_size=32):
    """Teacher-forced cross-entropy of `model` on aligned pairs, per target byte, no dropout.

    Each pair is framed as in training (source + EOS; BOS + target, labelled target + EOS), so
    the EOS after each target counts as one byte. Pairs whose framed source or target is longer
    than `model.max_length` are left out and counted.

    Args:
        model: a built `ByteNet`; called with `training=False`.
        sources, targets: lists of bytes, aligned.
        batch_size: pairs per call.

    Returns:
        dict: `nats_per_byte` (float; NaN when no pair was scored), `bits_per_byte`, `bytes`
        (target bytes scored, EOS included), `pairs` (scored), `skipped` (too long).

    Raises:
        ValueError: `sources` and `targets` differ in length.
    """
    if len(sources) != len(targets):
        raise ValueError(f"cross_entropy needs aligned pairs; got {len(sources)} sources and "
                         f"{len(targets)} targets.")
    length_filter = preprocessing.LengthFilter(model.max_length)
    pipeline = preprocessing.PipelineConfig(max_length=model.max_length, batch_size=batch_size,
                                            bucketing=False, shuffle_buffer=0, repeat=False)
    pairs = tf.data.Dataset.from_tensor_slices(
        (tf.constant(list(sources), tf.string), tf.constant(list(targets), tf.string)))
    total = count = 0.0
    for features, labels in preprocessing.make_batches(pairs, pipeline,
                                                       length_filter=length_filter):
        logits = tf.cast(model(features, training=False), tf.float32)
        batch_total, mask = masked_cross_entropy(labels, logits)
        total += float(batch_total)
        count += float(tf.reduce_sum(mask))
    skipped = length_filter.counts()["dropped"]
    nats = total / count if count else float("nan")
    return {"nats_per_byte": nats, "bits_per_byte": nats / math.log(2),
            "bytes": int(count), "pairs": len(sources) - skipped, "skipped": skipped}


def validation_scores(config, translate_fn):
    """`validate` on the first `config.valid_size` pairs of the validation split."""
    sources, references = datasets.take_pairs(config.data, "validation", config.valid_size)
    scores, _ = validate(translate_fn, sources, references, progress=config.progress)
    return scores


def digits_exact_match_by_length(config, translate_fn, per_length=200):
    """Exact match per number of digits, on numbers drawn independently of the digits sets.

    Returns:
        list of dicts `{digits, numbers, exact_match, seen_in_training,
        exact_match_unseen}` (the last is None when every number was seen in training).
    """
    drawn = digits.independent_numbers(config.data.digits_config, per_length)
    sources = [digits.spell(number).encode() for number, _ in drawn]
    outputs = inference.translate_batches(translate_fn, sources)
    groups = collections.defaultdict(list)
    for (number, seen), output in zip(drawn, outputs):
        groups[len(number)].append((output == number.encode(), seen))
    rows = []
    for length, results in sorted(groups.items()):
        unseen = [correct for correct, seen in results if not seen]
        rows.append({
            "digits": length, "numbers": len(results),
            "exact_match": sum(correct for correct, _ in results) / len(results),
            "seen_in_training": sum(seen for _, seen in results),
            "exact_match_unseen": sum(unseen) / len(unseen) if unseen else None})
        logging.info("Digits, %d digit(s): exact match %.4f on %d independent numbers (%d seen "
                     "in training)", length, rows[-1]["exact_match"], len(results),
                     rows[-1]["seen_in_training"])
    return rows
