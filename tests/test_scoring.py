"""bytenet_tf.scoring: corpus scores and the BLEU caveat for short references."""

import tensorflow as tf

from bytenet_tf import scoring


class ScoringTest(tf.test.TestCase):

    def test_digits_outputs_score_bleu_zero_and_get_the_caveat(self):
        references = [b"104", b"17", "3"]
        results = scoring.score(list(references), references)
        self.assertEqual(results["exact_match"], 1.0)
        self.assertEqual(results["bleu"], 0.0)
        self.assertGreater(results["chrf"], 99.0)
        self.assertIn("4-gram", scoring.bleu_caveat(references))

    def test_sentences_get_no_caveat(self):
        references = ["the cat sat on the mat", "a b"]
        self.assertEqual(scoring.bleu_caveat(references), "")
        self.assertEqual(scoring.bleu_caveat([]), "")
        self.assertAlmostEqual(scoring.score(references, references)["bleu"], 100.0, places=3)
