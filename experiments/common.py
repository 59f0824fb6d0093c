"""Helpers shared by the experiment scripts: paths, results files, and the commit that ran."""

import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "docs", "results")
RUNS = os.path.join(ROOT, "runs", "experiments")

# The training settings that `dataset=text` had before it got the recipe preset:
# the earlier experiments pass them, so that their recorded commands still mean what they did.
# The model of experiments/residual_text.py, and of its results files written before `--model`.
RESIDUAL_TEXT_MODEL = "bytenet_selu"
BEFORE_TEXT_PRESET = dict(schedule="rsqrt", select_by="last", average_last=0, beam_size=1,
                          train_max_length=500)


def commit():
    """The current commit, with `+dirty` when tracked files outside docs/ have changed.

    The experiments write their own results under docs/; those changes do not make a run dirty.
    """
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs"],
                           cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return head + ("+dirty" if dirty else "")


def write_results(name, results, commit_text=None):
    """Writes docs/results/<name>.json with the command's commit (or `commit_text`)."""
    os.makedirs(RESULTS, exist_ok=True)
    results = dict(results, commit=commit_text or commit())
    path = os.path.join(RESULTS, f"{name}.json")
    with open(path, "w") as f:
        json.dump(results, f, indent=2, default=str)
    return path


def write_pairs(folder, sources, targets):
    """Writes line-aligned `pairs.de` / `pairs.en` (lists of bytes) in `folder`; returns both
    paths."""
    os.makedirs(folder, exist_ok=True)
    paths = os.path.join(folder, "pairs.de"), os.path.join(folder, "pairs.en")
    for path, lines in zip(paths, (sources, targets)):
        with open(path, "wb") as f:
            f.write(b"".join(line + b"\n" for line in lines))
    return paths


def read_metrics(model_dir):
    """The JSON lines of `model_dir/metrics.jsonl` as a list of dicts."""
    path = os.path.join(model_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def mean_last_loss(curve, logs=10):
    """Mean training loss of the last `logs` logged rows of a `read_metrics` curve (nan if none)."""
    losses = [row["loss"] for row in curve if "loss" in row][-logs:]
    return sum(losses) / len(losses) if losses else float("nan")


def cpu_name():
    """The CPU's model name and family/model numbers from /proc/cpuinfo, or "unknown"."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return "unknown"
    return (f"{fields.get('model name', 'unknown')} (family {fields.get('cpu family', '?')}, "
            f"model {fields.get('model', '?')})")


def sweep_model(results):
    """The zoo model of a residual_text results file (RESIDUAL_TEXT_MODEL when it names none)."""
    return results.get("model", RESIDUAL_TEXT_MODEL)
