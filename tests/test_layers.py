"""DilatedConv1D, the residual blocks and AlphaDropout."""

import inspect

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from bytenet_tf import ops
from bytenet_tf.layers import AlphaDropout, DilatedConv1D, ResidualBlock, SimplifiedResidualBlock
from bytenet_tf.layers.alpha_dropout import DROPPED_VALUE, alpha_dropout_affine

# Every policy that can run here; `cpu_fused` needs its kernel compiled.
POLICIES = [policy for policy in ops.POLICIES
            if policy != "cpu_fused" or ops.resolve_policy("auto", accelerator="")[0] == policy]


def numpy_dilated_conv(x, kernel, bias, dilation, causal):
    """Reference: y[t] = sum_j x[t + offset + j * dilation] @ kernel[j] + bias."""
    k = kernel.shape[0]
    span = (k - 1) * dilation
    offset = -span if causal else -span // 2
    batch, length, _ = x.shape
    y = np.zeros((batch, length, kernel.shape[2]))
    for t in range(length):
        for j in range(k):
            source = t + offset + j * dilation
            if 0 <= source < length:
                y[:, t] += x[:, source] @ kernel[j]
    return y + bias


class DilatedConv1DBasicTest(parameterized.TestCase, tf.test.TestCase):

    def test_layer_creation_rejects_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "Received: kernel_size=4"):
            DilatedConv1D(4, kernel_size=4, causal=False)
        with self.assertRaisesRegex(ValueError, "Received: dilation_rate=0"):
            DilatedConv1D(4, dilation_rate=0)

    def test_serialize_deserialize(self):
        layer = DilatedConv1D(6, kernel_size=5, dilation_rate=3, causal=True,
                              kernel_initializer="lecun_uniform", use_bias=False, name="c")
        config = layer.get_config()
        for argument in inspect.signature(DilatedConv1D.__init__).parameters:
            if argument not in ("self", "kwargs", "ops_policy"):
                self.assertIn(argument, config)
        self.assertNotIn("ops_policy", config)  # a run-time choice (bytenet_tf.ops)
        clone = DilatedConv1D.from_config(config)
        self.assertEqual(clone.get_config(), config)

    def test_compute_output_shape(self):
        layer = DilatedConv1D(7)
        self.assertEqual(layer.compute_output_shape((2, 9, 3)), (2, 9, 7))


class DilatedConv1DCorrectnessTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(
        ("causal_k3_d1", 3, 1, True), ("causal_k3_d4", 3, 4, True), ("causal_k2_d8", 2, 8, True),
        ("centred_k3_d2", 3, 2, False), ("centred_k5_d4", 5, 4, False))
    def test_matches_numpy_reference(self, kernel_size, dilation, causal):
        for policy in POLICIES:
            layer = DilatedConv1D(4, kernel_size, dilation, causal=causal,
                                  kernel_initializer="glorot_uniform", ops_policy=policy)
            x = np.random.default_rng(0).normal(size=(2, 17, 3)).astype(np.float32)
            layer(x)
            layer.bias.assign(np.arange(4, dtype=np.float32))
            expected = numpy_dilated_conv(x, layer.kernel.numpy(), layer.bias.numpy(), dilation,
                                          causal)
            self.assertAllClose(layer(x), expected, atol=1e-5, msg=policy)

    def test_step_equals_full_causal_call(self):
        # Shifting queues, and ring buffers (a position per step), for kernels 2, 3 and 4.
        for kernel_size, ring in ((3, False), (3, True), (2, True), (4, True)):
            with self.subTest(kernel_size=kernel_size, ring=ring):
                layer = DilatedConv1D(5, kernel_size=kernel_size, dilation_rate=4, causal=True)
                x = tf.random.stateless_normal([2, 20, 3], seed=[1, 2])
                full = layer(x)
                queue = layer.initial_queue(2)
                steps = []
                for t in range(20):
                    y, queue = layer.step(x[:, t], queue, tf.constant(t) if ring else None)
                    steps.append(y)
                self.assertAllClose(tf.stack(steps, axis=1), full, atol=1e-5)


BLOCKS = [("residual", ResidualBlock), ("simplified", SimplifiedResidualBlock)]


class ResidualBlockTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(*BLOCKS)
    def test_every_argument_in_config_and_round_trip(self, cls):
        block = cls(8, kernel_size=5, dilation_rate=2, causal=True, normalization="none",
                    activation="selu", dropout_rate=0.1, kernel_initializer="lecun_uniform",
                    normalize_residual=True, branch_weight=0.5, seed=3)
        config = block.get_config()
        for argument in inspect.signature(ResidualBlock.__init__).parameters:
            if argument not in ("self", "kwargs", "ops_policy"):
                self.assertIn(argument, config)
        self.assertNotIn("ops_policy", config)  # a run-time choice (bytenet_tf.ops)
        x = tf.random.stateless_normal([2, 9, 8], seed=[0, 1])
        clone = cls.from_config(config)
        clone(x)
        block(x)
        clone.set_weights(block.get_weights())
        self.assertAllClose(clone(x), block(x))

    @parameterized.named_parameters(*BLOCKS)
    def test_step_equals_full_call(self, cls):
        block = cls(8, dilation_rate=2, causal=True, normalization="layer")
        x = tf.random.stateless_normal([3, 12, 8], seed=[4, 5])
        full = block(x)
        state = block.initial_state(3)
        outputs = []
        for t in range(12):
            y, state = block.step(x[:, t], state)
            outputs.append(y)
        self.assertAllClose(tf.stack(outputs, 1), full, atol=1e-5)

    def test_batch_norm_in_causal_block_is_rejected(self):
        with self.assertRaisesRegex(ValueError, "leaks future positions"):
            ResidualBlock(8, causal=True, normalization="batch")

    def test_unknown_choices_name_the_value(self):
        with self.assertRaisesRegex(ValueError, "normalization='group' is unknown"):
            ResidualBlock(8, normalization="group")
        with self.assertRaisesRegex(ValueError, "activation='gelu' is unknown"):
            ResidualBlock(8, activation="gelu")

    def test_normalized_residual_keeps_unit_variance(self):
        x = tf.random.stateless_normal([64, 32, 16], seed=[7, 7])
        block = ResidualBlock(16, activation="selu", normalization="none",
                              kernel_initializer="lecun_uniform", normalize_residual=True)
        plain = ResidualBlock(16, activation="selu", normalization="none",
                              kernel_initializer="lecun_uniform", normalize_residual=False)
        self.assertAllClose(float(tf.math.reduce_variance(block(x))), 1.0, atol=0.15)
        self.assertGreater(float(tf.math.reduce_variance(plain(x))), 1.5)


class AlphaDropoutTest(tf.test.TestCase):

    def test_keeps_mean_and_variance_in_training(self):
        layer = AlphaDropout(0.1, seed=1)
        x = tf.random.stateless_normal([400, 1000], seed=[3, 4])
        y = layer(x, training=True)
        self.assertNotAllClose(x, y)
        self.assertAllClose(float(tf.reduce_mean(y)), 0.0, atol=0.01)
        self.assertAllClose(float(tf.math.reduce_variance(y)), 1.0, atol=0.02)

    def test_matches_keras_alpha_dropout_on_kept_and_dropped_units(self):
        rate = 0.2
        x = tf.random.stateless_normal([300, 301], seed=[5, 6])
        y = AlphaDropout(rate, seed=3)(x, training=True)
        # Keras's formula: a * (x * kept + dropped * (1 - kept)) + b.
        a, b = alpha_dropout_affine(rate)
        dropped_output = a * DROPPED_VALUE + b
        dropped = np.isclose(y.numpy(), dropped_output, atol=1e-6)
        self.assertAllClose(y.numpy()[~dropped], a * x.numpy()[~dropped] + b, atol=1e-5)
        self.assertAllClose(dropped.mean(), rate, atol=0.005)
        # Keras's layer has the same statistics on the same inputs.
        reference = keras.layers.AlphaDropout(rate, seed=3)(x, training=True)
        self.assertAllClose(float(tf.math.reduce_variance(y)),
                            float(tf.math.reduce_variance(reference)), atol=0.02)

    def test_gradient_is_a_on_kept_units_and_zero_on_dropped_ones(self):
        rate = 0.3
        layer = AlphaDropout(rate, seed=2)
        x = tf.random.stateless_normal([64, 33], seed=[1, 1])
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True)
            loss = tf.reduce_sum(y * tf.range(33, dtype=tf.float32))
        grad = tape.gradient(loss, x).numpy()
        a, b = alpha_dropout_affine(rate)
        kept = ~np.isclose(y.numpy(), a * DROPPED_VALUE + b, atol=1e-6)
        expected = np.where(kept, a * np.arange(33, dtype=np.float32), 0.0)
        self.assertAllClose(grad, expected, atol=1e-5)

    def test_seeded_masks_repeat_and_differ_between_calls(self):
        x = tf.random.stateless_normal([32, 64], seed=[3, 4])
        first, second = AlphaDropout(0.5, seed=7), AlphaDropout(0.5, seed=7)
        y1, y2 = first(x, training=True), second(x, training=True)
        self.assertAllEqual(y1, y2)
        self.assertNotAllClose(first(x, training=True), y1)

    def test_keeps_bfloat16_and_odd_sizes(self):
        x = tf.cast(tf.random.stateless_normal([3, 5, 7], seed=[3, 4]), tf.bfloat16)
        y = AlphaDropout(0.1, seed=1, dtype="mixed_bfloat16")(x, training=True)
        self.assertEqual(y.dtype, tf.bfloat16)
        self.assertEqual(y.shape, x.shape)
        x32 = tf.random.stateless_normal([3, 5, 7], seed=[3, 4])
        self.assertEqual(AlphaDropout(0.1, dtype="mixed_bfloat16")(x32, training=True).dtype,
                         tf.float32)

    def test_identity_at_inference_and_rate_zero(self):
        x = tf.random.stateless_normal([8, 16], seed=[3, 4])
        self.assertAllEqual(AlphaDropout(0.1, seed=1)(x, training=False), x)
        self.assertAllEqual(AlphaDropout(0.0)(x, training=True), x)

    def test_bad_rate_names_the_value(self):
        with self.assertRaisesRegex(ValueError, "rate=1.0"):
            AlphaDropout(1.0)

    def test_selu_block_uses_alpha_dropout(self):
        block = ResidualBlock(8, activation="selu", normalization="none", dropout_rate=0.1)
        self.assertIsInstance(block.dropout, AlphaDropout)
        relu_block = ResidualBlock(8, activation="relu", dropout_rate=0.1)
        self.assertIsInstance(relu_block.dropout, keras.layers.Dropout)

    def test_selu_block_in_training_equals_its_plain_sequence(self):
        # The block's tail is one call, `ops.selu_alpha_dropout_dense`, which the cpu policies
        # fuse; the block must equal selu -> conv -> selu -> conv -> selu -> AlphaDropout ->
        # conv -> residual, with the dropout mask of that policy.
        for policy in POLICIES:
            with self.subTest(policy=policy):
                self._check_block_equals_plain_sequence(policy)

    def _check_block_equals_plain_sequence(self, policy):
        x = tf.random.stateless_normal([2, 11, 8], seed=[6, 7])
        block = ResidualBlock(8, dilation_rate=2, causal=True, activation="selu",
                              normalization="none", dropout_rate=0.3, normalize_residual=True,
                              branch_weight=0.5, seed=9, ops_policy=policy)
        block(x)
        for conv in block.convs:
            conv.bias.assign(tf.random.stateless_normal(conv.bias.shape, seed=[1, 1]))
        # A twin with the block's dropout seed draws the block's first seed.
        seed = AlphaDropout(0.3, seed=9).next_seed()
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            got = block(x, training=True)
            h = x
            for conv in block.convs[:-1]:
                h = conv(tf.nn.selu(h))
            h = block.convs[-1](_selu_then_alpha_dropout(policy, h, 0.3, seed))
            want = (x + 0.5 * h) / np.sqrt(1.25)
        self.assertAllClose(got, want, atol=1e-5)
        self.assertAllClose(tape.gradient(got, x), tape.gradient(want, x), atol=1e-4)
        kernel = block.convs[-1].kernel
        self.assertAllClose(tape.gradient(got, kernel), tape.gradient(want, kernel), atol=1e-4)


