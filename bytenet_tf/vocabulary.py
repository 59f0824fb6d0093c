"""The byte vocabulary under the model package's name: `pipelines.byte_codec`, re-exported.

    PAD_ID = 0, BOS_ID = 1, EOS_ID = 2, byte b -> b + BYTE_OFFSET (= b + 3)
    VOCAB_SIZE = 259

The ids are defined once, in `pipelines.byte_codec`: the data package is the lower layer, and
`bytenet_tf` depends on it, never the other way round.
"""

from pipelines.byte_codec import (BOS_ID, BYTE_OFFSET, DEFAULT_MAX_LENGTH, EOS_ID, PAD_ID,
                                  VOCAB_SIZE, decode, encode, encode_python, frame_batch)

__all__ = ["BOS_ID", "BYTE_OFFSET", "DEFAULT_MAX_LENGTH", "EOS_ID", "PAD_ID", "VOCAB_SIZE",
           "decode", "encode", "encode_python", "frame_batch"]
