"""SELU ByteNet keeps every block's output near mean 0, variance 1 through its full depth."""

import tensorflow as tf

import bytenet_tf
from bytenet_tf import analysis
from bytenet_tf.analysis import block_statistics, format_statistics, summary
from pipelines import byte_codec
from tests.conftest import read_lines, synthetic_batch


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


class UnitStatisticsTest(tf.test.TestCase):
    """Per-unit statistics see what pooled ones hide; kernel change sees what moved."""

    def _model_and_batch(self):
        model = bytenet_tf.build_model("bytenet_selu", hidden_size=32, num_stacks=1, seed=0,
                                       dropout_rate=0.0)
        source, target, _ = synthetic_batch(6, seed=4)
        return model, tf.constant(source), tf.constant(target)

    def test_one_drifting_unit_shows_per_unit_but_not_pooled(self):
        model, source, target = self._model_and_batch()
        conv_in = model.encoder_blocks[2].convs[0]
        conv_in.bias.assign(tf.tensor_scatter_nd_update(conv_in.bias, [[3]], [6.0]))
        rows = analysis.unit_statistics(model, source, target)
        self.assertLen(rows, 3 * 2 * 5)  # 3 selu inputs per block, 5 blocks per side
        row = next(r for r in rows if r["block"] == "encoder_block_2" and r["activation"] == 1)
        self.assertEqual(row["units"], 16)
        self.assertGreater(row["max_abs_mean"], 5.0)
        self.assertLess(abs(row["mean_q"][1]), 1.0)  # the median unit is unaffected
        untouched = next(r for r in rows if r["block"] == "encoder_block_1"
                         and r["activation"] == 1)
        self.assertLess(untouched["max_abs_mean"], 3.0)
        # block_statistics pools every unit of the block output: the drift is diluted there.
        pooled = block_statistics(model, source, target)[2]
        self.assertLess(abs(pooled["mean"]), 1.0)

    def test_branch_then_residual_is_the_block(self):
        model, source, target = self._model_and_batch()
        block = model.decoder_blocks[1]
        x = tf.random.stateless_normal([2, 9, 32], seed=[1, 2])
        recorded = []
        out = block._residual(x, block.branch(x, preactivations=recorded))
        self.assertAllClose(out, block(x), atol=1e-6)
        self.assertLen(recorded, 3)
        self.assertAllClose(recorded[0], x)  # no norm: the first selu reads the block input

    def test_weight_change_is_zero_unmoved_and_relative_when_moved(self):
        model, _, _ = self._model_and_batch()
        before = analysis.kernel_values(model)
        self.assertEqual(set(analysis.weight_change(before, before).values()), {0.0})
        kernel = model.encoder_blocks[0].convs[1].kernel
        kernel.assign(kernel * 1.5)
        change = analysis.weight_change(before, analysis.kernel_values(model))
        moved = [block for block, value in change.items() if value > 0]
        self.assertLen(moved, 1)
        self.assertIn("encoder_block_0", moved[0])
        # Only one of the block's three kernels grew by half: between 0 and 0.5 of the block.
        self.assertBetween(change[moved[0]], 0.05, 0.5)

