"""bytenet_tf.kernels: the fused SELU and dropout select, the masked SELU, the scaled sum and the
bias sum, their gradients, their use in training, the fallback."""

import os
import shutil
import tempfile
import unittest

import numpy as np
import tensorflow as tf

from bytenet_tf import ops, zoo
from bytenet_tf.ops import cpu, kernels
from bytenet_tf.ops.reference import DROPPED_VALUE, alpha_dropout_affine
from tests.conftest import run_python

SCALE = 1.0507009873554804934193349852946
ALPHA = 1.6732632423543772848170429916717


def every_bfloat16():
    """All 65,536 bfloat16 values, and the same values in float64."""
    values = tf.bitcast(tf.constant(np.arange(1 << 16, dtype=np.uint16)), tf.bfloat16)
    with np.errstate(invalid="ignore"):
        return values, tf.cast(values, tf.float32).numpy().astype(np.float64)


def bfloat16_ulp(value):
    """The spacing of bfloat16 numbers at `value` (8 significant bits)."""
    return 2.0 ** (np.floor(np.log2(np.abs(value))) - 7)


def _value_and_gradient(function, x, upstream):
    with tf.GradientTape() as tape:
        tape.watch(x)
        outputs = function(x)
    return outputs, tape.gradient(outputs, x, output_gradients=upstream)


@unittest.skipIf(shutil.which(os.environ.get("CXX", "g++")) is None,
                 "no C++ compiler on this machine: the fused kernel cannot be built, and the "
                 "fallback is tested in FallbackTest")
