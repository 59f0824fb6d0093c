"""`WeightAverage`: an exponential moving average of a model's trainable weights.

After every training step each average moves towards its weight,

    average = d * average + (1 - d) * weight,   d = min(decay, (1 + t) / (10 + t)),

with t the number of earlier updates (0 at the first), so that the first averages are not held
near the random initial weights (`tf.train.ExponentialMovingAverage`'s `num_updates`). The
averages start as the model's initial weights, are kept in float32 whatever the precision
policy, live in the run's checkpoint (a resumed run continues the same average), and are one of
the candidates that `selection.select_weights` scores for export (Marian's
`--exponential-smoothing`).
"""

import tensorflow as tf


class WeightAverage(tf.Module):
    """The moving averages of `model.trainable_variables`.

    Build it in the strategy's scope, after the model. `update()` runs in the training step's
    cross-replica context.

    Args:
        model: a built Keras model.
        decay: float in (0, 1), the decay once `(1 + t) / (10 + t)` exceeds it.
    """

    def __init__(self, model, decay):
        super().__init__(name="weight_average")
        if not 0 < decay < 1:
            raise ValueError(f"`decay` must be in (0, 1). Received: decay={decay!r}")
        self.decay = decay
        self._weights = list(model.trainable_variables)
        self.updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="ema_updates")
        self.averages = [tf.Variable(tf.cast(tf.convert_to_tensor(weight), tf.float32),
                                     trainable=False, name=f"ema_{index}")
                         for index, weight in enumerate(self._weights)]

    def current_decay(self):
        """The `d` of the next update: float32 scalar."""
        t = tf.cast(self.updates, tf.float32)
        return tf.minimum(tf.constant(self.decay, tf.float32), (1.0 + t) / (10.0 + t))

    def update(self):
        """Moves every average one step towards its weight."""
        decay = self.current_decay()
        for average, weight in zip(self.averages, self._weights):
            average.assign(decay * average + (1.0 - decay)
                           * tf.cast(tf.convert_to_tensor(weight), tf.float32))
        self.updates.assign_add(1)

    def reset(self):
        """Restarts the average at the current weights (a run that resumes without one)."""
        for average, weight in zip(self.averages, self._weights):
            average.assign(tf.cast(tf.convert_to_tensor(weight), tf.float32))
        self.updates.assign(0)

    def assign_to_model(self):
        """Sets the model's trainable weights to the averages."""
        for average, weight in zip(self.averages, self._weights):
            weight.assign(tf.cast(average, weight.dtype))
