"""How close to the matmul peak a training step's own products can run, one shape at a time.

    python benchmarks/matmul_shapes.py --hidden_size=256 --num_stacks=3 --batch_size=32 \\
        --length=80 --precision=mixed_bfloat16

`benchmarks/train_throughput.py` divides a step's analytic FLOPs (`bytenet_tf.flops`) by its
time and by the GFLOP/s of the fastest of five square matmuls (1024 to 4096). A step's products
are much smaller than that: at hidden size h a residual block's products have inner sizes h/2
and h, over `batch_size * length` rows. This benchmark lists every product that the `cpu` ops
policy runs for one training step of `bytenet_selu` (each convolution's forward product, its
input gradient and its kernel gradient, as `bytenet_tf.ops.cpu` computes them: 2-D matmuls for
width-1 convolutions and for the kernel gradient's taps, oneDNN's dilated convolution for a wider
convolution's forward pass and input gradient), times each distinct one alone, in the
precision's compute dtype, and reports its GFLOP/s and the share of the peak that all of them
together reach: the time the step would take if it did nothing but these products, one after
the other. Bias gradients, SELU, the loss and the optimizer are left out, as the analytic count
leaves them out.

Each distinct product runs `--reps` times per call, on `--reps` different inputs (so no two are
the same computation and none is served from a result already in cache), chained by control
dependencies so that they run one at a time; the median of `--rounds` calls over `--reps` is its
time. The rounds alternate between the products (one call of each, then the next round), so a
change in the machine's speed during the run spreads over all of them rather than falling on
whichever product was being timed. Every product's `--reps` inputs are therefore held at once
(1.6 GB of float32 operands at hidden 400, 32 x 128 bytes and 10 reps); lower `--reps` where memory
is short. The last line printed is one JSON object.
"""

import argparse
import collections
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bytenet_tf  # noqa: E402,F401  (before TensorFlow: the binaries' oneDNN setting)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.train_throughput import PEAK_DTYPES, matmul_peak, significant  # noqa: E402
from bytenet_tf import flops, zoo  # noqa: E402
from bytenet_tf.layers.dilated_conv1d import DilatedConv1D  # noqa: E402
from bytenet_tf.ops import cpu  # noqa: E402

# A product: (kind, batch_size, length, input_dim, output_dim, taps, dilation, left, right).
# "matmul": [rows, input_dim] x [input_dim, output_dim]; "matmul_t_a": [rows, input_dim]^T x
# [rows, output_dim] (a kernel gradient); "conv": a dilated convolution of [batch, length,
# input_dim] with a [taps, input_dim, output_dim] kernel.
Product = collections.namedtuple(
    "Product", "kind batch_size length input_dim output_dim taps dilation left right")


