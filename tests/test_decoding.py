"""Cached decoding equals the naive decoder; beam search keeps its caches in order."""

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import bytenet_tf
from bytenet_tf import decoding
from pipelines import byte_codec
from tests.conftest import synthetic_lines

MODELS = [(name, name) for name in bytenet_tf.list_models()]


def _sources(count=3, max_bytes=30):
    """Synthetic sources of different lengths, the empty sentence among them."""
    return tf.constant(byte_codec.frame_batch([b""] + synthetic_lines(count - 1, 3, max_bytes)))


def _sequence_log_prob(model, source, ids):
    """Teacher-forced log-probability of `ids` (up to and including EOS) under `model`."""
    ids = np.asarray(ids)
    target = np.concatenate([np.full((ids.shape[0], 1), byte_codec.BOS_ID), ids[:, :-1]], 1)
    logits = model({"source": source, "target": tf.constant(target, tf.int32)})
    log_probs = tf.nn.log_softmax(logits).numpy()
    totals = []
    for row in range(ids.shape[0]):
        total = 0.0
        for t, token in enumerate(ids[row]):
            if token == byte_codec.PAD_ID:
                break
            total += log_probs[row, t, token]
            if token == byte_codec.EOS_ID:
                break
        totals.append(total)
    return np.array(totals)


class CachedDecodingTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(*MODELS)
    def test_cached_greedy_equals_naive_greedy(self, name):
        model = bytenet_tf.build_model(name, hidden_size=24, num_stacks=1, seed=3)
        source = _sources()
        cached = tf.function(lambda s: decoding.greedy_decode(
            model, s, max_output_length=40, return_logits=True))
        naive = tf.function(lambda s: decoding.naive_greedy_decode(
            model, s, max_output_length=40, return_logits=True))
        cached_ids, cached_logits = cached(source)
        naive_ids, naive_logits = naive(source)
        self.assertAllEqual(cached_ids, naive_ids)
        self.assertAllClose(cached_logits, naive_logits, atol=1e-4, rtol=0)

    @parameterized.named_parameters(("float32", "float32"), ("mixed_bfloat16", "mixed_bfloat16"))
    def test_input_tables_add_up_to_the_input_projection(self, dtype):
        model = bytenet_tf.build_model("bytenet_selu", hidden_size=24, num_stacks=1, seed=3,
                                       dtype=dtype)
        source = _sources()
        encoded = model.encode(source)
        source_share, id_table = model.input_tables(encoded)
        ids = tf.constant(np.random.default_rng(0).integers(
            0, byte_codec.VOCAB_SIZE, size=encoded.shape[:2]), tf.int32)
        projected = model.decoder_input(tf.concat([encoded, model.target_embedding(ids)], -1))
        tolerance = 1e-5 if dtype == "float32" else 0.1
        self.assertAllClose(tf.cast(source_share + tf.gather(id_table, ids), tf.float32),
                            tf.cast(projected, tf.float32), atol=tolerance, rtol=0)
        # Zero encoder output (past the source end) has a zero share.
        self.assertAllEqual(model.input_tables(tf.zeros_like(encoded))[0],
                            tf.zeros_like(source_share))

    def test_thesis_layout_has_no_input_tables_and_decodes_as_naively(self):
        model = bytenet_tf.build_model("bytenet_selu_thesis", hidden_size=12, num_stacks=1,
                                       seed=3)
        source = _sources()
        self.assertIsNone(model.input_tables(model.encode(source)))
        self.assertAllEqual(decoding.greedy_decode(model, source, max_output_length=30),
                            decoding.naive_greedy_decode(model, source, max_output_length=30))

    def test_xla_compiled_decoding_equals_graph_mode(self):
        model = bytenet_tf.build_model("bytenet_selu", hidden_size=16, num_stacks=1, seed=0)
        source = _sources()
        compiled = tf.function(lambda s: decoding.greedy_decode(
            model, s, max_output_length=30, capacity=30), jit_compile=True)(source)
        plain = decoding.greedy_decode(model, source, max_output_length=30)
        self.assertEqual(compiled.shape, [3, 30])
        self.assertAllEqual(compiled[:, :plain.shape[1]], plain)
        self.assertAllEqual(compiled[:, plain.shape[1]:], tf.zeros_like(compiled[:, plain.shape[1]:]))

    def test_output_respects_dynamic_unfolding_bound(self):
        model = bytenet_tf.build_model("bytenet_selu", hidden_size=16, num_stacks=1,
                                       unfold_a=1.2, unfold_b=0.0, seed=0)
        source = tf.constant([[10, 11, 12, 13, 14, byte_codec.EOS_ID]])
        ids = decoding.greedy_decode(model, source, margin=3, ignore_eos=True)
        self.assertEqual(ids.shape[1], int(np.ceil(1.2 * 5)) + 3)

    def test_stops_once_every_row_has_emitted_eos(self):
        model = bytenet_tf.build_model("bytenet_selu", hidden_size=16, num_stacks=1, seed=0)
        model.output_projection.bias.assign(
            np.eye(byte_codec.VOCAB_SIZE)[byte_codec.EOS_ID] * 1e4)
        ids = decoding.greedy_decode(model, _sources())
        self.assertAllEqual(ids, tf.fill([3, 1], byte_codec.EOS_ID))


