"""Memorization: memorizing 100 newstest2013 pairs, trained and scored on the same pairs.

    python experiments/memorize.py [--minutes 10] [--variant selu]
    python experiments/memorize.py --minutes=15 --variant=none --pairs=500 --batch=64 \
        --learning_rate=3e-4 --precision=float32 --eval_epochs=10 --name=memorize_thesis_scale_none

With `--variant`, one variant runs and writes docs/results/memorize_<variant>.json. Run the
variants one after another on a quiet machine: the budget is wall-clock time.

Runs bytenet_small with normalization layer, batch and none, and bytenet_selu (the zoo's, and with
`--branch_weight=0.3`), each for the same
wall-clock budget (validation included), batch 20 (5 steps per epoch), Adam at a constant 1e-3
after 50 warm-up steps, dropout 0 for all (this task rewards memorizing), precision auto.
BLEU (sacrebleu) on the 100 pairs every 5 epochs. Writes docs/results/memorize.json; the
checkpoints stay in runs/experiments/memorize/ for experiments/depth_statistics.py.

`--pairs`, `--batch`, `--learning_rate` and `--precision` move the task toward the thesis's
memorization runs (3003 pairs, batch 64, Adam 3e-4, float32, 5.6k-14k steps); `--name` names
the results file and the run folder so that such runs do not overwrite the default ones.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bytenet_tf.training import trainer  # noqa: E402
from bytenet_tf.training.config import TrainConfig  # noqa: E402
from experiments import common  # noqa: E402
from experiments.common import BEFORE_TEXT_PRESET, RUNS, read_metrics, write_results  # noqa: E402
from shared_data import deen  # noqa: E402
from pipelines import datasets  # noqa: E402
from pipelines.text import read_parallel_lines  # noqa: E402

PAIRS = 100
BATCH = 20
VARIANTS = {
    "layer": ("bytenet_small", {}),
    "batch": ("bytenet_small", {"normalization": "batch"}),
    "none": ("bytenet_small", {"normalization": "none"}),
    "selu": ("bytenet_selu", {}),
    # SELU ByteNet with a residual branch weight of 0.3 instead of 1: each normalized block
    # scales its input by 1/sqrt(1 + w**2), so after the 15 decoder blocks the identity path
    # keeps 0.52 of the embedding (w=0.3) instead of 2**-7.5 = 0.0055 (w=1).
    "selu_branch0.3": ("bytenet_selu", {"branch_weight": 0.3}),
    # The same, with the global gradient norm clipped at 1 (does clipping calm its spikes?).
    "selu_branch0.3_clip1": ("bytenet_selu", {"branch_weight": 0.3, "clip_norm": 1.0}),
}


def write_pairs(folder, pairs=PAIRS):
    """The first `pairs` pairs of dev.* (newstest2013) as two files; returns their paths."""
    sources, targets, _ = read_parallel_lines(deen("dev.de"), deen("dev.en"))
    if not 1 <= pairs <= len(sources):
        raise SystemExit(f"--pairs must be in [1, {len(sources)}] (dev.* has {len(sources)} "
                         f"pairs). Received: --pairs={pairs}")
    return common.write_pairs(folder, sources[:pairs], targets[:pairs])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--variant", choices=sorted(VARIANTS), default=None)
    parser.add_argument("--pairs", type=int, default=PAIRS)
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--eval_epochs", type=int, default=5, help="epochs between BLEU scores")
    parser.add_argument("--name", default=None, help="results file and run folder name")
    args = parser.parse_args()
    variants = {args.variant: VARIANTS[args.variant]} if args.variant else VARIANTS
    pairs, batch = args.pairs, args.batch
    base = os.path.join(RUNS, "memorize", args.name) if args.name else os.path.join(RUNS, "memorize")
    data_folder = "data" if pairs == PAIRS else f"data_{pairs}"
    source, target = write_pairs(os.path.join(RUNS, "memorize", data_folder), pairs)
    data = datasets.DataSpec(dataset="text", source_file=source, target_file=target,
                             valid_source_file=source, valid_target_file=target)
    runs = {}
    for label, (model, overrides) in variants.items():
        model_dir = os.path.join(base, label)
        steps_per_epoch = max(pairs // batch, 1)
        config = TrainConfig(
            model=model, data=data, model_dir=model_dir, export=False, batch_size=batch,
            train_steps=1_000_000, **BEFORE_TEXT_PRESET,
            time_budget_seconds=60 * args.minutes, learning_rate=args.learning_rate,
            warmup_steps=50, decay_learning_rate=False,
            eval_every=args.eval_epochs * steps_per_epoch, valid_size=pairs,
            log_every=steps_per_epoch, checkpoint_every=1_000_000, shuffle_buffer=pairs,
            dropout_rate=0.0, precision=args.precision, progress=False, seed=0, **overrides)
        results = trainer.train_and_evaluate(config)
        curve = read_metrics(model_dir)
        passed = [row for row in curve if row.get("valid_bleu", 0) >= 90]
        runs[label] = {
            "model": model, "overrides": overrides, "steps": results["step"],
            "final_bleu": results["valid"]["bleu"], "final_chrf": results["valid"]["chrf"],
            "passed_bleu_90": bool(passed),
            "first_epoch_at_bleu_90": passed[0]["step"] * batch / pairs if passed else None,
            "first_seconds_at_bleu_90": _seconds_at(curve, passed[0]["step"]) if passed else None,
            "curve": curve}
        print(f"{label}: final BLEU {results['valid']['bleu']:.1f}; BLEU>=90 at epoch "
              f"{runs[label]['first_epoch_at_bleu_90']} ({runs[label]['first_seconds_at_bleu_90']} s)",
              flush=True)
    command = f"python experiments/memorize.py --minutes={args.minutes:g}"
    if args.variant:
        command += f" --variant={args.variant}"
    for flag in ("pairs", "batch", "learning_rate", "precision", "eval_epochs", "name"):
        value = getattr(args, flag)
        if value != parser.get_default(flag):
            command += f" --{flag}={value:g}" if isinstance(value, float) else f" --{flag}={value}"
    name = args.name or (f"memorize_{args.variant}" if args.variant else "memorize")
    print(write_results(name, {
        "command": command, "pairs": pairs, "batch_size": batch, "minutes": args.minutes,
        "learning_rate": args.learning_rate, "precision": args.precision, "runs": runs}))


def _seconds_at(curve, step):
    """Training seconds (validation included) logged at or just after `step`."""
    times = [row["train_seconds"] for row in curve if "train_seconds" in row and row["step"] >= step]
    return round(times[0], 1) if times else None


if __name__ == "__main__":
    main()