def step_products(model, batch_size, length):
    """`{Product: count}`: the products of one training step of `model` on `batch_size` pairs
    of `length` bytes on each side, as the `cpu` ops policy computes them."""
    counts = collections.Counter()
    for layer in model._flatten_layers(include_self=False):
        if not isinstance(layer, DilatedConv1D):
            continue
        taps, input_dim, filters = layer.kernel.shape
        if taps == 1:
            for kind, dims in (("matmul", (input_dim, filters)),  # forward
                               ("matmul", (filters, input_dim)),  # input gradient
                               ("matmul_t_a", (input_dim, filters))):  # kernel gradient
                counts[Product(kind, batch_size, length, *dims, 1, 1, 0, 0)] += 1
            continue
        span = (taps - 1) * layer.dilation_rate
        left, right = (span, 0) if layer.causal else (span // 2, span - span // 2)
        counts[Product("conv", batch_size, length, input_dim, filters, taps,
                       layer.dilation_rate, left, right)] += 1
        # The input gradient: the same convolution of the output gradient, taps reversed and
        # transposed, padding mirrored.
        counts[Product("conv", batch_size, length, filters, input_dim, taps,
                       layer.dilation_rate, right, left)] += 1
        counts[Product("matmul_t_a", batch_size, length, input_dim, filters, 1, 1, 0, 0)] += taps
    return counts


def product_flops(product):
    """2 FLOPs per multiply-add of one product (padding positions counted, as `flops` does)."""
    return (2 * product.batch_size * product.length * product.taps * product.input_dim
            * product.output_dim)


def _operands(product, dtype, rng):
    rows = product.batch_size * product.length
    if product.kind == "conv":
        shapes = [(product.batch_size, product.length, product.input_dim),
                  (product.taps, product.input_dim, product.output_dim)]
    elif product.kind == "matmul":
        shapes = [(rows, product.input_dim), (product.input_dim, product.output_dim)]
    else:
        shapes = [(rows, product.input_dim), (rows, product.output_dim)]
    return [tf.cast(rng.standard_normal(shape).astype(np.float32), dtype) for shape in shapes]


def _compute(product, a, b):
    if product.kind == "conv":
        return cpu._convolve(a, b, product.dilation, product.left, product.right)
    return tf.matmul(a, b, transpose_a=product.kind == "matmul_t_a")


def product_chain(product, dtype, reps, rng):
    """A warmed-up callable that runs `product` in `dtype` `reps` times, one after another."""
    operands = [_operands(product, dtype, rng) for _ in range(reps)]

    @tf.function
    def chain():
        outputs = []
        for a, b in operands:
            with tf.control_dependencies(outputs[-1:]):
                outputs.append(_compute(product, a, b))
        # Every output is returned (one element each): grappler prunes a product whose result
        # only a control dependency reads.
        return tf.stack([tf.reshape(output, [-1])[0] for output in outputs])

    chain().numpy()
    chain().numpy()
    return chain


def time_products(products, dtype, reps, rounds, rng):
    """`{product: seconds per run}` in `dtype`: the median of `rounds` calls over `reps`, the
    rounds alternating between the products."""
    chains = {product: product_chain(product, dtype, reps, rng) for product in products}
    times = {product: [] for product in products}
    for _ in range(rounds):
        for product, chain in chains.items():
            start = time.perf_counter()
            chain().numpy()
            times[product].append(time.perf_counter() - start)
    return {product: float(np.median(seconds)) / reps for product, seconds in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--hidden_size", type=int, default=256)
    parser.add_argument("--num_stacks", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--length", type=int, default=80)
    parser.add_argument("--precision", default="mixed_bfloat16", choices=sorted(PEAK_DTYPES))
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--peak_size", type=int, default=None,
                        help="side of the square matmul whose GFLOP/s is the peak; by default "
                             "the best of train_throughput.PEAK_SIZES, as that benchmark uses")
    args = parser.parse_args()
    if min(args.hidden_size, args.num_stacks, args.batch_size, args.length, args.reps,
           args.rounds, 1 if args.peak_size is None else args.peak_size) < 1:
        parser.error("--hidden_size, --num_stacks, --batch_size, --length, --reps, --rounds and "
                     f"--peak_size must all be at least 1; received {vars(args)}")
    model = zoo.build_model("bytenet_selu", hidden_size=args.hidden_size,
                            num_stacks=args.num_stacks, max_length=args.length + 1, seed=0,
                            dropout_rate=0.0)
    model({"source": tf.constant([[5, 6, 2]]), "target": tf.constant([[1, 5, 6]])})
    counts = step_products(model, args.batch_size, args.length)
    total_flops = sum(product_flops(p) * n for p, n in counts.items())
    analytic = flops.training_flops(model, args.length, args.length, args.batch_size)
    if total_flops != analytic:
        raise AssertionError(f"The listed products hold {total_flops} FLOPs, the analytic count "
                             f"{analytic}: the list misses or repeats a product.")
    dtype = PEAK_DTYPES[args.precision]
    rng = np.random.default_rng(0)
    peak = matmul_peak(dtype, args.peak_size)
    ordered = sorted(counts, key=lambda product: -product_flops(product) * counts[product])
    seconds_per_product = time_products(ordered, dtype, args.reps, args.rounds, rng)
    rows, total_seconds = [], 0.0
    for product in ordered:
        seconds, count = seconds_per_product[product], counts[product]
        total_seconds += seconds * count
        gflop_per_s = product_flops(product) / seconds / 1e9
        rows.append(dict(product._asdict(), count=count, ms=significant(seconds * 1e3),
                         gflop_per_s=significant(gflop_per_s),
                         fraction_of_peak=significant(gflop_per_s / peak, 4)))
    result = {
        "model": "bytenet_selu", "hidden_size": args.hidden_size, "num_stacks": args.num_stacks,
        "batch_size": args.batch_size, "length": args.length, "precision": args.precision,
        "reps": args.reps, "rounds": args.rounds, "peak_size": args.peak_size,
        "gflop_per_step": significant(analytic / 1e9),
        "matmul_peak_gflop_per_s": significant(peak),
        "products_ms_per_step": significant(total_seconds * 1e3),
        "products_fraction_of_peak": significant(analytic / total_seconds / 1e9 / peak, 4),
        "products": rows,
    }
    print(f"bytenet_selu h{args.hidden_size} x{args.num_stacks}, {args.batch_size}x{args.length}, "
          f"{args.precision}: the step's products alone take {total_seconds * 1e3:.1f} ms, "
          f"{100 * result['products_fraction_of_peak']:.1f}% of the {peak:.0f} GFLOP/s peak")
    print(f"{'product':10s} {'in':>5s} {'out':>5s} {'taps':>4s} {'dil':>3s} {'count':>5s} "
          f"{'ms':>7s} {'% peak':>7s}")
    for row in rows:
        print(f"{row['kind']:10s} {row['input_dim']:5d} {row['output_dim']:5d} {row['taps']:4d} "
              f"{row['dilation']:3d} {row['count']:5d} {row['ms']:7.3f} "
              f"{100 * row['fraction_of_peak']:7.1f}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
