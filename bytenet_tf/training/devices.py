"""Choosing the precision policy and the distribution strategy.

`resolve_precision("auto")`: `mixed_float16` on NVIDIA GPUs of compute capability 7.0 or more
(Keras then wraps the optimizer in a `LossScaleOptimizer`), `mixed_bfloat16` on TPUs and on CPUs
with native bfloat16 (AVX512-BF16 or AMX) where a bf16 matmul also measures faster than a
float32 one, and `float32` otherwise.

`resolve_strategy("auto")`: a TPU strategy when a TPU is configured, `MirroredStrategy` over all
local GPUs when there is more than one, and otherwise the default strategy (which places the
model on the one GPU when there is one). Only the default strategy's data iterator can be
checkpointed in TensorFlow 2.21, so `auto` prefers it to `OneDeviceStrategy`.
"""

import json
import os
import time

import tensorflow as tf

from pipelines.options import ConfigError

PRECISIONS = ("auto", "float32", "mixed_float16", "mixed_bfloat16")
STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker", "tpu")


# bfloat16 must beat float32 by this much on a matmul for `auto` to choose it on a CPU.
BFLOAT16_MIN_SPEEDUP = 1.1


def cpu_has_native_bfloat16(cpuinfo_path="/proc/cpuinfo"):
    """True when the CPU flags list avx512_bf16 or amx_bf16."""
    try:
        with open(cpuinfo_path) as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def matmul_seconds(dtype, size=768, repeats=5):
    """Best time of a `size` x `size` matmul in `dtype` on the CPU, after one untimed run."""
    with tf.device("/CPU:0"):
        a = tf.cast(tf.random.stateless_normal([size, size], seed=[1, 2]), dtype)
        tf.linalg.matmul(a, a).numpy()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            tf.linalg.matmul(a, a).numpy()
            times.append(time.perf_counter() - start)
    return min(times)


def cpu_bfloat16_speedup():
    """How many times faster a bfloat16 matmul runs than a float32 one on this CPU (measured).

    The bf16 flags alone do not decide: CPUs that list avx512_bf16 differ in whether their
    bf16 matmul is faster or slower than float32 (measured figures per CPU kind:
    docs/results.md, "Speed").
    """
    return matmul_seconds(tf.float32) / matmul_seconds(tf.bfloat16)


def onednn_description():
    """Whether TensorFlow runs its oneDNN CPU kernels in this process, for the training log.

    TensorFlow decides once, when it loads, from `TF_ENABLE_ONEDNN_OPTS` and the CPU (see
    `bytenet_tf/__init__.py`); its own answer is a private function, so a TensorFlow without it
    gets "unknown".
    """
    setting = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
    setting = "unset" if setting is None else f"TF_ENABLE_ONEDNN_OPTS={setting}"
    try:
        from tensorflow.python.util import _pywrap_util_port
        enabled = _pywrap_util_port.IsMklEnabled()
    except (ImportError, AttributeError):
        return f"unknown ({setting})"
    return f"{'on' if enabled else 'off'} ({setting})"


def _tpu_configured():
    # Physical, not logical, devices: listing logical devices starts the runtime, after which
    # MultiWorkerMirroredStrategy can no longer configure its collective ops.
    return bool(os.environ.get("TPU_NAME")) or bool(tf.config.list_physical_devices("TPU"))


