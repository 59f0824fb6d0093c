"""Where the training step's time goes: TensorFlow profiler time per op type.

    python benchmarks/profile_train_step.py --precision=mixed_bfloat16 [--top=25]

Builds the same step and batches as benchmarks/train_throughput.py (bytenet-train's
train step on real text), traces `--steps` steps after `--warmup` with `tf.profiler`, and prints
the wall time per step and, per op type, the milliseconds per step summed over threads (ops run
concurrently, so the sum exceeds the wall time). The trace stays in `--logdir` for TensorBoard's
profile plugin. The last line is one JSON object.
"""

import argparse
import collections
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bytenet_tf  # noqa: E402,F401  (before TensorFlow: the binaries' oneDNN setting)
import tensorflow as tf  # noqa: E402

import train_throughput  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402


def op_milliseconds(logdir):
    """Sum of the durations of each op type (the part of an event name after ':'), in ms."""
    paths = sorted(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True))
    if not paths:
        raise FileNotFoundError(f"The profiler wrote no *.xplane.pb under {logdir}.")
    space = xplane_pb2.XSpace()
    with open(paths[-1], "rb") as f:
        space.ParseFromString(f.read())
    totals, calls = collections.Counter(), collections.Counter()
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                if ":" in name:
                    op_type = name.rsplit(":", 1)[1]
                    totals[op_type] += event.duration_ps / 1e9
                    calls[op_type] += 1
    return totals, calls


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    train_throughput.add_step_arguments(parser, steps=5, warmup=4)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--logdir", default=os.path.join("runs", "profile"))
    args = parser.parse_args()
    _, train_step, iterator = train_throughput.build_step(args)
    for _ in range(args.warmup):
        float(train_step(iterator)[0])
    logdir = os.path.join(args.logdir, f"{args.model}_{args.precision}_{int(time.time())}")
    tf.profiler.experimental.start(logdir)
    start = time.perf_counter()
    for _ in range(args.steps):
        float(train_step(iterator)[0])
    wall = (time.perf_counter() - start) / args.steps * 1000
    tf.profiler.experimental.stop()

    totals, calls = op_milliseconds(logdir)
    # Names that are not TF ops: the function call, the executor, the input pipeline.
    skip = {"Process", "Run", "RunWithBorrowedArgs"}
    rows = [(op, ms / args.steps, calls[op] / args.steps) for op, ms in totals.most_common()
            if op not in skip and not op.startswith((" __inference", "__inference"))]
    print(f"{args.model} h{args.hidden_size} x{args.num_stacks}, {args.batch_size}x{args.length}, "
          f"{args.precision}: {wall:.1f} ms per step (wall, profiler on)")
    print(f"{'op type':36s} {'ms/step':>9s} {'calls':>6s}")
    for op, ms, count in rows[:args.top]:
        print(f"{op:36s} {ms:9.2f} {count:6.0f}")
    print(json.dumps({"precision": args.precision, "wall_ms_per_step": round(wall, 2),
                      "op_ms_per_step": {op: round(ms, 3) for op, ms, _ in rows[:args.top]},
                      "trace": logdir}))


if __name__ == "__main__":
    main()
