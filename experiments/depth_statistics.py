"""Experiment 3: each block's output mean and variance, at initialization and after experiment 2.

    python experiments/depth_statistics.py      (after python experiments/memorize.py)

For bytenet_selu, bytenet_small without normalization and bytenet_small with layer norm, on the
100 memorized newstest2013 pairs: the statistics of a fresh model (same seed as experiment 2)
and of experiment 2's final checkpoint. Writes docs/results/depth_statistics.json.
"""

import json
import os
import sys

import tensorflow as tf

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bytenet_tf import zoo  # noqa: E402
from bytenet_tf.analysis import block_statistics  # noqa: E402
from experiments.common import RUNS, write_results  # noqa: E402
from pipelines import byte_codec  # noqa: E402
from pipelines.text import read_parallel_lines  # noqa: E402

VARIANTS = {"selu": "bytenet_selu", "none": "bytenet_small", "layer": "bytenet_small"}


def batch(folder):
    sources, targets, _ = read_parallel_lines(os.path.join(folder, "pairs.de"),
                                              os.path.join(folder, "pairs.en"))
    source = tf.ragged.constant([byte_codec.encode_python(s) + [byte_codec.EOS_ID]
                                 for s in sources]).to_tensor()
    target = tf.ragged.constant([[byte_codec.BOS_ID] + byte_codec.encode_python(t)
                                 for t in targets]).to_tensor()
    return source, target


def model_for(label, model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        stored = json.load(f)["model_config"]
    model = zoo.build_model(VARIANTS[label], hidden_size=stored["hidden_size"],
                            num_stacks=stored["num_stacks"], normalization=stored["normalization"],
                            dropout_rate=stored["dropout_rate"], seed=stored["seed"],
                            max_length=stored["max_length"])
    return model


def main():
    folder = os.path.join(RUNS, "memorize")
    source, target = batch(os.path.join(folder, "data"))
    results = {}
    for label in VARIANTS:
        model_dir = os.path.join(folder, label)
        fresh = model_for(label, model_dir)
        initial = block_statistics(fresh, source, target)
        trained = model_for(label, model_dir)
        tf.train.Checkpoint(model=trained).restore(
            tf.train.latest_checkpoint(model_dir)).expect_partial()
        results[label] = {"initial": initial, "trained": block_statistics(trained, source, target)}
        print(label, "initial variance range",
              (min(r["variance"] for r in initial), max(r["variance"] for r in initial)),
              "trained", (min(r["variance"] for r in results[label]["trained"]),
                          max(r["variance"] for r in results[label]["trained"])), flush=True)
    print(write_results("depth_statistics", {"command": "python experiments/depth_statistics.py",
                                             "variants": results}))


if __name__ == "__main__":
    main()
