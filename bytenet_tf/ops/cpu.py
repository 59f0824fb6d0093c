"""Faster implementations of `ReferenceOps` for a CPU: `CpuOps` and `CpuFusedOps`.

Each method computes the function of the `ReferenceOps` method of the same name (tests check
values and gradients against it); what changes is how. Every choice below was kept only after
an A/B measurement on the project's 2-core CPU (figures in the docstrings and the README).

- `CpuOps`: stock TensorFlow ops arranged for oneDNN and Eigen on CPU. Dilated convolutions call
  oneDNN's convolution with its own explicit padding and a hand-written gradient; bias gradients
  are ones-row matmuls; a bfloat16 SELU runs in float32 between two casts; AlphaDropout draws 16
  random bits per unit and selects with `Select`.
- `CpuFusedOps`: `CpuOps` plus the compiled kernels of `bytenet_tf.ops.kernels`, in training:
  SELU and the whole AlphaDropout (its random bits included) in one pass each way, SELU with the
  encoder's padding mask in one, and a residual block's rescaled sum in one; and the bias of a
  bfloat16 sequence's 1x1 product in a pass of its own, rather than fused into oneDNN's product.

Both drop other units than `ReferenceOps` from the same seed (same rate, each reproducible).
"""

import tensorflow as tf

from bytenet_tf.ops import kernels
from bytenet_tf.ops.reference import (DROPPED_VALUE, ReferenceOps, alpha_dropout_affine,
                                      apply_mask)

# Each 32-bit random number decides two units through its two 16-bit halves.
_RANDOM_LEVELS = 1 << 16


def dropout_threshold(rate):
    """Units whose 16 random bits are below this are dropped: `round(rate * 2**16)`."""
    return min(round(rate * _RANDOM_LEVELS), _RANDOM_LEVELS - 1)


def bias_gradient(upstream):
    """Column sums of a 2-D `upstream`: the gradient of a bias added to every row.

    A `(1, rows)` row of ones times `upstream` runs on oneDNN's threads, unlike `BiasAddGrad`
    (timings: docs/cpu_fast_path.md).
    """
    ones = tf.ones(tf.stack([1, tf.shape(upstream)[0]]), upstream.dtype)
    return tf.matmul(ones, upstream)[0]


def _dense_2d(inputs, kernel, bias, add_bias=tf.nn.bias_add):
    """`inputs @ kernel + bias` for 2-D `inputs`, with the bias gradient of `bias_gradient`.

    With the default `add_bias`, grappler still fuses the forward product and bias into one
    oneDNN call; another `add_bias(product, bias)` adds it in an op of its own.
    """

    @tf.custom_gradient
    def forward(x, w, b):
        def grad(upstream):
            return (tf.matmul(upstream, w, transpose_b=True),
                    tf.matmul(x, upstream, transpose_a=True), bias_gradient(upstream))

        return add_bias(tf.matmul(x, w), b), grad

    return forward(inputs, kernel, bias)


def _convolve(inputs, kernel, dilation_rate, left, right, bias=None):
    """oneDNN's dilated convolution of `inputs` with `left` and `right` zeros of padding.

    The padding is the convolution's own (explicit padding), so no padded copy of `inputs` is
    made. The bias is added to the 4-D convolution output, where grappler fuses it into the
    convolution (`_FusedConv2D`), instead of in a pass of its own.
    """
    outputs = tf.nn.conv2d(tf.expand_dims(inputs, 1), tf.expand_dims(kernel, 0), strides=1,
                           padding=[[0, 0], [0, 0], [left, right], [0, 0]],
                           dilations=[1, 1, dilation_rate, 1])
    if bias is not None:
        outputs = tf.nn.bias_add(outputs, bias)
    return tf.squeeze(outputs, 1)


def _select(inputs, keep, dropped):
    """`where(keep, x, dropped)`, with the gradient `where(keep, dy, 0)`.

    `Select` on two tensors of one shape, not `tf.where` with a scalar: the broadcasting
    `SelectV2` is slower on a CPU, fill included (docs/cpu_fast_path.md).
    """

    @tf.custom_gradient
    def forward(x):
        outputs = tf.raw_ops.Select(condition=keep, x=x,
                                    y=tf.fill(tf.shape(x), tf.constant(dropped, x.dtype)))

        def grad(upstream):
            return tf.raw_ops.Select(condition=keep, x=upstream, y=tf.zeros_like(upstream))

        return outputs, grad

    return forward(inputs)


