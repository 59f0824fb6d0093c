"""`AlphaDropout`: SELU's dropout (Klambauer et al. 2017), with a seed that reaches its masks."""

import keras
from keras import ops as kops

from bytenet_tf import ops
from bytenet_tf.ops.reference import DROPPED_VALUE, alpha_dropout_affine

__all__ = ["AlphaDropout", "DROPPED_VALUE", "alpha_dropout_affine"]


@keras.saving.register_keras_serializable(package="bytenet_tf")
class AlphaDropout(keras.layers.Layer):
    """Alpha dropout: the mathematics of `keras.layers.AlphaDropout`, computed by an ops policy.

    In training, each unit is kept with probability `1 - rate` and otherwise set to SELU's
    negative saturation value `-alpha * scale`; then `a * x + b` (`alpha_dropout_affine(rate)`)
    restores mean 0 and variance 1 for standard-normal inputs. The mask comes from the next seed
    of a `keras.random.SeedGenerator`, so a seeded model repeats its masks from the same step
    on. Which units a seed drops depends on `ops_policy` (see `bytenet_tf.ops`).

    Args:
        rate: float in [0, 1), the probability of dropping a unit.
        seed: int or None, seeds the layer's `keras.random.SeedGenerator`.
        ops_policy: str, see `bytenet_tf.ops`.
        **kwargs: base layer arguments.

    Call arguments:
        inputs: float tensor of any shape.
        training: bool; the layer is the identity when it is false.

    Returns:
        Tensor of the shape and dtype of `inputs` (the layer does not cast its inputs to the
        dtype policy's compute dtype).

    Example:
    >>> layer = AlphaDropout(0.1, seed=1)
    >>> layer(tf.ones([2, 3]), training=False).numpy().tolist()
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    """

    def __init__(self, rate, seed=None, ops_policy="reference", **kwargs):
        # Inputs keep their dtype: a bfloat16 block hands over its float32 selu output.
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"`rate` must be in [0, 1). Received: rate={rate!r}")
        self.rate = rate
        self.seed = seed
        self.ops_policy = ops_policy
        self.ops = ops.get(ops_policy)
        self.supports_masking = True
        self.seed_generator = keras.random.SeedGenerator(seed) if rate > 0 else None

    def next_seed(self):
        """The next int32 seed of shape `[2]` from the layer's seed generator."""
        return kops.cast(kops.mod(self.seed_generator.next(), 2 ** 31 - 2), "int32")

    def call(self, inputs, training=False):
        if not training or self.rate == 0:
            return inputs
        return self.ops.alpha_dropout(inputs, self.rate, self.next_seed())

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed})
        return config
