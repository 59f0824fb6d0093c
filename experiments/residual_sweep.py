"""The residual branch: SELU ByteNet's residual branch weight, gate and optimizer, on memorization.

    python experiments/residual_sweep.py --minutes=3 --settings=w0.3,w1 --seeds=0
    python experiments/residual_sweep.py --minutes=10 --seeds=0,1,2       # every setting

Trains `bytenet_selu` at its zoo size (hidden 400, 3 stacks: 15 blocks per side) on the first
100 pairs of newstest2013 (`dev.*`) and scores BLEU on the same pairs, with what bytenet-train
does by default for `--learning_rate=1e-3 --warmup_steps=50 --batch_size=16` (the memorization
check of the zoo default): Adam at Keras's defaults, a peak rate of 1e-3 after 50 warm-up steps
then 1/sqrt(step) decay, the zoo's AlphaDropout (0.05), precision auto, and a wall-clock budget
per run (validation included; run alone on a quiet machine). Each setting changes one thing
against that base:

- `w<x>`: the branch weight of the normalized residual sum `(x + w f(x)) / sqrt(1 + w^2)`;
  `w_invsqrtL` is 1/sqrt(15), one over the root of the blocks on a side.
- `gate`: a learnable branch weight that starts at 0 (SkipInit/ReZero).
- `<setting>+snn_adam`: Adam with beta_2 0.99 and epsilon 0.01 (the SNN paper's advice).
- `<setting>+constant`: a constant rate after the warm-up instead of the 1/sqrt(step) decay.
- `<setting>+nodrop`: dropout 0 instead of the zoo's 0.05.
- `<setting>+lr<rate>`: peak learning rate `<rate>` (e.g. `w1+lr1e-3`).

Writes docs/results/residual_sweep.json: per run, BLEU and chrF at the end, the first training
second at which BLEU reached 90, the mean training loss of the last three logged steps, and the
logged curve (loss, gradient norm, learning rate, validation BLEU).
"""

import argparse
import math
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bytenet_tf.training import trainer  # noqa: E402
from bytenet_tf.training.config import TrainConfig  # noqa: E402
from experiments.common import BEFORE_TEXT_PRESET, RUNS, read_metrics, write_results  # noqa: E402
from experiments.memorize import write_pairs  # noqa: E402
from pipelines import datasets  # noqa: E402

PAIRS = 100
BATCH = 16
BLOCKS_PER_SIDE = 15

WEIGHTS = {"w0.1": 0.1, "w0.2": 0.2, "w0.3": 0.3, "w_invsqrtL": 1 / math.sqrt(BLOCKS_PER_SIDE),
           "w1": 1.0}
SUFFIXES = {"snn_adam": dict(adam_beta_2=0.99, adam_epsilon=0.01),
            "constant": dict(decay_learning_rate=False), "nodrop": dict(dropout_rate=0.0),
            "attention_identity": dict(cross_attention="identity"),
            "attention_branch": dict(cross_attention="branch"),
            "attention_positions": dict(cross_attention="branch_positions")}


def setting_overrides(setting):
    """`TrainConfig` overrides of a setting name such as `w0.3+snn_adam`."""
    base, *suffixes = setting.split("+")
    if base == "gate":
        overrides = dict(residual_gate=True)
    elif base in WEIGHTS:
        overrides = dict(branch_weight=WEIGHTS[base])
    else:
        raise ValueError(f"setting {setting!r}: {base!r} is unknown; choose one of: gate, "
                         f"{', '.join(WEIGHTS)}")
    for suffix in suffixes:
        if suffix.startswith("lr"):
            try:
                overrides["learning_rate"] = float(suffix[2:])
            except ValueError:
                raise ValueError(f"setting {setting!r}: suffix {suffix!r} is not `lr` and a "
                                 "number, such as `lr1e-3`") from None
            continue
        if suffix not in SUFFIXES:
            raise ValueError(f"setting {setting!r}: suffix {suffix!r} is unknown; choose from: "
                             f"{', '.join(SUFFIXES)}, or lr<rate>")
        overrides.update(SUFFIXES[suffix])
    return overrides


def run(setting, seed, minutes, data, eval_epochs):
    model_dir = os.path.join(RUNS, "residual_sweep", f"{setting}_seed{seed}")
    shutil.rmtree(model_dir, ignore_errors=True)  # a fresh run, never a resumed one
    base = dict(
        model="bytenet_selu", data=data, model_dir=model_dir, export=False, batch_size=BATCH,
        train_steps=1_000_000, **BEFORE_TEXT_PRESET,
        time_budget_seconds=60 * minutes, learning_rate=1e-3,
        warmup_steps=50, decay_learning_rate=True, dropout_rate=None,
        eval_every=eval_epochs * math.ceil(PAIRS / BATCH),
        valid_size=PAIRS, log_every=math.ceil(PAIRS / BATCH), checkpoint_every=1_000_000,
        shuffle_buffer=PAIRS, max_length=500, progress=False, seed=seed)
    config = TrainConfig(**dict(base, **setting_overrides(setting)))
    results = trainer.train_and_evaluate(config)
    curve = read_metrics(model_dir)
    passed = [row for row in curve if row.get("valid_bleu", 0) >= 90]
    losses = [row["loss"] for row in curve if "loss" in row]
    seconds = [row["train_seconds"] for row in curve
               if passed and "train_seconds" in row and row["step"] >= passed[0]["step"]]
    return {"setting": setting, "seed": seed, "overrides": setting_overrides(setting),
            "steps": results["step"], "final_bleu": results["valid"]["bleu"],
            "final_chrf": results["valid"]["chrf"],
            "first_seconds_at_bleu_90": round(seconds[0], 1) if seconds else None,
            "best_bleu": max([row.get("valid_bleu", 0) for row in curve] + [0]),
            "final_loss": round(sum(losses[-3:]) / max(len(losses[-3:]), 1), 4),
            "max_gradient_norm": max([row.get("gradient_norm", 0) for row in curve] + [0]),
            "curve": curve}


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--settings", default=",".join(["gate", *WEIGHTS]))
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--eval_epochs", type=int, default=5,
                        help="epochs between BLEU validations (each costs wall-clock time)")
    parser.add_argument("--name", default="residual_sweep",
                        help="results file docs/results/<name>.json")
    args = parser.parse_args()
    settings = args.settings.split(",")
    for setting in settings:
        setting_overrides(setting)  # fail before any training on a bad name
    source, target = write_pairs(os.path.join(RUNS, "memorize", "data"))
    data = datasets.DataSpec(dataset="text", source_file=source, target_file=target,
                             valid_source_file=source, valid_target_file=target)
    runs = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for setting in settings:
            runs.append(run(setting, seed, args.minutes, data, args.eval_epochs))
            row = runs[-1]
            print(f"{setting} seed {seed}: final BLEU {row['final_bleu']:.1f}, best "
                  f"{row['best_bleu']:.1f}, BLEU>=90 at {row['first_seconds_at_bleu_90']} s, "
                  f"loss {row['final_loss']:.3f}, steps {row['steps']}",
                  flush=True)
    command = (f"python experiments/residual_sweep.py --minutes={args.minutes:g} "
               f"--settings={args.settings} --seeds={args.seeds} "
               f"--eval_epochs={args.eval_epochs} --name={args.name}")
    print(write_results(args.name, {"command": command, "pairs": PAIRS, "batch_size": BATCH,
                                    "minutes": args.minutes, "runs": runs}))


if __name__ == "__main__":
    main()