class FusedSeluTest(tf.test.TestCase):

    def setUp(self):
        # A compiler is present, so the kernel must build (load raises otherwise).
        self.library = kernels.load()

    def test_forward_is_correctly_rounded_for_every_bfloat16(self):
        values, exact_input = every_bfloat16()
        with np.errstate(all="ignore"):
            exact = np.where(exact_input > 0, SCALE * exact_input,
                             SCALE * ALPHA * np.expm1(np.minimum(exact_input, 0)))
        got = tf.cast(kernels.selu(self.library, values), tf.float32).numpy().astype(np.float64)
        # Normal inputs and outputs in float32's range (the CPU flushes subnormals to zero).
        normal = (np.abs(exact_input) >= 1.2e-38) & (np.abs(exact) >= 1.2e-38) \
            & (np.abs(exact) <= 3.3e38)
        self.assertGreater(normal.sum(), 60000)
        error = np.abs(got[normal] - exact[normal]) / bfloat16_ulp(exact[normal])
        self.assertLessEqual(error.max(), 0.501)

    def test_nan_and_infinities(self):
        got = kernels.selu(self.library, tf.constant([np.nan, np.inf, -np.inf, 0.0], tf.bfloat16))
        got = tf.cast(got, tf.float32).numpy()
        self.assertTrue(np.isnan(got[0]))
        self.assertEqual(got[1], np.inf)
        self.assertAllClose(got[2:], [-SCALE * ALPHA, 0.0], atol=0.01)

    def test_gradient_is_the_exact_slope_rounded_once(self):
        values, exact_input = every_bfloat16()
        with tf.GradientTape() as tape:
            tape.watch(values)
            outputs = kernels.selu(self.library, values)
        slope = tape.gradient(outputs, values, output_gradients=tf.ones_like(values))
        slope = tf.cast(slope, tf.float32).numpy().astype(np.float64)
        with np.errstate(all="ignore"):
            exact = np.where(exact_input > 0, SCALE, SCALE * ALPHA * np.exp(np.minimum(exact_input, 0)))
        # Slopes whose float32 exp(x) is not subnormal (flushed to zero on the CPU).
        normal = np.isfinite(exact_input) & (np.abs(exact_input) >= 1.2e-38) & (exact >= 1e-37)
        error = np.abs(slope[normal] - exact[normal]) / bfloat16_ulp(exact[normal])
        self.assertLessEqual(error.max(), 0.501)

    def test_gradient_matches_the_float32_path(self):
        rng = np.random.default_rng(0)
        x = tf.constant(rng.normal(size=(4, 33, 8)) * 3, tf.bfloat16)
        upstream = tf.constant(rng.normal(size=(4, 33, 8)), tf.bfloat16)

        def gradient(fn):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = fn(x)
            return tf.cast(tape.gradient(y, x, output_gradients=upstream), tf.float32)

        fused = gradient(lambda v: kernels.selu(self.library, v))
        reference = gradient(lambda v: tf.cast(tf.nn.selu(tf.cast(v, tf.float32)), tf.bfloat16))
        self.assertAllClose(fused, reference, rtol=8e-3, atol=1e-3)

    def test_float32_matches_tensorflow_and_float64(self):
        x = np.concatenate([np.linspace(-90, 10, 200001), [-1e-7, -1e-30, 0.0, 1e-30]])
        x = x.astype(np.float32).astype(np.float64)
        got = kernels.selu(self.library, tf.constant(x, tf.float32)).numpy().astype(np.float64)
        exact = np.where(x > 0, SCALE * x, SCALE * ALPHA * np.expm1(np.minimum(x, 0)))
        relative = np.abs(got - exact) / np.maximum(np.abs(exact), 1e-30)
        self.assertLess(relative[np.abs(exact) > 1e-37].max(), 1e-6)
        self.assertAllClose(got, tf.nn.selu(tf.constant(x, tf.float32)), rtol=1e-6, atol=1e-7)
        with tf.GradientTape() as tape:
            features = tf.constant(x, tf.float32)
            tape.watch(features)
            outputs = kernels.selu(self.library, features)
        slope = tape.gradient(outputs, features).numpy()
        exact_slope = np.where(x > 0, SCALE, SCALE * ALPHA * np.exp(np.minimum(x, 0)))
        self.assertAllClose(slope, exact_slope, rtol=1e-6, atol=1e-37)

    def test_dropout_drops_at_the_rate_independently_and_reproducibly(self):
        rate = 0.1
        threshold = cpu.dropout_threshold(rate)
        x = tf.ones([64, 256, 128])

        def dropped(seed):
            return kernels.selu(self.library, x, tf.constant(seed, tf.int32), threshold,
                                -9.0).numpy() == -9.0

        first = dropped([1, 2])
        units = first.size
        sigma = (rate * (1 - rate) / units) ** 0.5
        self.assertLess(abs(first.mean() - rate), 5 * sigma)
        flat = first.reshape(-1)
        # The two units of one hash word, and neighbours across words, drop independently.
        for a, b in ((flat[0::2], flat[1::2]), (flat[1:-1:2], flat[2::2])):
            self.assertLess(abs((a & b).mean() - rate ** 2), 5 * (rate ** 2 / a.size) ** 0.5)
        np.testing.assert_array_equal(first, dropped([1, 2]))
        for other in ([1, 3], [2, 2], [0, 0]):
            both = (first & dropped(other)).mean()
            self.assertLess(abs(both - rate ** 2), 5 * (rate ** 2 / units) ** 0.5, other)

    def test_dropout_gradient_is_zero_on_the_dropped_units_only(self):
        for dtype in (tf.float32, tf.bfloat16):
            rng = np.random.default_rng(3)
            x = tf.constant(rng.uniform(-3, 3, size=(5, 7, 11)), dtype)
            upstream = tf.constant(rng.normal(size=(5, 7, 11)), dtype)
            seed = tf.constant([5, 6], tf.int32)
            with tf.GradientTape(persistent=True) as tape:
                tape.watch(x)
                fused = kernels.selu(self.library, x, seed, threshold=20000, dropped=-9.0)
                plain = tf.cast(tf.nn.selu(tf.cast(x, tf.float32)), dtype)
            drop = tf.cast(fused, tf.float32).numpy() == -9.0
            self.assertTrue(0.15 < drop.mean() < 0.45)
            tolerance = {"rtol": 1e-2} if dtype == tf.bfloat16 else {"rtol": 1e-6}
            self.assertAllClose(tf.cast(fused, tf.float32).numpy()[~drop],
                                tf.cast(plain, tf.float32).numpy()[~drop], **tolerance)
            got = tf.cast(tape.gradient(fused, x, output_gradients=upstream), tf.float32).numpy()
            want = tf.cast(tape.gradient(plain, x, output_gradients=upstream), tf.float32).numpy()
            self.assertTrue(np.all(got[drop] == 0))
            self.assertAllClose(got[~drop], want[~drop], **tolerance)

    def test_bad_seed_and_threshold_name_the_value(self):
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "seed must have shape"):
            kernels.selu(self.library, tf.zeros([2, 3]), tf.zeros([3], tf.int32), threshold=5)
        with self.assertRaisesRegex(ValueError, "threshold=70000"):
            kernels.selu(self.library, tf.zeros([2, 3]), tf.zeros([2], tf.int32),
                         threshold=70000)
        with self.assertRaisesRegex(ValueError, "needs a `seed`"):
            kernels.selu(self.library, tf.zeros([2, 3]), threshold=5)

    def test_fused_tail_draws_other_units_than_the_cpu_path_with_the_same_statistics(self):
        # The kernel hashes its bits, CpuOps draws Philox numbers: other units, same function.
        x = tf.constant(np.random.default_rng(4).uniform(-3, 3, size=(8, 64, 32)), tf.float32)
        seed = tf.constant([7, 1], tf.int32)
        identity = tf.eye(32)
        a, b = alpha_dropout_affine(0.2)

        def run(implementation):
            with tf.GradientTape() as tape:
                tape.watch(x)
                outputs = implementation.selu_alpha_dropout_dense(x, 0.2, seed, identity)
            # Undo the folded affine map: the dropped units are exactly DROPPED_VALUE.
            return ((outputs - b) / a).numpy(), tape.gradient(outputs, x).numpy()

        runs = [run(ops.get("cpu_fused")), run(ops.get("cpu"))]
        for outputs, gradient in runs:
            drop = np.isclose(outputs, DROPPED_VALUE, atol=1e-5)
            self.assertAlmostEqual(drop.mean(), 0.2, delta=0.02)
            self.assertAllClose(outputs[~drop], tf.nn.selu(x).numpy()[~drop], rtol=1e-5,
                                atol=1e-5)
            self.assertTrue(np.all(gradient[drop] == 0))
        self.assertFalse(np.array_equal(np.isclose(runs[0][0], DROPPED_VALUE, atol=1e-5),
                                        np.isclose(runs[1][0], DROPPED_VALUE, atol=1e-5)))

    def test_training_graph_uses_the_kernel_and_inference_does_not(self):
        x = tf.zeros([2, 5, 4], tf.bfloat16)
        mask = tf.constant([[True] * 5, [True, False, False, False, False]])
        fused = ops.get("cpu_fused")
        calls = {"BytenetSelu": lambda v, training: fused.selu(v, training),
                 "BytenetMaskedSelu": lambda v, training: fused.selu(v, training, mask),
                 "BytenetScaledAdd": lambda v, training: fused.residual(v, v, 0.5, 0.9,
                                                                        training)}
        for op_type, call in calls.items():
            def op_types(training):
                graph = tf.function(lambda v: call(v, training)).get_concrete_function(x).graph
                return {op.type for op in graph.get_operations()}

            self.assertIn(op_type, op_types(True))
            self.assertNotIn(op_type, op_types(False))
        # A plain sum stays TensorFlow's add, whose gradient costs nothing.
        graph = tf.function(lambda v: fused.residual(v, v, 1.0, 1.0, True)) \
            .get_concrete_function(x).graph
        self.assertNotIn("BytenetScaledAdd", {op.type for op in graph.get_operations()})

    def test_masked_selu_is_selu_times_the_mask_in_value_and_gradient(self):
        rng = np.random.default_rng(2)
        # Rows of several lengths, one fully masked, and channels that are not a multiple of
        # the vector width.
        lengths = [7, 1, 0, 4]
        mask = tf.sequence_mask(lengths, 7)
        for dtype in (tf.float32, tf.bfloat16):
            x = tf.constant(rng.normal(size=(4, 7, 13)) * 3, dtype)
            upstream = tf.constant(rng.normal(size=(4, 7, 13)), dtype)
            got, got_grad = _value_and_gradient(
                lambda v: kernels.masked_selu(self.library, v, mask), x, upstream)
            want, want_grad = _value_and_gradient(
                lambda v: kernels.selu(self.library, v)
                * tf.cast(mask, dtype)[..., None], x, upstream)
            self.assertAllEqual(tf.cast(got, tf.float32), tf.cast(want, tf.float32))
            self.assertAllEqual(tf.cast(got_grad, tf.float32), tf.cast(want_grad, tf.float32))
            self.assertAllEqual(got[2], tf.zeros_like(got[2]))

    def test_scaled_add_rounds_once_in_value_and_gradient(self):
        rng = np.random.default_rng(3)
        x_scale, y_scale = 0.9682458365518543, 0.25
        for dtype in (tf.float32, tf.bfloat16):
            x = tf.constant(rng.normal(size=(3, 11, 17)), dtype)
            y = tf.constant(rng.normal(size=(3, 11, 17)), dtype)
            upstream = tf.constant(rng.normal(size=(3, 11, 17)), dtype)
            with tf.GradientTape() as tape:
                tape.watch([x, y])
                got = kernels.scaled_add(self.library, x, y, x_scale, y_scale)
            x_grad, y_grad = tape.gradient(got, [x, y], output_gradients=upstream)
            # The scales are float32 attributes.
            a, b = float(np.float32(x_scale)), float(np.float32(y_scale))
            exact = [tf.cast(t, tf.float64).numpy() for t in (x, y, upstream)]
            for value, want, size in (
                    (got, a * exact[0] + b * exact[1],
                     np.abs(a * exact[0]) + np.abs(b * exact[1])),
                    (x_grad, a * exact[2], np.abs(a * exact[2])),
                    (y_grad, b * exact[2], np.abs(b * exact[2]))):
                value = tf.cast(value, tf.float64).numpy()
                # float32 arithmetic (a few roundings of its terms), then for bfloat16 one
                # rounding to half a bfloat16 ulp.
                bound = size * 2.0 ** -22
                if dtype == tf.bfloat16:
                    bound = bound + 0.5 * bfloat16_ulp(np.where(want == 0, 1.0, want))
                self.assertTrue(np.all(np.abs(value - want) <= bound), msg=str(dtype))

    def test_bias_add_rounds_once(self):
        rng = np.random.default_rng(4)
        # Channels that are not a multiple of the vector width, and a tensor without rows.
        for shape in [(3, 11, 17), (5, 1), (0, 4)]:
            for dtype in (tf.float32, tf.bfloat16):
                x = tf.constant(rng.normal(size=shape), dtype)
                bias = tf.constant(rng.normal(size=shape[-1:]), dtype)
                got = tf.cast(kernels.bias_add(self.library, x, bias), tf.float64).numpy()
                self.assertEqual(got.shape, shape)
                # The sum of two float32 values, rounded once to the dtype.
                want = (tf.cast(x, tf.float32) + tf.cast(bias, tf.float32)).numpy()
                want = tf.cast(tf.cast(want, dtype), tf.float64).numpy()
                self.assertAllEqual(got, want, msg=f"{dtype} {shape}")

    def test_bfloat16_dense_adds_its_bias_in_the_kernel_with_the_same_gradients(self):
        rng = np.random.default_rng(5)
        fused = ops.get("cpu_fused")
        x = tf.constant(rng.normal(size=(2, 7, 12)), tf.bfloat16)
        kernel = tf.constant(rng.normal(size=(12, 10)), tf.float32)
        bias = tf.constant(rng.normal(size=(10,)), tf.float32)
        upstream = tf.constant(rng.normal(size=(2, 7, 10)), tf.bfloat16)

        def value_and_gradients(implementation):
            with tf.GradientTape() as tape:
                tape.watch([x, kernel, bias])
                outputs = implementation.dense(x, kernel, bias)
            return outputs, tape.gradient(outputs, [x, kernel, bias], output_gradients=upstream)

        def op_types(dtype, shape):
            inputs = tf.zeros(shape, dtype)
            graph = tf.function(lambda v: fused.dense(v, kernel, bias)) \
                .get_concrete_function(inputs).graph
            return {op.type for op in graph.get_operations()}

        self.assertIn("BytenetBiasAdd", op_types(tf.bfloat16, [2, 7, 12]))
        # float32, where oneDNN's fused bias costs little, and one decoding step's rows keep
        # the stock ops.
        self.assertNotIn("BytenetBiasAdd", op_types(tf.float32, [2, 7, 12]))
        self.assertNotIn("BytenetBiasAdd", op_types(tf.bfloat16, [14, 12]))
        (got, got_grads), (want, want_grads) = [
            value_and_gradients(implementation) for implementation in (fused, ops.get("cpu"))]
        # The product is rounded to bfloat16 before the bias here, after it in oneDNN's fused
        # call: at most one bfloat16 rounding of the output apart.
        self.assertAllClose(tf.cast(got, tf.float32), tf.cast(want, tf.float32),
                            atol=float(np.max(bfloat16_ulp(np.abs(want) + 1e-30))))
        for got_grad, want_grad in zip(got_grads, want_grads):
            self.assertAllEqual(tf.cast(got_grad, tf.float32), tf.cast(want_grad, tf.float32))

    def test_bad_shapes_name_them(self):
        x = tf.zeros([2, 5, 4])
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    r"mask must have the shape of features.*\[2,5,4\].*\[2,4\]"):
            kernels.masked_selu(self.library, x, tf.ones([2, 4], tf.bool))
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    r"x and y must have one shape.*\[2,5,4\].*\[2,5,3\]"):
            kernels.scaled_add(self.library, x, tf.zeros([2, 5, 3]), 1.0, 0.5)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    r"bias must be a vector of the last axis of x.*\[2,5,4\].*\[5\]"):
            kernels.bias_add(self.library, x, tf.zeros([5]))

    def test_bfloat16_model_gradients_are_as_close_to_float32_as_the_cast_path(self):
        tf.keras.utils.set_random_seed(0)
        rng = np.random.default_rng(1)
        inputs = {"source": tf.constant(rng.integers(4, 200, size=(3, 20)), tf.int32),
                  "target": tf.constant(rng.integers(4, 200, size=(3, 21)), tf.int32)}
        models = {(dtype, policy): zoo.build_model(
            "bytenet_selu", hidden_size=32, num_stacks=1, dtype=dtype, seed=0, dropout_rate=0.0,
            ops_policy=policy)
            for dtype, policy in (("float32", "reference"), ("mixed_bfloat16", "cpu_fused"),
                                  ("mixed_bfloat16", "cpu"))}
        for model in models.values():
            model(inputs)
            model.set_weights(models["float32", "reference"].get_weights())

        def gradients(model):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(model(inputs, training=True) ** 2)
            return [tf.convert_to_tensor(g) for g in tape.gradient(loss, model.trainable_variables)]

        exact = gradients(models["float32", "reference"])
        fused = gradients(models["mixed_bfloat16", "cpu_fused"])
        cast_path = gradients(models["mixed_bfloat16", "cpu"])

        def error(grads):
            return float(tf.linalg.global_norm([g - e for g, e in zip(grads, exact)])
                         / tf.linalg.global_norm(exact))

        # Measured: 0.079 fused, 0.076 through the casts.
        self.assertLess(error(fused), 0.15)
        self.assertLess(error(fused), 1.5 * error(cast_path))


