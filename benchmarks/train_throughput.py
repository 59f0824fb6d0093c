"""Training throughput of the step that bytenet-train runs, against the matmul peak.

    python benchmarks/train_throughput.py --model=bytenet_selu --hidden_size=256 --num_stacks=2 \\
        --batch_size=16 --length=256 --precision=float32 --steps=20

Times bytenet-train's train step and optimizer (the binary's) on batches of real
text from ../shared/data/deen/train.* cut to exactly `--length` bytes, after `--warmup` untimed
steps, and reports the median step time.
FLOPs are counted analytically (`bytenet_tf.flops`). The peak is the best GFLOP/s of square
matmuls of 1024 to 4096 (`PEAK_SIZES`) in the same precision, measured in the same run, under
the same thread settings: with TF_NUM_INTRAOP_THREADS=1 it is one core's, so the share of peak
compares between runs only at TensorFlow's default threading (the JSON's `thread_env` names any
such variable set, and a note says so). The last line printed is one JSON object.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bytenet_tf  # noqa: E402,F401  (before TensorFlow: the binaries' oneDNN setting)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from real_text import real_rows  # noqa: E402

import keras  # noqa: E402

from bytenet_tf import flops, ops, zoo  # noqa: E402
from bytenet_tf.training.optimizer import make_optimizer  # noqa: E402
from bytenet_tf.training.step import make_train_step  # noqa: E402
from bytenet_tf.training.config import TrainConfig, resolve  # noqa: E402
from pipelines.datasets import DataSpec  # noqa: E402


def significant(value, digits=6):
    """`value` to `digits` significant digits. Fixed decimals would not do: a tiny model's step
    takes a few milliseconds, and 5 decimals of a second then lose up to 0.2% of it."""
    return float(f"{value:.{digits}g}")


# The matmul dtype whose peak a step in each precision is measured against.
PEAK_DTYPES = {"float32": tf.float32, "mixed_bfloat16": tf.bfloat16, "mixed_float16": tf.float16}


# TensorFlow's thread-pool sizes: the step and the peak both run under them.
THREAD_VARIABLES = ("TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS")


def thread_settings(environ=os.environ):
    """The thread-pool sizes set in `environ`, by variable; {} at TensorFlow's default."""
    return {name: environ[name] for name in THREAD_VARIABLES if environ.get(name)}


# Square matmul sizes whose best rate is the peak. One size does not do: TensorFlow's Eigen
# kernels (its default on AVX2-only CPUs) ran a 4096-square float32 matmul at 86 GFLOP/s on an
# AMD EPYC Zen 3, and 1536- and 3072-square ones at 157.
PEAK_SIZES = (1024, 1536, 2048, 3072, 4096)


def matmul_peak(dtype, size=None, repeats=10):
    """GFLOP/s of the fastest square matmul in `dtype`: best of `repeats` at each size.

    Args:
        dtype: the matmul's dtype.
        size: one side length, or None for the best over `PEAK_SIZES`.
        repeats: timed runs per size, after one untimed run.
    """
    matmul = tf.function(lambda x, y: tf.matmul(x, y), autograph=False)
    best_rate = 0.0
    for side in PEAK_SIZES if size is None else (size,):
        a = tf.cast(tf.random.normal([side, side], dtype=tf.float32), dtype)
        b = tf.cast(tf.random.normal([side, side]), dtype)
        matmul(a, b).numpy()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            matmul(a, b).numpy()
            best = min(best, time.perf_counter() - start)
        best_rate = max(best_rate, 2 * side ** 3 / best / 1e9)
    return best_rate


def add_step_arguments(parser, steps, warmup):
    """The flags that choose the model, the batch and the number of steps."""
    parser.add_argument("--model", default="bytenet_selu")
    parser.add_argument("--hidden_size", type=int, default=256)
    parser.add_argument("--num_stacks", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--precision", default="float32",
                        choices=["float32", "mixed_bfloat16", "mixed_float16"])
    parser.add_argument("--ops_policy", default="auto",
                        choices=["auto", "reference", "cpu", "cpu_fused"],
                        help="as bytenet-train's --ops_policy (auto: what the binary picks)")
    parser.add_argument("--dropout_rate", type=float, default=None,
                        help="the model's dropout rate (default: the zoo model's; the text "
                             "recipe trains with 0)")
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--warmup", type=int, default=warmup)


def replace_optimizer(optimizer, optimizer_class):
    """`optimizer` rebuilt as `optimizer_class` with the same settings.

    Under `mixed_float16` the binary's optimizer is a `LossScaleOptimizer`: its inner optimizer
    is the one replaced, and the result is wrapped again, so the loss scaling stays.
    """
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return keras.optimizers.LossScaleOptimizer(
            replace_optimizer(optimizer.inner_optimizer, optimizer_class),
            initial_scale=optimizer.initial_scale,
            dynamic_growth_steps=optimizer.dynamic_growth_steps)
    return optimizer_class.from_config(optimizer.get_config())


def build_step(args, optimizer_class=None, **overrides):
    """`(model, train_step, iterator)`: the binary's train step over real batches of `args`;
    `overrides` go to `zoo.build_model` (e.g. `residual_gate=True`). `optimizer_class`, a
    subclass of the binary's `Adam`, replaces it with the same settings."""
    keras.utils.set_random_seed(0)
    args.ops_policy, _ = ops.resolve_policy(args.ops_policy)
    if args.dropout_rate is not None:
        overrides = dict(overrides, dropout_rate=args.dropout_rate)
    model = zoo.build_model(args.model, hidden_size=args.hidden_size, num_stacks=args.num_stacks,
                            dtype=args.precision, max_length=args.length + 1, seed=0,
                            ops_policy=args.ops_policy, **overrides)
    # The binary's optimizer, with the default learning-rate schedule of a text run.
    config = resolve(TrainConfig(model=args.model, data=DataSpec(dataset="text")))
    optimizer = make_optimizer(config, args.precision)
    if optimizer_class is not None:
        optimizer = replace_optimizer(optimizer, optimizer_class)
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    train_step = make_train_step(tf.distribute.get_strategy(), model, optimizer, step)
    source, target, labels = real_rows(args.batch_size * (args.steps + args.warmup), args.length)
    # Rows re-batched with `padded_batch` (no padding: every row has `length` ids) so that, as
    # in the binary's pipeline, the step sees batches of unknown shape. Not `from_generator`:
    # TensorFlow's generator dataset lowers glibc's trim threshold to 128 kB for the whole
    # process, and the step then page-faults about 4,800 times (~20 MB) per step, which made it
    # 6-9% slower than in the binary.
    dataset = tf.data.Dataset.from_tensor_slices(({"source": source, "target": target}, labels))
    dataset = dataset.padded_batch(args.batch_size, padded_shapes=(
        {"source": [None], "target": [None]}, [None])).cache()
    return model, train_step, iter(dataset)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_step_arguments(parser, steps=20, warmup=3)
    args = parser.parse_args()
    model, train_step, iterator = build_step(args)
    for _ in range(args.warmup):
        float(train_step(iterator)[0])
    # The binary reads the loss after every step (NaN check), so each timed step does too.
    # The median step resists the noise of a shared machine.
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        float(train_step(iterator)[0])
        times.append(time.perf_counter() - start)
    seconds = float(np.median(times))

    step_flops = flops.training_flops(model, args.length, args.length, args.batch_size)
    achieved = step_flops / seconds / 1e9
    peak = matmul_peak(PEAK_DTYPES[args.precision])
    result = {
        "model": args.model, "hidden_size": args.hidden_size, "num_stacks": args.num_stacks,
        "batch_size": args.batch_size, "length": args.length, "precision": args.precision,
        "ops_policy": args.ops_policy, "dropout_rate": model.dropout_rate,
        "parameters": model.count_params(), "seconds_per_step": significant(seconds),
        "seconds_per_step_min_max": [significant(min(times)), significant(max(times))],
        "target_bytes_per_s": significant(args.batch_size * args.length / seconds),
        "gflop_per_step": significant(step_flops / 1e9), "gflop_per_s": significant(achieved),
        "matmul_peak_gflop_per_s": significant(peak), "fraction_of_peak": significant(achieved / peak),
        "thread_env": thread_settings(),
    }
    print(f"{args.model} h{args.hidden_size} x{args.num_stacks} stacks, {args.batch_size}x"
          f"{args.length} bytes, {args.precision}: {seconds * 1000:.1f} ms/step, "
          f"{result['target_bytes_per_s']:.0f} target bytes/s, {achieved:.1f} GFLOP/s = "
          f"{100 * achieved / peak:.1f}% of the {peak:.0f} GFLOP/s matmul peak")
    if result["thread_env"]:
        # With one intra-op thread the peak is one core's, while inter-op work still uses more.
        print(f"Note: {result['thread_env']} is set, and the matmul peak was measured under it "
              "too: this share of peak compares with other runs only at TensorFlow's default "
              "threading.")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
