"""Label smoothing of the training objective, and the moving average of the weights."""

import os

import keras
import numpy as np
import tensorflow as tf

from bytenet_tf import vocabulary, zoo
from bytenet_tf.training import evaluation, trainer
from bytenet_tf.training.config import TrainConfig, resolve
from bytenet_tf.training.ema import WeightAverage
from bytenet_tf.training.step import make_train_step
from pipelines import datasets
from pipelines.options import ConfigError
from tests.conftest import synthetic_batch

TINY = dict(hidden_size=16, num_stacks=1, batch_size=8, max_length=64, warmup_steps=2,
            log_every=1, valid_size=6, progress=False, precision="float32", seed=0)


def _tiny_model_and_step(learning_rate, seed, average_decay=None, label_smoothing=0.0):
    """A small SELU ByteNet without dropout, SGD on it, and its training step over one repeated
    batch of synthetic pairs: `(model, train_step, batches, average, (source, target, labels))`,
    with `average` the `WeightAverage` of `average_decay` (None without one)."""
    model = zoo.build_model("bytenet_selu", hidden_size=16, num_stacks=1, dropout_rate=0.0,
                            seed=0)
    optimizer = keras.optimizers.SGD(learning_rate)
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64)
    average = WeightAverage(model, average_decay) if average_decay else None
    source, target, labels = synthetic_batch(4, seed=seed)
    batches = iter(tf.data.Dataset.from_tensors(
        ({"source": source, "target": target}, labels)).repeat())
    train_step = make_train_step(tf.distribute.get_strategy(), model, optimizer, step,
                                 label_smoothing, average)
    return model, train_step, batches, average, (source, target, labels)


def _log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


class LabelSmoothingTest(tf.test.TestCase):

    def test_smoothed_loss_is_the_closed_form_on_a_known_distribution(self):
        rng = np.random.default_rng(0)
        logits = rng.normal(size=(2, 5, vocabulary.VOCAB_SIZE)).astype(np.float32) * 3
        labels = rng.integers(3, vocabulary.VOCAB_SIZE, size=(2, 5)).astype(np.int32)
        labels[1, 3:] = vocabulary.PAD_ID
        log_p = _log_softmax(logits.astype(np.float64))
        mask = labels != vocabulary.PAD_ID
        nll = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
        uniform = -log_p.mean(axis=-1)
        for smoothing in (0.0, 0.1, 0.3):
            expected = ((1 - smoothing) * nll + smoothing * uniform)[mask].sum()
            smoothed, plain, got_mask = evaluation.smoothed_cross_entropy(
                tf.constant(labels), tf.constant(logits), smoothing)
            self.assertAllClose(smoothed, expected, rtol=1e-5)
            self.assertAllClose(plain, nll[mask].sum(), rtol=1e-5)
            self.assertAllEqual(got_mask, mask.astype(np.float32))

    def test_uniform_logits_cost_the_same_smoothed_or_not(self):
        # Every id equally likely: -log p is log V for the label and for the mean alike.
        labels = tf.constant([[5, 9, vocabulary.PAD_ID]])
        logits = tf.zeros([1, 3, vocabulary.VOCAB_SIZE])
        smoothed, plain, _ = evaluation.smoothed_cross_entropy(labels, logits, 0.2)
        self.assertAllClose(smoothed, 2 * np.log(vocabulary.VOCAB_SIZE))
        self.assertAllClose(plain, smoothed)

    def test_training_step_follows_the_smoothed_objective_and_reports_the_plain_loss(self):
        model, train_step, batches, _, (source, target, labels) = _tiny_model_and_step(
            0.0, seed=2, label_smoothing=0.1)
        loss, _, count, _, objective = train_step(batches)
        logits = model({"source": source, "target": target}, training=False)
        smoothed, plain, _ = evaluation.smoothed_cross_entropy(tf.constant(labels), logits, 0.1)
        self.assertAllClose(loss, plain / count, rtol=1e-5)
        self.assertAllClose(objective, smoothed / count, rtol=1e-5)
        self.assertNotAllClose(loss, objective)

    def test_out_of_range_values_are_named(self):
        for key in ("label_smoothing", "ema_decay"):
            with self.assertRaisesRegex(ConfigError, rf"`{key}` must be in \[0, 1\). "
                                                     rf"Received: {key}=1.0"):
                resolve(TrainConfig(**{key: 1.0}))


class WeightAverageTest(tf.test.TestCase):

    def test_average_equals_its_closed_form_over_a_few_steps(self):
        model, train_step, batches, average, _ = _tiny_model_and_step(0.5, seed=5,
                                                                      average_decay=0.6)
        expected = [np.array(w, np.float64) for w in model.trainable_variables]
        for t in range(6):
            train_step(batches)
            decay = min(0.6, (1 + t) / (10 + t))  # 0.1, 0.18, ... then 0.6 from t = 4
            expected = [decay * e + (1 - decay) * np.array(w, np.float64)
                        for e, w in zip(expected, model.trainable_variables)]
        self.assertEqual(int(average.updates.numpy()), 6)
        moved = max(float(np.abs(np.array(a) - np.array(w)).max())
                    for a, w in zip(average.averages, model.trainable_variables))
        self.assertGreater(moved, 1e-3, "the average must differ from the last weights")
        for got, want in zip(average.averages, expected):
            self.assertAllClose(got, want, atol=1e-6)
        average.assign_to_model()
        for weight, want in zip(model.trainable_variables, expected):
            self.assertAllClose(weight, want, atol=1e-6)

    def test_a_resumed_run_continues_the_same_average(self):
        base = dict(data=datasets.DataSpec(dataset="digits", digits_config="thesis"),
                    export=False, checkpoint_every=2, ema_decay=0.9, select_by="chrf", **TINY)
        straight = os.path.join(self.get_temp_dir(), "straight")
        trainer.train_and_evaluate(TrainConfig(model_dir=straight, train_steps=6, **base))
        resumed = os.path.join(self.get_temp_dir(), "resumed")
        trainer.train_and_evaluate(TrainConfig(model_dir=resumed, train_steps=2, **base))
        results = trainer.train_and_evaluate(TrainConfig(model_dir=resumed, train_steps=6, **base))
        self.assertIn("ema", results["selection"]["candidates"])
        self.assertEqual(results["selection"]["candidates"]["ema"]["updates"], 6)
        want = tf.train.load_checkpoint(tf.train.latest_checkpoint(straight))
        got = tf.train.load_checkpoint(tf.train.latest_checkpoint(resumed))
        names = [n for n in want.get_variable_to_shape_map() if n.startswith("ema/")]
        self.assertGreater(len(names), 10)
        for name in names:
            self.assertAllClose(got.get_tensor(name), want.get_tensor(name), atol=1e-6, msg=name)
