"""What a user of bytenet-evaluate feels: sentences/s and target bytes/s of exported
translators on captions and news, and their share of the analytic FLOP bound.

    python benchmarks/translate_speed.py --saved_model=A --saved_model=B [--rounds=3]

Each SavedModel translates the 1000 Multi30k test2016 captions and the first `--news` sentences
of newstest2015 (../shared/data/deen) as bytenet-evaluate does (`inference.translate_batches`:
length-sorted batches, longest first, of up to `--batch_size` sentences and `--batch_bytes`
padded bytes, `--concurrent_batches` of them decoding at once; each may differ per export, so
one export given twice times two settings), after one untimed batch. The exports are timed in
turn, round after round (A B A B ...), and the median of the rounds is reported, with each
export's speed relative to the first one's. TensorFlow's intra-op threads are what
bytenet-evaluate sets for the largest `--concurrent_batches` (`inference.share_cores`), or
`--intra_op_threads`; they are fixed for the process, so two thread counts are compared by
running the benchmark once per count, alternated, and each row's `outputs_sha256` tells whether
the translations are the same. A row's `intra_op_threads` is null where TensorFlow chose them
itself (`--intra_op_threads=0`).

The FLOP bound counts the matrix products that the translations need (`bytenet_tf.flops`):
the encoder over each source, and the decoder over each output byte and its EOS, once per
beam. Divided by the time, it is the share of the float32 matmul peak (the best of square
matmuls of 1024 to 4096, measured in the same run, in a child process with TensorFlow's default
threads and the oneDNN kernels that `import bytenet_tf` turns on, so that the peak is the whole
CPU's best whatever the threads and kernels of the decoding) that decoding reaches; the exports
compute in float32. Like bytenet-translate and bytenet-evaluate, this process decodes with
TensorFlow's own choice of CPU kernels (see `bytenet_tf/__init__.py`). The last line printed is one JSON object.
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from shared_data import deen  # noqa: E402

from bytenet_tf import flops, inference  # noqa: E402
from bytenet_tf.models.bytenet import ByteNet  # noqa: E402
from pipelines.text import read_parallel_lines  # noqa: E402


def export_options(version_dir):
    """The export's `assets.extra/bytenet_config.json`: the model config and decoding options."""
    with open(os.path.join(version_dir, "assets.extra", "bytenet_config.json")) as f:
        return json.load(f)


def significant(seconds):
    """Seconds to 4 significant digits: a fixed number of decimals would round a short timing
    (a few milliseconds) by several percent."""
    return float(f"{seconds:.4g}")


def flop_bound(model, beam_size, sources, outputs, max_length):
    """FLOPs that translating `sources` into `outputs` needs: encoder, and decoder per beam."""
    total = 0
    for source, output in zip(sources, outputs):
        source_length = min(len(source), max_length - 1) + 1
        total += flops.forward_flops(model, source_length, 0, 1)
        total += beam_size * flops.forward_flops(model, 0, len(output) + 1, 1)
    return total


