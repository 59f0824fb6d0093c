"""The fused training kernels for CPUs, compiled for this machine on first use.

TensorFlow's pip build compiles its elementwise Eigen kernels for AVX only, so bfloat16
elementwise ops are slow on CPU: a bfloat16 SELU ran fastest as three float32 passes each way
(cast, selu, cast), and AlphaDropout (Philox numbers on one thread, a comparison, a select each
way) five more. `selu.cc` computes SELU and the whole dropout in one pass each way, in float32
or bfloat16, drawing the dropout's random bits from a hash of the seed and the unit's index.
Two more ops each replace two or three TensorFlow passes of a residual block: `masked_selu`
(SELU, then the encoder's padding zeroed) and `scaled_add` (the block's rescaled sum).

`load()` compiles it with the C++ compiler (`$CXX`, else `g++`) and `tf.sysconfig`'s flags for
this CPU (`-march=native`) into a cache keyed by the source, the TensorFlow version and the CPU
(about 15 s, once per machine, with a log line), and loads it. It raises
`KernelUnavailableError` with the reason when that fails; `bytenet_tf.ops.resolve_policy`
decides what to do about it, and says so. Only `bytenet_tf.ops.cpu.CpuFusedOps` calls these ops.

Environment:
    BYTENET_TF_CACHE: the cache directory (default `~/.cache/bytenet_tf`).
    CXX: the C++ compiler (default `g++`).
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

_lock = threading.Lock()
_state = {"tried": False, "library": None, "error": None}


class KernelUnavailableError(RuntimeError):
    """The kernel cannot be compiled or loaded on this machine; the message says why."""


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


def _target_flags():
    """`-march=native`, less AVX512-FP16 where the CPU has it.

    TensorFlow 2.21's Eigen headers do not compile with AVX512-FP16 enabled (g++ 12:
    `PacketMathFP16.h: expected initializer before '<' token`), which `-march=native` turns on
    on Sapphire Rapids and later. The kernel uses no half-precision floats, so nothing is lost.
    A compiler whose `-march=native` knows the extension also knows the flag that turns it off.
    """
    flags = ["-march=native"]
    if "avx512_fp16" in _cpu_signature().split():
        flags.append("-mno-avx512fp16")
    return flags


def _command(output):
    return (shlex.split(_compiler()) + ["-shared", "-fPIC", "-O3", *_target_flags(), "-w",
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
    """Compiles `SOURCE` to `path`.

    Raises:
        KernelUnavailableError: the compiler is missing, or it failed (its message is kept).
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # Compile to a private name and rename: concurrent processes (the workers of one cluster)
    # never load a half-written library.
    handle, partial = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(path))
    os.close(handle)
    try:
        logging.info("bytenet_tf: compiling the fused training kernels for this CPU "
                     "(once, about 15 s): %s", path)
        try:
            result = subprocess.run(_command(partial), capture_output=True, text=True,
                                    timeout=600)
        except FileNotFoundError as error:
            raise KernelUnavailableError(
                f"no C++ compiler: {_compiler()!r} was not found ({error}); install g++ or set "
                "CXX to a C++ compiler") from error
        except subprocess.SubprocessError as error:
            raise KernelUnavailableError(f"the compiler did not finish: {error}") from error
        if result.returncode:
            raise KernelUnavailableError(
                f"{_compiler()!r} exited with {result.returncode} compiling {SOURCE}: "
                f"{result.stderr.strip()[-2000:]}")
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def load():
    """The loaded op library, compiled on the first call in a process if it is not cached.

    Raises:
        KernelUnavailableError: the kernel source is missing from the installation, there is
            no compiler, it failed, or the library does not load; the message names the cause
            and its fix. The same error again on later calls, without a second attempt.
    """
    with _lock:
        if not _state["tried"]:
            _state["tried"] = True
            try:
                _state["library"] = _build_and_load()
            except KernelUnavailableError as error:
                _state["error"] = error
        if _state["library"] is None:
            raise KernelUnavailableError(str(_state["error"]))
        return _state["library"]


def _build_and_load():
    if not os.path.exists(SOURCE):
        raise KernelUnavailableError(
            f"its source {SOURCE} is missing, so this installation of bytenet_tf is incomplete; "
            "reinstall it (pip install --force-reinstall bytenet_tf, or pip install -e . from a "
            "checkout)")
    path = library_path()
    if not os.path.exists(path):
        _compile(path)
    try:
        return tf.load_op_library(path)
    except (OSError, tf.errors.OpError) as error:
        raise KernelUnavailableError(
            f"the compiled library {path} does not load ({type(error).__name__}: {error}); "
            "delete it to compile it again") from error


