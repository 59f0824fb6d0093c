"""Self-normalization through depth: each block's output mean and variance, at initialization
and after memorize.py's training.

    python experiments/depth_statistics.py      (after python experiments/memorize.py)

For bytenet_selu (branch weight 1 and 0.3), bytenet_small without normalization and with layer
norm, on the 100 memorized newstest2013 pairs: the statistics of a fresh model (same seed and
settings as memorize.py) and, where memorize.py ran that variant, of its final checkpoint.
Writes docs/results/depth_statistics.json.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bytenet_tf  # noqa: E402,F401  (before TensorFlow: the binaries' oneDNN setting)
import tensorflow as tf  # noqa: E402

from bytenet_tf import zoo  # noqa: E402
from bytenet_tf.analysis import block_statistics  # noqa: E402
from bytenet_tf.training import checkpoints  # noqa: E402
from experiments.common import RUNS, write_results  # noqa: E402
from experiments.memorize import VARIANTS  # noqa: E402
from pipelines import byte_codec  # noqa: E402
from pipelines.text import read_parallel_lines  # noqa: E402

LABELS = ("selu", "selu_branch0.3", "none", "layer")


def batch(folder):
    sources, targets, _ = read_parallel_lines(os.path.join(folder, "pairs.de"),
                                              os.path.join(folder, "pairs.en"))
    source, target, _ = byte_codec.frame_batch(sources, targets)
    return tf.constant(source), tf.constant(target)


def model_for(label):
    """A fresh model with memorize.py's settings for `label` (seed 0, dropout 0)."""
    name, overrides = VARIANTS[label]
    return zoo.build_model(name, dropout_rate=0.0, seed=0, max_length=500, **overrides)


def main():
    folder = os.path.join(RUNS, "memorize")
    source, target = batch(os.path.join(folder, "data"))
    results = {}
    for label in LABELS:
        model_dir = os.path.join(folder, label)
        initial = block_statistics(model_for(label), source, target)
        results[label] = {"initial": initial, "trained": None}
        latest = tf.train.latest_checkpoint(model_dir) if os.path.isdir(model_dir) else None
        if latest:
            trained = model_for(label)
            checkpoints.restore_model(trained, latest)
            results[label]["trained"] = block_statistics(trained, source, target)
            results[label]["checkpoint"] = latest
        for phase in ("initial", "trained"):
            rows = results[label][phase]
            print(label, phase, "not run (no memorize.py checkpoint)" if rows is None else
                  (min(r["variance"] for r in rows), max(r["variance"] for r in rows)), flush=True)
    print(write_results("depth_statistics", {"command": "python experiments/depth_statistics.py",
                                             "variants": results}))


if __name__ == "__main__":
    main()
