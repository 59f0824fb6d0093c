"""What the learnable residual gate costs a training step: `bytenet_selu` with its fixed branch
weight (the zoo default) against `residual_gate=True`, timed alternately in one process.

    python benchmarks/residual_gate_cost.py --hidden_size=400 --num_stacks=3 --batch_size=32 \\
        --length=200 --precision=float32 --rounds=10 --steps=5

Both models run `bytenet-train`'s train step and optimizer on the same real batches
(`benchmarks/train_throughput.py`'s `build_step`). Each round times `--steps` steps of one model,
then of the other, swapping which goes first every round, so that a machine that speeds up or
slows down during the run weighs on both alike. Timing the two in separate runs, one after the
other, would not do: on a shared 2-core machine the gap between runs is as large as the effect.
Reports each round's ratio of median step times (gate over fixed) and their median. The last
line printed is one JSON object.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.train_throughput import add_step_arguments, build_step, significant  # noqa: E402

VARIANTS = {"fixed": {}, "gate": {"residual_gate": True}}


def timed_steps(train_step, iterator, steps):
    """Seconds of each of `steps` train steps; the loss is read after each, as the binary does."""
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        float(train_step(iterator)[0])
        times.append(time.perf_counter() - start)
    return times


def alternate(steps, warmup, rounds, steps_per_round):
    """Times two train steps alternately: `(medians, ratios)`.

    Args:
        steps: `{name: (train_step, iterator)}`, two entries; the ratio is the second's median
            step time over the first's.
        warmup: untimed steps of each first.
        rounds, steps_per_round: each round times `steps_per_round` steps of one, then of the
            other, swapping which goes first every round.

    Returns:
        `medians`: `{name: [median step seconds of each round]}`; `ratios`: one per round.
    """
    names = list(steps)
    for train_step, iterator in steps.values():
        timed_steps(train_step, iterator, warmup)
    ratios, medians = [], {name: [] for name in names}
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else reversed(names):
            medians[name].append(float(np.median(timed_steps(*steps[name], steps_per_round))))
        ratios.append(medians[names[1]][-1] / medians[names[0]][-1])
        print(f"round {round_ + 1}: " + ", ".join(f"{name} {medians[name][-1] * 1000:.1f} ms"
                                                  for name in names)
              + f", ratio {ratios[-1]:.3f}", flush=True)
    return medians, ratios


def alternation_arguments(description, steps):
    """The flags of a benchmark that alternates two train steps: `(args, steps_per_round)`.

    `add_step_arguments`' flags (`--steps` is the steps per round, `steps` its default) and
    `--rounds`; `args.steps` becomes the number of batches `build_step` must read for all rounds.
    """
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawTextHelpFormatter)
    add_step_arguments(parser, steps=steps, warmup=3)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    if args.rounds < 1 or args.steps < 1:
        parser.error(f"--rounds={args.rounds} and --steps={args.steps} must both be at least 1")
    steps_per_round = args.steps
    args.steps = args.rounds * steps_per_round  # build_step reads this many batches
    return args, steps_per_round


def main():
    args, steps_per_round = alternation_arguments(__doc__, steps=5)
    steps = {name: build_step(args, **overrides)[1:] for name, overrides in VARIANTS.items()}
    medians, ratios = alternate(steps, args.warmup, args.rounds, steps_per_round)
    result = {
        "model": args.model, "hidden_size": args.hidden_size, "num_stacks": args.num_stacks,
        "batch_size": args.batch_size, "length": args.length, "precision": args.precision,
        "ops_policy": args.ops_policy, "rounds": args.rounds, "steps_per_round": steps_per_round,
        "seconds_per_step": {name: significant(float(np.median(values)))
                             for name, values in medians.items()},
        "gate_over_fixed_per_round": [significant(r, 4) for r in ratios],
        "gate_over_fixed": significant(float(np.median(ratios)), 4),
    }
    print(f"gate over fixed: median {result['gate_over_fixed']:.3f} over {args.rounds} rounds "
          f"(range {min(ratios):.3f}-{max(ratios):.3f})")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
