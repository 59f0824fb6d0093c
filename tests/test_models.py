"""The zoo models: causality, receptive field, serialization and mixed precision."""

import inspect
import os

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import bytenet_tf
from bytenet_tf.models.bytenet import ByteNet
from pipelines import byte_codec
from tests.conftest import assert_past_ignores_future, model_inputs, synthetic_batch

MODELS = [(name, name) for name in bytenet_tf.list_models()]
SMALL = dict(hidden_size=16, num_stacks=1, seed=1)


class ZooTest(tf.test.TestCase):

    def test_list_models_has_the_contract_models(self):
        self.assertContainsSubset(
            ["bytenet", "bytenet_small", "bytenet_simplified", "bytenet_nonorm", "bytenet_selu"],
            bytenet_tf.list_models())

    def test_unknown_model_lists_valid_names(self):
        with self.assertRaisesRegex(ValueError, "'bytenett' is unknown; choose one of: bytenet,"):
            bytenet_tf.build_model("bytenett")

    def test_unknown_override_lists_valid_overrides(self):
        with self.assertRaisesRegex(ValueError, "hiden_size.*valid overrides:.*hidden_size"):
            bytenet_tf.build_model("bytenet", hiden_size=3)

    def test_contract_overrides_are_accepted(self):
        model = bytenet_tf.build_model(
            "bytenet_small", hidden_size=24, num_stacks=2, kernel_size=5, dropout_rate=0.2,
            normalization="none", activation="selu")
        self.assertEqual((model.hidden_size, model.num_stacks, model.kernel_size),
                         (24, 2, 5))
        self.assertLen(model.decoder_blocks, 10)

    def test_selu_model_has_no_normalization_and_lecun_init(self):
        model = bytenet_tf.build_model("bytenet_selu")
        self.assertEqual(model.normalization, "none")
        self.assertEqual(model.activation, "selu")
        self.assertIsInstance(model.kernel_initializer, keras.initializers.LecunUniform)
        self.assertTrue(all(norm is None for block in model.encoder_blocks for norm in block.norms))

    def test_batch_normalization_model_uses_layer_norm_in_decoder(self):
        model = bytenet_tf.build_model("bytenet_small", normalization="batch", **SMALL)
        self.assertEqual(model.decoder_normalization, "layer")
        self.assertIsInstance(model.encoder_blocks[0].norms[0], keras.layers.BatchNormalization)


class ThesisLayoutTest(tf.test.TestCase):
    """The thesis code's architecture (`bytenet_thesis`, `bytenet_selu_thesis`)."""

    def test_thesis_models_have_the_thesis_shapes(self):
        for name, encoder_norm in (("bytenet_thesis", "batch"), ("bytenet_selu_thesis", "none")):
            with self.subTest(name=name):
                model = bytenet_tf.build_model(name, hidden_size=20, num_stacks=1)
                self.assertEqual(model.normalization, encoder_norm)
                self.assertEqual(model.encoder_blocks[0].dilated_conv.kernel.shape, (5, 10, 10))
                # The decoder runs on [encoder output, target embedding] itself: 2 * 20.
                self.assertIsNone(model.decoder_input_projection)
                self.assertEqual(model.decoder_blocks[0].dilated_conv.kernel.shape, (3, 20, 20))
                self.assertEqual(model.output_projection.kernel.shape[1], 40)
                self.assertIsNone(model.output_norm)
                self.assertIsNone(model.encoder_output_norm)
                self.assertFalse(model.normalize_residual)
                self.assertEqual(model.dropout_rate, 0.0)

    def test_thesis_logits_are_a_linear_map_of_the_last_block(self):
        model = bytenet_tf.build_model("bytenet_selu_thesis", **SMALL)
        source, target = [[5, 6, 7, byte_codec.EOS_ID]], [[byte_codec.BOS_ID, 5, 6]]
        inputs = model_inputs(source, target)
        encoded = model.encode(inputs["source"])
        x = model.decoder_input(tf.concat([encoded[:, :3],
                                           model.target_embedding(inputs["target"])], -1))
        for block in model.decoder_blocks:
            x = block(x)
        expected = tf.einsum("btc,cv->btv", x, model.output_projection.kernel[0]) \
            + model.output_projection.bias
        self.assertAllClose(model(inputs), expected, atol=1e-5)

    def test_unknown_layout_names_the_choices(self):
        with self.assertRaisesRegex(ValueError, "layout='wide' is unknown; choose one of: paper, "
                                    "thesis"):
            bytenet_tf.build_model("bytenet", layout="wide")


