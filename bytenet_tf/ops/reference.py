"""`ReferenceOps`: the numerical kernels of ByteNet, in stock TensorFlow ops.

This is what the model computes, written once and plainly; every other implementation in
`bytenet_tf.ops` must agree with it. It runs on any device (cuDNN's dilated convolutions on a
GPU, XLA on a TPU) and is what exported SavedModels contain.

Weights are cast to the dtype of the inputs, so one call serves float32 and mixed precision.
"""

import tensorflow as tf

# SELU's constants (Klambauer et al. 2017, eq. 14); a dropped unit is set to selu(-inf).
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
DROPPED_VALUE = -SELU_ALPHA * SELU_SCALE


def alpha_dropout_affine(rate):
    """The map `(a, b)` that restores mean 0 and variance 1 after alpha dropout at `rate`."""
    a = ((1.0 - rate) * (1.0 + rate * DROPPED_VALUE ** 2)) ** -0.5
    b = -a * DROPPED_VALUE * rate
    return a, b


class ReferenceOps:
    """Dilated convolution, dense, SELU and AlphaDropout in stock TensorFlow ops.

    Subclasses replace methods with faster implementations of the same function.
    """

    name = "reference"

    def dilated_conv(self, inputs, kernel, dilation_rate, left, right, bias=None):
        """`outputs[t] = sum_k padded[t + k * dilation_rate] @ kernel[k] + bias`.

        Args:
            inputs: `(batch_size, length, input_dim)`.
            kernel: `(kernel_size, input_dim, filters)`.
            dilation_rate: int.
            left, right: ints, zeros padded before and after the sequence;
                `left + right == (kernel_size - 1) * dilation_rate` keeps the length.
            bias: optional `(filters,)`.

        Returns:
            `(batch_size, length + left + right - (kernel_size - 1) * dilation_rate, filters)`.
        """
        padded = tf.pad(inputs, [[0, 0], [left, right], [0, 0]])
        # tf.nn.convolution, not conv1d(dilations=): TensorFlow's CPU kernels have no dilated
        # input gradient for float16, and convolution falls back to space-to-batch there.
        outputs = tf.nn.convolution(padded, tf.cast(kernel, inputs.dtype), padding="VALID",
                                    dilations=dilation_rate)
        if bias is not None:
            outputs = tf.nn.bias_add(outputs, tf.cast(bias, inputs.dtype))
        return outputs

    def dense(self, inputs, kernel, bias=None):
        """`inputs @ kernel + bias` over the last axis: `(..., input_dim)` to `(..., filters)`."""
        outputs = tf.tensordot(inputs, tf.cast(kernel, inputs.dtype), 1)
        if bias is not None:
            outputs = outputs + tf.cast(bias, inputs.dtype)
        return outputs

    def selu(self, inputs, training=False):
        """`scale * (x if x > 0 else alpha * (exp(x) - 1))`, in the dtype of `inputs`.

        A bfloat16 or float16 input is computed in float32 and rounded once: TensorFlow's
        low-precision `Selu` forms `exp(x) - 1` in that precision, which cancels near 0. With
        the thesis's small initial weights (`bytenet_selu_thesis`), whose selu inputs sit near
        0, that put mixed_bfloat16 logits several times further from float32 than this way does
        (docs/cpu_fast_path.md).
        """
        del training  # the same function in training and inference
        if inputs.dtype in (tf.bfloat16, tf.float16):
            return tf.cast(tf.nn.selu(tf.cast(inputs, tf.float32)), inputs.dtype)
        return tf.nn.selu(inputs)

    def keep_mask(self, shape, rate, seed):
        """Boolean mask of `shape`, true with probability `1 - rate`, from int32 `seed` `[2]`."""
        return tf.random.stateless_uniform(shape, seed) >= rate

    def alpha_dropout(self, inputs, rate, seed):
        """AlphaDropout in training: dropped units become `DROPPED_VALUE`, then `a * x + b`.

        Args:
            inputs: float tensor of any shape.
            rate: float in (0, 1).
            seed: int32 tensor `[2]`; the same seed drops the same units.
        """
        keep = self.keep_mask(tf.shape(inputs), rate, seed)
        a, b = alpha_dropout_affine(rate)
        dropped = tf.where(keep, inputs, tf.constant(DROPPED_VALUE, inputs.dtype))
        return dropped * tf.constant(a, inputs.dtype) + tf.constant(b, inputs.dtype)

    def selu_alpha_dropout_dense(self, inputs, rate, seed, kernel, bias=None):
        """`dense(alpha_dropout(selu(inputs)))` in training: the tail of a SELU residual block.

        One method so that a policy may fuse the three; here it is their composition.
        """
        return self.dense(self.alpha_dropout(self.selu(inputs, training=True), rate, seed),
                          kernel, bias)
