"""Training throughput of `model.fit`'s step on the Keras backend that runs it, against the
device's matmul peak: the GPU figure of the zoo, where TensorFlow is not installed.

    KERAS_BACKEND=jax python benchmarks/backend_throughput.py --model=bytenet_selu \\
        --hidden_size=400 --num_stacks=3 --batch_size=32 --length=128 --precision=float32

Needs keras, the backend (JAX, PyTorch or TensorFlow), numpy and this source tree, nothing
else. Times `train_on_batch` (Adam, cross-entropy over real bytes, compiled by the backend) on
rows of real text from ../shared/data/deen/train.* cut to exactly `--length` bytes, after
`--warmup` untimed steps, and reports the median step time. FLOPs are counted analytically
(`bytenet_tf.flops`); the peak is the best GFLOP/s of ten `--peak_size`-square matmuls queued
back to back, in the same precision on the same device, measured in the same run. Under JAX on
a GPU, float32 matmuls compute in TensorFloat-32 unless
`JAX_DEFAULT_MATMUL_PRECISION=highest`; the result names it (`matmul_precision`). The last line
printed is one JSON object.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402
from real_text import real_rows  # noqa: E402

import bytenet_tf  # noqa: E402
from bytenet_tf import flops  # noqa: E402
from pipelines import byte_codec  # noqa: E402

COMPUTE_DTYPES = {"float32": "float32", "mixed_bfloat16": "bfloat16",
                  "mixed_float16": "float16"}


def device():
    """The device the backend computes on, in words."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return f"jax {jax.devices()[0].platform}: {jax.devices()[0].device_kind}"
    if backend == "torch":
        import torch

        return (f"torch cuda: {torch.cuda.get_device_name()}" if torch.cuda.is_available()
                else "torch cpu")
    return f"{backend}"


def wait(tensor):
    """Blocks until `tensor` is computed (asynchronous backends return early)."""
    return float(keras.ops.convert_to_numpy(keras.ops.sum(keras.ops.cast(tensor[:1, :1],
                                                                         "float32"))))


def matmul_peak(dtype, size=4096, chain=10, rounds=3):
    """GFLOP/s of `size` x `size` matmuls in `dtype` on the backend's device: `chain` of them
    queued back to back and waited for once (so that a GPU's launch and copy-back latency does
    not count), best of `rounds`."""
    rng = np.random.default_rng(0)
    a, b = (keras.ops.cast(keras.ops.convert_to_tensor(
        rng.standard_normal((size, size)).astype(np.float32)), dtype) for _ in range(2))
    wait(keras.ops.matmul(a, b))
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        products = [keras.ops.matmul(a, b) for _ in range(chain)]
        for product in products:
            wait(product)
        best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 * chain / best / 1e9


def matmul_precision():
    """What float32 matmuls compute in: JAX's default precision on a GPU is TensorFloat-32."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.config.jax_default_matmul_precision or "default"
    if backend == "torch":
        import torch

        return "tensorfloat32" if torch.backends.cuda.matmul.allow_tf32 else "float32"
    return "default"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--model", default="bytenet_selu", choices=bytenet_tf.list_models())
    parser.add_argument("--hidden_size", type=int, default=400)
    parser.add_argument("--num_stacks", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--precision", default="float32", choices=list(COMPUTE_DTYPES))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--peak_size", type=int, default=4096,
                        help="side of the square matmuls that measure the peak (8192 on a GPU)")
    args = parser.parse_args()

    keras.utils.set_random_seed(0)
    model = bytenet_tf.build_model(args.model, hidden_size=args.hidden_size,
                                   num_stacks=args.num_stacks, dtype=args.precision,
                                   max_length=args.length + 1, seed=0)
    optimizer = keras.optimizers.Adam(1e-3)
    if args.precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=byte_codec.PAD_ID))
    source, target, labels = real_rows(args.batch_size * (args.steps + args.warmup), args.length)
    batches = [({"source": source[i:i + args.batch_size], "target": target[i:i + args.batch_size]},
                labels[i:i + args.batch_size])
               for i in range(0, len(source), args.batch_size)]
    for inputs, outputs in batches[:args.warmup]:
        model.train_on_batch(inputs, outputs)
    times = []
    for inputs, outputs in batches[args.warmup:]:
        start = time.perf_counter()
        float(model.train_on_batch(inputs, outputs))  # the loss, on the host: the step is done
        times.append(time.perf_counter() - start)
    seconds = float(np.median(times))
    step_flops = flops.training_flops(model, args.length, args.length, args.batch_size)
    achieved = step_flops / seconds / 1e9
    peak = matmul_peak(COMPUTE_DTYPES[args.precision], args.peak_size)
    result = {
        "backend": keras.backend.backend(), "device": device(), "model": args.model,
        "matmul_precision": matmul_precision(),
        "hidden_size": args.hidden_size, "num_stacks": args.num_stacks,
        "batch_size": args.batch_size, "length": args.length, "precision": args.precision,
        "parameters": model.count_params(), "seconds_per_step": float(f"{seconds:.6g}"),
        "target_bytes_per_s": float(f"{args.batch_size * args.length / seconds:.6g}"),
        "gflop_per_step": float(f"{step_flops / 1e9:.6g}"),
        "gflop_per_s": float(f"{achieved:.6g}"), "matmul_peak_gflop_per_s": float(f"{peak:.6g}"),
        "fraction_of_peak": float(f"{achieved / peak:.6g}")}
    print(f"{result['device']}, {args.model} h{args.hidden_size} x{args.num_stacks}, "
          f"{args.batch_size}x{args.length} bytes, {args.precision}: {seconds * 1000:.1f} ms/step, "
          f"{achieved:.0f} GFLOP/s = {100 * achieved / peak:.1f}% of the {peak:.0f} GFLOP/s "
          "matmul peak")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
