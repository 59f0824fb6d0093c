"""Shared test helpers: synthetic text of every kind of byte, and the real data beside the project.

The core correctness tests (causality, decoding, padding, serialization, precision) use
`synthetic_lines`: seeded random sentences drawn for the tests alone, independent of any
training or test set, with empty lines, NUL bytes, invalid UTF-8 and multi-byte characters.
Only tests that need real German-English text read `../shared/data/deen`, and skip without it.
"""

import concurrent.futures
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from pipelines import byte_codec  # noqa: E402
from shared_data import DEEN  # noqa: E402

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_PIECES = [b"der", b"Haus", b"und", b"Stra\xc3\x9fe", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80",
           b"\x00", b"\xff\xfe", b"\xc3(", b".", b",", b"1998", b"ja\xe2\x80\xa8nein"]


def run_python(code, **env):
    """Runs `code` in a fresh interpreter in the project root; returns the `CompletedProcess`
    (text output). For what one process must not have imported or installed already."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **env))


# For JAX processes in tests: XLA skips its LLVM optimizations, which change how fast the code it
# emits runs, not what the code computes, and compiles much sooner.
FAST_COMPILING_XLA = {"XLA_FLAGS": "--xla_backend_optimization_level=0"}


def run_concurrently(commands, max_workers=3, envs=None, **kwargs):
    """Runs independent `commands` side by side; returns their `CompletedProcess`es in order.

    A test that starts several processes spends most of their time importing TensorFlow and
    tracing, one core each; side by side they share the two cores of the CI machine. `envs`, if
    given, holds one environment per command; `kwargs` go to every `subprocess.run` (text output
    is captured unless they say otherwise)."""
    kwargs = dict(dict(capture_output=True, text=True, timeout=300), **kwargs)
    envs = envs or [kwargs.pop("env", None)] * len(commands)
    with concurrent.futures.ThreadPoolExecutor(max_workers) as pool:
        return list(pool.map(lambda command, env: subprocess.run(command, env=env, **kwargs),
                             commands, envs))


def synthetic_lines(count, seed=0, max_bytes=60):
    """`count` seeded random byte sentences of 0 to `max_bytes` bytes (some empty)."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(count):
        words = []
        for _ in range(int(rng.integers(0, 12))):
            words.append(_PIECES[rng.integers(len(_PIECES))] if rng.random() < 0.4
                         else bytes(rng.integers(97, 123, size=int(rng.integers(1, 9)))))
        lines.append(b" ".join(words)[:max_bytes])
    return lines


def synthetic_batch(count=4, max_bytes=40, seed=0):
    """A batch of synthetic pairs as `(source, target, labels)` int32 arrays, no empty source."""
    sources = [line or b"x" for line in synthetic_lines(count, seed, max_bytes)]
    targets = synthetic_lines(count, seed + 1, max_bytes)
    return byte_codec.frame_batch(sources, targets)


def model_inputs(source, target):
    """The `{"source", "target"}` int32 tensors a ByteNet model is called on."""
    import tensorflow as tf
    return {"source": tf.constant(source, tf.int32), "target": tf.constant(target, tf.int32)}


def assert_past_ignores_future(test, logits_of, changed_from=12):
    """Fails unless the logits before position `changed_from` stay the same when the target
    bytes from there on are redrawn, and the later ones change.

    `logits_of(source, target)`: the logits of a synthetic batch (4 pairs of up to 30 bytes).
    """
    source, target, _ = synthetic_batch(4, 30)
    target = np.array(target)
    changed = target.copy()
    changed[:, changed_from:] = np.random.default_rng(0).integers(
        3, 259, size=changed[:, changed_from:].shape)
    before, after = logits_of(source, target), logits_of(source, changed)
    test.assertAllClose(before[:, :changed_from], after[:, :changed_from], atol=1e-5)
    test.assertNotAllClose(before[:, changed_from:], after[:, changed_from:])


def write_parallel_files(directory, count, seed=0, name="synthetic"):
    """Writes `count` synthetic line-aligned pairs (no empty pair, no b"\\n" inside a line)."""
    sources = [line or b"leer" for line in synthetic_lines(count, seed)]
    targets = [line or b"empty" for line in synthetic_lines(count, seed + 1)]
    paths = []
    for suffix, lines in (("de", sources), ("en", targets)):
        paths.append(os.path.join(directory, f"{name}.{suffix}"))
        with open(paths[-1], "wb") as f:
            f.write(b"\n".join(lines) + b"\n")
    return paths


def deen_path(name):
    """Path of `../shared/data/deen/<name>`; skips the test when the folder is absent."""
    path = os.path.join(DEEN, name)
    if not os.path.exists(path):
        pytest.skip(f"needs ../shared/data/deen/{name} (the shared data folder beside the "
                    "project), which is absent")
    return path


def read_lines(name, count, max_bytes=None):
    """The first `count` lines of a shared data file, as bytes, split on b"\\n" only."""
    with open(deen_path(name), "rb") as f:
        lines = f.read().split(b"\n")[:count]
    return [line[:max_bytes] if max_bytes else line for line in lines]


def pytest_collection_modifyitems(config, items):
    # tf.test.TestCase.test_session is a TF helper, not a test; pytest would report it skipped.
    items[:] = [item for item in items if item.name != "test_session"]
