"""`make_train_step`: bytenet-train's training step, one `tf.function` for every strategy.

The loss is the cross-entropy summed over the non-PAD target bytes of a replica, divided by the
non-PAD count summed over all replicas, so the gradients that Keras sums across replicas are
those of the global per-byte mean (a loss that returned a pre-averaged scalar would be counted
once per replica).
"""

import keras
import tensorflow as tf

from bytenet_tf.training import evaluation


def _loss_scale(optimizer):
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return tf.cast(optimizer.dynamic_scale, tf.float32)
    return tf.constant(1.0)


def make_train_step(strategy, model, optimizer, step, label_smoothing=0.0, average=None):
    """The binary's training step: one `tf.function` that takes an iterator of batches.

    Args:
        strategy: a `tf.distribute.Strategy`; `model`, `optimizer` and `step` were built in its
            scope.
        model: a `ByteNet`.
        optimizer: a Keras optimizer, built on `model.trainable_variables`.
        step: an int64 `tf.Variable`, incremented once per call.
        label_smoothing: float in [0, 1): the gradient follows the label-smoothed cross-entropy
            (`evaluation.smoothed_cross_entropy`); every reported loss stays unsmoothed.
        average: an `ema.WeightAverage` to update after each step, or None.

    Returns:
        `train_step(iterator)` -> `(loss, byte_accuracy, target_bytes, gradient_norm,
        objective)` float32 scalars: the mean (unsmoothed) cross-entropy per non-PAD target
        byte of the global batch, the share of those bytes predicted right, their count, the
        global norm of the gradient before clipping (unscaled under loss scaling; with several
        replicas, the square root of the sum of the replicas' squared norms, which is not the
        norm of their summed gradient), and the mean of the objective the gradient follows
        (the label-smoothed cross-entropy; `loss` without smoothing).
    """
    def replica_step(features, labels):
        with tf.GradientTape() as tape:
            logits = model(features, training=True)
            objective_sum, local_sum, mask = evaluation.smoothed_cross_entropy(
                labels, logits, label_smoothing)
            local_count = tf.reduce_sum(mask)
            global_count = tf.distribute.get_replica_context().all_reduce("sum", local_count)
            loss = objective_sum / tf.maximum(global_count, 1.0)
            scaled_loss = optimizer.scale_loss(loss)
        gradients = tape.gradient(scaled_loss, model.trainable_variables)
        squared_norm = tf.square(tf.linalg.global_norm(gradients) / _loss_scale(optimizer))
        optimizer.apply(gradients, model.trainable_variables)
        predictions = tf.argmax(logits, axis=-1, output_type=labels.dtype)
        correct = tf.reduce_sum(tf.cast(tf.equal(predictions, labels), tf.float32) * mask)
        return local_sum, local_count, correct, squared_norm, objective_sum

    @tf.function
    def train_step(iterator):
        features, labels = next(iterator)
        per_replica = strategy.run(replica_step, args=(features, labels))
        loss_sum, count, correct, squared_norm, objective_sum = (
            strategy.reduce("sum", value, axis=None) for value in per_replica)
        step.assign_add(1)
        if average is not None:
            average.update()
        count_or_1 = tf.maximum(count, 1.0)
        return (loss_sum / count_or_1, correct / count_or_1, count, tf.sqrt(squared_norm),
                objective_sum / count_or_1)

    return train_step
