"""`SugartensorHeUniform`: the kernel initializer of the thesis's code (sugartensor 1.0).

sugartensor's `he_uniform` draws from U(-s, s) with `s = sqrt(1 / fan_in)`, but its `fan_in` is
not the usual one for a 3-D (convolution) kernel: it is `sqrt(prod(shape))`. A 1-D convolution
kernel of shape `(k, in, out)` therefore gets variance `1 / (3 * sqrt(k * in * out))`, far
smaller than LeCun's `1 / (k * in)` at the thesis's widths (hidden 400, k = 3: about 1/2900
against 1/1200 for the dilated conv), so each residual branch starts small. A 2-D shape
(embedding matrices, dense kernels) uses `fan_in = shape[0]`.
"""

import math

import keras


@keras.saving.register_keras_serializable(package="bytenet_tf")
class SugartensorHeUniform(keras.initializers.Initializer):
    """U(-s, s) with `s = sqrt(1 / fan_in)`, `fan_in` as sugartensor computes it (see module).

    Args:
        seed: int or None.
    """

    def __init__(self, seed=None):
        self.seed = seed

    @staticmethod
    def fan_in(shape):
        """sugartensor's `_get_fans(shape)[0]`: `shape[0]` for 2-D, `sqrt(prod(shape))` for 3-D."""
        shape = tuple(int(d) for d in shape)
        if len(shape) == 2:
            return shape[0]
        if len(shape) in (4, 5):
            return shape[-2] * math.prod(shape[:2])
        return math.sqrt(math.prod(shape))

    def __call__(self, shape, dtype=None):
        limit = math.sqrt(1.0 / self.fan_in(shape))
        return keras.random.uniform(shape, -limit, limit, dtype=dtype, seed=self.seed)

    def get_config(self):
        return {"seed": self.seed}
