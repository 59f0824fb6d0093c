"""What the data stream adds to each training checkpoint: a shuffle buffer that holds every
pair, against the in-memory epoch permutation, written alternately in one process.

    python benchmarks/checkpoint_cost.py --rounds=5

Builds bytenet-train's training batches (`pipelines.preprocessing.make_batches`, the text
preset's batching: pairs up to `--max_length` bytes, `--tokens_per_batch` per batch) from the
same two files both ways:

- `buffer`: the files streamed through a shuffle buffer of `--shuffle_buffer` pairs, which
  holds all of them: what bytenet-train did before it read such files into memory. The
  iterator's checkpoint stores the buffer.
- `permuted`: the files held in memory, each epoch a seeded permutation
  (`preprocessing.permuted_epochs`): what bytenet-train does now. The iterator's checkpoint
  stores a counter.

Both yield a full random order of the pairs per epoch. Reports, per variant, the seconds to the
first batch (the buffer fills first), the median seconds of `tf.train.Checkpoint(iterator=...)
.write` over `--rounds` rounds (each after `--batches` more batches; the variants alternate and
swap which goes first every round), and the bytes written. The model and optimizer, which a
training checkpoint holds as well, are not part of it. The last line printed is one JSON object.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bytenet_tf  # noqa: E402,F401  (before TensorFlow: the binaries' oneDNN setting)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from experiments.common import cpu_name  # noqa: E402
from pipelines import preprocessing, text  # noqa: E402
from shared_data import deen  # noqa: E402


def _stream(args, in_memory):
    """`(iterator, seconds to its first batch)` of one variant."""
    start = time.perf_counter()
    pairs, _ = text.parallel_text_dataset(
        args.source_file, args.target_file,
        in_memory_up_to=args.shuffle_buffer if in_memory else 0)
    config = preprocessing.PipelineConfig(max_length=args.max_length,
                                          tokens_per_batch=args.tokens_per_batch,
                                          shuffle_buffer=args.shuffle_buffer, seed=0)
    iterator = iter(preprocessing.make_batches(pairs, config))
    next(iterator)
    return iterator, time.perf_counter() - start


def _write(iterator, folder, batches):
    """Reads `batches` batches, then `(seconds, bytes)` of one iterator checkpoint."""
    for _ in range(batches):
        next(iterator)
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    tf.train.Checkpoint(iterator=iterator).write(os.path.join(folder, "ckpt"))
    seconds = time.perf_counter() - start
    size = sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))
    return seconds, size


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--source_file", default=None, help="default: ../shared/data/deen/train.de")
    parser.add_argument("--target_file", default=None, help="default: ../shared/data/deen/train.en")
    parser.add_argument("--shuffle_buffer", type=int, default=100_000)
    parser.add_argument("--tokens_per_batch", type=int, default=2560)
    parser.add_argument("--max_length", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=20)
    args = parser.parse_args()
    args.source_file = args.source_file or deen("train.de")
    args.target_file = args.target_file or deen("train.en")
    if args.rounds < 1 or args.batches < 0:
        parser.error(f"--rounds={args.rounds} must be at least 1 and --batches={args.batches} "
                     "at least 0")
    pairs = text.check_parallel_files(args.source_file, args.target_file).kept
    if pairs > args.shuffle_buffer:
        parser.error(f"{args.source_file} has {pairs:,} pairs, more than --shuffle_buffer="
                     f"{args.shuffle_buffer:,}: bytenet-train streams such files through the "
                     "buffer, so there is nothing to compare. Raise --shuffle_buffer.")
    names = ("buffer", "permuted")
    folder = tempfile.mkdtemp(prefix="checkpoint_cost_")
    streams, first_batch = {}, {}
    for name in names:
        streams[name], first_batch[name] = _stream(args, in_memory=name == "permuted")
    seconds, sizes = {name: [] for name in names}, {}
    for round_ in range(args.rounds):
        for name in names if round_ % 2 == 0 else reversed(names):
            spent, sizes[name] = _write(streams[name], os.path.join(folder, name), args.batches)
            seconds[name].append(spent)
        print(f"round {round_ + 1}: " + ", ".join(
            f"{name} {seconds[name][-1]:.3f} s" for name in names), flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    median = {name: float(np.median(seconds[name])) for name in names}
    print(json.dumps({
        "cpu": cpu_name(), "pairs": pairs, "shuffle_buffer": args.shuffle_buffer,
        "tokens_per_batch": args.tokens_per_batch, "max_length": args.max_length,
        "rounds": args.rounds, "batches_between_writes": args.batches,
        "seconds_to_first_batch": first_batch, "write_seconds_per_round": seconds,
        "write_seconds_median": median, "checkpoint_bytes": sizes,
        "permuted_over_buffer_write": median["permuted"] / median["buffer"]}))


if __name__ == "__main__":
    main()
