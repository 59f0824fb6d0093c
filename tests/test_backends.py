"""One model on every installed Keras backend: weights saved under TensorFlow give the same
logits under JAX (and PyTorch, where installed), seed 0 draws the same weights, causality and
the receptive field hold, and `model.fit` trains every zoo model, with TensorFlow unimportable
in the other backend's process (`tests/helpers/backend_checks.py`).

JAX and PyTorch (CPU builds) are in the `[test]` extra; a backend that is not installed is
skipped, and says so.
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import bytenet_tf
from pipelines import byte_codec
from tests.conftest import PROJECT_ROOT

SMALL = dict(hidden_size=16, num_stacks=1)
BACKENDS = [(name, name) for name in ("jax", "torch")]
SENTENCES = [b"Ein Hund l\xc3\xa4uft.", b"", b"Zwei M\xc3\xa4nner sitzen auf einer Bank."]
_runs = {}


def _tensorflow_side(folder):
    """Writes the inputs and, per zoo model, perturbed weights; returns their logits and the
    weights that seed 0 draws under TensorFlow."""
    source, target, labels = byte_codec.frame_batch(SENTENCES, [b"A dog runs.", b"x", b"Two"])
    np.savez(os.path.join(folder, "inputs.npz"), source=source, target=target, labels=labels)
    inputs = {"source": source, "target": target}
    logits, seeded = {}, {}
    rng = np.random.default_rng(0)
    for name in bytenet_tf.list_models():
        model = bytenet_tf.build_model(name, seed=3, **SMALL)
        model(inputs)
        # Weights that no initializer draws: trained-like, with nonzero biases and norms.
        for weight in model.weights:
            value = np.asarray(weight) + 0.05 * rng.standard_normal(weight.shape)
            if "variance" in weight.path:
                value = np.abs(value) + 0.5
            weight.assign(value.astype(np.float32))
        model.save_weights(os.path.join(folder, f"{name}.weights.h5"))
        logits[name] = np.asarray(model(inputs))
        fresh = bytenet_tf.build_model(name, seed=0, **SMALL)
        fresh(inputs)
        seeded[name] = {w.path: np.asarray(w) for w in fresh.weights}
    return logits, seeded


def _run(backend):
    """The other backend's results (cached per test process), or a skip."""
    if importlib.util.find_spec(backend) is None:
        raise __import__("unittest").SkipTest(
            f"{backend} is not installed here (pip install 'bytenet_tf[test]' installs jax)")
    if backend not in _runs:
        folder = tempfile.mkdtemp(prefix=f"backend_{backend}_")
        logits, seeded = _tensorflow_side(folder)
        completed = subprocess.run(
            [sys.executable, os.path.join(PROJECT_ROOT, "tests", "helpers", "backend_checks.py"),
             folder], capture_output=True, text=True, timeout=900,
            env=dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=PROJECT_ROOT,
                     JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES=""))
        if completed.returncode:
            raise AssertionError(f"backend_checks.py under {backend} failed:\n"
                                 f"{completed.stderr[-4000:]}")
        with open(os.path.join(folder, f"{backend}.json")) as f:
            _runs[backend] = (folder, json.load(f), logits, seeded)
    return _runs[backend]


class BackendTest(parameterized.TestCase, tf.test.TestCase):

    @parameterized.named_parameters(*BACKENDS)
    def test_the_zoo_imports_no_tensorflow(self, backend):
        _, results, _, _ = _run(backend)
        self.assertEqual(results["backend"], backend)
        self.assertEqual(results["tensorflow_modules"], [])
        self.assertEqual(results["ops_policy"][0], "reference")
        self.assertIn(f"Keras runs on '{backend}'", results["cpu_policy_error"])

    @parameterized.named_parameters(*BACKENDS)
    def test_one_weights_file_gives_the_same_logits(self, backend):
        folder, _, logits, _ = _run(backend)
        for name, expected in logits.items():
            with self.subTest(model=name):
                other = np.load(os.path.join(folder, f"{name}.{backend}.logits.npy"))
                self.assertGreater(np.abs(expected).max(), 0.1)
                self.assertAllClose(other, expected, atol=1e-4, rtol=0)

    @parameterized.named_parameters(*BACKENDS)
    def test_one_seed_draws_the_same_weights(self, backend):
        folder, _, _, seeded = _run(backend)
        for name, weights in seeded.items():
            with self.subTest(model=name):
                other = np.load(os.path.join(folder, f"{name}.{backend}.seeded.npz"))
                self.assertCountEqual(other.files, weights)
                for path, value in weights.items():
                    self.assertAllEqual(other[path], value, msg=path)

    @parameterized.named_parameters(*BACKENDS)
    def test_causality_and_receptive_field(self, backend):
        _, results, _, _ = _run(backend)
        for name, checks in results["models"].items():
            with self.subTest(model=name):
                self.assertEqual(checks["largest_leak"], 0.0)
                self.assertGreater(checks["source_effect"], 0.0)
        field = results["receptive_field"]
        self.assertEqual(field["analytic"], 1 + 2 * 2 * (1 + 2 + 4 + 8 + 16))
        self.assertEqual(field["touched"], list(range(field["analytic"])))

    @parameterized.named_parameters(*BACKENDS)
    def test_fit_trains_every_zoo_model(self, backend):
        _, results, _, _ = _run(backend)
        self.assertCountEqual(results["models"], bytenet_tf.list_models())
        for name, checks in results["models"].items():
            with self.subTest(model=name):
                self.assertLess(checks["last_loss"], 0.75 * checks["first_loss"])
