"""Learning-rate schedules of bytenet-train, and the clock of its time budget.

`WarmupRsqrtDecay`: linear warm-up, then inverse-square-root decay (no end).
`WarmupCosineDecay`: linear warm-up, then a cosine decay that ends at a floor when the run's
steps or its time budget are spent.
`BudgetClock`: the training time of every run in a `model_dir`, and the share of the budget it
is, which the cosine schedule reads. `make_schedule(config, progress)`: the schedule a resolved
`TrainConfig` names.
"""

import math
import time

import keras
import tensorflow as tf


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


@keras.saving.register_keras_serializable(package="bytenet_tf")
class WarmupCosineDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up, then a cosine decay to a floor that is reached when the run is over.

        lr = peak * min(step / warmup, 1) * (floor + (1 - floor) * (1 + cos(pi * done)) / 2)

    `done` in [0, 1] is how much of the run is over: the larger of `step / total_steps` and
    `progress`, a variable that the training loop sets to the share of its time budget spent.
    A run stopped by a time budget so ends at the floor, however many steps the budget held.

    Args:
        peak_learning_rate: float, reached at the end of the warm-up.
        warmup_steps: int >= 1.
        total_steps: int >= 1, the step count at which the decay reaches the floor.
        floor: float in [0, 1], the final rate as a fraction of the peak.
        progress: a float32 scalar `tf.Variable` in [0, 1], or None (steps alone).
    """

    def __init__(self, peak_learning_rate, warmup_steps, total_steps, floor=0.05, progress=None):
        if peak_learning_rate <= 0 or warmup_steps < 1 or total_steps < 1 or not 0 <= floor <= 1:
            raise ValueError(
                "Need peak_learning_rate > 0, warmup_steps >= 1, total_steps >= 1 and "
                f"0 <= floor <= 1. Received: peak_learning_rate={peak_learning_rate}, "
                f"warmup_steps={warmup_steps}, total_steps={total_steps}, floor={floor}")
        self.peak_learning_rate = peak_learning_rate
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.floor = floor
        self.progress = progress

    def done(self, step):
        """The share of the run that is over at `step` (counted from 0): float32 in [0, 1]."""
        done = (keras.ops.cast(step, "float32") + 1.0) / float(self.total_steps)
        if self.progress is not None:
            done = keras.ops.maximum(done, keras.ops.cast(self.progress, "float32"))
        return keras.ops.clip(done, 0.0, 1.0)

    def __call__(self, step):
        warmup = keras.ops.minimum((keras.ops.cast(step, "float32") + 1.0) / self.warmup_steps, 1.0)
        cosine = 0.5 * (1.0 + keras.ops.cos(math.pi * self.done(step)))
        return self.peak_learning_rate * warmup * (self.floor + (1.0 - self.floor) * cosine)

    def get_config(self):
        # The progress variable belongs to the run, not to the schedule's configuration.
        return {"peak_learning_rate": self.peak_learning_rate, "warmup_steps": self.warmup_steps,
                "total_steps": self.total_steps, "floor": self.floor}


def make_schedule(config, progress=None):
    """The learning-rate schedule that a resolved `TrainConfig` names.

    Args:
        config: a resolved `bytenet_tf.training.config.TrainConfig`.
        progress: float32 scalar variable, the share of the time budget spent (for `cosine`).
    """
    warmup = max(config.warmup_steps, 1)
    if not config.decay_learning_rate:
        return WarmupRsqrtDecay(config.learning_rate, warmup, decay=False)
    if config.schedule == "cosine":
        return WarmupCosineDecay(config.learning_rate, warmup, config.train_steps,
                                 config.learning_rate_floor, progress)
    return WarmupRsqrtDecay(config.learning_rate, warmup)


class BudgetClock:
    """The wall-clock budget of a `model_dir`'s runs: training, then the end of the run.

    The budget covers the training loop (periodic validation included) and the end of the run
    (validation, the choice of the weights and of the length penalty, the export). A `reserve`
    for the end, planned from measured decoding speed (`plan`), is kept from training: the loop
    stops, and the cosine schedule ends its decay, at `budget - reserve`.

    `seconds` (float64, checkpointed) is the time of the earlier runs plus this one's; `reserve`
    (float64, checkpointed) the seconds kept for the end; `progress` (float32, not
    checkpointed) is `seconds / (budget - reserve)`, which the cosine schedule reads.

    Args:
        budget: float, the time budget in seconds; 0 or None for none.
        reserve: float, the seconds kept for the end until `plan` measures better.
    """

    # The end of a run may take at most this share of the budget.
    MAX_RESERVE_SHARE = 0.5

    def __init__(self, budget, reserve=0.0):
        self.budget = budget
        self.seconds = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="train_seconds")
        self.reserve = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="finish_reserve")
        self.progress = tf.Variable(0.0, dtype=tf.float32, trainable=False,
                                    name="budget_progress")
        self.plan(reserve)
        self._base = 0.0
        self._start = None

    def plan(self, reserve):
        """Keeps `reserve` seconds (at most `MAX_RESERVE_SHARE` of the budget) for the end."""
        if self.budget:
            self.reserve.assign(min(max(reserve, 0.0), self.MAX_RESERVE_SHARE * self.budget))

    @property
    def training_budget(self):
        """The seconds that training may take: the budget less the reserve (0: no limit)."""
        return self.budget - float(self.reserve.numpy()) if self.budget else 0.0

    def start(self):
        """Starts counting from the checkpointed `seconds`."""
        self._base, self._start = float(self.seconds.numpy()), time.perf_counter()
        self.tick()

    def tick(self):
        """Brings `seconds` and `progress` up to now; returns the seconds."""
        seconds = self._base + time.perf_counter() - self._start
        self.seconds.assign(seconds)
        if self.budget:
            self.progress.assign(min(seconds / self.training_budget, 1.0))
        return seconds

    def spent(self):
        """Whether the training part of the budget is spent (never without a budget)."""
        return bool(self.budget) and float(self.seconds.numpy()) >= self.training_budget

    def remaining(self):
        """Seconds left of the whole budget, now (infinite without one)."""
        if not self.budget:
            return float("inf")
        return self.budget - (self.tick() if self._start is not None
                              else float(self.seconds.numpy()))
