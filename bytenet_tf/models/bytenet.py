"""`ByteNet`: the byte-level encoder-decoder of Kalchbrenner et al. (2016).

In: `{"source": int32 (batch, S), "target": int32 (batch, T)}` byte ids from
`bytenet_tf.vocabulary`, where `source` ends with EOS_ID and `target` (the decoder input) starts
with BOS_ID. Out: float32 logits `(batch, T, VOCAB_SIZE)`; `logits[:, i]` predicts the byte after
`target[:, i]`.
"""

import math

import keras
from keras import ops as kops

from bytenet_tf import initializers, ops
from bytenet_tf.layers.cross_attention import CROSS_ATTENTION, CrossAttention
from bytenet_tf.layers.dilated_conv1d import DilatedConv1D
from bytenet_tf.layers.normalization import build_normalization
from bytenet_tf.layers.residual_block import ResidualBlock
from bytenet_tf.layers.simplified_residual_block import SimplifiedResidualBlock
from bytenet_tf.models.unfolding import unfolded_length
from bytenet_tf.vocabulary import DEFAULT_MAX_LENGTH, PAD_ID, VOCAB_SIZE

BLOCKS = {"residual": ResidualBlock, "simplified": SimplifiedResidualBlock}
LAYOUTS = ("paper", "thesis")
# `branch_weight` that resolves to 1 / sqrt(blocks per side).
INV_SQRT_DEPTH = "inv_sqrt_depth"


