"""Cached (linear-time) against naive (quadratic) greedy decoding, and SavedModel throughput.

    python benchmarks/decode_speed.py [--model bytenet_small] [--batch_size 8]

For output lengths 50, 100, 200 and 400 bytes (forced by ignoring EOS) it times greedy decoding
of the same model on real newstest2013 sources, best of `--repeats`: naive and cached in graph
mode (`tf.function`), and cached compiled with XLA (`jit_compile=True`; compile time excluded).
The naive decoder cannot be compiled: its prefix grows every step. Then it exports the model and times a batch of 64
newstest2015 sentences through the SavedModel signature, greedy and with beam 4. Like
bytenet-translate and bytenet-evaluate, it imports TensorFlow before `bytenet_tf`, so it decodes
with TensorFlow's own choice of CPU kernels (see `bytenet_tf/__init__.py`). The last line
printed is one JSON object.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from shared_data import DEEN  # noqa: E402

from bytenet_tf import decoding, export, inference, zoo  # noqa: E402
from pipelines.text import read_parallel_lines  # noqa: E402

LENGTHS = (50, 100, 200, 400)


def best_time(function, argument, repeats):
    function(argument).numpy()  # trace and warm up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function(argument).numpy()
        best = min(best, time.perf_counter() - start)
    return best


def saved_model_throughput(model, sources, beam_size, repeats):
    folder = tempfile.mkdtemp()
    try:
        path = export.export_saved_model(model, folder, beam_size=beam_size)
        size = sum(os.path.getsize(os.path.join(root, name))
                   for root, _, names in os.walk(path) for name in names)
        signature = tf.saved_model.load(path).signatures["serving_default"]
        batch = tf.constant(sources)
        signature(source=batch)
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            signature(source=batch)["translation"].numpy()
            best = min(best, time.perf_counter() - start)
        return len(sources) / best, size
    finally:
        shutil.rmtree(folder)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--model", default="bytenet_small")
    parser.add_argument("--hidden_size", type=int, default=None)
    parser.add_argument("--num_stacks", type=int, default=None)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--saved_model", default=None,
                        help="Only time this trained export on 64 newstest2015 sentences.")
    args = parser.parse_args()
    news, _, _ = read_parallel_lines(os.path.join(DEEN, "newstest2015.de"),
                                     os.path.join(DEEN, "newstest2015.en"))
    if args.saved_model:
        signature = tf.saved_model.load(inference.resolve_saved_model(args.saved_model)).signatures[
            "serving_default"]
        batch = tf.constant(news[:64])
        signature(source=batch)
        start = time.perf_counter()
        outputs = signature(source=batch)["translation"].numpy()
        seconds = time.perf_counter() - start
        print(json.dumps({"saved_model": args.saved_model, "sentences_per_s": round(64 / seconds, 3),
                          "mean_output_bytes": sum(map(len, outputs)) / 64}))
        return
    overrides = {k: v for k, v in (("hidden_size", args.hidden_size),
                                   ("num_stacks", args.num_stacks)) if v is not None}
    model = zoo.build_model(args.model, seed=0, **overrides)
    de, _, _ = read_parallel_lines(os.path.join(DEEN, "fixture-small.de"),
                                   os.path.join(DEEN, "fixture-small.en"))
    sources = de[:args.batch_size]
    ids = inference.source_ids(tf.constant(sources), model.max_length)

    rows = []
    for length in LENGTHS:
        cached = tf.function(lambda s, n=length: decoding.greedy_decode(
            model, s, ignore_eos=True, max_output_length=n, margin=n))
        naive = tf.function(lambda s, n=length: decoding.naive_greedy_decode(
            model, s, ignore_eos=True, max_output_length=n, margin=n))
        xla = tf.function(lambda s, n=length: decoding.greedy_decode(
            model, s, ignore_eos=True, max_output_length=n, margin=n, capacity=n),
            jit_compile=True)
        cached_s = best_time(cached, ids, args.repeats)
        xla_s = best_time(xla, ids, args.repeats)
        naive_s = best_time(naive, ids, 1 if length >= 200 else args.repeats)
        rows.append({"length": length, "cached_s": cached_s, "cached_xla_s": xla_s,
                     "naive_s": naive_s, "cached_ms_per_byte": 1000 * cached_s / length,
                     "cached_xla_ms_per_byte": 1000 * xla_s / length,
                     "naive_ms_per_byte": 1000 * naive_s / length,
                     "speedup": naive_s / cached_s, "speedup_xla": naive_s / xla_s})
    print(f"{args.model}, {model.count_params()} parameters, batch {args.batch_size}")
    print("| output bytes | naive s | cached s | cached XLA s | naive ms/byte | cached ms/byte "
          "| cached XLA ms/byte | speedup (graph) | speedup (XLA) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['length']} | {r['naive_s']:.3f} | {r['cached_s']:.3f} | {r['cached_xla_s']:.3f} "
              f"| {r['naive_ms_per_byte']:.2f} | {r['cached_ms_per_byte']:.2f} "
              f"| {r['cached_xla_ms_per_byte']:.3f} | {r['speedup']:.1f}x | {r['speedup_xla']:.1f}x |")

    greedy_rate, size = saved_model_throughput(model, news[:64], 1, args.repeats)
    beam_rate, _ = saved_model_throughput(model, news[:64], 4, 1)
    print(f"SavedModel, 64 newstest2015 sentences (untrained model: every output runs to its "
          f"unfolding bound): greedy {greedy_rate:.2f} sentences/s, beam 4 {beam_rate:.2f} "
          f"sentences/s; {size / 1e6:.1f} MB on disk")
    by_length = {r["length"]: r for r in rows}
    print(json.dumps({
        "model": args.model, "batch_size": args.batch_size,
        "speedup_vs_naive_at_200": round(by_length[200]["speedup_xla"], 2),
        "speedup_vs_naive_at_200_graph_mode": round(by_length[200]["speedup"], 2),
        "time_per_byte_ratio_400_vs_100": round(by_length[400]["cached_xla_ms_per_byte"]
                                                / by_length[100]["cached_xla_ms_per_byte"], 3),
        "time_per_byte_ratio_400_vs_100_graph_mode": round(
            by_length[400]["cached_ms_per_byte"] / by_length[100]["cached_ms_per_byte"], 3),
        "rows": rows, "saved_model_greedy_sentences_per_s": round(greedy_rate, 3),
        "saved_model_beam4_sentences_per_s": round(beam_rate, 3),
        "saved_model_bytes": size}))


if __name__ == "__main__":
    main()
