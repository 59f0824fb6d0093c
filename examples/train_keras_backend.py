"""Train a zoo model with `model.fit` on any Keras backend: JAX, PyTorch or TensorFlow.

    KERAS_BACKEND=jax python examples/train_keras_backend.py \\
        --source_file=train.de --target_file=train.en --epochs=1 --precision=mixed_bfloat16

No TensorFlow is needed: the model is written in `keras.ops`, and the input is plain NumPy.
Pairs are read line by line (split on b"\\n" only), framed as `bytes + EOS` sources and `BOS +
bytes` decoder inputs, sorted into buckets of similar length and padded to a multiple of
`--bucket` bytes, so that a compiling backend (JAX, XLA) sees a few shapes only. Pairs with a
side longer than `--max_length - 1` bytes are left out and counted. The loss is the
cross-entropy over real bytes (PAD is ignored). The weights go to `--weights`
(`.weights.h5`), which loads under every backend, and into `bytenet-train`'s SavedModel export
on TensorFlow with `bytenet_tf.export`.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras  # noqa: E402

import bytenet_tf  # noqa: E402
from pipelines import byte_codec  # noqa: E402


def read_pairs(source_file, target_file, max_length):
    """Line-aligned pairs (bytes) whose sides fit `max_length - 1` bytes, and how many did not."""
    with open(source_file, "rb") as f:
        sources = f.read().split(b"\n")
    with open(target_file, "rb") as f:
        targets = f.read().split(b"\n")
    if sources and sources[-1] == b"" and targets and targets[-1] == b"":
        sources, targets = sources[:-1], targets[:-1]
    if len(sources) != len(targets):
        raise ValueError(f"{source_file} has {len(sources)} lines and {target_file} "
                         f"{len(targets)}: the files must be line-aligned.")
    kept = [(s, t) for s, t in zip(sources, targets)
            if len(s) < max_length and len(t) < max_length]
    return kept, len(sources) - len(kept)


class Batches(keras.utils.PyDataset):
    """Length-bucketed batches of `({"source", "target"}, labels)` int32 arrays, shuffled by
    `seed` once per epoch."""

    def __init__(self, pairs, batch_size, bucket, seed=0):
        super().__init__()
        self.pairs, self.batch_size, self.bucket = pairs, batch_size, bucket
        self.rng = np.random.default_rng(seed)
        self.on_epoch_end()

    def on_epoch_end(self):
        order = self.rng.permutation(len(self.pairs))
        # Sort within windows of 100 batches by length, then shuffle the batches.
        window = 100 * self.batch_size
        chunks = [sorted(order[i:i + window], key=lambda k: len(self.pairs[k][0]))
                  for i in range(0, len(order), window)]
        flat = [index for chunk in chunks for index in chunk]
        self.batches = [flat[i:i + self.batch_size] for i in range(0, len(flat), self.batch_size)]
        self.rng.shuffle(self.batches)

    def __len__(self):
        return len(self.batches)

    def _pad(self, rows):
        width = -(-max(rows.shape[1], 1) // self.bucket) * self.bucket
        return np.pad(rows, [[0, 0], [0, width - rows.shape[1]]],
                      constant_values=byte_codec.PAD_ID)

    def __getitem__(self, index):
        pairs = [self.pairs[i] for i in self.batches[index]]
        source, target, labels = byte_codec.frame_batch([s for s, _ in pairs],
                                                        [t for _, t in pairs])
        return {"source": self._pad(source), "target": self._pad(target)}, self._pad(labels)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--source_file", required=True)
    parser.add_argument("--target_file", required=True)
    parser.add_argument("--model", default="bytenet_selu", choices=bytenet_tf.list_models())
    parser.add_argument("--hidden_size", type=int, default=400)
    parser.add_argument("--num_stacks", type=int, default=3)
    parser.add_argument("--precision", default="float32",
                        choices=["float32", "mixed_bfloat16", "mixed_float16"])
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--max_length", type=int, default=201)
    parser.add_argument("--bucket", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--steps_per_epoch", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--weights", default="bytenet.weights.h5")
    args = parser.parse_args()

    keras.utils.set_random_seed(args.seed)
    pairs, skipped = read_pairs(args.source_file, args.target_file, args.max_length)
    print(f"Keras backend {keras.backend.backend()}; {len(pairs)} pairs, {skipped} longer than "
          f"{args.max_length - 1} bytes left out")
    model = bytenet_tf.build_model(args.model, hidden_size=args.hidden_size,
                                   num_stacks=args.num_stacks, dtype=args.precision,
                                   max_length=args.max_length, seed=args.seed)
    optimizer = keras.optimizers.Adam(args.learning_rate, clipnorm=1.0)
    if args.precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True, ignore_class=byte_codec.PAD_ID))
    model.fit(Batches(pairs, args.batch_size, args.bucket, args.seed), epochs=args.epochs,
              steps_per_epoch=args.steps_per_epoch)
    model.save_weights(args.weights)
    print(f"Weights: {args.weights}")


if __name__ == "__main__":
    main()
