"""`SugartensorHeUniform`: the kernel initializer of the thesis's code (sugartensor 1.0).

sugartensor's `he_uniform` draws from U(-s, s) with `s = sqrt(1 / fan_in)`, but its `fan_in` is
not the usual one for a 3-D (convolution) kernel: it is `sqrt(prod(shape))`. A 1-D convolution
kernel of shape `(k, in, out)` therefore gets variance `1 / (3 * sqrt(k * in * out))`, far
smaller than LeCun's `1 / (k * in)` at the thesis's widths (hidden 400, k = 3: about 1/2900
against 1/1200 for the dilated conv), so each residual branch starts small. A 2-D shape
(embedding matrices, dense kernels) uses `fan_in = shape[0]`.

`seeded_copy(initializer, seed)` gives one weight its own copy of an initializer, seeded from a
layer's seed and the weight's name (`derive_seed`), so that a model built twice with one seed
gets the same weights and no two of its weights share a draw.
"""

import math
import zlib

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


def get(identifier):
    """`keras.initializers.get`, which also knows `sugartensor_he_uniform`."""
    if identifier == "sugartensor_he_uniform":
        return SugartensorHeUniform()
    return keras.initializers.get(identifier)


def derive_seed(seed, name):
    """An int seed for the weight `name` of a layer seeded with `seed`, or None if `seed` is None.

    Distinct names give unrelated seeds (a CRC-32 of both), so a layer can seed each of its
    weights from its one `seed` argument.
    """
    if seed is None:
        return None
    return zlib.crc32(f"{int(seed)}/{name}".encode()) & 0x7FFFFFFF


def seeded_copy(initializer, seed):
    """A fresh copy of `initializer` for one weight, drawing with `seed` if it has none.

    Keras's random initializers draw the same values at every call when they hold an int seed,
    and an unseeded one picks its int seed when it is created; one initializer object shared by
    two weights of the same shape therefore gives both the same values. Each weight gets its
    own copy here. With an int `seed`, a copy whose config has `seed: None` draws with `seed`;
    an initializer that was given a seed of its own keeps it, and one with no seed in its
    config (`zeros`, `ones`) is copied as it is.

    Args:
        initializer: a Keras initializer object, name or config.
        seed: int or None.

    Returns:
        A `keras.initializers.Initializer`.
    """
    config = keras.initializers.serialize(keras.initializers.get(initializer))
    inner = config.get("config") if isinstance(config, dict) else None
    if seed is not None and isinstance(inner, dict) and "seed" in inner and inner["seed"] is None:
        config = dict(config, config=dict(inner, seed=int(seed)))
    return keras.initializers.get(config)
