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
from tests.conftest import FAST_COMPILING_XLA, PROJECT_ROOT

SMALL = dict(hidden_size=16, num_stacks=1)
BACKENDS = [(name, name) for name in ("jax", "torch")]
SENTENCES = [b"Ein Hund l\xc3\xa4uft.", b"", b"Zwei M\xc3\xa4nner sitzen auf einer Bank."]
_runs, _started = {}, {}


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


# JAX spends most of its run compiling (about 4 s per zoo model's `fit`): two halves of the zoo
# run side by side, and compile with `FAST_COMPILING_XLA`.
PARTS = {"jax": 2, "torch": 1}


def _start(backend):
    """Writes the TensorFlow side and starts the other backend's checks, in `PARTS[backend]`
    processes; stderr goes to files in the folder, so that a process nobody waits on yet never
    blocks on a full pipe."""
    folder = tempfile.mkdtemp(prefix=f"backend_{backend}_")
    logits, seeded = _tensorflow_side(folder)
    processes = []
    for part in range(PARTS[backend]):
        with open(os.path.join(folder, f"stderr.{part}.txt"), "w") as stderr:
            processes.append(subprocess.Popen(
                [sys.executable, os.path.join(PROJECT_ROOT, "tests", "helpers",
                                              "backend_checks.py"),
                 folder, str(part), str(PARTS[backend])], stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=PROJECT_ROOT,
                         JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="", **FAST_COMPILING_XLA)))
    return folder, logits, seeded, processes


def _merged(folder, backend, count):
    """The parts' results as one: every model's checks, the other entries of part 0, and the
    TensorFlow modules that any part imported."""
    parts = []
    for part in range(count):
        with open(os.path.join(folder, f"{backend}.{part}-of-{count}.json")) as f:
            parts.append(json.load(f))
    results = dict(parts[0], models={}, tensorflow_modules=[])
    for part in parts:
        results["models"].update(part["models"])
        results["tensorflow_modules"] = sorted(set(results["tensorflow_modules"])
                                               | set(part["tensorflow_modules"]))
    return results


def _run(backend):
    """The other backend's results (cached per test process), or a skip. The first call starts
    every installed backend's checks side by side."""
    if importlib.util.find_spec(backend) is None:
        raise __import__("unittest").SkipTest(
            f"{backend} is not installed here (pip install 'bytenet_tf[test]' installs jax)")
    if not _started:
        _started.update((name, _start(name)) for name, _ in BACKENDS
                        if importlib.util.find_spec(name) is not None)
    if backend not in _runs:
        folder, logits, seeded, processes = _started[backend]
        try:
            returncodes = [process.wait(timeout=900) for process in processes]
        finally:
            for process in processes:
                process.kill()
        for part, returncode in enumerate(returncodes):
            if returncode:
                with open(os.path.join(folder, f"stderr.{part}.txt")) as f:
                    raise AssertionError(f"backend_checks.py under {backend} (part {part}) "
                                         f"failed:\n{f.read()[-4000:]}")
        _runs[backend] = (folder, _merged(folder, backend, len(processes)), logits, seeded)
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