def _selu_then_alpha_dropout(policy, x, rate, seed):
    """selu, then AlphaDropout with the mask that `policy`'s block tail draws from `seed`."""
    if policy == "cpu_fused":
        from bytenet_tf.ops import cpu, kernels

        a, b = alpha_dropout_affine(rate)
        dropped = kernels.selu(kernels.load(), x, seed, cpu.dropout_threshold(rate), DROPPED_VALUE)
        return a * dropped + b
    return ops.get(policy).alpha_dropout(tf.nn.selu(x), rate, seed)


class ResidualGateTest(tf.test.TestCase):

    def test_gated_block_starts_as_the_identity_and_its_gate_learns(self):
        x = tf.random.stateless_normal([2, 9, 8], seed=[3, 3])
        for normalize in (False, True):
            block = ResidualBlock(8, dilation_rate=2, causal=True, activation="selu",
                                  normalization="none", normalize_residual=normalize,
                                  residual_gate=True)
            with tf.GradientTape() as tape:
                y = block(x, training=True)
                loss = tf.reduce_sum(tf.square(y - 1.0))
            self.assertAllClose(y, x)
            self.assertEqual(float(block.gate), 0.0)
            self.assertNotEqual(float(tape.gradient(loss, block.gate)), 0.0)
            # With the gate at w, the block is the fixed-weight block with branch_weight=w.
            block.gate.assign(0.4)
            fixed = ResidualBlock.from_config(dict(block.get_config(), residual_gate=False,
                                                   branch_weight=0.4))
            fixed(x)
            fixed.set_weights([w for w in block.get_weights() if np.shape(w) != ()])
            self.assertAllClose(block(x), fixed(x), atol=1e-6)


class KerasMaskTest(tf.test.TestCase):

    def test_block_takes_a_keras_mask_from_an_embedding(self):
        # supports_masking: a boolean (batch, length) mask from mask_zero=True must work, and
        # padded positions must not change what real positions compute.
        ids = keras.Input((None,), dtype="int32")
        x = keras.layers.Embedding(10, 8, mask_zero=True)(ids)
        for policy in POLICIES:
            model = keras.Model(ids, ResidualBlock(8, dilation_rate=2, ops_policy=policy)(x))
            short = model(np.array([[3, 4, 5]]))
            padded = model(np.array([[3, 4, 5, 0, 0, 0, 0]]))
            self.assertAllClose(padded[:, :3], short, atol=1e-5, msg=policy)
