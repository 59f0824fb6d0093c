"""`ResidualBlock`: the ByteNet paper's residual block, centred or causal."""

import math

import keras
from keras import ops as kops

from bytenet_tf import initializers, ops
from bytenet_tf.layers.alpha_dropout import AlphaDropout
from bytenet_tf.layers.dilated_conv1d import DilatedConv1D
from bytenet_tf.layers.normalization import build_normalization, validate_normalization
from bytenet_tf.ops.reference import apply_mask

ACTIVATIONS = ("relu", "selu")


@keras.saving.register_keras_serializable(package="bytenet_tf")
class ResidualBlock(keras.layers.Layer):
    """ByteNet residual block (Kalchbrenner et al. 2016, figure 3).

    norm, act, 1x1 conv to `hidden_size // 2`, norm, act, dilated conv of width `kernel_size`,
    norm, act, 1x1 conv back to `hidden_size`, then add the block input. When `dropout_rate > 0`,
    one dropout layer (`bytenet_tf.layers.AlphaDropout` for `selu`) acts on the input of the
    last convolution: once per block, not after every activation (three dropouts per block
    cost a large share of a CPU training step: docs/cpu_fast_path.md). In a SELU block the last activation,
    its AlphaDropout and a width-1 last convolution are one call,
    `ops.selu_alpha_dropout_dense`, which the `cpu` policies fuse.

    **Residual scaling, and why.** Adding a branch `f(x)` of unit variance to an input `x` of
    unit variance gives variance 2, so in a plain residual SELU stack the variance grows with
    depth and leaves the fixed point (mean 0, variance 1) that makes SELU self-normalizing. With
    `normalize_residual=True` the block returns `(x + w * f(x)) / sqrt(1 + w**2)` with
    `w = branch_weight`: for an uncorrelated branch it keeps the variance at 1 and the mean at 0
    at every depth. It adds no normalization op, only a scalar multiply. With w = 1 the identity
    path keeps only `2**-(blocks/2)` of the stack's input, so `bytenet_selu` weights the branch
    by w = 1/sqrt(blocks per side) instead. `python benchmarks/self_normalization.py` prints the
    block-output statistics through depth with and without the rescale; docs/results.md
    ("Self-normalization", "The residual branch") holds the measured figures.

    Args:
        hidden_size: int, channels of the block input and output.
        kernel_size: int, width of the dilated convolution.
        dilation_rate: int.
        causal: bool, causal (decoder) or centred (encoder) convolution.
        normalization: one of `layer`, `batch` (centred blocks only), `none`.
        activation: one of `relu`, `selu`.
        dropout_rate: float in [0, 1).
        kernel_initializer: initializer of every convolution kernel.
        normalize_residual: bool, rescale the residual sum as described above.
        branch_weight: float, the weight `w` of the branch in the residual sum.
        residual_gate: bool, make `w` a learnable scalar that starts at 0 (SkipInit, De & Smith
            2020; ReZero, Bachlechner et al. 2020): every block starts as the identity. With
            `normalize_residual` the sum is still divided by `sqrt(1 + w**2)`.
        seed: int or None, seeds the dropout layer and each convolution kernel (from the seed
            and the convolution's name, see `bytenet_tf.initializers.seeded_copy`) whose
            initializer has no seed of its own.
        ops_policy: str, how the kernels are computed (see `bytenet_tf.ops`).
        **kwargs: base layer arguments.

    Call arguments:
        inputs: tensor of shape `(batch_size, sequence_length, hidden_size)`.
        mask: optional Keras mask, boolean `(batch_size, sequence_length)`, true on real
            positions (as `keras.layers.Embedding(mask_zero=True)` makes). The dilated
            convolution's input is zeroed at padded positions (so real positions read exactly
            what an unpadded sequence would give them), and batch norm ignores padded
            positions. Padded outputs are not meaningful. The mask passes on unchanged.
        training: bool.

    Returns:
        Tensor of shape `(batch_size, sequence_length, hidden_size)`.

    Example:
    >>> block = ResidualBlock(16, dilation_rate=2, causal=True)
    >>> block(tf.zeros([2, 7, 16])).shape
    TensorShape([2, 7, 16])

    References:
        Kalchbrenner et al., "Neural Machine Translation in Linear Time", arXiv:1610.10099.
        Klambauer et al., "Self-Normalizing Neural Networks", arXiv:1706.02515.
    """

    def __init__(self, hidden_size, kernel_size=3, dilation_rate=1, causal=False,
                 normalization="layer", activation="relu", dropout_rate=0.0,
                 kernel_initializer="glorot_uniform", normalize_residual=False,
                 branch_weight=1.0, residual_gate=False, seed=None, ops_policy="reference",
                 **kwargs):
        super().__init__(**kwargs)
        validate_normalization(normalization, causal)
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation={activation!r} is unknown; choose one of: "
                             f"{', '.join(ACTIVATIONS)}")
        if not 0.0 <= dropout_rate < 1.0:
            raise ValueError(f"`dropout_rate` must be in [0, 1). Received: dropout_rate={dropout_rate}")
        if not branch_weight > 0:
            raise ValueError(f"`branch_weight` must be > 0. Received: branch_weight={branch_weight!r}")
        if hidden_size < 2 or hidden_size % 2:
            raise ValueError(f"`hidden_size` must be an even int >= 2. Received: hidden_size={hidden_size}")
        self.hidden_size = hidden_size
        self.kernel_size = kernel_size
        self.dilation_rate = dilation_rate
        self.causal = causal
        self.normalization = normalization
        self.activation = activation
        self.dropout_rate = dropout_rate
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.normalize_residual = normalize_residual
        self.branch_weight = branch_weight
        self.residual_gate = residual_gate
        self.seed = seed
        self.ops_policy = ops_policy
        self.ops = ops.get(ops_policy)
        self.supports_masking = True
        self.convs = self._build_convs()
        self.norms = [build_normalization(normalization, f"norm_{i}", self.dtype_policy)
                      for i in range(len(self.convs))]
        self.dropout = self._build_dropout()

    def _conv(self, filters, kernel_size, dilation_rate, name):
        initializer = initializers.seeded_copy(self.kernel_initializer,
                                               initializers.derive_seed(self.seed, name))
        return DilatedConv1D(filters, kernel_size, dilation_rate, causal=self.causal,
                             kernel_initializer=initializer, ops_policy=self.ops_policy,
                             name=name, dtype=self.dtype_policy)

    def _build_convs(self):
        half = self.hidden_size // 2
        return [self._conv(half, 1, 1, "conv_in"),
                self._conv(half, self.kernel_size, self.dilation_rate, "conv_dilated"),
                self._conv(self.hidden_size, 1, 1, "conv_out")]

    def _build_dropout(self):
        if self.dropout_rate == 0.0:
            return None
        if self.activation == "selu":
            return AlphaDropout(self.dropout_rate, seed=self.seed, ops_policy=self.ops_policy,
                                name="dropout", dtype=self.dtype_policy)
        return keras.layers.Dropout(self.dropout_rate, seed=self.seed, name="dropout",
                                    dtype=self.dtype_policy)

    @property
    def dilated_conv(self):
        """The one convolution of the block that spans time (and keeps a queue in `step`)."""
        return next(conv for conv in self.convs if conv.name == "conv_dilated")

    def build(self, input_shape):
        if self.residual_gate:
            self.gate = self.add_weight(name="gate", shape=(), initializer="zeros")
        channels = input_shape[-1]
        shape = tuple(input_shape)
        for norm, conv in zip(self.norms, self.convs):
            if norm is not None:
                norm.build(shape[:-1] + (channels,))
            conv.build(shape[:-1] + (channels,))
            channels = conv.filters

    def _normalize(self, index, x, mask, training):
        norm = self.norms[index]
        if norm is None:
            return x
        if self.normalization == "batch":
            return norm(x, training=training, mask=mask)
        return norm(x, training=training)

    def _activate(self, x, training, mask=None):
        """The activation; with a boolean `mask` `(batch_size, sequence_length)`, zero where
        it is false."""
        if self.activation == "selu":
            return self.ops.selu(x, training, mask=mask)
        x = kops.relu(x)
        return x if mask is None else apply_mask(x, mask)

    def _fused_tail(self, conv, training):
        """Whether the last stage (selu, AlphaDropout, 1x1 conv) runs as one op."""
        return (training and isinstance(self.dropout, AlphaDropout) and self.dropout.rate > 0
                and conv.kernel_size == 1)

    def _residual(self, inputs, branch, training=False):
        if self.residual_gate:
            gate = kops.cast(self.gate, branch.dtype)
            out = inputs + gate * branch
            return out * kops.rsqrt(1.0 + gate * gate) if self.normalize_residual else out
        rescale = 1.0 / math.sqrt(1.0 + self.branch_weight ** 2) if self.normalize_residual \
            else 1.0
        return self.ops.residual(inputs, branch, self.branch_weight, rescale, training)

    def call(self, inputs, mask=None, training=None):
        return self._residual(inputs, self.branch(inputs, mask=mask, training=training),
                              bool(training))

    def branch(self, inputs, mask=None, training=None, preactivations=None):
        """The residual branch `f(x)`, before the sum; arguments as for `call`.

        Args:
            preactivations: optional list; the input of each activation (after its norm) is
                appended to it, `(batch_size, sequence_length, channels)` each, in order. This
                is what SELU's fixed-point argument is about (`bytenet_tf.analysis`).
        """
        x = inputs
        for index, conv in enumerate(self.convs):
            last = index == len(self.convs) - 1
            x = self._normalize(index, x, mask, training)
            if preactivations is not None:
                preactivations.append(x)
            if last and self._fused_tail(conv, training):
                # selu, AlphaDropout and the 1x1 conv in one call, which a policy may fuse.
                x = self.ops.selu_alpha_dropout_dense(x, self.dropout.rate,
                                                      self.dropout.next_seed(), conv.matrix,
                                                      conv.bias_or_none)
                break
            # Biases and norm offsets make padded positions nonzero again; zero them where
            # the dilated convolution would read them across the sequence end.
            conv_mask = mask if conv is self.dilated_conv else None
            if last and self.dropout is not None:
                x = self.dropout(self._activate(x, training), training=training)
                x = x if conv_mask is None else apply_mask(x, conv_mask)
            else:
                x = self._activate(x, training, conv_mask)
            x = conv(x)
        return x

    def initial_state(self, batch_size):
        """Zero queue of the dilated convolution, for `step`."""
        return self.dilated_conv.initial_queue(batch_size)

    def step(self, inputs, state, position=None):
        """One causal position at inference: `(batch_size, hidden_size)` in and out.

        Args:
            inputs: tensor of shape `(batch_size, hidden_size)`.
            state: the queue of the dilated convolution, from `initial_state` or the last step.
            position: int32 scalar, this step's position, or None (see `DilatedConv1D.step`).

        Returns:
            `(outputs, new_state)`.
        """
        x = inputs
        new_state = state
        for index, conv in enumerate(self.convs):
            x = self._activate(self._normalize(index, x, None, False), False)
            if conv is self.dilated_conv:
                x, new_state = conv.step(x, state, position)
            else:
                x = conv.project_position(x)
        return self._residual(inputs, x), new_state

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_size": self.hidden_size,
            "kernel_size": self.kernel_size,
            "dilation_rate": self.dilation_rate,
            "causal": self.causal,
            "normalization": self.normalization,
            "activation": self.activation,
            "dropout_rate": self.dropout_rate,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "normalize_residual": self.normalize_residual,
            "branch_weight": self.branch_weight,
            "residual_gate": self.residual_gate,
            "seed": self.seed,
        })
        return config
