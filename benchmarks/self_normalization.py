"""Per-block mean and variance at initialization, on real newstest2013 text.

    python benchmarks/self_normalization.py [--count 64] [--seed 0]

Prints one Markdown table with `bytenet_selu` (its zoo default: the normalized residual sum
with w = 1/sqrt(15)), the same with w = 1 (`selu_w1`) and with the plain sum `x + f(x)`
(`selu_w1_plain_add`), `bytenet_nonorm` and `bytenet_small` (layer norm), then a one-line
summary per model: max |mean|, min and max variance.
"""

import argparse
import os
import sys


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from shared_data import DEEN  # noqa: E402

import bytenet_tf  # noqa: E402
from bytenet_tf.analysis import block_statistics, format_statistics, summary  # noqa: E402
from pipelines import byte_codec  # noqa: E402
from pipelines.text import read_parallel_lines  # noqa: E402



def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sources, targets, _ = read_parallel_lines(os.path.join(DEEN, "fixture-small.de"),
                                              os.path.join(DEEN, "fixture-small.en"))
    sources, targets = sources[:args.count], targets[:args.count]
    source, target, _ = byte_codec.frame_batch(sources, targets)
    variants = {
        "selu": bytenet_tf.build_model("bytenet_selu", seed=args.seed),
        "selu_w1": bytenet_tf.build_model("bytenet_selu", branch_weight=1.0, seed=args.seed),
        "selu_w1_plain_add": bytenet_tf.build_model("bytenet_selu", branch_weight=1.0,
                                                    normalize_residual=False, seed=args.seed),
        "nonorm": bytenet_tf.build_model("bytenet_nonorm", seed=args.seed),
        "layernorm": bytenet_tf.build_model("bytenet_small", seed=args.seed),
    }
    tables = {label: block_statistics(model, source, target) for label, model in variants.items()}
    print(format_statistics(tables))
    print()
    for label, rows in tables.items():
        half = len(rows) // 2
        for side, part in (("encoder", rows[:half]), ("decoder", rows[half:])):
            mean, low, high = summary(part)
            print(f"{label:18s} {side}: max|mean| {mean:.3f}  variance [{low:.3f}, {high:.3f}]")


if __name__ == "__main__":
    main()
