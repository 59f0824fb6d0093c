"""Activation statistics through depth: the measurement behind SELU self-normalization.

`block_statistics(model, source, target)` runs a `ByteNet` layer by layer and returns the mean
and variance of every block's output, over real (non-padding) positions and all channels.
"""

import numpy as np
import tensorflow as tf

from bytenet_tf.vocabulary import PAD_ID


def _moments(x, mask):
    x = tf.cast(x, tf.float32)
    weights = tf.broadcast_to(tf.cast(mask, tf.float32), tf.shape(x))
    count = tf.reduce_sum(weights)
    mean = tf.reduce_sum(x * weights) / count
    var = tf.reduce_sum(tf.square(x - mean) * weights) / count
    return float(mean), float(var)


def block_statistics(model, source, target, training=False):
    """Mean and variance of each block's output.

    Args:
        model: a `ByteNet`.
        source: int32 `(batch, S)` source ids (EOS-framed, PAD-padded).
        target: int32 `(batch, T)` decoder input ids (BOS-framed, PAD-padded).
        training: bool, run dropout and batch statistics in training mode.

    Returns:
        A list of dicts `{"block": name, "mean": float, "variance": float}`, encoder blocks
        first, then decoder blocks, in depth order.
    """
    source = tf.convert_to_tensor(source)
    target = tf.convert_to_tensor(target)
    source_mask = tf.cast(tf.not_equal(source, PAD_ID), model.compute_dtype)[..., tf.newaxis]
    target_mask = tf.not_equal(target, PAD_ID)[..., tf.newaxis]
    rows = []
    x = model.source_embedding(source) * source_mask
    for block in model.encoder_blocks:
        x = block(x, mask=tf.not_equal(source, PAD_ID), training=training)
        mean, var = _moments(x, source_mask)
        rows.append({"block": block.name, "mean": mean, "variance": var})
    encoded = model.encode(source, training=training)
    length = tf.shape(target)[1]
    aligned = tf.pad(encoded, [[0, 0], [0, tf.maximum(length - tf.shape(encoded)[1], 0)],
                               [0, 0]])[:, :length]
    y = model.decoder_input_projection(
        tf.concat([aligned, model.target_embedding(target)], axis=-1))
    for block in model.decoder_blocks:
        y = block(y, training=training)
        mean, var = _moments(y, target_mask)
        rows.append({"block": block.name, "mean": mean, "variance": var})
    return rows


def format_statistics(tables):
    """Formats `{label: block_statistics(...)}` side by side as a Markdown table."""
    labels = list(tables)
    header = "| block | " + " | ".join(f"{label} mean | {label} var" for label in labels) + " |"
    lines = [header, "|" + "---|" * (1 + 2 * len(labels))]
    for index, row in enumerate(tables[labels[0]]):
        cells = []
        for label in labels:
            stats = tables[label][index]
            cells += [f"{stats['mean']:+.3f}", f"{stats['variance']:.3f}"]
        lines.append(f"| {row['block']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(rows):
    """`(max |mean|, min variance, max variance)` over the rows of `block_statistics`."""
    means = np.array([row["mean"] for row in rows])
    variances = np.array([row["variance"] for row in rows])
    return float(np.abs(means).max()), float(variances.min()), float(variances.max())
