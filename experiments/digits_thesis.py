"""Digits: the thesis's digits task as the thesis ran and scored it.

    python experiments/digits_thesis.py [--seeds=0,1,2] [--models=bytenet_thesis,...]

Data: `--digits_config=thesis`, the thesis's own draws (`RandomState(10)` for 128 training
numbers and `RandomState(11)` for 128 test numbers of 2-3 digits, with replacement), so 28 of the
128 test items are also training items. Models: the zoo's `bytenet_thesis` and
`bytenet_selu_thesis` (the thesis code's `v1` and `v1-selu`; see `bytenet_tf/zoo.py`) at the
thesis's digits size, hidden (`latent_dim`) 20 and 3 stacks, as in its
`code/script/bytenet*_synthetic_digits_train.py`: batch 16, 300 epochs (2400 steps), Adam at a
constant 1e-3 (beta_2 0.999), float32, no dropout.

Scored with the thesis's metric (`bytenet_tf.scoring.character_error_rate`: wrong greedy output
bytes over reference bytes plus EOS) and with exact match, on the training set, on all 128 test
items, and on the test items that are and are not training items. Writes
docs/results/digits_thesis.json.
"""

import argparse
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import bytenet_tf  # noqa: E402,F401  (before TensorFlow: the binaries' oneDNN setting)
import tensorflow as tf  # noqa: E402

from bytenet_tf import inference, scoring, zoo  # noqa: E402
from bytenet_tf.training import checkpoints, trainer  # noqa: E402
from bytenet_tf.training.config import TrainConfig  # noqa: E402
from experiments.common import RUNS, write_results  # noqa: E402
from pipelines import datasets, digits  # noqa: E402

MODELS = ("bytenet_thesis", "bytenet_selu_thesis")
SIZE = dict(hidden_size=20, num_stacks=3, max_length=64)
OPTIONS = dict(SIZE, batch_size=16, train_steps=300 * 8, learning_rate=1e-3, warmup_steps=1,
               decay_learning_rate=False, valid_size=128, checkpoint_every=100_000,
               eval_every=0, log_every=80, bucketing=False, shuffle_buffer=128,
               precision="float32", dropout_rate=0.0, export=False, progress=False)


def scores(translate, pairs):
    """Per-character error and exact match of `translate` on `(source, target)` pairs."""
    if not pairs:
        return None
    outputs = translate([source for source, _ in pairs])
    references = [target for _, target in pairs]
    errors, positions = scoring.character_error_rate(outputs, references)
    exact = sum(o == r for o, r in zip(outputs, references)) / len(pairs)
    return {"items": len(pairs), "character_error": errors / positions,
            "exact_match": exact, "misclassification": 1.0 - exact}


def run(model, seed):
    started = time.time()
    model_dir = os.path.join(RUNS, "digits_thesis", f"{model}_seed{seed}")
    shutil.rmtree(model_dir, ignore_errors=True)
    results = trainer.train_and_evaluate(TrainConfig(
        model=model, data=datasets.DataSpec(dataset="digits", digits_config="thesis"),
        model_dir=model_dir, seed=seed, **OPTIONS))
    trained = zoo.build_model(model, seed=seed, **SIZE)
    checkpoints.restore_model(trained, tf.train.latest_checkpoint(model_dir))
    translate = inference.Translator(trained)
    train, test = digits.digit_pairs("thesis")
    seen = set(train)
    row = {"model": model, "seed": seed, "steps": results["step"],
           "train_loss": results["train_loss"], "seconds": round(time.time() - started, 1),
           "train": scores(translate, train), "test": scores(translate, test),
           "test_overlap": scores(translate, [p for p in test if p in seen]),
           "test_clean": scores(translate, [p for p in test if p not in seen])}
    print(f"{model} seed {seed}: character error test {row['test']['character_error']:.3f} "
          f"(overlap {row['test_overlap']['character_error']:.3f}, clean "
          f"{row['test_clean']['character_error']:.3f}), exact match test "
          f"{row['test']['exact_match']:.3f}, train {row['train']['exact_match']:.3f}, "
          f"loss {row['train_loss']:.4f}, {row['seconds']:.0f} s", flush=True)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    runs = [run(model, int(seed)) for model in args.models.split(",")
            for seed in args.seeds.split(",")]
    command = (f"python experiments/digits_thesis.py --seeds={args.seeds} "
               f"--models={args.models}")
    print(write_results("digits_thesis", {"command": command, "options": OPTIONS,
                                          "runs": runs}))


if __name__ == "__main__":
    main()
