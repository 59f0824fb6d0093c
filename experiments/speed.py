"""Speed: training speed of every zoo model at one size, float32 and mixed_bfloat16.

    python experiments/speed.py

Runs benchmarks/train_throughput.py (the binary's training step, median of 10 steps) for each
zoo model at hidden 256, 2 stacks, batch 16 x 128 bytes, in a fresh process each. The whole
sweep runs `--passes` times (default 2), and each row reports its fastest pass: on this shared
machine one pass alone moved some rows by 50%. Every pass's step time is kept in the JSON.
Writes docs/results/speed.json.
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bytenet_tf import list_models  # noqa: E402
from experiments.common import ROOT, write_results  # noqa: E402

SIZE = ["--hidden_size=256", "--num_stacks=2", "--batch_size=16", "--length=128", "--steps=10"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--passes", type=int, default=2)
    args = parser.parse_args()
    runs = {}
    for sweep in range(args.passes):
        for model in list_models():
            for precision in ("float32", "mixed_bfloat16"):
                completed = subprocess.run(
                    [sys.executable, os.path.join(ROOT, "benchmarks", "train_throughput.py"),
                     f"--model={model}", f"--precision={precision}", *SIZE],
                    capture_output=True, text=True, check=True,
                    env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
                row = json.loads(completed.stdout.strip().splitlines()[-1])
                runs.setdefault((model, precision), []).append(row)
                print(f"pass {sweep + 1}: {model:20s} {precision:15s} "
                      f"{row['target_bytes_per_s']:9.0f} target bytes/s "
                      f"{row['seconds_per_step'] * 1000:7.1f} ms/step", flush=True)
    rows = []
    for passes in runs.values():
        best = dict(min(passes, key=lambda row: row["seconds_per_step"]))
        best["seconds_per_step_per_pass"] = [row["seconds_per_step"] for row in passes]
        rows.append(best)
    print(write_results("speed", {"command": f"python experiments/speed.py --passes={args.passes}",
                                  "rows": rows}))


if __name__ == "__main__":
    main()