class SugartensorInitializerTest(tf.test.TestCase):

    def test_variance_follows_sugartensors_fan_in(self):
        from bytenet_tf.initializers import SugartensorHeUniform
        init = SugartensorHeUniform(seed=3)
        # 3-D (conv) kernels: fan_in = sqrt(k * in * out), so variance 1 / (3 sqrt(k in out)).
        kernel = init((3, 200, 200)).numpy()
        self.assertAllClose(kernel.var(), 1 / (3 * np.sqrt(3 * 200 * 200)), rtol=0.02)
        self.assertLessEqual(np.abs(kernel).max(), np.sqrt(1 / np.sqrt(3 * 200 * 200)))
        # 2-D (embedding) matrices: fan_in = shape[0].
        self.assertAllClose(init((259, 400)).numpy().var(), 1 / (3 * 259), rtol=0.03)
        self.assertEqual(SugartensorHeUniform.from_config(init.get_config()).seed, 3)


def _random_weights(model):
    """`{path: array}` of the weights that an initializer draws at random (not zeros or ones)."""
    return {weight.path: weight.numpy() for weight in model.weights
            if weight.trainable and np.unique(weight.numpy()).size > 2}


class SeedingTest(parameterized.TestCase, tf.test.TestCase):
    """`seed` decides every random weight, and no two weights share a draw."""

    @parameterized.named_parameters(*MODELS)
    def test_one_seed_builds_equal_models(self, name):
        first = _random_weights(bytenet_tf.build_model(name, **SMALL))
        second = _random_weights(bytenet_tf.build_model(name, **SMALL))
        self.assertEqual(sorted(first), sorted(second))
        for path in first:
            self.assertAllEqual(first[path], second[path], msg=path)

    @parameterized.named_parameters(*MODELS)
    def test_two_seeds_differ_in_every_random_weight(self, name):
        first = _random_weights(bytenet_tf.build_model(name, **dict(SMALL, seed=1)))
        second = _random_weights(bytenet_tf.build_model(name, **dict(SMALL, seed=2)))
        same = [path for path in first if np.array_equal(first[path], second[path])]
        self.assertEmpty(same)

    @parameterized.named_parameters(*MODELS)
    def test_no_two_weights_share_their_values(self, name):
        # One initializer object shared by two weights gave the source and target embeddings the
        # same table; an int seed reused across a block's convolutions would do the same.
        for seed in (1, None):
            weights = _random_weights(bytenet_tf.build_model(name, **dict(SMALL, seed=seed)))
            firsts = {}
            for path, value in weights.items():
                key = tuple(np.ravel(value)[:8].tolist())
                self.assertNotIn(key, firsts, msg=f"{path} starts as {firsts.get(key)} does")
                firsts[key] = path

    def test_unseeded_models_follow_the_global_keras_seed(self):
        keras.utils.set_random_seed(5)
        first = _random_weights(bytenet_tf.build_model("bytenet_selu", hidden_size=16,
                                                       num_stacks=1))
        keras.utils.set_random_seed(5)
        second = _random_weights(bytenet_tf.build_model("bytenet_selu", hidden_size=16,
                                                        num_stacks=1))
        for path in first:
            self.assertAllEqual(first[path], second[path], msg=path)

    def test_seeded_copy_keeps_an_initializers_own_seed(self):
        from bytenet_tf.initializers import seeded_copy
        own = seeded_copy(keras.initializers.GlorotUniform(seed=11), seed=3)
        self.assertEqual(own.get_config()["seed"], 11)
        self.assertEqual(seeded_copy("lecun_uniform", seed=3).get_config()["seed"], 3)
        self.assertIsNone(seeded_copy("lecun_uniform", seed=None).get_config()["seed"])
        self.assertIsInstance(seeded_copy("zeros", seed=3), keras.initializers.Zeros)


class CausalityTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(
        *[(f"{name}_{mode}", name, mode == "training") for name, _ in MODELS
          for mode in ("training", "inference")])
    def test_future_targets_do_not_change_past_logits(self, name, training):
        # Dropout off: with it, two calls draw different masks anyway; what is tested is the flow
        # of information, which normalization statistics could leak in training mode.
        model = bytenet_tf.build_model(name, dropout_rate=0.0, **SMALL)
        assert_past_ignores_future(
            self, lambda source, target: model(model_inputs(source, target), training=training))

    @parameterized.named_parameters(*MODELS)
    def test_last_source_byte_changes_early_logits(self, name):
        model = bytenet_tf.build_model(name, **SMALL)
        source = [[byte_codec.encode_python(b"abcdefgh")[i % 8] for i in range(9)] + [byte_codec.EOS_ID]]
        target = [[byte_codec.BOS_ID] + byte_codec.encode_python(b"xyz")]
        changed = [list(source[0])]
        changed[0][-2] = byte_codec.encode_python(b"Q")[0]
        before = model(model_inputs(source, target), training=False)
        after = model(model_inputs(changed, target), training=False)
        self.assertNotAllClose(before[:, 0], after[:, 0])