def _early_stopping_model(name, seed=3):
    """A small model whose rows emit EOS at different steps: EOS's bias is raised until it is
    the greedy choice at about one position in ten."""
    model = bytenet_tf.build_model(name, hidden_size=24, num_stacks=1, dropout_rate=0.0,
                                   seed=seed)
    source = tf.constant(byte_codec.frame_batch(synthetic_lines(16, 7, 40)))
    _, logits = decoding.greedy_decode(model, source, max_output_length=30, ignore_eos=True,
                                       return_logits=True)
    logits = logits.numpy().reshape(-1, byte_codec.VOCAB_SIZE)
    others = np.delete(logits, byte_codec.EOS_ID, axis=1).max(axis=1)
    bias = np.zeros(byte_codec.VOCAB_SIZE, np.float32)
    bias[byte_codec.EOS_ID] = np.quantile(others - logits[:, byte_codec.EOS_ID], 0.1)
    model.output_projection.bias.assign(model.output_projection.bias.numpy() + bias)
    return model


def _naive_beam_search(model, source, beam_size, max_output_length):
    """Beam search that re-runs the whole decoder on every beam's prefix at each step, one
    sentence at a time: the O(L^2) reference of `decoding.beam_search_decode` at
    `length_alpha=0`, with no cache to reorder. Returns a list of output id lists."""
    limits = decoding.output_limits(model, source, max_output_length=max_output_length).numpy()
    # One graph for every prefix length: the same decoder, without eager dispatch per step.
    decode = tf.function(lambda encoded, prefixes, mask: model.decode(encoded, prefixes,
                                                                      source_mask=mask),
                         reduce_retracing=True)
    outputs = []
    for row in range(source.shape[0]):
        sentence = source[row:row + 1]
        encoded = tf.repeat(model.encode(sentence), beam_size, axis=0)
        mask = tf.repeat(tf.not_equal(sentence, byte_codec.PAD_ID), beam_size, axis=0)
        prefixes = np.full((beam_size, 1), byte_codec.BOS_ID)
        scores = np.array([0.0] + [-1e9] * (beam_size - 1), np.float32)
        finished = np.zeros(beam_size, bool)
        for t in range(limits[row]):
            logits = decode(encoded, tf.constant(prefixes, tf.int32), mask)
            log_probs = tf.nn.log_softmax(logits[:, -1]).numpy()
            log_probs[finished] = -1e9
            log_probs[finished, byte_codec.PAD_ID] = 0.0
            top = tf.math.top_k((scores[:, None] + log_probs).reshape(-1), k=beam_size)
            scores = top.values.numpy()
            parents, chosen = np.divmod(top.indices.numpy(), byte_codec.VOCAB_SIZE)
            prefixes = np.concatenate([prefixes[parents], chosen[:, None]], axis=1)
            finished = finished[parents] | (chosen == byte_codec.EOS_ID) | (t + 1 >= limits[row])
            if finished.all():
                break
        best = prefixes[np.argmax(scores), 1:]
        outputs.append([int(i) for i in best if i != byte_codec.PAD_ID])
    return outputs