class FallbackTest(unittest.TestCase):

    def run_python(self, code, **env):
        result = run_python(code, **env)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        return result

    CODE = ("from bytenet_tf import ops\n"
            "print('auto', ops.resolve_policy('auto', accelerator=''))\n"
            "try:\n"
            "    ops.resolve_policy('cpu_fused', accelerator='')\n"
            "except ValueError as error:\n"
            "    print('explicit', error)\n")

    def _fallback(self, code=CODE, **env):
        cache = self.enterContext(tempfile.TemporaryDirectory())
        result = self.run_python(code, BYTENET_TF_CACHE=cache, **env)
        lines = result.stdout.splitlines()
        auto = next(line for line in lines if line.startswith("auto"))
        explicit = next(line for line in lines if line.startswith("explicit"))
        self.assertIn("'cpu'", auto)
        self.assertIn("ops_policy='cpu_fused' is unavailable", explicit)
        self.assertIn("WARNING", result.stderr)
        self.assertIn("falls back to the slower 'cpu' policy", result.stderr)
        self.assertEqual(os.listdir(cache), [], "a failed build leaves no file behind")
        return auto, explicit

    def test_compiler_failure_makes_auto_warn_why_and_an_explicit_request_fail(self):
        auto, explicit = self._fallback(CXX="false")
        self.assertIn("'false' exited with 1", auto)
        self.assertIn("'false' exited with 1", explicit)

    def test_missing_compiler_says_so(self):
        auto, explicit = self._fallback(CXX="/nonexistent/g++")
        for line in (auto, explicit):
            self.assertIn("no C++ compiler: '/nonexistent/g++' was not found", line)
            self.assertIn("install g++ or set CXX", line)

    def test_missing_source_is_a_broken_install_not_a_missing_compiler(self):
        code = ("from bytenet_tf.ops import kernels\n"
                "kernels.SOURCE = '/nonexistent/selu.cc'\n" + self.CODE)
        auto, explicit = self._fallback(code)
        for line in (auto, explicit):
            self.assertIn("/nonexistent/selu.cc is missing", line)
            self.assertIn("installation of bytenet_tf is incomplete", line)
            self.assertNotIn("compiler", line)


class TargetFlagsTest(unittest.TestCase):
    def test_avx512_fp16_is_turned_off_only_where_the_cpu_has_it(self):
        # TF 2.21's Eigen headers fail to compile with AVX512-FP16 on (Sapphire Rapids).
        original = kernels._cpu_signature
        try:
            kernels._cpu_signature = lambda: "flags\t: avx2 avx512f avx512_bf16 avx512_fp16\n"
            self.assertEqual(kernels._target_flags(), ["-march=native", "-mno-avx512fp16"])
            kernels._cpu_signature = lambda: "flags\t: avx2 avx512f avx512_bf16\n"
            self.assertEqual(kernels._target_flags(), ["-march=native"])
        finally:
            kernels._cpu_signature = original


if __name__ == "__main__":
    tf.test.main()
