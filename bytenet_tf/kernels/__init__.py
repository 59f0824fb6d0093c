"""Fused CPU kernels, compiled for this machine on first use, with TensorFlow's ops as fallback.

TensorFlow's pip build compiles its elementwise Eigen kernels for AVX only, so bfloat16
elementwise ops are slow on CPU: a bfloat16 SELU ran fastest as three float32 passes each way
(cast, selu, cast), and AlphaDropout (Philox numbers on one thread, a comparison, a select each
way) five more. `selu.cc` computes SELU and the whole dropout in one pass each way, in float32
or bfloat16, drawing the dropout's random bits from a hash of the seed and the unit's index (so
it drops other units than the TensorFlow path does from the same seed). The first call of
`library()` in a process compiles it with the C++ compiler (`$CXX`, else `g++`) and
`tf.sysconfig`'s flags for this CPU (`-march=native`), into a cache keyed by the source, the
TensorFlow version and the CPU, and loads it; this takes about 15 s once per machine. If
anything fails (no compiler, no headers), `library()` logs why once and returns None, and
callers use TensorFlow's ops.

In-process A/B runs of a `bytenet_selu` training step (h256 x 2 stacks, 16 x 256 bytes) on the
2-core CPU: the bfloat16 SELU alone took the step from 284.4 to 265.6 ms; the dropout inside the
kernel from 389.5 to 369.1 ms (float32) and 257.9 to 246.1 ms (mixed_bfloat16).

Environment:
    BYTENET_TF_FUSED_KERNELS=0: never compile or use the kernels.
    BYTENET_TF_CACHE: the cache directory (default `~/.cache/bytenet_tf`).
    CXX: the C++ compiler (default `g++`).

Only training graphs use the kernels (`activate` and `activate_and_drop` in
`bytenet_tf.layers.residual_block`, with `training=True`, on CPU): inference, decoding under XLA
and exported SavedModels use TensorFlow's ops, so a SavedModel loads without this library.
"""

import hashlib
import os
import platform
import shlex
import subprocess
import tempfile
import threading

import tensorflow as tf
from absl import logging

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "selu.cc")
SWITCH = "BYTENET_TF_FUSED_KERNELS"

_lock = threading.Lock()
_state = {"tried": False, "library": None}


def _cpu_signature():
    """What `-march=native` depends on: the CPU's model and feature flags."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [line for line in f if line.startswith(("model name", "flags"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.processor() + platform.machine()


def _compiler():
    return os.environ.get("CXX", "g++")


def _command(output):
    return (shlex.split(_compiler()) + ["-shared", "-fPIC", "-O3", "-march=native", "-w",
                                     "-fno-math-errno", "-fno-trapping-math"]
            + tf.sysconfig.get_compile_flags() + [SOURCE, "-o", output]
            + tf.sysconfig.get_link_flags())


def library_path():
    """Where the compiled library for this source, TensorFlow and CPU is cached."""
    with open(SOURCE, "rb") as f:
        key = hashlib.sha256(f.read() + tf.__version__.encode() + _cpu_signature().encode()
                             + _compiler().encode()).hexdigest()[:16]
    root = os.environ.get("BYTENET_TF_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "bytenet_tf")
    return os.path.join(root, f"selu_{key}.so")


def _compile(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # Compile to a private name and rename: concurrent processes (the workers of one cluster)
    # never load a half-written library.
    handle, partial = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
    os.close(handle)
    try:
        logging.info("bytenet_tf: compiling the fused SELU kernel for this CPU "
                     "(once, about 15 s): %s", path)
        result = subprocess.run(_command(partial), capture_output=True, text=True, timeout=600)
        if result.returncode:
            raise RuntimeError(f"the compiler exited with {result.returncode}: "
                               f"{result.stderr.strip()[-2000:]}")
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def library():
    """The loaded op library, or None if it is switched off or cannot be built here."""
    with _lock:
        if not _state["tried"]:
            _state["tried"] = True
            if os.environ.get(SWITCH, "1") == "0":
                logging.info("bytenet_tf: %s=0; using TensorFlow's ops for SELU.", SWITCH)
            else:
                try:
                    path = library_path()
                    if not os.path.exists(path):
                        _compile(path)
                    _state["library"] = tf.load_op_library(path)
                except (OSError, RuntimeError, subprocess.SubprocessError,
                        tf.errors.OpError) as error:
                    logging.warning(
                        "bytenet_tf: the fused SELU kernel is unavailable (%s); training "
                        "uses TensorFlow's slower ops. Install a C++ "
                        "compiler (g++) or set CXX, or set %s=0 to silence this.", error, SWITCH)
        return _state["library"]


def fused_selu_available():
    """True when a training graph may use `selu`: the library loads, no GPU or TPU is visible.

    The op has CPU kernels only, and no XLA lowering: a training step compiled with
    `jit_compile=True` (bytenet-train never compiles one) needs `BYTENET_TF_FUSED_KERNELS=0`.
    """
    if tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"):
        return False
    return library() is not None


def selu(features, seed=None, threshold=0, dropped=0.0):
    """SELU, then units dropped to `dropped` at random, in one pass each way (see `selu.cc`).

    Without dropout (`threshold=0`), equal to `tf.nn.selu` in float32, and to
    `tf.cast(tf.nn.selu(tf.cast(features, tf.float32)), tf.bfloat16)` in bfloat16, up to the
    rounding of the last bit; more exact near 0, where TensorFlow's `exp(x) - 1` cancels.
    With dropout, unit `i` is dropped when its 16 random bits, a counter-based hash of `seed`
    and `i`, are below `threshold`: with probability `threshold / 2**16`, the same quantization
    as `AlphaDropout`'s TensorFlow path, though not the same bits (that path draws Philox
    numbers). The gradient is `upstream * selu'(features)` on kept units and 0 on dropped ones,
    from the same bits (no mask is stored), computed in float32 and rounded once.

    Args:
        features: float32 or bfloat16 tensor of any shape.
        seed: int32 tensor of shape `[2]`; needed when `threshold > 0`.
        threshold: int in [0, 65535]; 0 keeps every unit.
        dropped: float, the value of dropped units.

    Returns:
        Tensor of the shape and dtype of `features`.

    Raises:
        RuntimeError: if the library is unavailable (check `fused_selu_available()` first).
        ValueError: if `threshold > 0` and no seed is given, or `threshold` is out of range.
    """
    ops = library()
    if ops is None:
        raise RuntimeError("The fused kernels are unavailable; see the warning logged by "
                           "bytenet_tf.kernels.library().")
    if not 0 <= threshold <= 0xFFFF:
        raise ValueError(f"`threshold` must be in [0, 65535]. Received: threshold={threshold!r}")
    if seed is None:
        if threshold:
            raise ValueError("Dropout (threshold > 0) needs a `seed` of shape [2].")
        seed = tf.zeros([2], tf.int32)
    attrs = {"threshold": int(threshold), "dropped": float(dropped)}

    @tf.custom_gradient
    def forward(x):
        def grad(upstream):
            return ops.bytenet_selu_grad(upstream, x, seed, **attrs)

        return ops.bytenet_selu(x, seed, **attrs), grad

    return forward(features)
