"""How many training steps a length curriculum lasts, and how many steps an epoch takes.

    python experiments/curriculum_steps.py --minutes=30
    python experiments/curriculum_steps.py --minutes=30 --set curriculum_epochs=1

`--curriculum_epochs=K` is counted in pairs (K epochs' worth, drawn shortest first), and its
batches hold a token budget, so the steps it lasts depend on the data, while the steps a time
budget holds depend on the CPU. This builds the training stream that bytenet-train builds for
`experiments/translator.py --minutes=M` (the same held-out split, the `text` preset with that
budget's values, the `--set` overrides) without training, draws `--steps` batches, and reports
the step by which the stream has drawn each multiple of half an epoch, the curriculum's last
step among them when `curriculum_epochs` is a multiple of one half. Dividing by a run's steps (its `results.json`) gives the share of the run spent
in the curriculum. The last line printed is one JSON object.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bytenet_tf  # noqa: E402,F401
from bytenet_tf.training import stream  # noqa: E402
from bytenet_tf.training.config import TrainConfig, resolve  # noqa: E402
from experiments.common import RUNS  # noqa: E402
from experiments.translator import held_out_data, parse_overrides  # noqa: E402
from pipelines import datasets, preprocessing  # noqa: E402


def epoch_steps(config, steps, half_epochs):
    """`(pairs, {epochs: step})`: the training pairs of `config` and, for each multiple of half
    an epoch up to `half_epochs / 2`, the first step whose batches bring the pairs drawn to at
    least that many epochs' worth, among the first `steps` batches.

    Args:
        config: a resolved `TrainConfig`; its `train_length_share` sets the length filter's
            bound as in bytenet-train, and the marks count the pairs that the filter keeps.
        steps: int >= 1, batches to draw at most.
        half_epochs: int >= 1, how many half-epoch marks to find.
    """
    config = stream.apply_length_share(config)  # the length bound bytenet-train would use
    pairs, stats = datasets.load_pairs_with_stats(config.data, "train",
                                                  in_memory_up_to=config.shuffle_buffer)
    count = stats.kept
    batches = preprocessing.make_batches(pairs, stream.pipeline_config(config))
    marks, drawn, wanted = {}, 0, [k / 2 for k in range(1, half_epochs + 1)]
    for step, (_, labels) in enumerate(batches.take(steps), 1):
        drawn += int(labels.shape[0])
        while wanted and drawn >= wanted[0] * count:
            marks[wanted.pop(0)] = step
        if not wanted:
            break
    return count, marks


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30,
                        help="the time budget whose preset values apply")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a TrainConfig field to override, e.g. curriculum_epochs=1")
    parser.add_argument("--epochs", type=float, default=4,
                        help="report the marks up to this many epochs' worth of pairs")
    parser.add_argument("--steps", type=int, default=20000, help="batches to draw at most")
    args = parser.parse_args()
    if args.minutes <= 0 or args.epochs < 0.5 or args.steps < 1:
        parser.error(f"--minutes must be > 0, --epochs >= 0.5 and --steps >= 1; received "
                     f"--minutes={args.minutes} --epochs={args.epochs} --steps={args.steps}")
    data, _ = held_out_data(os.path.join(RUNS, "translator", "data"))
    config = resolve(TrainConfig(data=data, time_budget_seconds=60 * args.minutes,
                                 seed=args.seed, **parse_overrides(args.set)))
    count, marks = epoch_steps(config, args.steps, int(2 * args.epochs))
    print(f"{count} training pairs, {config.tokens_per_batch} tokens per batch, curriculum of "
          f"{config.curriculum_epochs:g} epochs")
    for epochs, step in marks.items():
        where = "  (the curriculum's end)" if epochs == config.curriculum_epochs else ""
        print(f"{epochs:4g} epochs' worth of pairs drawn by step {step}{where}")
    print(json.dumps({"minutes": args.minutes, "seed": args.seed, "overrides": args.set,
                      "pairs": count, "tokens_per_batch": config.tokens_per_batch,
                      "curriculum_epochs": config.curriculum_epochs,
                      "step_by_epochs": {f"{k:g}": v for k, v in marks.items()}}))


if __name__ == "__main__":
    main()
