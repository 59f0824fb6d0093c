"""The throughput, gate-cost, kernel-cost, optimizer-cost, product-shape and profile benchmarks
(of training and of translating) run, at a tiny size, and end with the JSON they promise. They
run side by side: these tests check what they report, not how fast the machine is."""

import importlib.util
import json
import os
import sys
import tempfile
from unittest import mock

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from bytenet_tf import inference
from tests.conftest import PROJECT_ROOT, deen_path, run_concurrently

TINY = ["--hidden_size=16", "--num_stacks=1", "--batch_size=2", "--length=16", "--steps=2",
        "--warmup=1"]


def _script(name, *flags):
    return [sys.executable, os.path.join(PROJECT_ROOT, "benchmarks", name), *flags]


def _backend_command(backend):
    """backend_throughput.py under `backend`, with TensorFlow unimportable."""
    argv = TINY + ["--peak_size=1024"]
    path = os.path.join(PROJECT_ROOT, "benchmarks", "backend_throughput.py")
    code = ("import runpy, sys; sys.modules['tensorflow'] = None; "
            f"sys.argv = ['backend_throughput.py'] + {argv!r}; "
            f"runpy.run_path({path!r}, run_name='__main__')")
    return [sys.executable, "-c", code]


def _commands(folder):
    """Every benchmark run the tests read: `{key: (command, environment)}`."""
    from bytenet_tf import export, zoo

    model = zoo.build_model("bytenet_selu", hidden_size=16, num_stacks=1, max_length=64, seed=0)
    model({"source": tf.constant([[5, 2]]), "target": tf.constant([[1, 5]])})
    greedy = export.export_saved_model(model, folder + "/greedy")
    beam = export.export_saved_model(model, folder + "/beam", beam_size=2)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=PROJECT_ROOT)
    float32 = TINY + ["--precision=float32"]
    fixture = [f"--source_file={deen_path('fixture-small.de')}",
               f"--target_file={deen_path('fixture-small.en')}"]
    runs = {
        "train_throughput": (_script("train_throughput.py", *float32, "--dropout_rate=0"), env),
        "train_throughput_one_thread": (_script("train_throughput.py", *float32),
                                        dict(env, TF_NUM_INTRAOP_THREADS="1")),
        "residual_gate_cost": (_script("residual_gate_cost.py", *float32, "--rounds=3"), env),
        "fused_kernels_cost": (_script("fused_kernels_cost.py", *float32, "--rounds=3"), env),
        "optimizer_cost": (_script("optimizer_cost.py", *float32, "--rounds=3"), env),
        "matmul_shapes": (_script("matmul_shapes.py", "--hidden_size=16", "--num_stacks=1",
                                  "--batch_size=2", "--length=16", "--precision=float32",
                                  "--reps=2", "--rounds=2", "--peak_size=256"), env),
        "profile_train_step": (_script("profile_train_step.py", *float32,
                                       f"--logdir={folder}/profile"), env),
        "profile_translate": (_script("profile_translate.py", f"--saved_model={beam}",
                                      "--sentences=5", "--top=100",
                                      f"--logdir={folder}/profile_translate"),
                              env),
        "checkpoint_cost": (_script("checkpoint_cost.py", *fixture, "--shuffle_buffer=1000",
                                    "--rounds=2", "--batches=3"), env),
        "checkpoint_cost_small_buffer": (_script("checkpoint_cost.py", *fixture,
                                                 "--shuffle_buffer=499"), env),
        "translate_speed": (_script("translate_speed.py", f"--saved_model={greedy}",
                                    f"--saved_model={beam}", "--rounds=2", "--captions=6",
                                    "--news=4", "--batch_size=4", "--concurrent_batches=1",
                                    "--concurrent_batches=2"), env),
    }
    for backend in ("jax", "torch"):
        if importlib.util.find_spec(backend) is not None:
            runs[backend] = (_backend_command(backend), dict(
                os.environ, KERAS_BACKEND=backend, JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="",
                PYTHONPATH=PROJECT_ROOT + os.pathsep + os.path.join(PROJECT_ROOT, "benchmarks")))
    return runs


