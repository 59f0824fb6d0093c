"""`WarmupRsqrtDecay`: linear warm-up, then inverse-square-root decay."""

import keras


@keras.saving.register_keras_serializable(package="bytenet_tf")
class WarmupRsqrtDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = peak * min(step / warmup, sqrt(warmup / step)), with step counted from 1.

    With `decay=False` the rate stays at the peak after the warm-up.

    Args:
        peak_learning_rate: float, reached at the end of the warm-up.
        warmup_steps: int >= 1.
        decay: bool, decay as 1/sqrt(step) after the warm-up.
    """

    def __init__(self, peak_learning_rate, warmup_steps, decay=True):
        if peak_learning_rate <= 0 or warmup_steps < 1:
            raise ValueError("Need peak_learning_rate > 0 and warmup_steps >= 1. Received: "
                             f"peak_learning_rate={peak_learning_rate}, warmup_steps={warmup_steps}")
        self.peak_learning_rate = peak_learning_rate
        self.warmup_steps = warmup_steps
        self.decay = decay

    def __call__(self, step):
        step = keras.ops.cast(step, "float32") + 1.0
        warmup = float(self.warmup_steps)
        after_warmup = keras.ops.sqrt(warmup / step) if self.decay else 1.0
        factor = keras.ops.minimum(step / warmup, after_warmup)
        return self.peak_learning_rate * factor

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "warmup_steps": self.warmup_steps,
                "decay": self.decay}