def _fold_affine(kernel, bias, affine):
    """Kernel and bias of `dense(a * x + b)` as a dense of `x`: `a * kernel`, `bias + b * sum`."""
    scale, shift = affine
    folded_bias = shift * tf.reduce_sum(kernel, axis=0)
    return scale * kernel, folded_bias if bias is None else folded_bias + bias


class CpuOps(ReferenceOps):
    """`ReferenceOps` arranged for a CPU, in stock TensorFlow ops (see the module docstring)."""

    name = "cpu"

    def dilated_conv(self, inputs, kernel, dilation_rate, left, right, bias=None):
        """See `ReferenceOps.dilated_conv`; oneDNN forward, and a gradient written for the CPU.

        `tf.nn.convolution` routes a dilated convolution through `SpaceToBatchND` and
        `BatchToSpaceND`, and oneDNN's backward-data and backward-weights kernels are slower
        than its forward kernel. Here the input gradient is a forward convolution of the output
        gradient with the taps reversed and transposed (padding mirrored), and the kernel
        gradient is one matrix product per tap (timings: docs/cpu_fast_path.md).
        """
        kernel = tf.cast(kernel, inputs.dtype)

        @tf.custom_gradient
        def forward(x, w, *maybe_bias):
            def grad(upstream):
                taps, input_dim, filters = w.shape
                flipped = tf.transpose(tf.reverse(w, [0]), [0, 2, 1])
                input_grad = _convolve(upstream, flipped, dilation_rate, right, left)
                padded = tf.pad(x, [[0, 0], [left, right], [0, 0]])
                length = tf.shape(upstream)[1]
                flat_upstream = tf.reshape(upstream, [-1, filters])

                def tap_inputs(k):
                    # The tap that sits on the unpadded input (the last of a causal kernel, the
                    # middle one of a centred kernel) reads `x` itself: no copy.
                    if k * dilation_rate == left and left + right == (taps - 1) * dilation_rate:
                        return tf.reshape(x, [-1, input_dim])
                    start = k * dilation_rate
                    return tf.reshape(padded[:, start:start + length], [-1, input_dim])

                kernel_grad = tf.stack([tf.matmul(tap_inputs(k), flat_upstream, transpose_a=True)
                                        for k in range(taps)])
                bias_grad = [bias_gradient(flat_upstream)] if maybe_bias else []
                return (input_grad, kernel_grad, *bias_grad)

            return _convolve(x, w, dilation_rate, left, right, *maybe_bias), grad

        maybe_bias = [] if bias is None else [tf.cast(bias, inputs.dtype)]
        return forward(inputs, kernel, *maybe_bias)

    def dense(self, inputs, kernel, bias=None):
        """See `ReferenceOps.dense`; one 2-D MatMul (+ BiasAdd), the fastest 1x1 form here."""
        return self._dense(inputs, kernel, bias, tf.nn.bias_add)

    def _dense(self, inputs, kernel, bias, add_bias):
        """`dense`, the bias added by `add_bias(product, bias)` (see `_dense_2d`)."""
        kernel = tf.cast(kernel, inputs.dtype)
        if inputs.shape.rank == 2:  # one decoding step's rows: no reshapes
            return tf.matmul(inputs, kernel) if bias is None \
                else _dense_2d(inputs, kernel, tf.cast(bias, inputs.dtype), add_bias)
        shape = tf.shape(inputs)
        # A reshape to 2-D: grappler fuses MatMul + BiasAdd into one oneDNN call.
        flat = tf.reshape(inputs, [-1, kernel.shape[0]])
        outputs = tf.matmul(flat, kernel) if bias is None \
            else _dense_2d(flat, kernel, tf.cast(bias, inputs.dtype), add_bias)
        return tf.reshape(outputs, tf.concat([shape[:-1], [kernel.shape[1]]], 0))

    def selu(self, inputs, training=False, mask=None):
        """See `ReferenceOps.selu`; a bfloat16 SELU runs in float32 between two casts.

        On CPU, Eigen's bfloat16 elementwise ops are slower than the casts and float32 ops
        together (docs/cpu_fast_path.md).
        """
        if inputs.dtype == tf.bfloat16:
            outputs = tf.cast(tf.nn.selu(tf.cast(inputs, tf.float32)), tf.bfloat16)
        else:
            outputs = tf.nn.selu(inputs)
        return outputs if mask is None else apply_mask(outputs, mask)

    def keep_mask(self, shape, rate, seed):
        """See `ReferenceOps.keep_mask`; 16 bits per unit, so `rate` is quantized to 2**-16.

        Drawing 16 bits per unit is faster than drawing float uniforms (docs/cpu_fast_path.md).
        """
        size = tf.reduce_prod(shape)
        words = tf.random.stateless_uniform([(size + 1) // 2], seed, minval=None, maxval=None,
                                            dtype=tf.uint32)
        halves = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size]
        return tf.reshape(halves >= tf.constant(dropout_threshold(rate), tf.uint16), shape)

    def _drop(self, inputs, rate, seed):
        """Alpha dropout without its affine map, which the caller applies or folds."""
        return _select(inputs, self.keep_mask(tf.shape(inputs), rate, seed), DROPPED_VALUE)

    def alpha_dropout(self, inputs, rate, seed):
        a, b = alpha_dropout_affine(rate)
        dropped = self._drop(inputs, rate, seed)
        return dropped * tf.constant(a, inputs.dtype) + tf.constant(b, inputs.dtype)

    def selu_alpha_dropout_dense(self, inputs, rate, seed, kernel, bias=None):
        """See `ReferenceOps`; the dropout's affine map is folded into the kernel and bias.

        That saves a multiply and an add over the whole tensor forward and a multiply backward:
        the dropout is one select each way.
        """
        kernel, bias = _fold_affine(kernel, bias, alpha_dropout_affine(rate))
        return self.dense(self._drop(self.selu(inputs), rate, seed), kernel, bias)


class CpuFusedOps(CpuOps):
    """`CpuOps` with SELU and AlphaDropout in the compiled kernel of `bytenet_tf.ops.kernels`.

    The kernel runs in training only (inference takes `CpuOps`'s stock ops), but for the bias
    of a bfloat16 sequence's product (`dense`), which it adds in inference too. Constructing this
    class loads the kernel (compiling it once per machine, with a log line), so it is ready
    before any graph is traced.

    What it saves per training step was measured in in-process A/B runs (docs/cpu_fast_path.md).

    Raises:
        kernels.KernelUnavailableError: the kernel cannot be built or loaded here.
    """

    name = "cpu_fused"

    def __init__(self):
        self._library = kernels.load()

    def selu(self, inputs, training=False, mask=None):
        """See `ReferenceOps.selu`; in training, one kernel pass each way, the mask included."""
        if training and inputs.dtype in (tf.float32, tf.bfloat16):
            if mask is None:
                return kernels.selu(self._library, inputs)
            return kernels.masked_selu(self._library, inputs, mask)
        return super().selu(inputs, training, mask)

    def dense(self, inputs, kernel, bias=None):
        """See `ReferenceOps.dense`; a bfloat16 sequence's bias is the kernel's pass of its own.

        oneDNN's bfloat16 product with the bias fused into it ran 1.5-3x as long as the product
        alone at a training step's shapes on an Intel Xeon with AMX, and the product followed
        by `kernels.bias_add` faster (docs/cpu_fast_path.md). One decoding step's rows (2-D
        inputs) and float32, where the fused bias costs little, keep `CpuOps.dense`.
        """
        if bias is None or inputs.dtype != tf.bfloat16 or inputs.shape.rank == 2:
            return super().dense(inputs, kernel, bias)
        return self._dense(inputs, kernel, bias,
                           lambda product, b: kernels.bias_add(self._library, product, b))

    def residual(self, inputs, branch, branch_weight=1.0, rescale=1.0, training=False):
        """See `ReferenceOps.residual`; in training, one kernel pass each way when it scales.

        A plain sum (both weights 1) stays TensorFlow's add, whose gradient is free.
        """
        if (training and inputs.dtype in (tf.float32, tf.bfloat16)
                and (branch_weight, rescale) != (1.0, 1.0)):
            return kernels.scaled_add(self._library, inputs, branch, rescale,
                                      branch_weight * rescale)
        return super().residual(inputs, branch, branch_weight, rescale, training)

    def selu_alpha_dropout_dense(self, inputs, rate, seed, kernel, bias=None):
        """See `ReferenceOps`; SELU and the dropout are one kernel pass, the map is folded."""
        if inputs.dtype not in (tf.float32, tf.bfloat16):
            return super().selu_alpha_dropout_dense(inputs, rate, seed, kernel, bias)
        kernel, bias = _fold_affine(kernel, bias, alpha_dropout_affine(rate))
        dropped = kernels.selu(self._library, inputs, seed, dropout_threshold(rate),
                               DROPPED_VALUE)
        return self.dense(dropped, kernel, bias)
