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

    def test_character_error_rate_counts_reference_bytes_and_eos(self):
        # "104": positions 1, 0, 4, EOS. A longer output is wrong at the EOS only, a shorter
        # one at every missing position, and output past the reference's EOS is ignored.
        cases = [(b"104", 0), (b"1049", 1), (b"10", 2), (b"", 4), (b"204", 1), ("104", 0)]
        for hypothesis, errors in cases:
            with self.subTest(hypothesis=hypothesis):
                self.assertEqual(scoring.character_error_rate([hypothesis], [b"104"]),
                                 (errors, 4))
        self.assertEqual(scoring.character_error_rate([b"12", b"7"], [b"12", b"99"]), (3, 6))
        with self.assertRaisesRegex(ValueError, "1 hypotheses but 2 references"):
            scoring.character_error_rate([b"1"], [b"1", b"2"])

