"""`Adam`: Keras's Adam with its update fused into one op per variable, and `make_optimizer`."""

import keras
import tensorflow as tf

from bytenet_tf.training.schedule import make_schedule


@keras.saving.register_keras_serializable(package="bytenet_tf")
class Adam(keras.optimizers.Adam):
    """`keras.optimizers.Adam` whose update step is one `ResourceApplyAdam` op per variable.

    Keras's Adam spends about ten elementwise ops and variable reads and writes per variable
    and step; TensorFlow's `ResourceApplyAdam` kernel computes the same update in one pass:

        m += (1 - beta_1) * (g - m);  v += (1 - beta_2) * (g * g - v)
        variable -= lr * sqrt(1 - beta_2**t) / (1 - beta_1**t) * m / (sqrt(v) + epsilon)

    with `t` the step number starting at 1. The slot variables are Keras's own, so checkpoints,
    `get_config`, weight decay, gradient clipping, loss scaling and distribution strategies behave
    as with Keras's Adam. With `amsgrad=True` the update is Keras's. It exists for speed on a
    CPU (docs/results.md, "Speed").

    Args: those of `keras.optimizers.Adam`.
    """

    def update_step(self, gradient, variable, learning_rate):
        if self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        index = self._get_variable_index(variable)
        target = variable.value if isinstance(variable, keras.Variable) else variable
        dtype = target.dtype
        step = tf.cast(self.iterations + 1, dtype)
        beta_1 = tf.cast(self.beta_1, dtype)
        beta_2 = tf.cast(self.beta_2, dtype)
        # An embedding's gradient arrives as IndexedSlices; Keras's update densifies it too.
        gradient = tf.cast(tf.convert_to_tensor(gradient), dtype)
        tf.raw_ops.ResourceApplyAdam(
            var=target.handle, m=self._momentums[index].value.handle,
            v=self._velocities[index].value.handle, beta1_power=tf.pow(beta_1, step),
            beta2_power=tf.pow(beta_2, step), lr=tf.cast(learning_rate, dtype), beta1=beta_1,
            beta2=beta_2, epsilon=tf.cast(self.epsilon, dtype), grad=gradient)


def make_optimizer(config, policy, progress=None):
    """bytenet-train's optimizer: `Adam` with the schedule of `config` (`make_schedule`),
    gradient clipping, decoupled weight decay, and loss scaling under `mixed_float16`.

    Args:
        config: a resolved `TrainConfig`.
        policy: the Keras dtype policy name the model uses.
        progress: the `BudgetClock.progress` variable, or None.
    """
    optimizer = Adam(
        make_schedule(config, progress),
        beta_2=config.adam_beta_2, epsilon=config.adam_epsilon, clipnorm=config.clip_norm or None,
        weight_decay=config.weight_decay or None)
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer
