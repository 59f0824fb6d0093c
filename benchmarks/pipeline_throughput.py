"""Input pipeline throughput against what training consumes, and padding with/without buckets.

    python benchmarks/pipeline_throughput.py [--seconds 20] [--train_steps 8]

1. Runs the full training pipeline (`pipelines.datasets.make_dataset`: files -> shuffle ->
   length filter -> framing -> length buckets -> prefetch) over ../shared/data/deen/train.*
   for `--seconds` and counts target bytes per second (labels that are not PAD).
2. Times the training step of `bytenet_small` (the binary's step, float32 and mixed_bfloat16)
   on batches from that same pipeline, and reports the target bytes per second it consumes.
3. Measures the padding fraction of the first 300 batches with and without bucketing.

The last line printed is one JSON object.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bytenet_tf  # noqa: E402,F401  (before TensorFlow: the binaries' oneDNN setting)
import tensorflow as tf  # noqa: E402

from shared_data import DEEN  # noqa: E402

import keras  # noqa: E402

from bytenet_tf import ops, zoo  # noqa: E402
from bytenet_tf.training.step import make_train_step  # noqa: E402
from pipelines import byte_codec, datasets, preprocessing  # noqa: E402


def spec():
    return datasets.DataSpec(dataset="text", source_file=os.path.join(DEEN, "train.de"),
                             target_file=os.path.join(DEEN, "train.en"))


def target_bytes(labels):
    return int(tf.reduce_sum(tf.cast(tf.not_equal(labels, byte_codec.PAD_ID), tf.int64)))


def pipeline_rate(config, seconds):
    length_filter = preprocessing.LengthFilter(config.max_length)
    dataset = datasets.make_dataset(spec(), config, length_filter=length_filter)
    iterator = iter(dataset)
    next(iterator)  # start-up (file check pass, first shuffle fill) is not throughput
    total, batches, start = 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, labels = next(iterator)
        total += target_bytes(labels)
        batches += 1
    return total / (time.perf_counter() - start), batches, length_filter.counts()


def training_rate(config, precision, steps):
    keras.utils.set_random_seed(0)
    model = zoo.build_model("bytenet_small", dtype=precision, seed=0,
                            ops_policy=ops.resolve_policy("auto")[0])
    optimizer = keras.optimizers.Adam(1e-4)
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    train_step = make_train_step(tf.distribute.get_strategy(), model, optimizer, step)
    dataset = datasets.make_dataset(spec(), config)
    iterator = iter(dataset)
    for _ in range(2):
        float(train_step(iterator)[0])
    consumed, start = 0.0, time.perf_counter()
    for _ in range(steps):
        count = train_step(iterator)[2]
        consumed += float(count)
    return consumed / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--train_steps", type=int, default=8)
    parser.add_argument("--batch_size", type=int, default=32)
    args = parser.parse_args()
    config = preprocessing.PipelineConfig(batch_size=args.batch_size, seed=0)
    pipeline, batches, counts = pipeline_rate(config, args.seconds)
    print(f"pipeline: {pipeline:,.0f} target bytes/s ({batches} batches of {args.batch_size}; "
          f"length filter {counts})")
    consumption = {}
    for precision in ("float32", "mixed_bfloat16"):
        consumption[precision] = training_rate(config, precision, args.train_steps)
        print(f"bytenet_small training ({precision}) consumes {consumption[precision]:,.0f} "
              f"target bytes/s: the pipeline delivers {pipeline / consumption[precision]:,.0f}x that")
    padding_bucketed = preprocessing.padding_fraction(datasets.make_dataset(spec(), config), 300)
    unbucketed = preprocessing.PipelineConfig(batch_size=args.batch_size, seed=0, bucketing=False)
    padding_plain = preprocessing.padding_fraction(datasets.make_dataset(spec(), unbucketed), 300)
    print(f"padding fraction over 300 batches: {padding_plain:.3f} without buckets, "
          f"{padding_bucketed:.3f} with")
    fastest = max(consumption.values())
    print(json.dumps({
        "pipeline_target_bytes_per_s": round(pipeline, 1),
        "training_target_bytes_per_s": {k: round(v, 1) for k, v in consumption.items()},
        "pipeline_over_training": round(pipeline / fastest, 1),
        "padding_fraction_without_buckets": round(padding_plain, 4),
        "padding_fraction_with_buckets": round(padding_bucketed, 4),
        "batch_size": args.batch_size}))


if __name__ == "__main__":
    main()
