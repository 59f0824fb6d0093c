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



class BootstrapSpreadTest(tf.test.TestCase):
    REFERENCES = ["A dog runs across the green grass.", "Two men sit on a bench in the park.",
                  "A girl in a red dress is jumping.", "People walk down a busy street.",
                  "A man plays the guitar on stage.", "Children are swimming in a lake."]
    WORSE = ["A dog runs on grass.", "Two men sit on a wall.", "A girl is jumping.",
             "People walk down a street.", "A man plays music.", "Children swim."]

    def test_standard_deviation_is_that_of_resampled_corpus_scores(self):
        import numpy as np
        import sacrebleu

        for metric, scorer in (("bleu", sacrebleu.metrics.BLEU()),
                               ("chrf", sacrebleu.metrics.CHRF())):
            spread = scoring.bootstrap_spread([self.WORSE], self.REFERENCES, metric, samples=40,
                                              seed=3)
            rng = np.random.default_rng(3)
            direct = []
            for _ in range(40):
                index = rng.integers(0, len(self.REFERENCES), len(self.REFERENCES))
                direct.append(scorer.corpus_score([self.WORSE[i] for i in index],
                                                  [[self.REFERENCES[i] for i in index]]).score)
            self.assertAllClose(spread["std"][0], np.std(direct), atol=1e-3)
            self.assertGreater(spread["std"][0], 0.5)

    def test_wins_rank_the_sets_and_split_ties(self):
        spread = scoring.bootstrap_spread([self.WORSE, self.REFERENCES], self.REFERENCES,
                                          samples=50)
        self.assertEqual(spread["wins"], [0.0, 1.0])
        self.assertEqual(spread["std"][1], 0.0)
        tied = scoring.bootstrap_spread([self.WORSE, list(self.WORSE)], self.REFERENCES,
                                        "bleu", samples=50)
        self.assertEqual(tied["wins"], [0.5, 0.5])

    def test_bad_arguments_are_named(self):
        with self.assertRaisesRegex(ValueError, "'ter'"):
            scoring.bootstrap_spread([self.WORSE], self.REFERENCES, "ter")
        with self.assertRaisesRegex(ValueError, "5 hypotheses but 6 references"):
            scoring.bootstrap_spread([self.WORSE[:5]], self.REFERENCES)
