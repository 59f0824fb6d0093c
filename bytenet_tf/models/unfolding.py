"""Dynamic unfolding's bound in Python (no TensorFlow): how many bytes a source may unfold to."""

import math

import numpy as np


def unfolded_length(source_bytes, unfold_a, unfold_b):
    """`ceil(unfold_a * source_bytes + unfold_b)`, rounded as the decoder rounds it.

    The product is taken in float32, as the decoder computes it: float32(1.2) * 25 is a little
    above 30, so a 25-byte source unfolds to 31 bytes, not to the 30 of float64.
    """
    unfolded = np.float32(unfold_a) * np.float32(source_bytes) + np.float32(unfold_b)
    return int(math.ceil(unfolded))
