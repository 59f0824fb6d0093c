"""The normalization choices of a ByteNet block, built by name.

- `layer`: `keras.layers.LayerNormalization` over channels, per position. Safe in a causal decoder.
- `batch`: `keras.layers.BatchNormalization` with the padding mask. Its statistics pool over
  time and over the batch, so in a causal decoder it leaks later positions into earlier ones:
  it is accepted for centred (encoder) blocks only.
- `none`: no normalization (the identity).
"""

import keras

NORMALIZATIONS = ("layer", "batch", "none")


def validate_normalization(normalization, causal):
    """Raises `ValueError` unless `normalization` is valid for a centred or causal block."""
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization={normalization!r} is unknown; choose one of: "
                         f"{', '.join(NORMALIZATIONS)}")
    if causal and normalization == "batch":
        raise ValueError(
            "normalization='batch' leaks future positions in a causal decoder through its "
            "statistics; use 'layer' or 'none' for the decoder (decoder_normalization=).")


def build_normalization(normalization, name, dtype=None):
    """Returns a normalization layer, or `None` for `normalization="none"`."""
    if normalization == "layer":
        return keras.layers.LayerNormalization(epsilon=1e-6, name=name, dtype=dtype)
    if normalization == "batch":
        return keras.layers.BatchNormalization(name=name, dtype=dtype)
    return None
