"""TensorFlow's oneDNN CPU kernels: `import bytenet_tf` before TensorFlow turns them on unless
the user chose or the process is a decoding binary, the trainer says which it runs, and the benchmarks' matmul peak is the best
square size, not one size."""

import os
import subprocess
import sys
import unittest
from unittest import mock

import bytenet_tf
from bytenet_tf.training import devices
from tests.conftest import PROJECT_ROOT

_REPORT = ("import os, bytenet_tf\n"
           "from tensorflow.python.util import _pywrap_util_port\n"
           "print(os.environ['TF_ENABLE_ONEDNN_OPTS'], _pywrap_util_port.IsMklEnabled())\n")


def _report(**variables):
    env = {name: value for name, value in os.environ.items() if name != "TF_ENABLE_ONEDNN_OPTS"}
    env.update(variables, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=PROJECT_ROOT)
    result = subprocess.run([sys.executable, "-c", _REPORT], env=env, capture_output=True,
                            text=True, timeout=300, check=True)
    return result.stdout.split()


class OneDnnTest(unittest.TestCase):

    def test_bytenet_tf_turns_them_on_before_tensorflow_loads(self):
        # On a CPU without AVX512 TensorFlow alone leaves them off.
        self.assertEqual(_report(), ["1", "True"])

    def test_a_users_choice_stands(self):
        self.assertEqual(_report(TF_ENABLE_ONEDNN_OPTS="0"), ["0", "False"])

    def test_only_the_decoding_binaries_keep_tensorflows_choice(self):
        decoding = [["python", "-m", "bytenet_tf.translate", "--saved_model=x"],
                    ["/venv/bin/python3", "/venv/bin/bytenet-evaluate", "--source_file=f"],
                    ["python", "-u", "-m", "bytenet_tf.evaluate"]]
        others = [["python", "-m", "bytenet_tf.train"], ["/venv/bin/bytenet-train"],
                  ["python", "-c", "import bytenet_tf"], ["python"], ["python", "-m"],
                  ["python", "-m", "pytest", "tests"],
                  ["python", "script.py", "bytenet-translate"]]
        for argv in decoding:
            self.assertTrue(bytenet_tf.runs_a_decoding_binary(argv), argv)
        for argv in others:
            self.assertFalse(bytenet_tf.runs_a_decoding_binary(argv), argv)

    def test_the_description_names_the_state_and_the_setting(self):
        with mock.patch.dict(os.environ, {"TF_ENABLE_ONEDNN_OPTS": "1"}):
            self.assertRegex(devices.onednn_description(),
                             r"^(on|off) \(TF_ENABLE_ONEDNN_OPTS=1\)$")
        with mock.patch.dict(os.environ):
            os.environ.pop("TF_ENABLE_ONEDNN_OPTS", None)
            self.assertRegex(devices.onednn_description(), r"^(on|off) \(unset\)$")


class MatmulPeakTest(unittest.TestCase):

    def test_the_peak_is_the_best_size_not_the_last(self):
        with mock.patch.object(sys, "path", [os.path.join(PROJECT_ROOT, "benchmarks")] + sys.path):
            from benchmarks import train_throughput
        import tensorflow as tf

        # One timed run per size: size 2 takes 1 us (16 FLOP: 0.016 GFLOP/s), size 4 takes
        # 100 us (128 FLOP: 0.00128 GFLOP/s).
        clock = iter([0.0, 1e-6, 0.0, 1e-4])
        with mock.patch.object(train_throughput, "PEAK_SIZES", (2, 4)), \
                mock.patch.object(train_throughput.time, "perf_counter", lambda: next(clock)):
            peak = train_throughput.matmul_peak(tf.float32, repeats=1)
        self.assertAlmostEqual(peak, 0.016, places=9)
        self.assertGreater(train_throughput.matmul_peak(tf.float32, size=64, repeats=2), 0.0)


if __name__ == "__main__":
    unittest.main()
