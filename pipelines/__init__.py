"""Byte-level tf.data pipelines for ByteNet: the codec, the datasets and the batching steps."""
