"""The byte vocabulary: the one place where special ids are reserved, and the byte codec.

The data pipelines, the model, decoding and the exported SavedModel all speak in these ids;
`bytenet_tf.vocabulary`, the model package's name for them, re-exports this module unchanged.

Every byte value 0..255 maps to its own id, shifted past the special ids, so the NUL byte is
never confused with padding:

    PAD_ID = 0, BOS_ID = 1, EOS_ID = 2, byte b -> b + BYTE_OFFSET (= b + 3)
    VOCAB_SIZE = 259

Encoding and decoding use core TensorFlow ops only (`tf.strings`, `tf.io.decode_raw`), imported
when they are called (the ids and `frame_batch` need no TensorFlow), so they run inside
`tf.data`, inside compiled graphs and inside an exported SavedModel that is loaded by a process
that imports nothing but tensorflow. Any byte string round-trips exactly: the
empty string, NUL bytes, invalid UTF-8 and 4-byte characters alike.
"""

import numpy as np

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
BYTE_OFFSET = 3
VOCAB_SIZE = 256 + BYTE_OFFSET
# The longest sequence in ids, EOS included, that a model accepts and training keeps by default
# (the thesis's maximum sentence length).
DEFAULT_MAX_LENGTH = 500

# id -> the byte string it decodes to; the special ids decode to nothing.
_ID_TO_BYTES = [b""] * BYTE_OFFSET + [bytes([b]) for b in range(256)]


def encode(strings):
    """Encodes byte strings to ids, one ragged row per string.

    Args:
        strings: tf.string tensor of shape `(batch_size,)`, or a scalar string.

    Returns:
        int32 `tf.RaggedTensor` of shape `(batch_size, None)` (a dense `(length,)` tensor for a
        scalar input) holding `byte + BYTE_OFFSET` for every byte. No BOS or EOS is added.
    """
    import tensorflow as tf

    strings = tf.convert_to_tensor(strings, dtype=tf.string)
    if strings.shape.rank == 0:
        return tf.cast(tf.io.decode_raw(strings, tf.uint8), tf.int32) + BYTE_OFFSET
    chars = tf.strings.bytes_split(strings)
    # Every flat value is exactly one byte long, so decode_raw yields shape (n, 1).
    flat = tf.io.decode_raw(chars.flat_values, tf.uint8)
    flat = tf.cast(tf.reshape(flat, [-1]), tf.int32) + BYTE_OFFSET
    return chars.with_flat_values(flat)


def decode(ids):
    """Decodes ids to byte strings, stopping at the first EOS_ID in each row.

    PAD_ID and BOS_ID decode to nothing. Ids outside `[0, VOCAB_SIZE)` are an error.

    Args:
        ids: int tensor of shape `(batch_size, length)`, or of shape `(length,)`.

    Returns:
        tf.string tensor of shape `(batch_size,)`, or a scalar for a 1-D input.
    """
    import tensorflow as tf

    ids = tf.convert_to_tensor(ids)
    ids = tf.cast(ids, tf.int32)
    squeeze = ids.shape.rank == 1
    if squeeze:
        ids = ids[tf.newaxis]
    before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=-1), 0)
    pieces = tf.gather(tf.constant(_ID_TO_BYTES), ids)
    pieces = tf.where(before_eos, pieces, tf.constant(b""))
    out = tf.strings.reduce_join(pieces, axis=-1)
    return out[0] if squeeze else out


def encode_python(text):
    """Encodes one Python `bytes` or `str` (UTF-8) to a list of ids. For tests and tools."""
    if isinstance(text, str):
        text = text.encode("utf-8")
    return [b + BYTE_OFFSET for b in text]


def frame_batch(sources, targets=None):
    """Frames byte strings as padded model inputs in Python: for tests, tools and experiments.

    Args:
        sources: list of `bytes` (or `str`, encoded as UTF-8).
        targets: optional list of `bytes`, one per source.

    Returns:
        `source` int32 array `(batch, S)`, each row `bytes + [EOS_ID]` padded with PAD_ID; with
        `targets`, `(source, target, labels)` where `target` rows are `[BOS_ID] + bytes` and
        `labels` rows `bytes + [EOS_ID]`, both `(batch, T)`.
    """
    def pad(rows):
        width = max([len(row) for row in rows] + [1])
        return np.array([row + [PAD_ID] * (width - len(row)) for row in rows], np.int32)

    source = pad([encode_python(s) + [EOS_ID] for s in sources])
    if targets is None:
        return source
    if len(targets) != len(sources):
        raise ValueError(f"{len(sources)} sources but {len(targets)} targets; pass one target "
                         "per source.")
    encoded = [encode_python(t) for t in targets]
    return source, pad([[BOS_ID] + t for t in encoded]), pad([t + [EOS_ID] for t in encoded])
