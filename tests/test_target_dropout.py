"""`target_dropout`: byte-level word dropout on the decoder's inputs, in training only."""

import numpy as np
import tensorflow as tf

import bytenet_tf
from bytenet_tf.vocabulary import BOS_ID
from tests.conftest import assert_past_ignores_future, model_inputs, synthetic_batch
from tests.test_train import assert_same_model_weights, resume_and_compare, train_digits

SMALL = dict(hidden_size=16, num_stacks=1, dropout_rate=0.0, seed=1)


class TargetDropoutModelTest(tf.test.TestCase):

    def test_a_rate_outside_zero_to_one_names_the_value(self):
        for rate in (-0.1, 1.0, 1.5):
            with self.assertRaisesRegex(ValueError, f"target_dropout={rate}"):
                bytenet_tf.build_model("bytenet_selu", target_dropout=rate, **SMALL)

    def test_inference_hides_nothing(self):
        source, target, _ = synthetic_batch(3, 20)
        dropped = bytenet_tf.build_model("bytenet_selu", target_dropout=0.5, **SMALL)
        plain = bytenet_tf.build_model("bytenet_selu", **SMALL)
        self.assertAllEqual(dropped(model_inputs(source, target), training=False),
                            plain(model_inputs(source, target), training=False))

    def test_hidden_bytes_read_as_zero_embeddings(self):
        # At a rate this close to 1 every byte after BOS is hidden: the model must then compute
        # what a model whose target embedding is zero for every id but BOS computes.
        source, target, _ = synthetic_batch(3, 20)
        dropped = bytenet_tf.build_model("bytenet_selu", target_dropout=1 - 1e-7, **SMALL)
        plain = bytenet_tf.build_model("bytenet_selu", **SMALL)
        table = plain.target_embedding.embeddings.numpy()
        only_bos = np.zeros_like(table)
        only_bos[BOS_ID] = table[BOS_ID]
        plain.target_embedding.embeddings.assign(only_bos)
        self.assertAllClose(dropped(model_inputs(source, target), training=True),
                            plain(model_inputs(source, target), training=True), atol=1e-6)
        # And it differs from reading the bytes.
        self.assertNotAllClose(dropped(model_inputs(source, target), training=True),
                               dropped(model_inputs(source, target), training=False))

    def test_first_position_is_never_hidden(self):
        source, target, _ = synthetic_batch(4, 20)
        model = bytenet_tf.build_model("bytenet_selu", target_dropout=0.9, **SMALL)
        trained = model(model_inputs(source, target), training=True)
        inferred = model(model_inputs(source, target), training=False)
        # Position 0 reads BOS and the encoder's position 0 only (the decoder is causal).
        self.assertAllClose(trained[:, 0], inferred[:, 0], atol=1e-6)
        self.assertNotAllClose(trained[:, 1:], inferred[:, 1:])

    def test_share_of_hidden_bytes_is_the_rate(self):
        model = bytenet_tf.build_model("bytenet_selu", target_dropout=0.1, **SMALL)
        hidden = model.hide_target_bytes(tf.ones([64, 201, 4]))
        zero_rows = tf.reduce_all(tf.equal(hidden, 0.0), axis=-1).numpy()
        self.assertFalse(zero_rows[:, 0].any())
        # 12,800 draws: the share's standard deviation is 0.0027.
        self.assertAllClose(zero_rows[:, 1:].mean(), 0.1, atol=0.01)
        # Kept rows are unscaled.
        self.assertAllEqual(hidden.numpy()[~zero_rows], np.ones([(~zero_rows).sum(), 4]))

    def test_a_seed_repeats_its_masks_and_each_call_draws_new_ones(self):
        first = bytenet_tf.build_model("bytenet_selu", target_dropout=0.3, **SMALL)
        second = bytenet_tf.build_model("bytenet_selu", target_dropout=0.3, **SMALL)
        ones = tf.ones([8, 50, 2])
        masks = [first.hide_target_bytes(ones), first.hide_target_bytes(ones)]
        self.assertAllEqual(masks[0], second.hide_target_bytes(ones))
        self.assertAllEqual(masks[1], second.hide_target_bytes(ones))
        self.assertNotAllEqual(masks[0], masks[1])
        other = bytenet_tf.build_model("bytenet_selu", target_dropout=0.3,
                                       **dict(SMALL, seed=2))
        self.assertNotAllEqual(masks[0], other.hide_target_bytes(ones))

    def test_future_targets_do_not_change_past_logits_in_training(self):
        # Two models of one seed draw the same mask on their first call, so the only difference
        # between the calls is the changed future.
        def logits_of(source, target):
            model = bytenet_tf.build_model("bytenet_selu", target_dropout=0.3, **SMALL)
            return model(model_inputs(source, target), training=True)

        assert_past_ignores_future(self, logits_of)

    def test_config_keeps_the_rate_and_old_configs_have_none(self):
        model = bytenet_tf.build_model("bytenet_selu", target_dropout=0.2, **SMALL)
        config = model.get_config()
        self.assertEqual(config["target_dropout"], 0.2)
        rebuilt = type(model).from_config(config)
        self.assertEqual(rebuilt.target_dropout, 0.2)
        del config["target_dropout"]  # a config written before the option existed
        self.assertEqual(type(model).from_config(config).target_dropout, 0.0)


class TargetDropoutTrainingTest(tf.test.TestCase):

    def test_resumed_run_hides_the_same_bytes(self):
        # The mask generator's state is in the checkpoint: a resumed run equals one that never
        # stopped.
        straight = resume_and_compare(self, target_dropout=0.3)
        # And the option changes training: without it the weights differ.
        plain = self.get_temp_dir() + "/plain"
        train_digits(plain, train_steps=6)
        with self.assertRaises(AssertionError):
            assert_same_model_weights(self, plain, straight)
