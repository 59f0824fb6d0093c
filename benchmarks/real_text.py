"""Batches of real German-English text for the throughput benchmarks, in NumPy only (no
TensorFlow): ../shared/data/deen/train.* packed into rows without padding."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from shared_data import DEEN  # noqa: E402

from pipelines import byte_codec  # noqa: E402


def real_rows(rows, length):
    """`(source, target, labels)`, each `rows` x `length` ids of real text (no padding)."""
    def packed(path):
        with open(path, "rb") as f:
            data = f.read().replace(b"\n", b" ")
        ids = np.frombuffer(data, dtype=np.uint8).astype(np.int32) + byte_codec.BYTE_OFFSET
        return ids[:rows * length].reshape(rows, length)
    source = packed(os.path.join(DEEN, "train.de"))
    labels = packed(os.path.join(DEEN, "train.en"))
    target = np.concatenate([np.full((rows, 1), byte_codec.BOS_ID, np.int32), labels[:, :-1]], 1)
    return source, target, labels
