"""`CrossAttention`: one dot-product attention readout of the encoder output, with a residual."""

import math

import keras
from keras import ops

from bytenet_tf import initializers

# ByteNet's `cross_attention` modes (see `CrossAttention.of_mode`).
CROSS_ATTENTION = ("none", "identity", "branch", "branch_positions")


@keras.saving.register_keras_serializable(package="bytenet_tf")
class CrossAttention(keras.layers.Layer):
    """Scaled dot-product attention from the decoder's stream to the encoder output.

    A ByteNet decoder reads the encoder output only at its own position i, so every source word
    must be carried to the position where the target needs it through the encoder's stacks.
    This layer lets position i read any source position, as ConvS2S's attention does:

        query = x W_q,  keys = encoded W_k,  values = encoded W_v
        context = softmax(query keys^T / sqrt(hidden_size), over real source positions) values
        out = x + context W_o

    By default W_o starts at zero, so the layer starts as the identity (SkipInit, De & Smith
    2020). With `branch_weight=w` it is one more residual branch instead: W_o drawn like the
    other kernels and `out = x + w context W_o`, divided by `sqrt(1 + w^2)` with
    `normalize_residual` (SELU ByteNet's rule). How each trained: docs/results.md, "Real
    translation".

    It looks at the decoder's own position only, so it keeps the decoder causal, and cached
    decoding computes the keys and values once per source (`memory`) and one position per step
    (`attend`). The softmax runs in float32 under mixed precision.

    Args:
        hidden_size: int, channels of the decoder stream and of the encoder output.
        kernel_initializer: initializer of the query, key and value projections (and of the
            output projection with `branch_weight`).
        branch_weight: None, or a float w > 0 for the weighted residual branch above.
        positions: bool, add sinusoidal position encodings (Vaswani et al.) of the target
            position to the query's input and of the source position to the key's, so that the
            attention can follow where it is, not only what the bytes say.
        normalize_residual: bool, rescale the weighted branch's sum (only with
            `branch_weight`).
        seed: int or None, seeds each projection (from the seed and its name) when its
            initializer has no seed of its own.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: the decoder stream, `(batch_size, target_length, hidden_size)`.
        encoded: the encoder output, `(batch_size, source_length, hidden_size)`.
        source_mask: optional boolean `(batch_size, source_length)`, true at real source
            positions; None attends to every position.

    Returns:
        Tensor of shape `(batch_size, target_length, hidden_size)`.

    Example:
    >>> attention = CrossAttention(8)
    >>> attention(ops.zeros([2, 5, 8]), ops.zeros([2, 7, 8])).shape
    (2, 5, 8)

    References:
        Gehring et al., "Convolutional Sequence to Sequence Learning", arXiv:1705.03122.
        Vaswani et al., "Attention Is All You Need", arXiv:1706.03762.
    """

    PROJECTIONS = ("query", "key", "value", "output")

    def __init__(self, hidden_size, kernel_initializer="glorot_uniform", branch_weight=None,
                 normalize_residual=False, positions=False, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(hidden_size, int) or hidden_size < 1:
            raise ValueError(f"`hidden_size` must be a positive int. Received: "
                             f"hidden_size={hidden_size!r}")
        if branch_weight is not None and branch_weight <= 0:
            raise ValueError(f"`branch_weight` must be > 0 or None. Received: "
                             f"branch_weight={branch_weight!r}")
        self.hidden_size = hidden_size
        self.branch_weight = branch_weight
        self.normalize_residual = normalize_residual
        self.positions = positions
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.seed = seed

    @classmethod
    def of_mode(cls, mode, hidden_size, branch_weight, normalize_residual, **kwargs):
        """The readout of one of ByteNet's `CROSS_ATTENTION` modes, or None for `none`:
        `identity` starts as the identity; `branch` is a residual branch of weight
        `branch_weight` (rescaled with `normalize_residual`); `branch_positions` adds position
        encodings to that branch. `kwargs` go to the constructor."""
        if mode == "none":
            return None
        return cls(hidden_size, branch_weight=None if mode == "identity" else branch_weight,
                   normalize_residual=normalize_residual, positions=mode == "branch_positions",
                   **kwargs)

    def build(self, inputs_shape, encoded_shape=None):
        for name in self.PROJECTIONS:
            zero = name == "output" and self.branch_weight is None
            initializer = "zeros" if zero else initializers.seeded_copy(
                self.kernel_initializer, initializers.derive_seed(self.seed, name))
            setattr(self, f"{name}_kernel", self.add_weight(
                name=f"{name}_kernel", shape=(self.hidden_size, self.hidden_size),
                initializer=initializer))
        self.built = True

    def memory(self, encoded, source_mask=None):
        """The keys, values and score bias of a source, computed once for every target position.

        Args:
            encoded: `(batch_size, source_length, hidden_size)`.
            source_mask: optional boolean `(batch_size, source_length)`.

        Returns:
            `(keys, values, bias)`: keys and values `(batch_size, source_length, hidden_size)` in
            the compute dtype, and a float32 bias `(batch_size, 1, source_length)`, 0 at real
            positions and -1e9 at padding.
        """
        encoded = ops.cast(encoded, self.compute_dtype)
        located = encoded + self._encoding(ops.shape(encoded)[1]) if self.positions else encoded
        keys = ops.matmul(located, ops.cast(self.key_kernel, self.compute_dtype))
        values = ops.matmul(encoded, ops.cast(self.value_kernel, self.compute_dtype))
        if source_mask is None:
            bias = ops.zeros(ops.shape(encoded)[:2], "float32")
        else:
            bias = ops.where(source_mask, 0.0, -1e9)
        return keys, values, ops.expand_dims(ops.cast(bias, "float32"), 1)

    def _encoding(self, length, start=0):
        """Sinusoidal position encodings of positions `start .. start + length - 1`:
        `(length, hidden_size)` in the compute dtype."""
        positions = ops.cast(ops.arange(length), "float32") + ops.cast(start, "float32")
        rates = ops.exp(-math.log(10000.0) * ops.cast(
            ops.arange(0, self.hidden_size, 2), "float32") / self.hidden_size)
        angles = ops.expand_dims(positions, 1) * ops.expand_dims(rates, 0)
        encoding = ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)
        return ops.cast(encoding[:, :self.hidden_size], self.compute_dtype)

    def attend(self, inputs, memory, start=0):
        """The layer's output for decoder positions `inputs` `(batch, T, hidden_size)` (T may be
        1, a decoding step), the first of which is target position `start`, given `memory`
        from `memory`."""
        keys, values, bias = memory
        inputs = ops.cast(inputs, self.compute_dtype)
        located = inputs + self._encoding(ops.shape(inputs)[1], start) if self.positions \
            else inputs
        query = ops.matmul(located, ops.cast(self.query_kernel, self.compute_dtype))
        scores = ops.einsum("btd,bsd->bts", ops.cast(query, "float32"),
                            ops.cast(keys, "float32")) / math.sqrt(self.hidden_size)
        weights = ops.softmax(scores + bias, axis=-1)
        context = ops.einsum("bts,bsd->btd", ops.cast(weights, self.compute_dtype), values)
        readout = ops.matmul(context, ops.cast(self.output_kernel, self.compute_dtype))
        if self.branch_weight is None:
            return inputs + readout
        w = self.branch_weight
        total = inputs + w * readout
        return total / math.sqrt(1.0 + w * w) if self.normalize_residual else total

    def call(self, inputs, encoded, source_mask=None):
        return self.attend(inputs, self.memory(encoded, source_mask))

    def compute_output_shape(self, inputs_shape, encoded_shape=None, source_mask_shape=None):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update({"hidden_size": self.hidden_size,
                       "branch_weight": self.branch_weight,
                       "normalize_residual": self.normalize_residual,
                       "positions": self.positions,
                       "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                       "seed": self.seed})
        return config
