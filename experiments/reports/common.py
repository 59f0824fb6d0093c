"""What every renderer of docs/results.md uses: loading results files, smoothing, provenance."""

import json
import os

from experiments.common import RESULTS, ROOT

DOCS = os.path.join(ROOT, "docs")


def load(name):
    path = os.path.join(RESULTS, f"{name}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def ema(values, weight=0.8):
    smoothed, last = [], None
    for value in values:
        last = value if last is None else weight * last + (1 - weight) * value
        smoothed.append(last)
    return smoothed


def provenance(result, seeds=None):
    """The command and commit of a results file, and its seeds when the table does not show them."""
    line = f"Command: `{result['command']}` at commit `{result['commit']}`."
    return line + (f" Seeds: {seeds} (one run per row)." if seeds is not None else "")


def seconds_text(value):
    return "never" if value is None else f"{value:.0f}"


def command_flags(command):
    """The words of a recorded command, without its model_dir (which names the run)."""
    return [word for word in command.split() if not word.startswith("--model_dir=")]


def results_named(prefix):
    """docs/results/<prefix>*.json, by file name without `.json`, sorted."""
    names = sorted(f[:-len(".json")] for f in os.listdir(RESULTS)
                   if f.startswith(prefix) and f.endswith(".json"))
    return {name: load(name) for name in names}


def mean(values):
    return sum(values) / len(values)
