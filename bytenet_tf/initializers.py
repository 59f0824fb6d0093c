"""`SugartensorHeUniform`: the kernel initializer of the thesis's code (sugartensor 1.0).

sugartensor's `he_uniform` draws from U(-s, s) with `s = sqrt(1 / fan_in)`, but its `fan_in` is
not the usual one for a 3-D (convolution) kernel: it is `sqrt(prod(shape))`. A 1-D convolution
kernel of shape `(k, in, out)` therefore gets variance `1 / (3 * sqrt(k * in * out))`, far
smaller than LeCun's `1 / (k * in)` at the thesis's widths (hidden 400, k = 3: about 1/2900
against 1/1200 for the dilated conv), so each residual branch starts small. A 2-D shape
(embedding matrices, dense kernels) uses `fan_in = shape[0]`.

`seeded_copy(initializer, seed)` gives one weight its own copy of an initializer, seeded from a
layer's seed and the weight's name (`derive_seed`), so that a model built twice with one seed
gets the same weights and no two of its weights share a draw. A seeded copy draws with NumPy
(`Portable`), so one seed gives the same weights under every Keras backend.
"""

import math
import zlib

import keras
import numpy as np


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
    config = keras.initializers.serialize(get(initializer))
    inner = config.get("config") if isinstance(config, dict) else None
    if seed is not None and isinstance(inner, dict) and "seed" in inner and inner["seed"] is None:
        inner = dict(inner, seed=int(seed))
        config = dict(config, config=inner)
    copy = keras.initializers.get(config)
    # An unseeded Keras initializer picks a seed of its own when it is made; only a seed given
    # here or in the config is drawn portably.
    given = inner.get("seed") if isinstance(inner, dict) else None
    if isinstance(given, int) and Portable.supports(copy):
        return Portable(copy, given)
    return copy


def _fans(shape):
    """Keras's `compute_fans`: `(fan_in, fan_out)` of a kernel shape."""
    shape = tuple(int(d) for d in shape)
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def _truncated_normal(rng, shape, stddev):
    """N(0, stddev^2) truncated to two standard deviations, by redrawing what falls outside."""
    values = rng.standard_normal(shape)
    outside = np.abs(values) > 2.0
    while outside.any():
        values[outside] = rng.standard_normal(int(outside.sum()))
        outside = np.abs(values) > 2.0
    return values * stddev


@keras.saving.register_keras_serializable(package="bytenet_tf")
class Portable(keras.initializers.Initializer):
    """The distribution of a Keras initializer, drawn by NumPy from an int seed.

    Keras's own initializers draw with the backend's random numbers, so one seed gives other
    weights under TensorFlow, JAX and PyTorch; this one draws the same float64 values with
    `numpy.random.default_rng(seed)` everywhere and casts them to the weight's dtype. It knows
    `VarianceScaling` and its named forms (`lecun_uniform`, `glorot_uniform`, `he_normal`, ...),
    `RandomUniform`, `RandomNormal`, `TruncatedNormal` and `SugartensorHeUniform`.

    Args:
        initializer: one of those, as an object, name or config.
        seed: int.
    """

    KINDS = (keras.initializers.VarianceScaling, keras.initializers.RandomUniform,
             keras.initializers.RandomNormal, keras.initializers.TruncatedNormal,
             SugartensorHeUniform)

    def __init__(self, initializer, seed):
        self.initializer = keras.initializers.get(initializer)
        if not self.supports(self.initializer):
            raise ValueError(f"Portable cannot draw {type(self.initializer).__name__}; it draws "
                             + ", ".join(kind.__name__ for kind in self.KINDS) + ".")
        self.seed = int(seed)

    @classmethod
    def supports(cls, initializer):
        return isinstance(initializer, cls.KINDS)

    def sample(self, shape):
        """The float64 NumPy values for `shape`."""
        init, rng, shape = self.initializer, np.random.default_rng(self.seed), tuple(shape)
        if isinstance(init, SugartensorHeUniform):
            limit = math.sqrt(1.0 / init.fan_in(shape))
            return rng.uniform(-limit, limit, shape)
        if isinstance(init, keras.initializers.RandomUniform):
            return rng.uniform(init.minval, init.maxval, shape)
        if isinstance(init, keras.initializers.RandomNormal):
            return init.mean + init.stddev * rng.standard_normal(shape)
        if isinstance(init, keras.initializers.TruncatedNormal):
            return init.mean + _truncated_normal(rng, shape, init.stddev)
        fan_in, fan_out = _fans(shape)
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[init.mode]
        scale = init.scale / max(1.0, fan)
        if init.distribution == "uniform":
            limit = math.sqrt(3.0 * scale)
            return rng.uniform(-limit, limit, shape)
        if init.distribution == "truncated_normal":
            return _truncated_normal(rng, shape, math.sqrt(scale) / 0.87962566103423978)
        return math.sqrt(scale) * rng.standard_normal(shape)

    def __call__(self, shape, dtype=None):
        dtype = keras.backend.standardize_dtype(dtype or keras.config.floatx())
        return keras.ops.cast(keras.ops.convert_to_tensor(self.sample(shape), "float32"), dtype)

    def get_config(self):
        return {"initializer": keras.initializers.serialize(self.initializer), "seed": self.seed}
