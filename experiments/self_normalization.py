"""Self-normalization as the theory states it, with an attraction test.

    python experiments/self_normalization.py [--steps=150] [--scales=0.1,1,3] [--seed=0]

SELU's fixed-point argument is about each unit's pre-activation (the input of each selu), not
about the pooled residual stream. For `bytenet_selu` at its zoo defaults (hidden 400, 3 stacks)
this measures, on the 100 memorization pairs of memorize.py (the first 100 of newstest2013):

- per unit (channel) of every selu input in every residual branch, its mean and variance over
  real positions (`bytenet_tf.analysis.unit_statistics`), summarized by the 5%, 50% and 95%
  quantiles over the units, at initialization and after training;
- an attraction test: both embeddings scaled by 0.1 and by 3 at initialization (so the stream
  starts far from variance 1), then the same statistics through depth, before and after
  training;
- how far each block's kernels moved (`weight_change`, relative Frobenius norm), so that
  statistics that stay put cannot come from weights that never moved.

Each scale trains `--steps` steps with the memorization settings of the residual sweep (batch
16, Adam at 1e-3 after 50 warm-up steps then 1/sqrt decay, zoo dropout, precision auto).
Writes docs/results/self_normalization.json.
"""

import argparse
import math
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bytenet_tf  # noqa: E402,F401  (before TensorFlow: the binaries' oneDNN setting)
import tensorflow as tf  # noqa: E402

from bytenet_tf import analysis, zoo  # noqa: E402
from bytenet_tf.training import checkpoints, trainer  # noqa: E402
from bytenet_tf.training.config import TrainConfig  # noqa: E402
from experiments.common import BEFORE_TEXT_PRESET, RUNS, write_results  # noqa: E402
from experiments.depth_statistics import batch  # noqa: E402
from experiments.memorize import write_pairs  # noqa: E402
from pipelines import datasets  # noqa: E402

PAIRS = 100
BATCH = 16


def scale_embeddings(scale, initial):
    """A `prepare_model` for `train_and_evaluate`: scales both embeddings of the fresh model by
    `scale`, and keeps the model's statistics and kernels at that moment in `initial`."""
    def prepare(model):
        for embedding in (model.source_embedding, model.target_embedding):
            embedding.embeddings.assign(embedding.embeddings * scale)
        initial["kernels"] = analysis.kernel_values(model)
        initial["statistics"] = analysis.unit_statistics(model, *initial["batch"])

    return prepare


def summarize(rows):
    """Per side and activation: the quantiles over units of the deepest block, and extremes."""
    out = {}
    for side in ("encoder", "decoder"):
        for activation in (0, 1, 2):
            chosen = [r for r in rows if r["side"] == side and r["activation"] == activation]
            if not chosen:
                continue
            out[f"{side}_act{activation}"] = {
                "first_block_variance_q": chosen[0]["variance_q"],
                "last_block_variance_q": chosen[-1]["variance_q"],
                "last_block_mean_q": chosen[-1]["mean_q"],
                "max_abs_unit_mean": max(r["max_abs_mean"] for r in chosen),
                "unit_variance_range": [min(r["min_variance"] for r in chosen),
                                        max(r["max_variance"] for r in chosen)]}
    return out


def run(scale, steps, seed, data, source_target):
    model_dir = os.path.join(RUNS, "self_normalization", f"scale{scale:g}_seed{seed}")
    shutil.rmtree(model_dir, ignore_errors=True)
    initial = {"batch": source_target}
    results = trainer.train_and_evaluate(TrainConfig(
        model="bytenet_selu", data=data, model_dir=model_dir, export=False,
        batch_size=BATCH, train_steps=steps, learning_rate=1e-3, warmup_steps=50,
        decay_learning_rate=True, eval_every=0, valid_size=PAIRS,
        log_every=math.ceil(PAIRS / BATCH), checkpoint_every=100_000,
        shuffle_buffer=PAIRS, max_length=500, progress=False, seed=seed,
        **BEFORE_TEXT_PRESET), prepare_model=scale_embeddings(scale, initial))
    trained = zoo.build_model("bytenet_selu", seed=seed, max_length=500)
    checkpoints.restore_model(trained, tf.train.latest_checkpoint(model_dir))
    after = analysis.unit_statistics(trained, *source_target)
    change = analysis.weight_change(initial["kernels"], analysis.kernel_values(trained))
    row = {"scale": scale, "seed": seed, "steps": results["step"],
           "train_loss": results["train_loss"], "valid_bleu": results["valid"]["bleu"],
           "initial": initial["statistics"], "trained": after,
           "initial_summary": summarize(initial["statistics"]),
           "trained_summary": summarize(after), "kernel_change": change}
    encoder_change = [v for k, v in change.items() if "encoder" in k]
    print(f"scale {scale:g}: loss {results['train_loss']:.3f}, BLEU {row['valid_bleu']:.1f}, "
          f"encoder kernel change {min(encoder_change):.3f}-{max(encoder_change):.3f}",
          flush=True)
    for phase in ("initial_summary", "trained_summary"):
        for key, value in row[phase].items():
            print(f"  {phase[:-8]:8s} {key}: last-block unit variance q05/50/95 "
                  f"{', '.join(f'{v:.2f}' for v in value['last_block_variance_q'])}; "
                  f"max |unit mean| {value['max_abs_unit_mean']:.2f}", flush=True)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--scales", default="0.1,1,3")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    folder = os.path.join(RUNS, "memorize", "data")
    source, target = write_pairs(folder)
    data = datasets.DataSpec(dataset="text", source_file=source, target_file=target,
                             valid_source_file=source, valid_target_file=target)
    source_target = batch(folder)
    runs = [run(float(scale), args.steps, args.seed, data, source_target)
            for scale in args.scales.split(",")]
    command = (f"python experiments/self_normalization.py --steps={args.steps} "
               f"--scales={args.scales} --seed={args.seed}")
    print(write_results("self_normalization", {"command": command, "runs": runs}))


if __name__ == "__main__":
    main()