def resolve_precision(precision, gpus=None, tpu=None, cpu_bfloat16=None):
    """Returns `(policy_name, reason)` for `--precision`.

    Args:
        precision: one of `PRECISIONS`.
        gpus: list of `(name, compute_capability)` or None to query TensorFlow.
        tpu: bool or None to query.
        cpu_bfloat16: bool, whether bfloat16 is faster on this CPU; None to decide: the
            CPU flags must list native bf16, and a bf16 matmul must then measure at least
            `BFLOAT16_MIN_SPEEDUP` times as fast as a float32 one (about 0.1 s).
    """
    if precision not in PRECISIONS:
        raise ConfigError(f"precision={precision!r} is unknown; choose one of: "
                         f"{', '.join(PRECISIONS)}")
    if precision != "auto":
        return precision, "requested"
    if gpus is None:
        gpus = [(gpu.name, tf.config.experimental.get_device_details(gpu).get("compute_capability"))
                for gpu in tf.config.list_physical_devices("GPU")]
    if tpu is None:
        tpu = _tpu_configured()
    if tpu:
        return "mixed_bfloat16", "TPU found"
    if gpus:
        capability = min((c or (0, 0)) for _, c in gpus)
        if capability >= (7, 0):
            return "mixed_float16", f"{len(gpus)} NVIDIA GPU(s), compute capability {capability}"
        return "float32", f"GPU compute capability {capability} is below 7.0"
    if cpu_bfloat16 is not None:
        return ("mixed_bfloat16", "CPU with fast bfloat16 (given)") if cpu_bfloat16 else (
            "float32", "CPU without fast bfloat16 (given)")
    if not cpu_has_native_bfloat16():
        return "float32", "CPU without native bfloat16"
    speedup = cpu_bfloat16_speedup()
    if speedup >= BFLOAT16_MIN_SPEEDUP:
        return "mixed_bfloat16", f"CPU with native bfloat16, matmul {speedup:.2f}x float32's speed"
    return "float32", (f"CPU lists native bfloat16, but a bf16 matmul ran at {speedup:.2f}x "
                       "float32's speed here")


def resolve_strategy(strategy):
    """Returns `(tf.distribute.Strategy, description)` for `--strategy`.

    `multi_worker` reads the cluster from `TF_CONFIG`. `mirrored` uses every local GPU, or every
    logical CPU device when there is no GPU.
    """
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy={strategy!r} is unknown; choose one of: "
                         f"{', '.join(STRATEGIES)}")
    if strategy == "multi_worker":
        # Must come before anything that starts the TensorFlow runtime.
        return _multi_worker_strategy()
    gpus = tf.config.list_physical_devices("GPU")
    if strategy == "auto":
        if _tpu_configured():
            strategy = "tpu"
        elif len(gpus) > 1:
            strategy = "mirrored"
        else:
            device = "the GPU" if gpus else "the CPU"
            return tf.distribute.get_strategy(), f"default strategy (one device: {device})"
    if strategy == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=os.environ.get("TPU_NAME", ""))
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver), "TPUStrategy"
    if strategy == "one_device":
        device = "/gpu:0" if gpus else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device), f"OneDeviceStrategy on {device}"
    logical_gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    devices = logical_gpus or [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices), f"MirroredStrategy over {devices}"


def _multi_worker_strategy():
    if not os.environ.get("TF_CONFIG"):
        raise ConfigError("strategy='multi_worker' needs the cluster in the TF_CONFIG environment "
                         'variable, e.g. {"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
                         '"task": {"type": "worker", "index": 0}}')
    options = tf.distribute.experimental.CommunicationOptions(
        implementation=tf.distribute.experimental.CommunicationImplementation.AUTO)
    resolved = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    return resolved, f"MultiWorkerMirroredStrategy, {resolved.num_replicas_in_sync} replicas"


def worker_index():
    """This process's task index from `TF_CONFIG` (0 when there is none)."""
    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    return int(config.get("task", {}).get("index", 0))


def is_chief(strategy):
    """True for the process that writes summaries, checkpoints in `model_dir` and exports."""
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        resolver = strategy.cluster_resolver
        return resolver.task_type in (None, "chief") or (
            resolver.task_type == "worker" and resolver.task_id == 0)
    return True


def chief_choice(strategy, choice, choices):
    """The chief's `choice` on every worker of a multi-worker `strategy`; `choice` elsewhere.

    Each worker decides `auto` settings for itself (precision by a matmul timing, say), and
    two workers could decide differently; this all-reduce makes the chief's decision theirs.

    Args:
        strategy: a `tf.distribute.Strategy`.
        choice: this worker's choice, one of `choices`.
        choices: the sequence of possible choices, the same on every worker.
    """
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return choice
    # Only the chief's replicas vote, for the index of its choice.
    vote = tf.one_hot(choices.index(choice) if is_chief(strategy) else -1, len(choices))

    def replica_vote():
        return tf.distribute.get_replica_context().all_reduce("sum", vote)

    votes = strategy.experimental_local_results(strategy.run(replica_vote))[0]
    return choices[int(tf.argmax(votes))]