class CompactionTest(parameterized.TestCase, tf.test.TestCase):
    """Finished rows leave the batch: the outputs stay those of decoding every row to the end."""

    @parameterized.named_parameters(*MODELS)
    def test_greedy_equals_the_naive_decoder_when_rows_stop_at_different_steps(self, name):
        model = _early_stopping_model(name)
        source = tf.constant(byte_codec.frame_batch([b""] + synthetic_lines(11, 3, 40)))
        compact = tf.function(lambda s: decoding.greedy_decode(model, s, max_output_length=40))
        naive = tf.function(lambda s: decoding.naive_greedy_decode(model, s,
                                                                   max_output_length=40))
        compact_ids, naive_ids = compact(source).numpy(), naive(source).numpy()
        lengths = (compact_ids != byte_codec.PAD_ID).sum(1)
        self.assertGreater(len(set(lengths)), 3, "rows should finish at different steps")
        self.assertAllEqual(compact_ids, naive_ids)

    def test_beam_search_equals_the_static_loop(self):
        # `capacity` keeps every sentence in the batch to the end (the XLA path).
        for name in ("bytenet_selu", "bytenet_small", "bytenet_selu_attention"):
            with self.subTest(model=name):
                model = _early_stopping_model(name)
                source = tf.constant(byte_codec.frame_batch([b""] + synthetic_lines(11, 4, 40)))
                ids, scores = decoding.beam_search_decode(
                    model, source, beam_size=4, max_output_length=30, return_scores=True)
                static, static_scores = decoding.beam_search_decode(
                    model, source, beam_size=4, max_output_length=30, return_scores=True,
                    capacity=30)
                self.assertAllEqual(ids, static[:, :ids.shape[1]])
                self.assertAllEqual(static[:, ids.shape[1]:],
                                    tf.zeros_like(static[:, ids.shape[1]:]))
                self.assertAllClose(scores, static_scores, atol=1e-5)

    def test_beam_search_equals_the_naive_beam_search(self):
        # Each beam reads its past along its lineage; over 45 steps every lag of the dilations
        # (up to 32 steps back) is read after beams have been reordered and sentences have
        # left the batch (at their length bounds: EOS is made unlikely).
        for name in ("bytenet_selu", "bytenet_small"):
            with self.subTest(model=name):
                model = bytenet_tf.build_model(name, hidden_size=24, num_stacks=1,
                                               dropout_rate=0.0, seed=7)
                bias = np.zeros(byte_codec.VOCAB_SIZE, np.float32)
                bias[byte_codec.EOS_ID] = -30.0
                model.output_projection.bias.assign(bias)
                source = tf.constant(byte_codec.frame_batch(
                    [b""] + synthetic_lines(5, 11, 45)))
                ids = decoding.beam_search_decode(model, source, beam_size=3, length_alpha=0.0,
                                                  max_output_length=45).numpy()
                cached = [[int(i) for i in row if i != byte_codec.PAD_ID] for row in ids]
                lengths = [len(row) for row in cached]
                self.assertGreater(max(lengths), 33, "no beam ran past the longest lag")
                self.assertGreater(len(set(lengths)), 2, "sentences should finish apart")
                self.assertEqual(cached, _naive_beam_search(model, source, 3, 45))

    def test_beams_that_finish_early_leave_the_decoder_step_and_change_nothing(self):
        # With EOS likely, a sentence's beams end at different steps; from then on only its
        # running beams step the decoder, reading their pasts through rows that are numbered
        # among the running beams alone.
        for name in ("bytenet_selu", "bytenet_small", "bytenet_selu_attention"):
            with self.subTest(model=name):
                model = _early_stopping_model(name, seed=5)
                source = tf.constant(byte_codec.frame_batch(
                    [b""] + synthetic_lines(9, 5, 40)))
                _, _, lengths = decoding.beam_search_decode(
                    model, source, beam_size=4, max_output_length=40, return_beams=True)
                lengths = lengths.numpy()
                apart = np.sum(lengths.min(1) < lengths.max(1))
                self.assertGreater(apart, 3, "too few sentences whose beams ended apart")
                self.assertGreater(lengths.max(), 10, "every beam ended within 10 bytes")
                ids = decoding.beam_search_decode(model, source, beam_size=4, length_alpha=0.0,
                                                  max_output_length=40).numpy()
                cached = [[int(i) for i in row if i != byte_codec.PAD_ID] for row in ids]
                self.assertEqual(cached, _naive_beam_search(model, source, 4, 40))

    def test_every_beam_serves_every_length_penalty(self):
        model = _early_stopping_model("bytenet_selu", seed=5)
        source = tf.constant(byte_codec.frame_batch([b""] + synthetic_lines(15, 3, 30)))
        beams, scores, lengths = decoding.beam_search_decode(
            model, source, beam_size=4, max_output_length=20, return_beams=True)
        self.assertEqual(beams.shape[:2], [16, 4])
        # Each beam's length counts its bytes up to and including EOS.
        self.assertAllEqual(lengths, tf.reduce_sum(
            tf.cast(tf.not_equal(beams, byte_codec.PAD_ID), tf.int32), axis=-1))
        chosen_differ = False
        for alpha in (0.0, 0.6, 2.0):
            ids = decoding.beam_search_decode(model, source, beam_size=4, length_alpha=alpha,
                                              max_output_length=20)
            best = decoding.best_beam(scores, lengths, alpha)
            self.assertAllEqual(tf.gather(beams, best, batch_dims=1)[:, :ids.shape[1]], ids)
            chosen_differ |= bool(tf.reduce_any(best != decoding.best_beam(scores, lengths, 0.0)))
        self.assertTrue(chosen_differ, "the penalties chose the same beams everywhere")


