"""The zoo under one Keras backend, with TensorFlow unimportable: run by tests/test_backends.py.

    KERAS_BACKEND=jax python tests/helpers/backend_checks.py FOLDER [PART COUNT]

FOLDER holds what the TensorFlow side wrote: `inputs.npz` (source, target, labels) and, per zoo
model, `<name>.weights.h5`. Checks part PART (from 0) of COUNT equal shares of the zoo (default:
all of it, part 0 of 1), so that shares can run side by side. Writes
`FOLDER/<backend>.<PART>-of-<COUNT>.json`, and per model the logits of those weights
(`<name>.<backend>.logits.npy`) and the weights that seed 0 draws (`<name>.<backend>.seeded.npz`).
"""

import json
import os
import sys

# As if TensorFlow were not installed: `import tensorflow` raises ImportError.
sys.modules["tensorflow"] = None
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras.ops import convert_to_numpy as to_numpy  # noqa: E402

import bytenet_tf  # noqa: E402
from pipelines import byte_codec  # noqa: E402

SMALL = dict(hidden_size=16, num_stacks=1)


def causality(model):
    """Changing target byte t changes no logit before t, and the source changes logit 0."""
    source = np.array([[10, 11, 12, byte_codec.EOS_ID]], np.int32)
    target = np.array([[byte_codec.BOS_ID, 20, 21, 22, 23, 24]], np.int32)
    base = to_numpy(model({"source": source, "target": target}))
    leaks = []
    for t in range(1, target.shape[1]):
        changed = target.copy()
        changed[0, t] = 99
        logits = to_numpy(model({"source": source, "target": changed}))
        leaks.append(float(np.abs(logits[:, :t] - base[:, :t]).max()))
    other = np.array([[30, 31, 32, byte_codec.EOS_ID]], np.int32)
    source_effect = float(np.abs(to_numpy(model({"source": other, "target": target}))[:, 0]
                                 - base[:, 0]).max())
    return {"largest_leak": max(leaks), "source_effect": source_effect}


def receptive_field(seed=0):
    """The decoder positions whose logits change when target byte 0 changes a lot."""
    model = bytenet_tf.build_model("bytenet_selu", hidden_size=8, num_stacks=2, dropout_rate=0.0,
                                   seed=seed)
    length = model.receptive_field + 10
    source = np.array([[5, byte_codec.EOS_ID]], np.int32)
    target = np.full((1, length), 40, np.int32)
    target[0, 0] = 41
    base = to_numpy(model({"source": source, "target": target})).astype(np.float64)
    table = to_numpy(model.target_embedding.embeddings).copy()
    table[41] = 100.0 * np.random.default_rng(seed).standard_normal(table.shape[1])
    model.target_embedding.embeddings.assign(table)
    moved = to_numpy(model({"source": source, "target": target})).astype(np.float64)
    touched = np.nonzero(np.abs(moved - base)[0].max(axis=-1) > 0)[0]
    return {"analytic": model.receptive_field, "touched": touched.tolist()}


def fit(name):
    """`model.fit` on reversing short random words: the first and last epoch's loss."""
    rng = np.random.default_rng(0)
    words = [bytes(rng.integers(97, 123, rng.integers(1, 6))) for _ in range(64)]
    source, target, labels = byte_codec.frame_batch(words, [w[::-1] for w in words])
    model = bytenet_tf.build_model(name, seed=0, **SMALL)
    model.compile(optimizer=keras.optimizers.Adam(3e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(
                      from_logits=True, ignore_class=byte_codec.PAD_ID))
    history = model.fit({"source": source, "target": target}, labels, batch_size=16, epochs=8,
                        verbose=0)
    return history.history["loss"][0], history.history["loss"][-1]


def main(folder, part=0, count=1):
    backend = keras.backend.backend()
    data = np.load(os.path.join(folder, "inputs.npz"))
    inputs = {"source": data["source"], "target": data["target"]}
    results = {"backend": backend, "models": {}}
    for name in bytenet_tf.list_models()[part::count]:
        # Another seed than the saved weights', so only the file can make the logits equal.
        model = bytenet_tf.build_model(name, seed=7, **SMALL)
        model(inputs)
        model.load_weights(os.path.join(folder, f"{name}.weights.h5"))
        np.save(os.path.join(folder, f"{name}.{backend}.logits.npy"), to_numpy(model(inputs)))
        seeded = bytenet_tf.build_model(name, seed=0, **SMALL)
        seeded(inputs)
        np.savez(os.path.join(folder, f"{name}.{backend}.seeded.npz"),
                 **{w.path: to_numpy(w) for w in seeded.weights})
        first, last = fit(name)
        results["models"][name] = dict(causality(seeded), first_loss=first, last_loss=last)
    if part == 0:
        results["receptive_field"] = receptive_field()
    results["ops_policy"] = bytenet_tf.ops.resolve_policy("auto")
    try:
        bytenet_tf.ops.get("cpu")
        results["cpu_policy_error"] = None
    except ValueError as error:
        results["cpu_policy_error"] = str(error)
    results["tensorflow_modules"] = sorted(m for m in sys.modules
                                           if m.split(".")[0] == "tensorflow"
                                           and sys.modules[m] is not None)
    with open(os.path.join(folder, f"{backend}.{part}-of-{count}.json"), "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:4]))
