"""CrossAttention and the zoo's SELU ByteNet with one attention readout."""

import os

import numpy as np
import tensorflow as tf

import bytenet_tf
from bytenet_tf import decoding, export, vocabulary
from bytenet_tf.layers import CrossAttention
from tests.conftest import synthetic_lines


class CrossAttentionLayerTest(tf.test.TestCase):

    def test_starts_as_the_identity(self):
        layer = CrossAttention(6, seed=3)
        x = tf.random.stateless_normal([2, 4, 6], seed=[1, 2])
        self.assertAllEqual(layer(x, tf.random.stateless_normal([2, 5, 6], seed=[3, 4])), x)

    def test_matches_a_numpy_reference_and_ignores_padded_source_positions(self):
        layer = CrossAttention(6, seed=3)
        rng = np.random.default_rng(0)
        x = rng.normal(size=(2, 4, 6)).astype(np.float32)
        encoded = rng.normal(size=(2, 5, 6)).astype(np.float32)
        mask = np.array([[True] * 5, [True, True, False, False, False]])
        layer(x, encoded, mask)
        layer.output_kernel.assign(rng.normal(size=(6, 6)).astype(np.float32))  # as if trained
        got = layer(x, encoded, mask).numpy()
        wq, wk, wv, wo = (np.array(getattr(layer, f"{n}_kernel"), np.float64)
                          for n in CrossAttention.PROJECTIONS)
        scores = np.einsum("btd,bsd->bts", x @ wq, encoded @ wk) / np.sqrt(6)
        scores = np.where(mask[:, None, :], scores, -np.inf)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        expected = x + np.einsum("bts,bsd->btd", weights, encoded @ wv) @ wo
        self.assertAllClose(got, expected, atol=1e-5)
        # What sits at a padded source position cannot change the output.
        changed = encoded.copy()
        changed[1, 2:] = 100.0
        self.assertAllClose(layer(x, changed, mask)[1], got[1], atol=1e-5)

    def test_branch_mode_weighs_and_rescales_an_initialized_readout(self):
        layer = CrossAttention(6, branch_weight=0.5, normalize_residual=True, seed=3)
        x = tf.random.stateless_normal([1, 3, 6], seed=[1, 2])
        encoded = tf.random.stateless_normal([1, 4, 6], seed=[3, 4])
        got = layer(x, encoded)
        self.assertGreater(float(tf.reduce_max(tf.abs(layer.output_kernel))), 0.0)
        plain = CrossAttention(6, branch_weight=1.0, normalize_residual=False, seed=3)
        plain(x, encoded)
        for name in CrossAttention.PROJECTIONS:
            getattr(plain, f"{name}_kernel").assign(getattr(layer, f"{name}_kernel"))
        # plain = x + r, so r = plain - x, and the layer must give (x + 0.5 r) / sqrt(1.25).
        readout = plain(x, encoded) - x
        self.assertAllClose(got, (x + 0.5 * readout) / np.sqrt(1.25), atol=1e-5)

    def test_unknown_mode_names_the_choices(self):
        with self.assertRaisesRegex(ValueError, "cross_attention='yes' is unknown; choose one "
                                                "of: none, identity, branch"):
            bytenet_tf.build_model("bytenet_selu", hidden_size=8, cross_attention="yes")

    def test_serialize_deserialize(self):
        layer = CrossAttention(4, kernel_initializer="lecun_uniform", seed=7, name="attention")
        clone = CrossAttention.from_config(layer.get_config())
        self.assertEqual(clone.get_config(), layer.get_config())
        x, encoded = tf.ones([1, 2, 4]), tf.ones([1, 3, 4])
        self.assertAllClose(clone(x, encoded), layer(x, encoded))


