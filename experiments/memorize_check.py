"""The zoo-default check of SELU ByteNet: memorize 64 unseen newstest pairs in 10 minutes.

    python experiments/memorize_check.py --label=default
    python experiments/memorize_check.py --label=w1 -- --branch_weight=1

Draws 64 pairs of newstest2017 (never used while developing: the sweeps and experiments train on
newstest2013) whose German and English lines are both at most 190 bytes, with
`numpy.random.default_rng(2017)`, and writes them to runs/experiments/memorize_check/data. Then
runs the binary as a user would (as `python -m bytenet_tf.train`, the contract's other name
for bytenet-train, so that the code of this tree runs even from a frozen copy), with the flags
of the check:

    bytenet-train --model=bytenet_selu --dataset=text --learning_rate=1e-3 --warmup_steps=50
        --batch_size=16 --max_length=200

plus the data files (training and validation are the same 64 pairs), a 600-second training
budget (validation included), BLEU on the 64 pairs every 10 epochs, no export. Arguments after
`--` go to bytenet-train as well (e.g. `--branch_weight=1`, `--seed=1`). Writes
docs/results/memorize_check_<label>.json: the first training second at which BLEU reached 90,
the final BLEU, the precision and CPU (seconds hold for that CPU kind) and the logged curve.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from experiments import common  # noqa: E402
from experiments.common import ROOT, RUNS, read_metrics, write_results  # noqa: E402
from pipelines.text import read_parallel_lines  # noqa: E402
from shared_data import deen  # noqa: E402

PAIRS = 64
MAX_BYTES = 190
CHECK_FLAGS = ["--model=bytenet_selu", "--dataset=text", "--learning_rate=1e-3",
               "--warmup_steps=50", "--batch_size=16", "--max_length=200"]


def write_pairs(folder, test_set="newstest2017", seed=2017):
    """Writes the drawn pairs as `pairs.de` / `pairs.en` in `folder`; returns both paths."""
    sources, targets, _ = read_parallel_lines(deen(f"{test_set}.de"), deen(f"{test_set}.en"))
    short = [i for i, (s, t) in enumerate(zip(sources, targets))
             if 0 < len(s) <= MAX_BYTES and 0 < len(t) <= MAX_BYTES]
    chosen = sorted(np.random.default_rng(seed).choice(short, PAIRS, replace=False))
    return common.write_pairs(folder, [sources[i] for i in chosen], [targets[i] for i in chosen])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--label", required=True, help="results file memorize_check_<label>.json")
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("extra", nargs="*", help="more bytenet-train flags, after --")
    args = parser.parse_args()
    source, target = write_pairs(os.path.join(RUNS, "memorize_check", "data"))
    model_dir = os.path.join(RUNS, "memorize_check", args.label)
    shutil.rmtree(model_dir, ignore_errors=True)  # a fresh run, never a resumed one
    command = [sys.executable, "-m", "bytenet_tf.train", *CHECK_FLAGS, f"--source_file={source}",
               f"--target_file={target}", f"--valid_source_file={source}",
               f"--valid_target_file={target}", f"--time_budget_seconds={args.seconds:g}",
               # The schedule and weights of the recorded runs (before the text preset).
               "--schedule=rsqrt", "--select_by=last", "--average_last=0", "--beam_size=1",
               f"--eval_every={10 * PAIRS // 16}", f"--valid_size={PAIRS}", "--log_every=4",
               "--export=false", "--progress=false", f"--model_dir={model_dir}", *args.extra]
    print(" ".join(command), flush=True)
    subprocess.run(command, check=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get(
                       "PYTHONPATH", "")))
    curve = read_metrics(model_dir)
    with open(os.path.join(model_dir, "results.json")) as f:
        results = json.load(f)
    validations = [row for row in curve if "valid_bleu" in row]
    seconds = {row["step"]: row["train_seconds"] for row in curve if "train_seconds" in row}
    passed = [row for row in validations if row["valid_bleu"] >= 90]
    summary = {
        "label": args.label, "pairs": PAIRS,
        "command": " ".join(["bytenet-train", *command[3:]]).replace(ROOT + os.sep, ""),
        "steps": results["step"], "final_bleu": results["valid"]["bleu"],
        "final_chrf": results["valid"]["chrf"],
        "best_bleu": max([row["valid_bleu"] for row in validations] + [0]),
        "first_seconds_at_bleu_90": seconds.get(passed[0]["step"]) if passed else None,
        "passed": bool(passed) and results["valid"]["bleu"] >= 90,
        "precision": results["precision"], "cpu": common.cpu_name(), "curve": curve}
    print(f"{args.label}: final BLEU {summary['final_bleu']:.1f}, best {summary['best_bleu']:.1f}, "
          f"first >= 90 at {summary['first_seconds_at_bleu_90']} s, steps {summary['steps']}")
    print(write_results(f"memorize_check_{args.label}", summary))


if __name__ == "__main__":
    main()
