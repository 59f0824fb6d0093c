"""Activation statistics through depth: the measurement behind SELU self-normalization.

- `block_statistics(model, source, target)`: the mean and variance of every block's output,
  pooled over real (non-padding) positions and all channels.
- `unit_statistics(model, source, target)`: what SELU's fixed-point argument is about: the mean
  and variance of each unit (channel) of each activation's input inside every residual branch,
  over real positions, summarized per activation by quantiles over the units. Pooling hides a
  unit that drifts; this does not.
- `weight_change(before, after)`: relative change of each block's kernels, so that "stays
  normalized" can be told apart from "never moved".
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
    rows = []

    def run_block(side, block, x, mask):
        out = block(x, mask=_call_mask(side, mask), training=training)
        mean, var = _moments(out, mask[..., tf.newaxis])
        rows.append({"block": block.name, "mean": mean, "variance": var})
        return out

    _walk(model, source, target, run_block, training)
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


def _walk(model, source, target, run_block, training=False):
    """Runs `model` block by block, encoder then decoder, as `ByteNet.call` does.

    `run_block(side, block, x, mask)` returns the output of `block` for its input `x` (and may
    record what it sees); `side` is `"encoder"` or `"decoder"` and `mask` the boolean
    `(batch, length)` mask of real positions on that side.
    """
    source = tf.convert_to_tensor(source)
    target = tf.convert_to_tensor(target)
    source_mask = tf.not_equal(source, PAD_ID)
    x = model.source_embedding(source) * tf.cast(source_mask, model.compute_dtype)[..., tf.newaxis]
    for block in model.encoder_blocks:
        x = run_block("encoder", block, x, source_mask)
    encoded = model.encode(source, training=training)
    length = tf.shape(target)[1]
    aligned = tf.pad(encoded, [[0, 0], [0, tf.maximum(length - tf.shape(encoded)[1], 0)],
                               [0, 0]])[:, :length]
    y = model.decoder_input(tf.concat([aligned, model.target_embedding(target)], axis=-1))
    target_mask = tf.not_equal(target, PAD_ID)
    for block in model.decoder_blocks:
        y = run_block("decoder", block, y, target_mask)


def _call_mask(side, mask):
    """The mask a block is called with: the encoder's blocks take it, the decoder's are causal."""
    return mask if side == "encoder" else None


def _real_positions(x, mask):
    """`x` `(batch, length, channels)` at the real positions of `mask`: `(positions, channels)`."""
    x = np.asarray(tf.cast(x, tf.float32)).reshape(-1, x.shape[-1])
    return x[np.asarray(mask).reshape(-1)]


def unit_statistics(model, source, target, quantiles=(0.05, 0.5, 0.95)):
    """Per-unit statistics of every activation input in every residual branch.

    Args:
        model: a `ByteNet` whose blocks are `ResidualBlock`s.
        source: int32 `(batch, S)` source ids (EOS-framed, PAD-padded).
        target: int32 `(batch, T)` decoder input ids (BOS-framed, PAD-padded).
        quantiles: the quantiles over units to report.

    Returns:
        A list of dicts, one per (block, activation), in depth order, encoder first:
        `{"side", "block", "activation"` (0 is the block input's, 1 and 2 follow the block's
        first two convolutions), `"units"`, `"mean_q"` and `"variance_q"` (the quantiles of the
        units' means and variances), `"max_abs_mean"`, `"min_variance"`, `"max_variance"` and
        `"pooled_variance"`}.
    """
    rows = []

    def run_block(side, block, x, mask):
        preactivations = []
        branch = block.branch(x, mask=_call_mask(side, mask), training=False,
                              preactivations=preactivations)
        for index, z in enumerate(preactivations):
            real = _real_positions(z, mask)
            means, variances = real.mean(axis=0), real.var(axis=0)
            rows.append({
                "side": side, "block": block.name, "activation": index, "units": len(means),
                "mean_q": [float(np.quantile(means, q)) for q in quantiles],
                "variance_q": [float(np.quantile(variances, q)) for q in quantiles],
                "max_abs_mean": float(np.abs(means).max()),
                "min_variance": float(variances.min()), "max_variance": float(variances.max()),
                "pooled_variance": float(real.var())})
        return block._residual(x, branch)  # the block's output, without running it again

    _walk(model, source, target, run_block)
    return rows


def kernel_values(model):
    """`{variable path: numpy value}` of every convolution kernel in the residual blocks."""
    return {v.path: np.array(v.numpy()) for block in model.encoder_blocks + model.decoder_blocks
            for v in block.trainable_variables if v.path.endswith("kernel")}


def weight_change(before, after):
    """Relative change `||after - before|| / ||before||` of each kernel, grouped by block.

    Args:
        before, after: dicts from `kernel_values`.

    Returns:
        `{block path: relative change of the block's kernels taken together}`, in the order of
        `before`.
    """
    squared_change, squared_norm = {}, {}
    for path, value in before.items():
        block = path.rsplit("/", 2)[0]
        squared_change[block] = squared_change.get(block, 0.0) + float(
            np.sum((after[path] - value) ** 2))
        squared_norm[block] = squared_norm.get(block, 0.0) + float(np.sum(value ** 2))
    return {block: (squared_change[block] / squared_norm[block]) ** 0.5 for block in squared_change}
