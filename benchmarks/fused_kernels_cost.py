"""What the masked-SELU and scaled-sum kernels save a training step: `cpu_fused` as
`bytenet-train` runs it, against the same policy with those two computed by TensorFlow ops,
timed alternately in one process.

    python benchmarks/fused_kernels_cost.py --hidden_size=400 --num_stacks=3 --batch_size=32 \\
        --length=128 --precision=mixed_bfloat16 --dropout_rate=0 --rounds=10 --steps=3

`tensorflow_ops` is `cpu_fused` as it was before these two kernels: the encoder's SELU before
each dilated convolution is the SELU kernel followed by a multiply by the padding mask, and each
block's rescaled residual sum is TensorFlow's multiplies and add. `fused` is `cpu_fused`. Both run
`bytenet-train`'s train step and optimizer on the same real batches from the same weights
(`benchmarks/train_throughput.py`'s `build_step`), alternated as in
`benchmarks/residual_gate_cost.py`. Reports each round's ratio of median step times (fused
over tensorflow_ops), their median, and each variant's share of the matmul peak. The last line
printed is one JSON object.
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.residual_gate_cost import alternate, alternation_arguments  # noqa: E402
from benchmarks.train_throughput import (PEAK_DTYPES, build_step, matmul_peak,  # noqa: E402
                                         significant)
from bytenet_tf import flops  # noqa: E402
from bytenet_tf.ops import cpu  # noqa: E402
from bytenet_tf.ops.reference import ReferenceOps, apply_mask  # noqa: E402


class TensorflowBlockOps(cpu.CpuFusedOps):
    """`cpu_fused` with the padding mask and the residual sum in TensorFlow ops."""

    def selu(self, inputs, training=False, mask=None):
        outputs = super().selu(inputs, training)
        return outputs if mask is None else apply_mask(outputs, mask)

    def residual(self, inputs, branch, branch_weight=1.0, rescale=1.0, training=False):
        return ReferenceOps.residual(self, inputs, branch, branch_weight, rescale, training)


def use_ops(model, ops_object):
    """Makes every layer of `model` that computes through an ops object use `ops_object`."""
    for layer in model._flatten_layers(include_self=True):
        if hasattr(layer, "ops"):
            layer.ops = ops_object


def main():
    args, steps_per_round = alternation_arguments(__doc__, steps=3)
    args.ops_policy = "cpu_fused"
    steps = {}
    for name in ("tensorflow_ops", "fused"):
        model, train_step, iterator = build_step(args)
        if name == "tensorflow_ops":
            use_ops(model, TensorflowBlockOps())
        steps[name] = (train_step, iterator)
    medians, ratios = alternate(steps, args.warmup, args.rounds, steps_per_round)
    peak = matmul_peak(PEAK_DTYPES[args.precision])
    step_gflop = flops.training_flops(model, args.length, args.length, args.batch_size) / 1e9
    seconds = {name: float(np.median(values)) for name, values in medians.items()}
    result = {
        "model": args.model, "hidden_size": args.hidden_size, "num_stacks": args.num_stacks,
        "batch_size": args.batch_size, "length": args.length, "precision": args.precision,
        "dropout_rate": model.dropout_rate, "rounds": args.rounds,
        "steps_per_round": steps_per_round,
        "seconds_per_step": {name: significant(value) for name, value in seconds.items()},
        "gflop_per_step": significant(step_gflop),
        "matmul_peak_gflop_per_s": significant(peak),
        "fraction_of_peak": {name: significant(step_gflop / value / peak, 4)
                             for name, value in seconds.items()},
        "fused_over_tensorflow_ops_per_round": [significant(r, 4) for r in ratios],
        "fused_over_tensorflow_ops": significant(float(np.median(ratios)), 4),
    }
    print(f"fused over tensorflow_ops: median {result['fused_over_tensorflow_ops']:.3f} over "
          f"{args.rounds} rounds (range {min(ratios):.3f}-{max(ratios):.3f}); share of the "
          f"{peak:.0f} GFLOP/s matmul peak: " + ", ".join(
              f"{name} {100 * value:.1f}%" for name, value in result["fraction_of_peak"].items()))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
