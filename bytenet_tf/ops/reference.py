"""`ReferenceOps`: the numerical kernels of ByteNet, in `keras.ops`.

This is what the model computes, written once and plainly; every other implementation in
`bytenet_tf.ops` must agree with it. It runs on every Keras backend (TensorFlow, JAX, PyTorch)
and any device (cuDNN's dilated convolutions on a GPU, XLA on a TPU), and it is what exported
SavedModels contain.

Weights are cast to the dtype of the inputs, so one call serves float32 and mixed precision.
"""

import keras
from keras import ops

# SELU's constants (Klambauer et al. 2017, eq. 14); a dropped unit is set to selu(-inf).
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
DROPPED_VALUE = -SELU_ALPHA * SELU_SCALE


def alpha_dropout_affine(rate):
    """The map `(a, b)` that restores mean 0 and variance 1 after alpha dropout at `rate`."""
    a = ((1.0 - rate) * (1.0 + rate * DROPPED_VALUE ** 2)) ** -0.5
    b = -a * DROPPED_VALUE * rate
    return a, b


def apply_mask(inputs, mask):
    """`inputs` times the boolean `mask` (the shape of `inputs` without its last axis)."""
    return inputs * ops.expand_dims(ops.cast(mask, inputs.dtype), -1)


class ReferenceOps:
    """Dilated convolution, dense, SELU, AlphaDropout and the residual sum in `keras.ops`.

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
        padded = ops.pad(inputs, [[0, 0], [left, right], [0, 0]])
        # Under TensorFlow this is tf.nn.convolution, which has a dilated input gradient for
        # float16 on CPU (conv1d(dilations=) has none).
        outputs = ops.conv(padded, ops.cast(kernel, inputs.dtype), padding="valid",
                           dilation_rate=dilation_rate)
        if bias is not None:
            outputs = outputs + ops.cast(bias, inputs.dtype)
        return outputs

    def dense(self, inputs, kernel, bias=None):
        """`inputs @ kernel + bias` over the last axis: `(..., input_dim)` to `(..., filters)`."""
        outputs = ops.tensordot(inputs, ops.cast(kernel, inputs.dtype), 1)
        if bias is not None:
            outputs = outputs + ops.cast(bias, inputs.dtype)
        return outputs

    def selu(self, inputs, training=False, mask=None):
        """`scale * (x if x > 0 else alpha * (exp(x) - 1))`, in the dtype of `inputs`.

        With a boolean `mask` of the shape of `inputs` without its last axis, the output is
        multiplied by it: 0 at masked-out positions (the encoder's padding).

        A bfloat16 or float16 input is computed in float32 and rounded once: TensorFlow's
        low-precision `Selu` forms `exp(x) - 1` in that precision, which cancels near 0. With
        the thesis's small initial weights (`bytenet_selu_thesis`), whose selu inputs sit near
        0, that put mixed_bfloat16 logits several times further from float32 than this way does
        (docs/cpu_fast_path.md).
        """
        del training  # the same function in training and inference
        dtype = keras.backend.standardize_dtype(inputs.dtype)
        if dtype in ("bfloat16", "float16"):
            outputs = ops.cast(ops.selu(ops.cast(inputs, "float32")), dtype)
        else:
            outputs = ops.selu(inputs)
        return outputs if mask is None else apply_mask(outputs, mask)

    def residual(self, inputs, branch, branch_weight=1.0, rescale=1.0, training=False):
        """A residual block's sum, `(inputs + branch_weight * branch) * rescale`.

        Args:
            inputs, branch: tensors of one shape and dtype.
            branch_weight, rescale: Python floats; a 1.0 skips its multiply.
            training: bool; the same function either way.
        """
        del training
        outputs = inputs + (branch if branch_weight == 1.0 else branch_weight * branch)
        return outputs if rescale == 1.0 else outputs * rescale

    def keep_mask(self, shape, rate, seed):
        """Boolean mask of `shape`, true with probability `1 - rate`, from int32 `seed` `[2]`.

        Each backend draws with its own stateless generator, so the masks of one seed differ
        between backends (the weights of one seed do not: `bytenet_tf.initializers`).
        """
        backend = keras.backend.backend()
        if backend == "tensorflow":
            import tensorflow as tf

            return tf.random.stateless_uniform(shape, seed) >= rate
        if backend == "jax":
            # A uint32 [2] array is a JAX PRNG key, which keras.random takes as it is.
            return keras.random.uniform(shape, seed=ops.cast(seed, "uint32")) >= rate
        # PyTorch seeds a generator from Python ints.
        seed = [int(value) for value in ops.convert_to_numpy(seed)]
        return keras.random.uniform(shape, seed=(seed[0] * 1_000_003 + seed[1]) % 2 ** 31) >= rate

    def alpha_dropout(self, inputs, rate, seed):
        """AlphaDropout in training: dropped units become `DROPPED_VALUE`, then `a * x + b`.

        Args:
            inputs: float tensor of any shape.
            rate: float in (0, 1).
            seed: int32 tensor `[2]`; the same seed drops the same units.
        """
        keep = self.keep_mask(ops.shape(inputs), rate, seed)
        a, b = alpha_dropout_affine(rate)
        dtype = inputs.dtype
        dropped = ops.where(keep, inputs, ops.convert_to_tensor(DROPPED_VALUE, dtype))
        return dropped * ops.convert_to_tensor(a, dtype) + ops.convert_to_tensor(b, dtype)

    def selu_alpha_dropout_dense(self, inputs, rate, seed, kernel, bias=None):
        """`dense(alpha_dropout(selu(inputs)))` in training: the tail of a SELU residual block.

        One method so that a policy may fuse the three; here it is their composition.
        """
        return self.dense(self.alpha_dropout(self.selu(inputs, training=True), rate, seed),
                          kernel, bias)
