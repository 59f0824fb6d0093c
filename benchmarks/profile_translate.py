"""Where translating time goes: TensorFlow profiler time per op type in an exported translator.

    python benchmarks/profile_translate.py --saved_model=EXPORT [--sentences=256] [--top=25]

Loads the SavedModel, translates the first `--sentences` Multi30k test2016 captions
(../shared/data/deen) once untimed, then once more under `tf.profiler`, in one batch as
bytenet-evaluate does (`inference.translate_batches` with a batch of all of them), and prints
the wall time and, per op type, the milliseconds summed over threads (ops run concurrently,
so the sum can exceed the wall time) with the share of the summed time and the number of
calls. Like bytenet-translate and bytenet-evaluate, it imports TensorFlow before `bytenet_tf`,
so it profiles TensorFlow's own choice of CPU kernels (see `bytenet_tf/__init__.py`). The trace
stays in `--logdir` for TensorBoard's profile plugin. The last line is one JSON object.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from profile_train_step import op_milliseconds  # noqa: E402

from bytenet_tf import inference  # noqa: E402
from pipelines.text import read_parallel_lines  # noqa: E402
from shared_data import deen  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--saved_model", required=True, help="an export base or version directory")
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--logdir", default=None, help="default: a new temporary directory")
    args = parser.parse_args()
    if args.sentences < 1:
        parser.error(f"--sentences must be >= 1. Received: --sentences={args.sentences}")
    captions, _, _ = read_parallel_lines(deen("multi30k-test2016.de"),
                                         deen("multi30k-test2016.en"))
    sources = captions[:args.sentences]
    signature, version_dir = inference.load_saved_model(args.saved_model)
    translate = inference.as_translate_fn(signature)
    inference.translate_batches(translate, sources, len(sources))  # untimed: set-up
    logdir = args.logdir or tempfile.mkdtemp(prefix="profile_translate_")
    tf.profiler.experimental.start(logdir)
    start = time.perf_counter()
    outputs = inference.translate_batches(translate, sources, len(sources))
    seconds = time.perf_counter() - start
    tf.profiler.experimental.stop()
    totals, calls = op_milliseconds(logdir)
    summed = sum(totals.values())
    print(f"{version_dir}: {len(sources)} sentences in {seconds:.3f} s with the profiler on, "
          f"{sum(map(len, outputs))} output bytes; ops summed {summed:.1f} ms")
    for op_type, ms in totals.most_common(args.top):
        print(f"  {op_type:32s} {ms:9.1f} ms  {100 * ms / summed:5.1f}%  {calls[op_type]:8d} calls")
    print(json.dumps({"saved_model": version_dir, "sentences": len(sources),
                      "seconds": round(seconds, 4), "summed_op_ms": round(summed, 1),
                      "logdir": logdir,
                      "ops": [{"op": op_type, "ms": round(ms, 2), "calls": calls[op_type]}
                              for op_type, ms in totals.most_common(args.top)]}))


if __name__ == "__main__":
    main()
