"""SELU ByteNet keeps every block's output near mean 0, variance 1 through its full depth."""

import tensorflow as tf

import bytenet_tf
from bytenet_tf.analysis import block_statistics, format_statistics, summary
from pipelines import byte_codec
from tests.conftest import read_lines


def _real_text(count=32):
    # The statistics of real sentences at initialization: what the claim is about.
    source, target, _ = byte_codec.frame_batch(read_lines("fixture-small.de", count),
                                               read_lines("fixture-small.en", count))
    return tf.constant(source), tf.constant(target)


class SelfNormalizationTest(tf.test.TestCase):

    def test_selu_blocks_stay_near_the_fixed_point_at_full_depth(self):
        source, target = _real_text()
        selu = bytenet_tf.build_model("bytenet_selu", seed=0)
        nonorm = bytenet_tf.build_model("bytenet_nonorm", seed=0)
        self.assertLen(selu.encoder_blocks + selu.decoder_blocks, 30)
        tables = {"bytenet_selu": block_statistics(selu, source, target),
                  "bytenet_nonorm": block_statistics(nonorm, source, target)}
        print("\n" + format_statistics(tables))
        for row in tables["bytenet_selu"]:
            with self.subTest(block=row["block"]):
                self.assertBetween(row["mean"], -0.25, 0.25)
                self.assertBetween(row["variance"], 0.6, 1.6)
        # The same test must be able to fail: the unnormalized ReLU model leaves the band.
        _, _, nonorm_max_variance = summary(tables["bytenet_nonorm"])
        self.assertGreater(nonorm_max_variance, 1.6)