_runs = {}


def _last_json(key):
    """The last stdout line of benchmark run `key`, as JSON. The first call starts every run,
    three side by side (each is mostly start-up: imports and tracing), and keeps their output
    for the other tests; their timings are not what these tests check."""
    if not _runs:
        runs = _commands(tempfile.mkdtemp(prefix="benchmarks_"))
        commands, envs = zip(*runs.values())
        _runs.update(zip(runs, run_concurrently(commands, envs=envs, timeout=600)))
    completed = _runs[key]
    if completed.returncode:
        raise AssertionError(f"{key} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


class BenchmarksTest(parameterized.TestCase, tf.test.TestCase):

    def setUp(self):
        super().setUp()
        deen_path("train.de")  # both scripts read real text from ../shared/data/deen/train.*

    def test_train_throughput_reports_bytes_flops_and_peak(self):
        result = _last_json("train_throughput")
        self.assertEqual(result["dropout_rate"], 0.0)  # the text recipe's, not the zoo's 0.05
        # Reported to 6 significant digits: a tiny step of a few ms keeps its precision.
        self.assertAllClose(result["target_bytes_per_s"], 2 * 16 / result["seconds_per_step"],
                            rtol=1e-4)
        self.assertGreater(result["gflop_per_s"], 0)
        # It times the step the binary runs, on the policy the binary picks on a CPU.
        self.assertIn(result["ops_policy"], ("cpu", "cpu_fused"))
        self.assertGreater(result["matmul_peak_gflop_per_s"], result["gflop_per_s"])
        self.assertAlmostEqual(result["fraction_of_peak"],
                               result["gflop_per_s"] / result["matmul_peak_gflop_per_s"], places=2)

    def test_train_throughput_names_the_thread_setting_its_peak_ran_under(self):
        result = _last_json("train_throughput_one_thread")
        self.assertEqual(result["thread_env"], {"TF_NUM_INTRAOP_THREADS": "1"})
        self.assertIn("compares with other runs only at TensorFlow's default threading",
                      _runs["train_throughput_one_thread"].stdout)
        self.assertEqual(_last_json("train_throughput")["thread_env"], {
            name: os.environ[name] for name in ("TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS")
            if os.environ.get(name)})

    def test_residual_gate_cost_alternates_rounds_and_reports_their_median(self):
        result = _last_json("residual_gate_cost")
        ratios = result["gate_over_fixed_per_round"]
        self.assertLen(ratios, 3)
        self.assertEqual(result["steps_per_round"], 2)
        self.assertAllGreater(ratios, 0.0)
        self.assertAllClose(result["gate_over_fixed"], sorted(ratios)[1], rtol=1e-3)
        self.assertCountEqual(result["seconds_per_step"], ["fixed", "gate"])

    def test_fused_kernels_cost_times_both_variants_and_only_one_uses_the_kernels(self):
        result = _last_json("fused_kernels_cost")
        ratios = result["fused_over_tensorflow_ops_per_round"]
        self.assertLen(ratios, 3)
        self.assertAllClose(result["fused_over_tensorflow_ops"], sorted(ratios)[1], rtol=1e-3)
        self.assertCountEqual(result["fraction_of_peak"], ["tensorflow_ops", "fused"])

        from bytenet_tf import zoo

        # The benchmarks import their neighbours (real_text) as top-level modules.
        with mock.patch.object(sys, "path", [os.path.join(PROJECT_ROOT, "benchmarks")] + sys.path):
            from benchmarks import fused_kernels_cost

        def op_types(swap):
            model = zoo.build_model("bytenet_selu", hidden_size=16, num_stacks=1,
                                    ops_policy="cpu_fused", dropout_rate=0.0)
            if swap:
                fused_kernels_cost.use_ops(model, fused_kernels_cost.TensorflowBlockOps())
            inputs = {"source": tf.constant([[5, 6, 2, 0]]), "target": tf.constant([[1, 5, 6]])}
            graph = tf.function(lambda: model(inputs, training=True)).get_concrete_function().graph
            return {op.type for op in graph.get_operations()}

        new_ops = {"BytenetMaskedSelu", "BytenetScaledAdd"}
        self.assertTrue(new_ops <= op_types(swap=False))
        self.assertFalse(new_ops & op_types(swap=True))
        self.assertIn("BytenetSelu", op_types(swap=True))

    def test_checkpoint_cost_writes_both_streams_and_the_permutation_is_smaller(self):
        result = _last_json("checkpoint_cost")
        self.assertEqual(result["pairs"], 500)
        for name in ("buffer", "permuted"):
            self.assertLen(result["write_seconds_per_round"][name], 2)
            self.assertGreater(result["checkpoint_bytes"][name], 0)
        self.assertLess(result["checkpoint_bytes"]["permuted"],
                        result["checkpoint_bytes"]["buffer"])
        self.assertAllClose(result["permuted_over_buffer_write"],
                            result["write_seconds_median"]["permuted"]
                            / result["write_seconds_median"]["buffer"])

    def test_checkpoint_cost_refuses_a_buffer_smaller_than_the_data(self):
        _last_json("checkpoint_cost")  # starts every run
        completed = _runs["checkpoint_cost_small_buffer"]
        self.assertEqual(completed.returncode, 2)
        self.assertIn("500 pairs, more than --shuffle_buffer=499", completed.stderr)

    def test_optimizer_cost_times_both_optimizers_on_the_same_update(self):
        result = _last_json("optimizer_cost")
        ratios = result["once_over_per_variable_per_round"]
        self.assertLen(ratios, 3)
        self.assertAllClose(result["once_over_per_variable"], sorted(ratios)[1], rtol=1e-3)
        # Computing the scalars once leaves fewer ops in the step, and the same weights.
        self.assertLess(result["graph_ops"]["once"], result["graph_ops"]["per_variable"])
        self.assertLess(result["largest_weight_difference"], 1e-5)

    def test_once_adam_updates_as_the_binarys_adam(self):
        import keras

        with mock.patch.object(sys, "path", [os.path.join(PROJECT_ROOT, "benchmarks")] + sys.path):
            from benchmarks import optimizer_cost
        from bytenet_tf.training.optimizer import Adam
        from bytenet_tf.training.schedule import WarmupRsqrtDecay

        def run(optimizer_class, **kwargs):
            rng = np.random.default_rng(0)
            variables = [keras.Variable(rng.normal(size=shape).astype(np.float32))
                         for shape in [(4, 3), (3,)]]
            # A schedule whose rate changes every step, and a decay large enough to show.
            optimizer = optimizer_class(WarmupRsqrtDecay(0.05, warmup_steps=3),
                                        weight_decay=2.0, **kwargs)
            optimizer.build(variables)
            apply = tf.function(lambda grads: optimizer.apply(grads, variables))
            for _ in range(6):
                apply([tf.constant(rng.normal(size=v.shape).astype(np.float32))
                       for v in variables])
            return [v.numpy() for v in variables]

        for ours, theirs in zip(run(optimizer_cost.OnceAdam), run(Adam)):
            self.assertAllClose(ours, theirs, rtol=1e-6, atol=1e-7)
        # The check has teeth: another beta_1 moves the weights.
        self.assertNotAllClose(run(optimizer_cost.OnceAdam, beta_1=0.5)[0], run(Adam)[0])

    def test_replacing_the_optimizer_keeps_settings_and_loss_scaling(self):
        import keras

        with mock.patch.object(sys, "path", [os.path.join(PROJECT_ROOT, "benchmarks")] + sys.path):
            from benchmarks import optimizer_cost, train_throughput
        from bytenet_tf.training.config import TrainConfig, resolve
        from bytenet_tf.training.optimizer import make_optimizer
        from pipelines.datasets import DataSpec

        config = resolve(TrainConfig(model="bytenet_selu", data=DataSpec(dataset="text")))
        # The binary's optimizer for each policy, and a loss scaling with settings of its own.
        binaries = {policy: make_optimizer(config, policy)
                    for policy in ("float32", "mixed_bfloat16", "mixed_float16")}
        binaries["own_scaling"] = keras.optimizers.LossScaleOptimizer(
            make_optimizer(config, "float32"), initial_scale=8.0, dynamic_growth_steps=7)
        for policy, binary in binaries.items():
            with self.subTest(policy=policy):
                replaced = train_throughput.replace_optimizer(binary, optimizer_cost.OnceAdam)
                if policy in ("mixed_float16", "own_scaling"):
                    # The loss scaling stays, around the replaced inner optimizer.
                    self.assertIsInstance(replaced, keras.optimizers.LossScaleOptimizer)
                    self.assertEqual(replaced.initial_scale, binary.initial_scale)
                    self.assertEqual(replaced.dynamic_growth_steps, binary.dynamic_growth_steps)
                    binary, replaced = binary.inner_optimizer, replaced.inner_optimizer
                self.assertNotIsInstance(binary, optimizer_cost.OnceAdam)
                self.assertIsInstance(replaced, optimizer_cost.OnceAdam)
                for setting in ("beta_2", "epsilon", "clipnorm", "weight_decay"):
                    self.assertEqual(getattr(replaced, setting), getattr(binary, setting))
                self.assertEqual(replaced.get_config()["learning_rate"],
                                 binary.get_config()["learning_rate"])

    def test_matmul_shapes_lists_the_analytic_flops_and_times_each_product(self):
        result = _last_json("matmul_shapes")
        products = result["products"]
        flops = sum(2 * p["batch_size"] * p["length"] * p["taps"] * p["input_dim"]
                    * p["output_dim"] * p["count"] for p in products)
        self.assertAllClose(flops / 1e9, result["gflop_per_step"], rtol=1e-5)
        self.assertAllClose(result["products_ms_per_step"],
                            sum(p["ms"] * p["count"] for p in products), rtol=1e-4)
        self.assertAllClose(result["products_fraction_of_peak"], result["gflop_per_step"]
                            / result["products_ms_per_step"] * 1e3
                            / result["matmul_peak_gflop_per_s"], rtol=1e-3)
        self.assertCountEqual({p["kind"] for p in products}, ["matmul", "matmul_t_a", "conv"])

    def test_matmul_shapes_product_list_matches_the_step_it_stands_for(self):
        from bytenet_tf import flops, zoo

        with mock.patch.object(sys, "path", [os.path.join(PROJECT_ROOT, "benchmarks")] + sys.path):
            from benchmarks import matmul_shapes
        model = zoo.build_model("bytenet_selu", hidden_size=24, num_stacks=2, seed=0)
        model({"source": tf.constant([[5, 6, 2]]), "target": tf.constant([[1, 5, 6]])})
        counts = matmul_shapes.step_products(model, batch_size=3, length=7)
        self.assertEqual(sum(matmul_shapes.product_flops(p) * n for p, n in counts.items()),
                         flops.training_flops(model, 7, 7, 3))
        # Each product computes what the cpu ops policy computes in the step.
        rng = np.random.default_rng(1)
        for product in counts:
            a, b = matmul_shapes._operands(product, tf.float32, rng)
            got = matmul_shapes._compute(product, a, b)
            if product.kind == "conv":
                padded = tf.pad(a, [[0, 0], [product.left, product.right], [0, 0]])
                want = sum(tf.einsum("bti,io->bto", padded[:, k * product.dilation:][:, :7],
                                     b[k]) for k in range(product.taps))
            else:
                want = np.matmul(a.numpy().T if product.kind == "matmul_t_a" else a.numpy(),
                                 b.numpy())
            self.assertAllClose(got, want, rtol=1e-4, atol=1e-4)

    def test_matmul_shapes_alternates_the_rounds_between_products(self):
        with mock.patch.object(sys, "path", [os.path.join(PROJECT_ROOT, "benchmarks")] + sys.path):
            from benchmarks import matmul_shapes
        calls = []

        def recording_chain(product, dtype, reps, rng):
            def chain():
                calls.append(product)
                return tf.constant(0.0)
            return chain

        with mock.patch.object(matmul_shapes, "product_chain", recording_chain):
            seconds = matmul_shapes.time_products(["a", "b", "c"], tf.float32, reps=4, rounds=3,
                                                  rng=None)
        self.assertEqual(calls, ["a", "b", "c"] * 3)
        self.assertCountEqual(seconds, ["a", "b", "c"])
        self.assertTrue(all(value >= 0 for value in seconds.values()), seconds)

    def test_profile_lists_the_matmuls(self):
        result = _last_json("profile_train_step")
        self.assertGreater(result["wall_ms_per_step"], 0)
        self.assertTrue(any("MatMul" in op for op in result["op_ms_per_step"]),
                        result["op_ms_per_step"])

    def test_translate_profile_lists_the_decoding_ops(self):
        result = _last_json("profile_translate")
        self.assertEqual(result["sentences"], 5)
        self.assertGreater(result["seconds"], 0)
        ops = {row["op"]: row for row in result["ops"]}
        # The decoder step's products and beam search's choice, each called once per step.
        self.assertTrue(any("MatMul" in op for op in ops), ops)
        self.assertIn("TopKV2", ops)
        self.assertGreater(ops["TopKV2"]["calls"], 1)

    def test_translate_speed_reports_speed_and_flop_share_per_export(self):
        result = _last_json("translate_speed")
        rows = {(row["beam_size"], row["set"]): row for row in result["rows"]}
        self.assertCountEqual(rows, [(1, "captions"), (1, "news"), (2, "captions"), (2, "news")])
        for (beam, _), row in rows.items():
            self.assertEqual(row["concurrent_batches"], beam)  # one value per export, in order
            self.assertLen(row["seconds_per_round"], 2)
            self.assertAllClose(row["sentences_per_s"], row["sentences"] / row["seconds"],
                                rtol=0.02)
            self.assertGreater(row["fraction_of_float32_peak"], 0.0)
            self.assertLess(row["fraction_of_float32_peak"], 1.0)
        self.assertEqual(rows[(1, "news")]["speed_vs_first"], 1.0)
        # The threads bytenet-evaluate sets for the largest --concurrent_batches given (2), and
        # digests that tell the sets' translations apart.
        self.assertEqual({row["intra_op_threads"] for row in rows.values()},
                         {inference.threads_per_batch(2)})
        for beam in (1, 2):
            digests = {rows[(beam, name)]["outputs_sha256"] for name in ("captions", "news")}
            self.assertLen(digests, 2)
            self.assertTrue(all(len(d) == 64 for d in digests), digests)

    @parameterized.named_parameters(("jax", "jax"), ("torch", "torch"))
    def test_backend_throughput_runs_without_tensorflow(self, backend):
        if importlib.util.find_spec(backend) is None:
            self.skipTest(f"{backend} is not installed here (pip install 'bytenet_tf[test]' "
                          "installs it)")
        result = _last_json(backend)
        self.assertEqual(result["backend"], backend)
        self.assertEqual(result["matmul_precision"], "float32" if backend == "torch" else "default")
        self.assertAllClose(result["target_bytes_per_s"], 2 * 16 / result["seconds_per_step"],
                            rtol=1e-4)
        self.assertGreater(result["matmul_peak_gflop_per_s"], result["gflop_per_s"])