@keras.saving.register_keras_serializable(package="bytenet_tf")
class ByteNet(keras.Model):
    """ByteNet: dilated convolutions over source bytes, causal ones over target bytes.

    The encoder embeds the source and runs `num_stacks` stacks of blocks with dilations
    `dilations` (centred convolutions). Padded source positions are zeroed after every block, so
    a sentence's result does not depend on how much padding its batch has. The decoder reads, at
    target position i, the concatenation of the encoder output at position i and the embedding of
    target id i (the byte before the one it predicts), projects it to `hidden_size` channels and
    runs the same stacks with causal convolutions. **Dynamic unfolding**: where i is past the end
    of the source, the encoder output is a zero vector; at inference the output is bounded by
    `unfold_a * |source| + unfold_b` bytes (see `bytenet_tf.decoding`).

    Args:
        hidden_size: int, channels of the residual stream.
        num_stacks: int, repetitions of the dilation sequence in the encoder and in the decoder.
        dilations: sequence of ints, one stack's dilation rates.
        kernel_size: int, width of every dilated convolution (odd).
        encoder_kernel_size: int or None, width of the encoder's dilated convolutions; None
            for `kernel_size` (the thesis used 5 in the encoder and 3 in the decoder).
        block: `residual` (the paper's block) or `simplified` (norm, act, dilated conv, add).
        normalization: `layer`, `batch` or `none`, for the encoder.
        decoder_normalization: `layer` or `none`, or None for the encoder's choice (with
            `batch` replaced by `layer`, because batch statistics leak the future in a causal
            decoder). The resolved value is what `get_config` returns.
        activation: `relu` or `selu`.
        dropout_rate: float; `bytenet_tf.layers.AlphaDropout` for `selu`, Dropout otherwise.
        target_dropout: float in [0, 1), word dropout at the byte level: in training, each
            decoder input byte after BOS is hidden with this probability (its embedding is
            replaced by zeros, unscaled), so the decoder must lean on the source more than on
            the bytes it has written. Inference never hides a byte.
        kernel_initializer: initializer of every convolution kernel; `sugartensor_he_uniform`
            is the thesis's (`bytenet_tf.initializers.SugartensorHeUniform`).
        embedding_initializer: initializer of both embeddings; None for unit-variance normal
            draws (which put the first block's input at SELU's fixed point).
        layout: `paper` or `thesis`. `paper` (this zoo's): the decoder reads a width-1
            projection of [encoder output, target embedding] down to `hidden_size` channels,
            a normalized encoder ends in a norm, and the logits come from norm, act and a
            width-1 convolution. `thesis` (the thesis's code, `bytenet_supervised_translator`):
            the decoder runs at `2 * hidden_size` channels on the concatenation itself, the
            encoder has no output norm, and the logits are a width-1 convolution of the last
            decoder block's output.
        normalize_residual: bool, see `ResidualBlock`.
        branch_weight: float, or `"inv_sqrt_depth"` for `1 / sqrt(len(dilations) *
            num_stacks)`, one over the root of the blocks on a side; see `ResidualBlock`.
            `bytenet_selu`'s default is `"inv_sqrt_depth"` (0.258 at its 15 blocks per side),
            chosen by the residual sweep in docs/results.md.
        residual_gate: bool, a learnable branch weight that starts at 0; see `ResidualBlock`.
        unfold_a: float, dynamic unfolding slope.
        unfold_b: float, dynamic unfolding offset (bytes).
        max_length: int, the longest source in bytes (EOS included) that serving accepts.
        source_blind: bool, a baseline: `encode` returns zeros, so the decoder learns the
            target language alone. The encoder still runs (same cost per step) and the output
            bound still follows the source length.
        cross_attention: `none`, `identity` or `branch`: with `identity` or `branch`, one
            `CrossAttention` readout of the encoder output follows the decoder's first stack
            (its last block with one stack), so that each target position can read any source
            position (`paper` layout only). `identity` starts it as the identity; `branch`
            makes it one more residual branch, weighted by `branch_weight` and rescaled like
            the blocks when `normalize_residual`; `branch_positions` adds position encodings to
            its queries and keys (see `CrossAttention`).
        seed: int or None, seeds every weight drawn at random (each from the seed and its
            layer's name, see `bytenet_tf.initializers.seeded_copy`) and the dropout layers, so
            that two models built with one seed are equal. With None, weights come from Keras's
            global generator (`keras.utils.set_random_seed`).
        ops_policy: str, how the numerical kernels are computed: `reference` (stock TensorFlow
            ops, any device), `cpu` or `cpu_fused` (see `bytenet_tf.ops`). The same function
            either way; bytenet-train chooses it per device. A run-time choice, not part of
            the model: `get_config` leaves it out.
        **kwargs: base model arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: dict with `source` int32 `(batch_size, source_length)` and `target` int32
            `(batch_size, target_length)`.
        training: bool.

    Returns:
        float32 logits of shape `(batch_size, target_length, VOCAB_SIZE)`.

    References:
        Kalchbrenner et al., "Neural Machine Translation in Linear Time", arXiv:1610.10099.
    """

    def __init__(self, hidden_size=400, num_stacks=3, dilations=(1, 2, 4, 8, 16), kernel_size=3,
                 encoder_kernel_size=None, block="residual", normalization="layer",
                 decoder_normalization=None, activation="relu", dropout_rate=0.0,
                 target_dropout=0.0,
                 kernel_initializer="glorot_uniform", embedding_initializer=None, layout="paper",
                 normalize_residual=False, branch_weight=1.0, residual_gate=False, unfold_a=1.2,
                 unfold_b=0.0, max_length=DEFAULT_MAX_LENGTH, source_blind=False,
                 cross_attention="none", seed=None, ops_policy="reference", **kwargs):
        super().__init__(**kwargs)
        if block not in BLOCKS:
            raise ValueError(f"block={block!r} is unknown; choose one of: {', '.join(BLOCKS)}")
        for arg, value in (("hidden_size", hidden_size), ("num_stacks", num_stacks),
                           ("max_length", max_length)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"`{arg}` must be a positive int. Received: {arg}={value!r}")
        if layout not in LAYOUTS:
            raise ValueError(f"layout={layout!r} is unknown; choose one of: {', '.join(LAYOUTS)}")
        if cross_attention not in CROSS_ATTENTION:
            raise ValueError(f"cross_attention={cross_attention!r} is unknown; choose one of: "
                             f"{', '.join(CROSS_ATTENTION)}")
        if cross_attention != "none" and layout != "paper":
            raise ValueError("`cross_attention` needs layout='paper' (the thesis layout's decoder "
                             f"is wider than the encoder output). Received: layout={layout!r}")
        if not 0.0 <= target_dropout < 1.0:
            raise ValueError(f"`target_dropout` must be in [0, 1). Received: "
                             f"target_dropout={target_dropout!r}")
        if unfold_a <= 0:
            raise ValueError(f"`unfold_a` must be positive. Received: unfold_a={unfold_a}")
        if decoder_normalization is None:
            decoder_normalization = "layer" if normalization == "batch" else normalization
        self.hidden_size = hidden_size
        self.num_stacks = num_stacks
        self.dilations = tuple(int(d) for d in dilations)
        self.kernel_size = kernel_size
        self.encoder_kernel_size = encoder_kernel_size or kernel_size
        self.layout = layout
        self.block = block
        self.normalization = normalization
        self.decoder_normalization = decoder_normalization
        self.activation = activation
        self.dropout_rate = dropout_rate
        self.target_dropout = float(target_dropout)
        # Created only when used, so a model without it has the variables it always had.
        self.target_dropout_seed = keras.random.SeedGenerator(
            initializers.derive_seed(seed, "target_dropout"),
            name="target_dropout_seed") if target_dropout > 0 else None
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.embedding_initializer = None if embedding_initializer is None else initializers.get(
            embedding_initializer)
        self.normalize_residual = normalize_residual
        if isinstance(branch_weight, str) and branch_weight != INV_SQRT_DEPTH:
            raise ValueError(f"`branch_weight` must be a float or {INV_SQRT_DEPTH!r}. Received: "
                             f"branch_weight={branch_weight!r}")
        self.branch_weight = branch_weight
        self.residual_gate = residual_gate
        self.unfold_a = unfold_a
        self.unfold_b = unfold_b
        self.max_length = max_length
        self.source_blind = bool(source_blind)
        self.cross_attention = cross_attention
        self.seed = seed
        self.ops_policy = ops_policy
        self.ops = ops.get(ops_policy)

        policy = self.dtype_policy
        thesis = layout == "thesis"
        # Unit-variance embeddings put the first block's input at SELU's fixed point. Each
        # embedding draws its own table: one shared initializer object would give both the same.
        embedding_init = (keras.initializers.RandomNormal(stddev=1.0)
                          if self.embedding_initializer is None else self.embedding_initializer)
        self.source_embedding = keras.layers.Embedding(
            VOCAB_SIZE, hidden_size,
            embeddings_initializer=self._initializer("source_embedding", embedding_init),
            name="source_embedding", dtype=policy)
        self.target_embedding = keras.layers.Embedding(
            VOCAB_SIZE, hidden_size,
            embeddings_initializer=self._initializer("target_embedding", embedding_init),
            name="target_embedding", dtype=policy)
        self.encoder_blocks = self._build_stack(causal=False, normalization=normalization)
        self.encoder_output_norm = None if thesis else build_normalization(
            normalization, "encoder_output_norm", policy)
        self.decoder_input_projection = None if thesis else DilatedConv1D(
            hidden_size, 1, causal=True,
            kernel_initializer=self._initializer("decoder_input_projection"),
            ops_policy=ops_policy, name="decoder_input_projection", dtype=policy)
        self.decoder_blocks = self._build_stack(causal=True, normalization=decoder_normalization)
        self.output_norm = None if thesis else build_normalization(
            decoder_normalization, "output_norm", policy)
        self.attention = CrossAttention.of_mode(
            cross_attention, hidden_size, self.branch_weight_value, normalize_residual,
            kernel_initializer=initializers.seeded_copy(self.kernel_initializer, None),
            seed=initializers.derive_seed(seed, "cross_attention"), name="cross_attention",
            dtype=policy)
        # The readout follows the decoder's first stack.
        self.attention_after_block = min(len(self.dilations), len(self.decoder_blocks)) - 1
        # Logits stay float32 under mixed precision, for a stable softmax and loss.
        self.output_projection = DilatedConv1D(
            VOCAB_SIZE, 1, causal=True, kernel_initializer=self._initializer("output_projection"),
            ops_policy=ops_policy, name="output_projection", dtype="float32")

    def _initializer(self, layer_name, initializer=None):
        """A fresh copy of `initializer` (default: the kernel initializer) for the layer
        `layer_name`, seeded from the model's seed and that name (`initializers.seeded_copy`)."""
        return initializers.seeded_copy(initializer or self.kernel_initializer,
                                        initializers.derive_seed(self.seed, layer_name))

    @property
    def branch_weight_value(self):
        """The residual branch weight as a number (`inv_sqrt_depth` resolved)."""
        if self.branch_weight == INV_SQRT_DEPTH:
            return 1.0 / math.sqrt(len(self.dilations) * self.num_stacks)
        return float(self.branch_weight)

    @property
    def decoder_width(self):
        """Channels of the decoder's residual stream: `2 * hidden_size` in the thesis layout."""
        return 2 * self.hidden_size if self.layout == "thesis" else self.hidden_size

    def _build_stack(self, causal, normalization):
        block_cls = BLOCKS[self.block]
        prefix = "decoder" if causal else "encoder"
        width = self.decoder_width if causal else self.hidden_size
        kernel_size = self.kernel_size if causal else self.encoder_kernel_size
        blocks = []
        for stack in range(self.num_stacks):
            for dilation in self.dilations:
                index = len(blocks)
                blocks.append(block_cls(
                    width, kernel_size, dilation, causal=causal,
                    normalization=normalization, activation=self.activation,
                    dropout_rate=self.dropout_rate,
                    # Unseeded here: the block seeds each kernel and its dropout from `seed`.
                    kernel_initializer=initializers.seeded_copy(self.kernel_initializer, None),
                    normalize_residual=self.normalize_residual,
                    branch_weight=self.branch_weight_value,
                    residual_gate=self.residual_gate,
                    seed=initializers.derive_seed(self.seed, f"{prefix}_block_{index}"),
                    ops_policy=self.ops_policy, name=f"{prefix}_block_{index}",
                    dtype=self.dtype_policy))
        return blocks

    @property
    def receptive_field(self):
        """Target positions that one decoder output reads: 1 + stacks * (k-1) * sum(dilations)."""
        return 1 + self.num_stacks * (self.kernel_size - 1) * sum(self.dilations)

    def build(self, input_shape=None):
        hidden = (None, None, self.hidden_size)
        decoder = (None, None, self.decoder_width)
        self.source_embedding.build((None, None))
        self.target_embedding.build((None, None))
        for block in self.encoder_blocks:
            block.build(hidden)
        for block in self.decoder_blocks:
            block.build(decoder)
        for norm in (self.encoder_output_norm, self.output_norm):
            if norm is not None:
                norm.build(hidden)
        if self.decoder_input_projection is not None:
            self.decoder_input_projection.build((None, None, 2 * self.hidden_size))
        if self.attention is not None:
            self.attention.build(decoder, hidden)
        self.output_projection.build(decoder)
        self.built = True

    def encode(self, source, training=None):
        """Encodes source ids `(batch, S)` to `(batch, S, hidden_size)`, zero at padding."""
        source = kops.convert_to_tensor(source)
        mask = kops.not_equal(source, PAD_ID)
        zero_padding = kops.expand_dims(kops.cast(mask, self.compute_dtype), -1)
        x = self.source_embedding(source) * zero_padding
        for block in self.encoder_blocks:
            x = block(x, mask=mask, training=training)
        if self.encoder_output_norm is not None:
            kwargs = {"mask": mask} if self.normalization == "batch" else {}
            x = self.encoder_output_norm(x, training=training, **kwargs)
        if self.source_blind:
            # Times zero, not zeros_like: the encoder's gradients stay defined (and zero).
            zero_padding = zero_padding * 0.0
        return x * zero_padding

    def _head(self, x, training=None):
        if self.layout == "thesis":
            return x
        if self.output_norm is not None:
            x = self.output_norm(x, training=training)
        return kops.relu(x) if self.activation == "relu" else self.ops.selu(x, training)

    def decoder_input(self, x):
        """`[encoder output, target embedding]` (`(..., 2 * hidden_size)`) to the stream."""
        if self.decoder_input_projection is None:
            return x
        if len(x.shape) == 2:
            return self.decoder_input_projection.project_position(x)
        return self.decoder_input_projection(x)

    def input_tables(self, encoded):
        """The decoder input projection split by its two inputs, for cached decoding.

        `decoder_input([e, embedding(id)])` is `e @ W_source + embedding(id) @ W_target + b`.
        Cached decoding computes the first term once for every source position, and the rest
        once for every id, instead of one product of both per position and beam.

        Args:
            encoded: `(batch, S, hidden_size)` from `encode`.

        Returns:
            `(source_share, id_table)`: `(batch, S, hidden_size)`, zero where `encoded` is
            (past the end of the source), and `(VOCAB_SIZE, hidden_size)`; or None for the
            thesis layout, whose decoder reads the concatenation itself.
        """
        if self.decoder_input_projection is None:
            return None
        projection = self.decoder_input_projection
        matrix = kops.cast(projection.matrix, self.compute_dtype)
        source_share = kops.matmul(kops.cast(encoded, self.compute_dtype),
                                   matrix[:self.hidden_size])
        embeddings = kops.cast(self.target_embedding.embeddings, self.compute_dtype)
        id_table = kops.matmul(embeddings, matrix[self.hidden_size:])
        if projection.use_bias:
            id_table = id_table + kops.cast(projection.bias, self.compute_dtype)
        return source_share, id_table

    def attention_memory(self, encoded, source_mask=None):
        """What `decoder_step` needs of the whole source: the cross-attention's keys, values and
        mask bias (`CrossAttention.memory`), or None for a model without cross-attention."""
        if self.attention is None:
            return None
        return self.attention.memory(encoded, source_mask)

    def decode(self, encoded, target, training=None, source_mask=None):
        """Runs the decoder over all target positions at once.

        Args:
            encoded: `(batch, S, hidden_size)` from `encode`.
            target: int32 `(batch, T)` decoder input ids.
            source_mask: boolean `(batch, S)`, true at real source positions, for the
                cross-attention (every position counts when it is None).

        Returns:
            float32 logits `(batch, T, VOCAB_SIZE)`.
        """
        target = kops.convert_to_tensor(target)
        length = kops.shape(target)[1]
        missing = length - kops.shape(encoded)[1]  # an int where shapes are static
        missing = max(missing, 0) if isinstance(missing, int) else kops.maximum(missing, 0)
        aligned = kops.pad(encoded, [[0, 0], [0, missing], [0, 0]])[:, :length]
        embedded = self.target_embedding(target)
        if training and self.target_dropout > 0:
            embedded = self.hide_target_bytes(embedded)
        x = self.decoder_input(kops.concatenate([aligned, embedded], axis=-1))
        memory = self.attention_memory(encoded, source_mask)
        for index, block in enumerate(self.decoder_blocks):
            x = block(x, training=training)
            if memory is not None and index == self.attention_after_block:
                x = self.attention.attend(x, memory)
        return self.output_projection(self._head(x, training))

    def hide_target_bytes(self, embedded):
        """`target_dropout` on target embeddings `(batch, T, hidden_size)`: each position after
        the first (BOS) becomes zeros with probability `target_dropout`, from the next seed of
        the model's generator (kept in its checkpoints, so a resumed run hides the same bytes)."""
        shape = kops.shape(embedded)[:2]
        hidden = keras.random.uniform(shape, seed=self.target_dropout_seed) < self.target_dropout
        hidden = kops.logical_and(hidden, kops.expand_dims(kops.arange(shape[1]) > 0, 0))
        return embedded * kops.expand_dims(kops.cast(kops.logical_not(hidden), embedded.dtype), -1)

    def call(self, inputs, training=None):
        source = kops.convert_to_tensor(inputs["source"])
        encoded = self.encode(source, training=training)
        return self.decode(encoded, inputs["target"], training=training,
                           source_mask=kops.not_equal(source, PAD_ID))

    def initial_decoder_state(self, batch_size):
        """Zero queues of every decoder block, for `decoder_step`."""
        return [block.initial_state(batch_size) for block in self.decoder_blocks]

    def decoder_step(self, encoded_t, previous_ids, state, memory=None, position=None,
                     id_table=None):
        """One decoder position at inference, with cached convolution queues.

        Args:
            encoded_t: `(batch, hidden_size)`, the encoder output at this position (zeros past
                the end of the source); with `id_table`, its share of the input projection
                there instead (`input_tables`).
            previous_ids: int32 `(batch,)`, the byte before the one to predict (BOS_ID at first).
            state: per block, a queue that `DilatedConv1D.step` takes (`initial_decoder_state`).
            memory: `attention_memory` of the source (needed with cross-attention), or None.
            position: int32 scalar, this step's target position, at every step or none: it
                makes the queues ring buffers (`DilatedConv1D.step`); position encodings need it.
            id_table: the id table of `input_tables`, or None to project `[encoded_t,
                embedding]` here.

        Returns:
            `(logits, new_state)` with float32 logits of shape `(batch, VOCAB_SIZE)`.
        """
        if self.attention is not None and memory is None:
            raise ValueError("This model has cross-attention: pass decoder_step the source's "
                             "`memory=model.attention_memory(encoded, source_mask)`.")
        if id_table is None:
            x = self.decoder_input(kops.concatenate(
                [kops.cast(encoded_t, self.compute_dtype), self.target_embedding(previous_ids)],
                -1))
        else:
            x = kops.cast(encoded_t, self.compute_dtype) + kops.take(id_table, previous_ids, 0)
        new_state = []
        for index, (block, queue) in enumerate(zip(self.decoder_blocks, state)):
            x, queue = block.step(x, queue, position)
            new_state.append(queue)
            if memory is not None and index == self.attention_after_block:
                start = 0 if position is None else position
                x = self.attention.attend(x[:, None], memory, start)[:, 0]
        logits = self.output_projection.project_position(
            kops.cast(self._head(x, training=False), "float32"))
        return logits, new_state

    def max_output_length(self, source_length):
        """Dynamic unfolding bound: `ceil(unfold_a * source_length + unfold_b)` bytes, rounded
        in float32 as the decoder rounds it (`unfolded_length`)."""
        return unfolded_length(source_length, self.unfold_a, self.unfold_b)

    def get_config(self):
        config = super().get_config()
        config.update({
            "hidden_size": self.hidden_size,
            "num_stacks": self.num_stacks,
            "dilations": list(self.dilations),
            "kernel_size": self.kernel_size,
            "encoder_kernel_size": self.encoder_kernel_size,
            "block": self.block,
            "normalization": self.normalization,
            "decoder_normalization": self.decoder_normalization,
            "activation": self.activation,
            "dropout_rate": self.dropout_rate,
            "target_dropout": self.target_dropout,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "embedding_initializer": None if self.embedding_initializer is None else
            keras.initializers.serialize(self.embedding_initializer),
            "layout": self.layout,
            "normalize_residual": self.normalize_residual,
            "branch_weight": self.branch_weight,
            "residual_gate": self.residual_gate,
            "unfold_a": self.unfold_a,
            "unfold_b": self.unfold_b,
            "max_length": self.max_length,
            "source_blind": self.source_blind,
            "cross_attention": self.cross_attention,
            "seed": self.seed,
        })
        return config