def whole_cpu_peak():
    """The float32 matmul peak (`matmul_peak`) measured in a child process with TensorFlow's
    default threads: this process's intra-op threads may be fewer than the cores."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import sys; sys.path.insert(0, {here!r}); "
            "from train_throughput import matmul_peak, tf; print(matmul_peak(tf.float32))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    return float(result.stdout.split()[-1])


def digest(outputs):
    """SHA-256 of a list of translations, to compare outputs across processes."""
    hasher = hashlib.sha256()
    for output in outputs:
        hasher.update(len(output).to_bytes(8, "little") + output)
    return hasher.hexdigest()


def per_export(parser, flag, values, default, exports, minimum=1):
    """A flag given once for every export or once per export: one value >= `minimum` per
    export."""
    values = values or [default]
    if len(values) == 1:
        values = values * exports
    if len(values) != exports or min(values) < minimum:
        parser.error(f"--{flag}={values}: give one value >= {minimum}, or one per --saved_model "
                     f"({exports})")
    return values


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--saved_model", action="append", required=True,
                        help="an export base or version directory; repeat to compare")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--news", type=int, default=500, help="newstest2015 sentences")
    parser.add_argument("--captions", type=int, default=1000, help="Multi30k captions")
    parser.add_argument("--batch_size", type=int, action="append",
                        help="sentences per batch: once for every export, or once per "
                             f"--saved_model in its order (default {inference.DEFAULT_BATCH_SIZE})")
    parser.add_argument("--batch_bytes", type=int, action="append",
                        help="padded source bytes per batch (0: no such limit), as --batch_size "
                             f"(default {inference.DEFAULT_BATCH_BYTES})")
    parser.add_argument("--concurrent_batches", type=int, action="append",
                        help="batches decoding at once: once for every export, or once per "
                             "--saved_model in its order (default "
                             f"{inference.DEFAULT_CONCURRENT_BATCHES})")
    parser.add_argument("--intra_op_threads", type=int, default=None,
                        help="TensorFlow's intra-op threads for the whole run (0: TensorFlow's "
                             "own default; default: what bytenet-evaluate sets for the largest "
                             "--concurrent_batches)")
    args = parser.parse_args()
    batch_sizes = per_export(parser, "batch_size", args.batch_size,
                             inference.DEFAULT_BATCH_SIZE, len(args.saved_model))
    batch_bytes = per_export(parser, "batch_bytes", args.batch_bytes,
                             inference.DEFAULT_BATCH_BYTES, len(args.saved_model), minimum=0)
    concurrency = per_export(parser, "concurrent_batches", args.concurrent_batches,
                             inference.DEFAULT_CONCURRENT_BATCHES, len(args.saved_model))
    if args.intra_op_threads is None:
        inference.share_cores(max(concurrency))
    elif args.intra_op_threads < 0:
        parser.error(f"--intra_op_threads={args.intra_op_threads}: give 0 (TensorFlow's "
                     "default) or a count of threads")
    elif args.intra_op_threads > 0:
        tf.config.threading.set_intra_op_parallelism_threads(args.intra_op_threads)
    threads = tf.config.threading.get_intra_op_parallelism_threads()

    captions, _, _ = read_parallel_lines(deen("multi30k-test2016.de"),
                                         deen("multi30k-test2016.en"))
    news, _, _ = read_parallel_lines(deen("newstest2015.de"), deen("newstest2015.en"))
    sets = {"captions": captions[:args.captions], "news": news[:args.news]}
    exports = []
    for path, batch_size, bytes_, concurrent in zip(args.saved_model, batch_sizes, batch_bytes,
                                                    concurrency):
        signature, version_dir = inference.load_saved_model(path)
        options = export_options(version_dir)
        translate = inference.as_translate_fn(signature)
        translate(sets["captions"][:batch_size])  # untimed: the first call's set-up
        exports.append({"path": version_dir, "translate": translate, "options": options,
                        "batch_size": batch_size, "batch_bytes": bytes_ or None,
                        "concurrent_batches": concurrent,
                        "model": ByteNet.from_config(options["model"]),
                        "seconds": {name: [] for name in sets}, "outputs": {}})
    for _ in range(args.rounds):
        for export in exports:
            for name, sources in sets.items():
                start = time.perf_counter()
                outputs = inference.translate_batches(
                    export["translate"], sources, export["batch_size"],
                    concurrent_batches=export["concurrent_batches"],
                    batch_bytes=export["batch_bytes"])
                export["seconds"][name].append(time.perf_counter() - start)
                export["outputs"][name] = outputs
    peak = whole_cpu_peak()
    rows = []
    for export in exports:
        model, beam = export["model"], export["options"]["beam_size"]
        for name, sources in sets.items():
            seconds = statistics.median(export["seconds"][name])
            outputs = export["outputs"][name]
            bound = flop_bound(model, beam, sources, outputs, model.max_length)
            rows.append({
                "saved_model": export["path"], "set": name, "beam_size": beam,
                "batch_size": export["batch_size"], "batch_bytes": export["batch_bytes"],
                "concurrent_batches": export["concurrent_batches"],
                "sentences": len(sources), "seconds": significant(seconds),
                "seconds_per_round": [significant(s) for s in export["seconds"][name]],
                "intra_op_threads": threads or None, "outputs_sha256": digest(outputs),
                "sentences_per_s": round(len(sources) / seconds, 2),
                "target_bytes_per_s": round(sum(map(len, outputs)) / seconds, 1),
                "gflop_per_s": round(bound / seconds / 1e9, 2),
                "fraction_of_float32_peak": round(bound / seconds / 1e9 / peak, 4)})
    # The first export's rows (by position: one export may be timed again at another batch size).
    first = {row["set"]: row for row in rows[:len(sets)]}
    # Outputs against the first export of the same beam size (the same weights decoded by
    # other code should agree; beams may differ at exact ties).
    reference = {}
    for export in exports:
        reference.setdefault(export["options"]["beam_size"], export)
    for export, row_pair in zip(exports, zip(rows[::2], rows[1::2])):
        base = reference[export["options"]["beam_size"]]
        for row in row_pair:
            ours, theirs = export["outputs"][row["set"]], base["outputs"][row["set"]]
            row["identical_to_first_of_its_beam"] = round(
                sum(a == b for a, b in zip(ours, theirs)) / len(ours), 4)
    for row in rows:
        row["speed_vs_first"] = round(row["sentences_per_s"]
                                      / first[row["set"]]["sentences_per_s"], 3)
        print(f"{row['saved_model']} beam {row['beam_size']}, batch {row['batch_size']} "
              f"({row['batch_bytes'] or 'no'} bytes) x {row['concurrent_batches']} at once, "
              f"{row['set']}: "
              f"{100 * row['identical_to_first_of_its_beam']:.1f}% identical outputs, "
              f"{row['sentences_per_s']:.1f} sentences/s, {row['target_bytes_per_s']:.0f} "
              f"target bytes/s, {100 * row['fraction_of_float32_peak']:.1f}% of the "
              f"{peak:.0f} GFLOP/s float32 peak, {row['speed_vs_first']:.2f}x the first")
    print(json.dumps({"matmul_peak_gflop_per_s": round(peak, 1), "rounds": args.rounds,
                      "rows": rows}))


if __name__ == "__main__":
    main()
