"""Byte-level ids and the byte codec, under the data package's name.

The definitions live in `bytenet_tf.vocabulary`, beside the model that speaks in these ids; this
module re-exports them so that `pipelines.byte_codec.PAD_ID` and friends keep working:

    PAD_ID = 0, BOS_ID = 1, EOS_ID = 2, byte b -> b + BYTE_OFFSET (= b + 3)
    VOCAB_SIZE = 259
"""

from bytenet_tf.vocabulary import (BOS_ID, BYTE_OFFSET, DEFAULT_MAX_LENGTH, EOS_ID, PAD_ID,
                                   VOCAB_SIZE, decode, encode, encode_python, frame_batch)

__all__ = ["BOS_ID", "BYTE_OFFSET", "DEFAULT_MAX_LENGTH", "EOS_ID", "PAD_ID", "VOCAB_SIZE",
           "decode", "encode", "encode_python", "frame_batch"]