class ReceptiveFieldTest(tf.test.TestCase):

    def test_decoder_receptive_field_matches_analytic_value(self):
        # SELU has no zero-slope region, so the single path that reaches farthest is never cut
        # by a dead unit (ReLU can cut it at initialization); the conv topology is the same.
        model = bytenet_tf.build_model("bytenet_selu", hidden_size=8, num_stacks=2,
                                       kernel_size=3, dropout_rate=0.0, seed=0)
        expected = 1 + 2 * (3 - 1) * (1 + 2 + 4 + 8 + 16)
        self.assertEqual(model.receptive_field, expected)
        length = expected + 10
        # Sources of one byte: past position 1 the decoder sees only target bytes. Target id 41
        # appears at position 0 only, so the gradient of a position's logits with respect to
        # row 41 of the target embedding is that position's dependence on position 0. A
        # gradient, not the change of the logits when position 0 changes: the farthest path
        # is one chain of small weights, and its effect on the logits can round away in
        # float32 (it did for some seeds), while its gradient cannot.
        source = [[5, byte_codec.EOS_ID]]
        target = np.full((1, length), 40)
        target[0, 0] = 41
        projection = tf.random.stateless_normal([byte_codec.VOCAB_SIZE], seed=[1, 2])
        embeddings = model.target_embedding.embeddings
        inputs = model_inputs(source, target)

        @tf.function  # traced once, then one graph run per position
        def reach_of(position):
            with tf.GradientTape() as tape:
                value = tf.linalg.matvec(model(inputs)[0], projection)[position]
            gradient = tf.convert_to_tensor(tape.gradient(value, embeddings))
            return tf.reduce_max(tf.abs(gradient[41]))

        reach = [float(reach_of(tf.constant(position))) for position in range(length)]
        touched = np.nonzero(np.array(reach) > 0)[0]
        self.assertEqual(touched.max(), expected - 1)
        self.assertLen(touched, expected)  # every position within the field depends on it

    def test_padding_does_not_change_a_sentence(self):
        for name in ("bytenet_small", "bytenet_selu", "bytenet_simplified"):
            for normalization in ("layer", "none"):
                model = bytenet_tf.build_model(name, normalization=normalization, **SMALL)
                # Trained models have nonzero biases and norm offsets, which turn padded
                # positions nonzero inside a block; randomize them as training would.
                rng = np.random.default_rng(0)
                for weight in model.weights:
                    if "bias" in weight.path or "beta" in weight.path:
                        weight.assign(rng.normal(size=weight.shape).astype("float32"))
                source, target, _ = synthetic_batch(2, 20)
                alone = model(model_inputs(source[:1], target[:1]))
                padded_source = np.pad(source[:1], [[0, 0], [0, 7]],
                                       constant_values=byte_codec.PAD_ID)
                self.assertAllClose(model(model_inputs(padded_source, target[:1])), alone, atol=1e-4,
                                    msg=f"{name} normalization={normalization}")


class SerializationTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(*MODELS)
    def test_keras_save_and_load_with_overrides(self, name):
        model = bytenet_tf.build_model(
            name, hidden_size=12, num_stacks=1, kernel_size=5, dropout_rate=0.1,
            dilations=(1, 3), unfold_a=1.5, unfold_b=2.0, max_length=77, seed=4)
        source, target, _ = synthetic_batch(2, 16)
        path = os.path.join(self.get_temp_dir(), f"{name}.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
        self.assertEqual(loaded.get_config(), model.get_config())
        self.assertAllClose(loaded(model_inputs(source, target)), model(model_inputs(source, target)))

    def test_every_constructor_argument_in_config(self):
        config = bytenet_tf.build_model("bytenet_selu", **SMALL).get_config()
        for argument in inspect.signature(ByteNet.__init__).parameters:
            if argument not in ("self", "kwargs", "ops_policy"):
                self.assertIn(argument, config)
        self.assertNotIn("ops_policy", config)  # a run-time choice (bytenet_tf.ops)


class PrecisionTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(
        *[(f"{name}_{policy}", name, policy) for name, _ in MODELS
          for policy in ("float32", "mixed_bfloat16", "mixed_float16")])
    def test_training_step_gives_float32_logits_and_finite_loss(self, name, policy):
        model = bytenet_tf.build_model(name, dtype=policy, **SMALL)
        optimizer = keras.optimizers.Adam(1e-3)
        if policy == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        source, target, labels = synthetic_batch(2, 16)
        before = [w.numpy().copy() for w in model.trainable_variables]
        # A loss-scale optimizer skips the steps whose scaled gradients overflow float16 and
        # halves its scale (2**15 at the start) each time, so it may take a few steps to move.
        for _ in range(16 if policy == "mixed_float16" else 1):
            with tf.GradientTape() as tape:
                logits = model(model_inputs(source, target), training=True)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    tf.constant(labels), logits))
                scaled = optimizer.scale_loss(loss)
            optimizer.apply(tape.gradient(scaled, model.trainable_variables),
                            model.trainable_variables)
            changed = [not np.array_equal(b, w.numpy())
                       for b, w in zip(before, model.trainable_variables)]
            if any(changed):
                break
        self.assertEqual(logits.dtype, tf.float32)
        self.assertTrue(np.isfinite(float(loss)))
        self.assertEqual(model.encoder_blocks[0].compute_dtype, policy.replace("mixed_", "")
                         if policy != "float32" else "float32")
        self.assertTrue(any(changed))
