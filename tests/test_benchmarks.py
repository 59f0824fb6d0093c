"""The throughput, gate-cost and profile benchmarks run, at a tiny size, and end with the JSON they promise."""

import json
import os
import subprocess
import sys

import tensorflow as tf

from tests.conftest import PROJECT_ROOT, deen_path

TINY = ["--hidden_size=16", "--num_stacks=1", "--batch_size=2", "--length=16", "--steps=2",
        "--warmup=1"]


def _last_json(script, *flags):
    completed = subprocess.run(
        [sys.executable, os.path.join(PROJECT_ROOT, "benchmarks", script), *TINY, *flags],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=PROJECT_ROOT))
    if completed.returncode:
        raise AssertionError(f"{script} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


class BenchmarksTest(tf.test.TestCase):

    def setUp(self):
        super().setUp()
        deen_path("train.de")  # both scripts read real text from ../shared/data/deen/train.*

    def test_train_throughput_reports_bytes_flops_and_peak(self):
        result = _last_json("train_throughput.py", "--precision=float32")
        # Reported to 6 significant digits: a tiny step of a few ms keeps its precision.
        self.assertAllClose(result["target_bytes_per_s"], 2 * 16 / result["seconds_per_step"],
                            rtol=1e-4)
        self.assertGreater(result["gflop_per_s"], 0)
        # It times the step the binary runs, on the policy the binary picks on a CPU.
        self.assertIn(result["ops_policy"], ("cpu", "cpu_fused"))
        self.assertGreater(result["matmul_peak_gflop_per_s"], result["gflop_per_s"])
        self.assertAlmostEqual(result["fraction_of_peak"],
                               result["gflop_per_s"] / result["matmul_peak_gflop_per_s"], places=2)

    def test_residual_gate_cost_alternates_rounds_and_reports_their_median(self):
        result = _last_json("residual_gate_cost.py", "--precision=float32", "--rounds=3")
        ratios = result["gate_over_fixed_per_round"]
        self.assertLen(ratios, 3)
        self.assertEqual(result["steps_per_round"], 2)
        self.assertAllGreater(ratios, 0.0)
        self.assertAllClose(result["gate_over_fixed"], sorted(ratios)[1], rtol=1e-3)
        self.assertCountEqual(result["seconds_per_step"], ["fixed", "gate"])

    def test_profile_lists_the_matmuls(self):
        result = _last_json("profile_train_step.py", "--precision=float32",
                            f"--logdir={self.get_temp_dir()}")
        self.assertGreater(result["wall_ms_per_step"], 0)
        self.assertTrue(any("MatMul" in op for op in result["op_ms_per_step"]),
                        result["op_ms_per_step"])