class AttentionModelTest(tf.test.TestCase):

    def _model(self, mode="branch"):
        """A small attention model with a random output projection, as a trained one has
        (the `identity` readout starts it at 0)."""
        model = bytenet_tf.build_model("bytenet_selu_attention", hidden_size=16, num_stacks=2,
                                       dropout_rate=0.0, seed=0, cross_attention=mode)
        model.attention.output_kernel.assign(
            tf.random.stateless_uniform([16, 16], seed=[5, 6], minval=-0.4, maxval=0.4))
        return model

    def test_a_target_position_reads_a_source_position_far_ahead(self):
        # Without attention the decoder reads the encoder at its own position, which sees the
        # source only through the encoder's receptive field; with it, position 0 reads them all.
        model = self._model()
        base = [b"a" * 300]
        changed = [b"a" * 299 + b"z"]
        target = vocabulary.frame_batch(base, [b"x"])[1]
        outputs = [model({"source": vocabulary.frame_batch(s), "target": target})[:, 0]
                   for s in (base, changed)]
        self.assertGreater(float(tf.reduce_max(tf.abs(outputs[0] - outputs[1]))), 1e-6)
        plain = bytenet_tf.build_model("bytenet_selu", hidden_size=16, num_stacks=2,
                                       dropout_rate=0.0, seed=0)
        outputs = [plain({"source": vocabulary.frame_batch(s), "target": target})[:, 0]
                   for s in (base, changed)]
        self.assertAllEqual(outputs[0], outputs[1])

    def test_decoder_step_without_the_memory_is_a_clear_error(self):
        model = self._model()
        with self.assertRaisesRegex(ValueError, "pass decoder_step the source's `memory="):
            model.decoder_step(tf.zeros([1, 16]), tf.constant([vocabulary.BOS_ID]),
                               model.initial_decoder_state(1))

    def test_cached_greedy_equals_the_naive_decoder(self):
        source = vocabulary.frame_batch([line or b"x" for line in synthetic_lines(3, seed=9)])
        for mode in ("branch", "branch_positions"):
            with self.subTest(mode=mode):
                model = self._model(mode)
                # In graphs, as the translator runs them (eagerly, every step dispatches each op).
                cached, cached_logits = tf.function(decoding.greedy_decode)(
                    model, source, return_logits=True)
                naive, naive_logits = tf.function(decoding.naive_greedy_decode)(
                    model, source, return_logits=True)
                self.assertAllEqual(cached, naive)
                self.assertAllClose(cached_logits, naive_logits, atol=1e-4)

    def test_position_encodings_reach_the_queries_and_keys(self):
        plain, located = (CrossAttention(8, branch_weight=1.0, positions=p, seed=1)
                          for p in (False, True))
        x, encoded = tf.ones([1, 3, 8]), tf.ones([1, 5, 8])
        plain(x, encoded)
        located(x, encoded)
        # Identical bytes everywhere: only the positions can tell the source positions apart.
        without = plain.memory(encoded)[0]
        self.assertAllClose(without[:, 0], without[:, 4])
        with_positions = located.memory(encoded)[0]
        self.assertNotAllClose(with_positions[:, 0], with_positions[:, 4])
        # A step at target position 2 equals the full pass's third position.
        full = located(x, encoded)
        step = located.attend(x[:, 2:3], located.memory(encoded), 2)
        self.assertAllClose(step[:, 0], full[:, 2], atol=1e-5)

    def test_beam_search_on_a_padded_batch_equals_each_sentence_alone(self):
        model = self._model()
        sources = [line or b"x" for line in synthetic_lines(3, seed=8, max_bytes=40)]
        batch = decoding.beam_search_decode(model, vocabulary.frame_batch(sources), beam_size=3)
        for row, source in zip(batch.numpy(), sources):
            alone = decoding.beam_search_decode(model, vocabulary.frame_batch([source]),
                                                beam_size=3).numpy()[0]
            self.assertEqual(vocabulary.decode(row).numpy(), vocabulary.decode(alone).numpy())

    def test_export_translates_like_the_model(self):
        model = self._model()
        base = os.path.join(self.get_temp_dir(), "attention_export")
        version = export.export_saved_model(model, base, beam_size=2)
        signature = tf.saved_model.load(version).signatures["serving_default"]
        sources = [b"Guten Tag", b"", b"\xff\x00 kaputt"]
        got = signature(source=tf.constant(sources))["translation"].numpy().tolist()
        want = bytenet_tf.inference.Translator(model, beam_size=2)(sources)
        self.assertEqual(got, want)
