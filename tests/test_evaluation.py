"""`evaluation.cross_entropy`: the held-out loss of the real-text residual sweep."""

import math

import numpy as np
import tensorflow as tf

import bytenet_tf
from bytenet_tf import vocabulary
from bytenet_tf.training import evaluation

# Lengths 0 to 30, non-ASCII, invalid UTF-8, NUL and U+2028, drawn here and not from any corpus.
PAIRS = [(b"", b"x"), (b"a", b""), ("Straße über".encode(), b"street over"),
         (b"\xff\xfe bad", b"\x00nul"), ("line\u2028sep".encode(), b"y" * 30),
         (b"z" * 17, b"q")]


def _one_pair_nats(model, source, target):
    """Summed cross-entropy of one unpadded, unbatched pair, from the logits by numpy."""
    source_ids = [b + vocabulary.BYTE_OFFSET for b in source] + [vocabulary.EOS_ID]
    target_ids = [b + vocabulary.BYTE_OFFSET for b in target]
    labels = target_ids + [vocabulary.EOS_ID]
    features = {"source": tf.constant([source_ids], tf.int32),
                "target": tf.constant([[vocabulary.BOS_ID] + target_ids], tf.int32)}
    logits = model(features, training=False).numpy()[0].astype(np.float64)
    top = logits.max(axis=-1, keepdims=True)
    log_probs = logits - top - np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))
    return -sum(log_probs[i, label] for i, label in enumerate(labels)), len(labels)


class CrossEntropyTest(tf.test.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.model = bytenet_tf.build_model("bytenet_selu", hidden_size=16, num_stacks=1,
                                           max_length=40, seed=4)

    def test_equals_the_per_pair_sum_whatever_the_batching(self):
        sources, targets = zip(*PAIRS)
        parts = [_one_pair_nats(self.model, s, t) for s, t in PAIRS]
        expected = sum(p[0] for p in parts) / sum(p[1] for p in parts)
        for batch_size in (1, 4, 32):  # padding differs; the mask must hide it
            with self.subTest(batch_size=batch_size):
                result = evaluation.cross_entropy(self.model, list(sources), list(targets),
                                                  batch_size=batch_size)
                self.assertAllClose(result["nats_per_byte"], expected, rtol=1e-5)
                self.assertAllClose(result["bits_per_byte"], expected / math.log(2), rtol=1e-5)
                self.assertEqual(result["bytes"], sum(p[1] for p in parts))
                self.assertEqual((result["pairs"], result["skipped"]), (len(PAIRS), 0))

    def test_too_long_pairs_are_counted_and_left_out(self):
        # max_length 40 counts EOS: 39 bytes fit, 40 do not, on either side.
        sources = [b"short", b"s" * 40, b"ok", b"e" * 39]
        targets = [b"fine", b"t", b"t" * 40, b"f" * 39]
        result = evaluation.cross_entropy(self.model, sources, targets)
        kept = [_one_pair_nats(self.model, b"short", b"fine"),
                _one_pair_nats(self.model, b"e" * 39, b"f" * 39)]
        count = sum(k[1] for k in kept)
        self.assertEqual((result["pairs"], result["skipped"], result["bytes"]), (2, 2, count))
        self.assertAllClose(result["nats_per_byte"], sum(k[0] for k in kept) / count, rtol=1e-5)

    def test_nothing_scored_is_nan(self):
        result = evaluation.cross_entropy(self.model, [b"s" * 50], [b"t"])
        self.assertTrue(math.isnan(result["nats_per_byte"]))
        self.assertEqual((result["pairs"], result["skipped"]), (0, 1))

    def test_misaligned_pairs_name_both_counts(self):
        with self.assertRaisesRegex(ValueError, "2 sources and 1 targets"):
            evaluation.cross_entropy(self.model, [b"a", b"b"], [b"c"])
