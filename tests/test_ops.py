"""The ops policies: each CPU implementation against the reference, and choosing a policy."""

import os
from unittest import mock

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import bytenet_tf
from bytenet_tf import ops, vocabulary
from bytenet_tf.ops.cpu import CpuOps
from bytenet_tf.ops.reference import DROPPED_VALUE, ReferenceOps, alpha_dropout_affine
from tests.test_layers import POLICIES

REFERENCE = ReferenceOps()
CPU = CpuOps()


def _value_and_gradients(function, inputs, upstream):
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        outputs = function(*inputs)
    return outputs, tape.gradient(outputs, inputs, output_gradients=upstream)


class CpuOpsEqualReferenceTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(
        ("causal_k3_d4", 3, 4, True), ("causal_k2_d8", 2, 8, True),
        ("causal_k3_d6", 3, 6, True), ("centred_k3_d13", 3, 13, False),
        ("centred_k3_d16", 3, 16, False), ("centred_k5_d1", 5, 1, False))
    def test_dilated_conv_value_and_gradient(self, kernel_size, dilation, causal):
        # Including a dilation wider than the sequence (16 > 13), where most taps read padding,
        # one as wide (13), and taps 12 positions back of 13.
        span = (kernel_size - 1) * dilation
        left, right = (span, 0) if causal else (span // 2, span // 2)
        rng = np.random.default_rng(1)
        x = tf.constant(rng.normal(size=(3, 13, 4)), tf.float32)
        kernel = tf.constant(rng.normal(size=(kernel_size, 4, 5)), tf.float32)
        bias = tf.constant(rng.normal(size=(5,)), tf.float32)
        upstream = tf.constant(rng.normal(size=(3, 13, 5)), tf.float32)
        for with_bias in (False, True):
            inputs = [x, kernel, bias] if with_bias else [x, kernel]
            results = [_value_and_gradients(
                lambda *a, o=implementation: o.dilated_conv(a[0], a[1], dilation, left, right,
                                                            *a[2:]), inputs, upstream)
                for implementation in (CPU, REFERENCE)]
            (got, got_grads), (want, want_grads) = results
            self.assertAllClose(got, want, atol=1e-5)
            for got_grad, want_grad in zip(got_grads, want_grads):
                self.assertAllClose(got_grad, want_grad, atol=1e-4)

    def test_dilated_conv_gradient_in_bfloat16_is_close_to_float32(self):
        rng = np.random.default_rng(2)
        x = rng.normal(size=(2, 32, 8)).astype(np.float32)
        kernel = (0.3 * rng.normal(size=(3, 8, 8))).astype(np.float32)

        def grads(dtype):
            xs, ks = tf.constant(x, dtype), tf.constant(kernel, dtype)
            with tf.GradientTape() as tape:
                tape.watch([xs, ks])
                loss = tf.reduce_sum(tf.cast(CPU.dilated_conv(xs, ks, 4, 8, 0), tf.float32) ** 2)
            return [tf.cast(g, tf.float32) for g in tape.gradient(loss, [xs, ks])]

        for low, high in zip(grads(tf.bfloat16), grads(tf.float32)):
            self.assertEqual(low.shape, high.shape)
            self.assertLess(float(tf.norm(low - high) / tf.norm(high)), 0.02)

    def test_dense_value_and_gradient_on_2d_and_3d_inputs(self):
        rng = np.random.default_rng(3)
        kernel = tf.constant(rng.normal(size=(4, 3)), tf.float32)
        bias = tf.constant(rng.normal(size=(3,)), tf.float32)
        for shape in [(6, 4), (2, 5, 4)]:
            x = tf.constant(rng.normal(size=shape), tf.float32)
            upstream = tf.constant(rng.normal(size=shape[:-1] + (3,)), tf.float32)
            (got, got_grads), (want, want_grads) = [
                _value_and_gradients(implementation.dense, [x, kernel, bias], upstream)
                for implementation in (CPU, REFERENCE)]
            self.assertAllClose(got, want, atol=1e-5)
            for got_grad, want_grad in zip(got_grads, want_grads):
                self.assertAllClose(got_grad, want_grad, atol=1e-5)

    def test_bfloat16_selu_is_the_float32_selu_rounded_once(self):
        x = tf.cast(tf.random.stateless_normal([4, 9, 8], seed=[2, 2]) * 3, tf.bfloat16)
        got = CPU.selu(x)
        self.assertEqual(got.dtype, tf.bfloat16)
        self.assertAllEqual(got, tf.cast(tf.nn.selu(tf.cast(x, tf.float32)), tf.bfloat16))

    def test_fused_tail_equals_selu_dropout_dense_in_value_and_gradient(self):
        # CpuOps folds the dropout's affine map into the kernel: it must equal the composition
        # with the same mask (same seed, same keep_mask).
        rng = np.random.default_rng(4)
        x = tf.constant(rng.normal(size=(3, 7, 6)), tf.float32)
        kernel = tf.constant(rng.normal(size=(6, 5)), tf.float32)
        bias = tf.constant(rng.normal(size=(5,)), tf.float32)
        upstream = tf.constant(rng.normal(size=(3, 7, 5)), tf.float32)
        seed = tf.constant([3, 8], tf.int32)
        fused = _value_and_gradients(
            lambda *a: CPU.selu_alpha_dropout_dense(a[0], 0.3, seed, a[1], a[2]),
            [x, kernel, bias], upstream)
        plain = _value_and_gradients(
            lambda *a: CPU.dense(CPU.alpha_dropout(CPU.selu(a[0]), 0.3, seed), a[1], a[2]),
            [x, kernel, bias], upstream)
        self.assertAllClose(fused[0], plain[0], atol=1e-5)
        for got, want in zip(fused[1], plain[1]):
            self.assertAllClose(got, want, atol=1e-4)


class AlphaDropoutStatisticsTest(tf.test.TestCase):

    def test_every_policy_drops_at_the_rate_and_keeps_mean_and_variance(self):
        x = tf.random.stateless_normal([400, 1000], seed=[3, 4])
        a, b = alpha_dropout_affine(0.1)
        for policy in POLICIES:
            y = ops.get(policy).alpha_dropout(x, 0.1, tf.constant([1, 2], tf.int32)).numpy()
            dropped = np.isclose(y, a * DROPPED_VALUE + b, atol=1e-6)
            self.assertAllClose(dropped.mean(), 0.1, atol=0.003, msg=policy)
            self.assertAllClose(y.mean(), 0.0, atol=0.01, msg=policy)
            self.assertAllClose(y.var(), 1.0, atol=0.02, msg=policy)


def _batch():
    # Random bytes of several lengths, an empty target among them, drawn for this test only.
    rng = np.random.default_rng(0)
    sources = [bytes(rng.integers(0, 256, size=n)) for n in (1, 7, 30)]
    targets = [bytes(rng.integers(0, 256, size=n)) for n in (0, 9, 25)]
    source, target, _ = vocabulary.frame_batch(sources, targets)
    return {"source": tf.constant(source), "target": tf.constant(target)}


def _logits_and_gradients(model, inputs):
    with tf.GradientTape() as tape:
        logits = model(inputs, training=True)
        loss = tf.reduce_mean(tf.square(logits))
    gradients = [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]
    return logits, gradients


class ZooModelsAgreeAcrossPoliciesTest(parameterized.TestCase, tf.test.TestCase):
    """Every zoo model computes the same function under every policy (dropout off).

    Stated tolerance: float32 logits within 1e-4 absolute and every gradient within 1e-4 of
    its largest entry (or of 1e-3 of the model's largest gradient entry, if that is larger); mixed_bfloat16 logits within 5% (relative L2) of the float32 reference
    (measured: 0.6-3.0%; 5.1% for `bytenet_selu_thesis` under `reference` before its bfloat16
    selu ran in float32, 1.2% after).
    """

    @parameterized.named_parameters(*[(name, name) for name in bytenet_tf.list_models()])
    def test_outputs_and_gradients_agree(self, name):
        inputs = _batch()
        keras.utils.set_random_seed(0)
        reference = bytenet_tf.build_model(name, hidden_size=16, num_stacks=1, dropout_rate=0.0)
        want_logits, want_grads = _logits_and_gradients(reference, inputs)
        for policy in POLICIES:
            for dtype in ("float32", "mixed_bfloat16"):
                model = bytenet_tf.build_model(name, hidden_size=16, num_stacks=1,
                                               dropout_rate=0.0, ops_policy=policy, dtype=dtype)
                model.set_weights(reference.get_weights())
                logits, grads = _logits_and_gradients(model, inputs)
                if dtype == "float32":
                    self.assertAllClose(logits, want_logits, atol=1e-4, msg=policy)
                    # A gradient that is zero in exact arithmetic (the bias of a convolution
                    # that batch norm follows) is round-off on both sides: compare it on the
                    # scale of the model's gradients, not on its own.
                    floor = 1e-3 * max(float(tf.reduce_max(tf.abs(w))) for w in want_grads)
                    for got, want in zip(grads, want_grads):
                        scale = max(float(tf.reduce_max(tf.abs(want))), floor)
                        self.assertAllClose(got / scale, want / scale, atol=1e-4, msg=policy)
                else:
                    error = float(tf.norm(logits - want_logits) / tf.norm(want_logits))
                    self.assertLess(error, 0.05, msg=f"{policy} {dtype}")


class ResolvePolicyTest(tf.test.TestCase):

    def test_auto_takes_reference_when_an_accelerator_is_present(self):
        for kind in ("GPU", "TPU"):
            self.assertEqual(ops.resolve_policy("auto", accelerator=kind),
                             ("reference", f"a {kind} is present"))

    def test_auto_on_cpu_takes_a_cpu_policy(self):
        policy, reason = ops.resolve_policy("auto", accelerator="")
        self.assertIn(policy, ("cpu", "cpu_fused"))
        self.assertIn("CPU only", reason)

    def test_environment_sets_what_auto_means_but_not_an_explicit_choice(self):
        with mock.patch.dict(os.environ, {ops.ENVIRONMENT_VARIABLE: "reference"}):
            self.assertEqual(ops.resolve_policy("auto", accelerator=""),
                             ("reference", f"{ops.ENVIRONMENT_VARIABLE}=reference"))
            self.assertEqual(ops.resolve_policy("cpu", accelerator=""), ("cpu", "requested"))
        with mock.patch.dict(os.environ, {ops.ENVIRONMENT_VARIABLE: "fast"}):
            with self.assertRaisesRegex(ValueError, "ops_policy='fast' is unknown"):
                ops.resolve_policy("auto", accelerator="")

    def test_a_cpu_policy_with_an_accelerator_is_refused(self):
        with self.assertRaisesRegex(ValueError, "runs on CPU only, but a GPU is present"):
            ops.resolve_policy("cpu", accelerator="GPU")

    def test_unknown_policy_names_the_value_and_the_choices(self):
        with self.assertRaisesRegex(ValueError, "ops_policy='gpu' is unknown; choose one of: "
                                                "reference, cpu, cpu_fused"):
            bytenet_tf.build_model("bytenet_selu", hidden_size=8, ops_policy="gpu")

    def test_policy_is_a_run_time_choice_left_out_of_every_config(self):
        model = bytenet_tf.build_model("bytenet_selu", hidden_size=8, num_stacks=1,
                                       ops_policy="cpu")
        self.assertEqual({block.ops.name for block in model.decoder_blocks}, {"cpu"})
        self.assertNotIn("ops_policy", model.get_config())
        for layer in (model.encoder_blocks + model.decoder_blocks
                      + [model.decoder_input_projection, model.output_projection]):
            self.assertNotIn("ops_policy", layer.get_config(), layer.name)
        rebuilt = type(model).from_config(model.get_config())
        self.assertEqual({block.ops.name for block in rebuilt.decoder_blocks}, {"reference"})