class BeamSearchTest(tf.test.TestCase):

    def test_beam_of_one_equals_greedy(self):
        model = bytenet_tf.build_model("bytenet_small", hidden_size=16, num_stacks=1, seed=2)
        source = _sources()
        greedy = decoding.greedy_decode(model, source, max_output_length=25)
        beam = decoding.beam_search_decode(model, source, beam_size=1, length_alpha=0.0,
                                           max_output_length=25)
        self.assertAllEqual(beam, greedy)

    def test_beam_scores_match_teacher_forcing(self):
        # If a reordered beam kept another beam's queues, its score would not be the
        # log-probability of the sequence it returns.
        model = bytenet_tf.build_model("bytenet_selu", hidden_size=16, num_stacks=1,
                                       dropout_rate=0.0, seed=5)
        source = _sources()
        ids, scores = decoding.beam_search_decode(model, source, beam_size=4, length_alpha=0.0,
                                                  max_output_length=20, return_scores=True)
        self.assertAllClose(scores, _sequence_log_prob(model, source, ids), atol=1e-3)

    def test_length_penalty_decides_the_final_choice(self):
        # The beams grow by raw log-probability whatever length_alpha is; only the final choice
        # differs: alpha 0 takes the best raw score, alpha 2 the best score / ((5 + L) / 6)**2.
        keras.utils.set_random_seed(0)
        model = bytenet_tf.build_model("bytenet_selu", hidden_size=16, num_stacks=1,
                                       dropout_rate=0.0, seed=5)
        bias = np.zeros(byte_codec.VOCAB_SIZE, np.float32)
        # EOS likely enough that beams end at different lengths: with these 16 sources, models
        # of seeds 0-11 each change 2-16 choices.
        bias[byte_codec.EOS_ID] = 1.0
        # PAD and BOS never follow a byte in training data; an untrained model may pick them.
        bias[[byte_codec.PAD_ID, byte_codec.BOS_ID]] = -30.0
        model.output_projection.bias.assign(bias)
        source = tf.constant(byte_codec.frame_batch([b""] + synthetic_lines(15, 3, 30)))
        results = {}
        for alpha in (0.0, 2.0):
            ids, scores = decoding.beam_search_decode(model, source, beam_size=4,
                                                      length_alpha=alpha, max_output_length=20,
                                                      return_scores=True)
            ids = ids.numpy()
            self.assertAllClose(scores, _sequence_log_prob(model, source, ids), atol=1e-3)
            results[alpha] = (scores.numpy(), (ids != byte_codec.PAD_ID).sum(1))
        (raw_scores, raw_lengths), (long_scores, long_lengths) = results[0.0], results[2.0]
        self.assertTrue(np.any(long_lengths > raw_lengths), "the penalty changed no choice")

        def normalized(scores, lengths):
            return scores / ((5.0 + lengths) / 6.0) ** 2.0

        self.assertTrue(np.all(raw_scores >= long_scores - 1e-4))
        self.assertTrue(np.all(normalized(long_scores, long_lengths)
                               >= normalized(raw_scores, raw_lengths) - 1e-4))

    def test_rejects_bad_beam_size(self):
        model = bytenet_tf.build_model("bytenet_selu", hidden_size=8, num_stacks=1)
        with self.assertRaisesRegex(ValueError, "Received: beam_size=0"):
            decoding.beam_search_decode(model, _sources(), beam_size=0)