def selu(library, features, seed=None, threshold=0, dropped=0.0):
    """SELU, then units dropped to `dropped` at random, in one pass each way (see `selu.cc`).

    Without dropout (`threshold=0`), equal to `tf.nn.selu` in float32, and to
    `tf.cast(tf.nn.selu(tf.cast(features, tf.float32)), tf.bfloat16)` in bfloat16, up to the
    rounding of the last bit; more exact near 0, where TensorFlow's `exp(x) - 1` cancels.
    With dropout, unit `i` is dropped when its 16 random bits, a counter-based hash of `seed`
    and `i`, are below `threshold`: with probability `threshold / 2**16`, the same quantization
    as `bytenet_tf.ops.cpu.CpuOps.keep_mask`, though not the same bits (that draws Philox
    numbers). The gradient is `upstream * selu'(features)` on kept units and 0 on dropped ones,
    from the same bits (no mask is stored), computed in float32 and rounded once.

    Args:
        library: the op library from `load()`.
        features: float32 or bfloat16 tensor of any shape.
        seed: int32 tensor of shape `[2]`; needed when `threshold > 0`.
        threshold: int in [0, 65535]; 0 keeps every unit.
        dropped: float, the value of dropped units.

    Returns:
        Tensor of the shape and dtype of `features`.

    Raises:
        ValueError: if `threshold > 0` and no seed is given, or `threshold` is out of range.
    """
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
            return library.bytenet_selu_grad(upstream, x, seed, **attrs)

        return library.bytenet_selu(x, seed, **attrs), grad

    return forward(features)


def masked_selu(library, features, mask):
    """`selu(features)` where `mask` is true and 0 where it is false, in one pass each way.

    Equal to `selu(features) * cast(mask)[..., None]` for finite inputs (a non-finite input at
    a masked position gives 0 here rather than NaN); SELU as in `selu`. The gradient is
    `upstream * selu'(features)` where `mask` is true and 0 elsewhere.

    Args:
        library: the op library from `load()`.
        features: float32 or bfloat16 tensor `(..., channels)`.
        mask: boolean tensor of the shape of `features` without its last axis.

    Returns:
        Tensor of the shape and dtype of `features`.
    """
    mask = tf.convert_to_tensor(mask, tf.bool)

    @tf.custom_gradient
    def forward(x):
        def grad(upstream):
            return library.bytenet_masked_selu_grad(upstream, x, mask)

        return library.bytenet_masked_selu(x, mask), grad

    return forward(features)


def scaled_add(library, x, y, x_scale, y_scale):
    """`x_scale * x + y_scale * y` in one pass, and both gradients in one pass back.

    Computed in float32 and rounded once, so a bfloat16 sum is at least as exact as TensorFlow's
    multiplies and add, each rounded to bfloat16.

    Args:
        library: the op library from `load()`.
        x, y: float32 or bfloat16 tensors of one shape and dtype.
        x_scale, y_scale: Python floats.

    Returns:
        Tensor of the shape and dtype of `x`.
    """
    attrs = {"x_scale": float(x_scale), "y_scale": float(y_scale)}

    @tf.custom_gradient
    def forward(a, b):
        def grad(upstream):
            return library.bytenet_scaled_add_grad(upstream, **attrs)

        return library.bytenet_scaled_add(a, b, **attrs), grad

    return forward(x, y)


def bias_add(library, x, bias):
    """`x + bias` over the last axis of `x`, in one pass; no gradient of its own.

    Computed in float32 and rounded once. For the product before it this is an op of its own
    rather than a bias fused into oneDNN's product, which is slower in bfloat16 (see
    `selu.cc`). A caller that differentiates through it wraps it in its own gradient
    (`bytenet_tf.ops.cpu.CpuFusedOps.dense`).

    Args:
        library: the op library from `load()`.
        x: float32 or bfloat16 tensor `(..., channels)`.
        bias: tensor `(channels,)` of the dtype of `x`.

    Returns:
        Tensor of the shape and dtype of `x`.
    """
    return library.bytenet_bias_add(x, bias)
