"""The text recipe's levers at their real step counts, on an accelerator: held-out loss by step.

    KERAS_BACKEND=jax python experiments/lever_screen.py --data_dir=../shared/data/deen \\
        --setting=base --setting=smooth:label_smoothing=0.1 --setting=wide:hidden_size=512,steps=1900 \\
        --output_dir=runs/lever_screen

A 2-core CPU trains one 30-minute run of the text recipe per half hour (about 3,000 steps of 32
pairs at hidden 400 on a Zen 4 in bf16), so settings screened there were screened at 4 minutes.
On a GPU the same steps take about a minute, so each lever can be screened at the step count the
CPU's budget really holds. A setting is `name` or `name:key=value,...`; its keys:

    hidden_size, num_stacks, dropout_rate, source_blind, branch_weight   (the zoo model's)
    label_smoothing, learning_rate, warmup_steps, floor, batch_size, steps, seed, ema_decay

Each setting trains as `bytenet-train --dataset=text` does with the same values: `bytenet_selu`
from the zoo with the setting's overrides (seeded weights, the same on every backend); Keras's
Adam update (beta_2 0.999, epsilon 1e-7) at a peak rate of 2e-3 after 200 linear warm-up steps,
then a cosine decay that reaches 5% of the peak at the setting's last step; batches of 32 pairs
whose framed sides fit 201 ids; the mean label-smoothed cross-entropy per target byte as the
objective; mixed_bfloat16. The training pairs are `train.*` less the 500 pairs that
experiments/translator.py holds out (seed 13). Every `--eval_every` steps and at the end it
records the teacher-forced cross-entropy (unsmoothed, nats per target byte, EOS included, no
dropout) of the held-out pairs and of their Multi30k captions, for the weights and for their
exponential moving average (`bytenet_tf.training.ema`'s update, decay `ema_decay`).

What differs from bytenet-train: the batches. Here each epoch is shuffled by the seed, sorted by
length within windows of 100 batches, and each batch is padded to the first of `--lengths` that
holds it (a compiled step per length); bytenet-train buckets a 100,000-pair shuffle buffer with
tf.data. PAD is masked in the loss in both. The GPU's bf16 kernels also round differently from
the CPU's. So a screen ranks settings; the recipe's figures come from bytenet-train runs.

Several processes may share one accelerator and one `--output_dir`: each claims the next
unclaimed setting (an exclusive file in `output_dir/claims/`), so running N copies with the same
settings trains N settings at a time. Each setting's curve is rewritten to
`output_dir/<name>.json` after every evaluation, so a run stopped by `--deadline` (seconds since
the epoch) keeps what it measured, marked `"stopped_early": true`.
"""

import argparse
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from experiments.long_run import adam_update  # noqa: E402

RECIPE = dict(hidden_size=400, num_stacks=3, label_smoothing=0.0, learning_rate=2e-3,
              warmup_steps=200, floor=0.05, batch_size=32, steps=3000, seed=0, ema_decay=0.999)
MODEL_KEYS = ("hidden_size", "num_stacks", "dropout_rate", "source_blind", "branch_weight")
TRAIN_MAX_LENGTH = 200  # bytes per side, as the text preset's train_max_length
VALID_PAIRS, SPLIT_SEED = 500, 13  # experiments/translator.py's held-out split
CAPTIONS = b"multi30k"  # the prefix of the caption lines' origin in train.origin
ADAM = dict(adam_beta_1=0.9, adam_beta_2=0.999, adam_epsilon=1e-7)  # long_run.adam_update's keys


def parse_setting(text):
    """`name` or `name:key=value,...` -> `(name, {key: value})` over `RECIPE`'s values.

    Raises:
        ValueError: an unknown key or a value of the wrong type, naming both.
    """
    name, _, rest = text.partition(":")
    values = dict(RECIPE)
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        if key not in RECIPE and key not in MODEL_KEYS:
            raise ValueError(f"Unknown key {key!r} in setting {text!r}; known keys: "
                             f"{', '.join(sorted(set(RECIPE) | set(MODEL_KEYS)))}.")
        if key == "source_blind":
            values[key] = value.lower() in ("1", "true", "yes")
        elif key in ("hidden_size", "num_stacks", "warmup_steps", "batch_size", "steps", "seed"):
            values[key] = int(value)
        else:
            values[key] = float(value)
    if not name:
        raise ValueError(f"Setting {text!r} has no name; write name or name:key=value,...")
    return name, values


def read_lines(path):
    """The lines of `path`, split on b"\\n" only (as pipelines.text), without a trailing CR."""
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def load_data(data_dir):
    """`(train_pairs, valid_pairs, valid_is_caption)`: train.* split as experiments/translator.py
    splits it (500 pairs drawn with seed 13 held out), each side keeping the pairs whose sides
    fit the recipe's 200 bytes."""
    sources, targets = read_lines(f"{data_dir}/train.de"), read_lines(f"{data_dir}/train.en")
    origins = read_lines(f"{data_dir}/train.origin")
    if not len(sources) == len(targets) == len(origins):
        raise ValueError(f"train.de, train.en and train.origin in {data_dir} have "
                         f"{len(sources)}, {len(targets)} and {len(origins)} lines.")
    held = set(random.Random(SPLIT_SEED).sample(range(len(sources)), VALID_PAIRS))

    def fits(i):
        return 0 < len(sources[i]) <= TRAIN_MAX_LENGTH and 0 < len(targets[i]) <= TRAIN_MAX_LENGTH

    train = [(sources[i], targets[i]) for i in range(len(sources)) if i not in held and fits(i)]
    held = [i for i in sorted(held) if fits(i)]
    valid = [(sources[i], targets[i]) for i in held]
    captions = np.array([origins[i].startswith(CAPTIONS) for i in held])
    return train, valid, captions


def frame(pairs, length):
    """`({"source", "target"}, labels)` int32 `(len(pairs), length)` arrays, PAD-padded:
    `byte_codec.frame_batch` widened to `length`."""
    from pipelines import byte_codec

    source, target, labels = byte_codec.frame_batch([de for de, _ in pairs],
                                                    [en for _, en in pairs])

    def widen(ids):  # PAD_ID is 0
        return np.pad(ids, ((0, 0), (0, length - ids.shape[1])))

    return {"source": widen(source), "target": widen(target)}, widen(labels)


def length_of(pairs):
    return max(max(len(s), len(t)) for s, t in pairs) + 1


def batches(pairs, batch_size, lengths, seed):
    """Endless `(features, labels)` batches: each epoch shuffled by `seed`, sorted by length in
    windows of 100 batches, padded to the first of `lengths` that holds the batch."""
    rng = np.random.default_rng(seed)
    while True:
        order = rng.permutation(len(pairs))
        window = 100 * batch_size
        epoch = []
        for start in range(0, len(order), window):
            chunk = sorted(order[start:start + window],
                           key=lambda i: max(len(pairs[i][0]), len(pairs[i][1])))
            epoch += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
        for index in rng.permutation(len(epoch)):
            chosen = [pairs[i] for i in epoch[index]]
            need = length_of(chosen)
            yield frame(chosen, next(length for length in lengths if length >= need))


def learning_rate(step, values):
    """WarmupCosineDecay of bytenet_tf.training.schedule at `step` (counted from 0)."""
    warmup = min((step + 1.0) / values["warmup_steps"], 1.0)
    done = min((step + 1.0) / values["steps"], 1.0)
    cosine = 0.5 * (1.0 + math.cos(math.pi * done))
    return values["learning_rate"] * warmup * (values["floor"] + (1 - values["floor"]) * cosine)


def build(values):
    import keras

    from bytenet_tf import zoo

    overrides = {key: values[key] for key in MODEL_KEYS if key in values}
    keras.config.set_dtype_policy("mixed_bfloat16")
    return zoo.build_model("bytenet_selu", seed=values["seed"], **overrides)


def make_functions(model, values):
    """Jitted `train(state, features, labels, lr) -> (state, objective, loss, count)` and
    `evaluate(weights, non_trainable, features, labels) -> per-pair (summed nats, bytes)`."""
    import jax
    import jax.numpy as jnp

    smoothing = values["label_smoothing"]
    decay = values["ema_decay"]

    def scores(logits, labels):
        log_probs = jax.nn.log_softmax(logits.astype(jnp.float32))
        nll = -jnp.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
        mask = (labels != 0).astype(jnp.float32)
        uniform = -jnp.mean(log_probs, axis=-1)
        return nll * mask, uniform * mask, mask

    def objective(trainable, non_trainable, features, labels):
        logits, non_trainable = model.stateless_call(trainable, non_trainable, features,
                                                     training=True)
        nll, uniform, mask = scores(logits, labels)
        count = jnp.maximum(jnp.sum(mask), 1.0)
        plain = jnp.sum(nll) / count
        smoothed = (1.0 - smoothing) * plain + smoothing * jnp.sum(uniform) / count
        return smoothed, (non_trainable, plain, count)

    @jax.jit
    def train(state, features, labels, lr):
        trainable, non_trainable, m, v, average, t = state
        (smoothed, (non_trainable, plain, count)), grads = jax.value_and_grad(
            objective, has_aux=True)(trainable, non_trainable, features, labels)
        trainable, (m, v) = adam_update(trainable, grads, (m, v), t, lr, recipe=ADAM)
        t1 = t + 1.0
        d = jnp.minimum(decay, (1.0 + t) / (10.0 + t))  # t earlier updates, as ema.py
        average = [d * a + (1.0 - d) * w for a, w in zip(average, trainable)]
        return (trainable, non_trainable, m, v, average, t1), smoothed, plain, count

    @jax.jit
    def evaluate(trainable, non_trainable, features, labels):
        logits, _ = model.stateless_call(trainable, non_trainable, features, training=False)
        nll, _, mask = scores(logits, labels)
        return jnp.sum(nll, axis=1), jnp.sum(mask, axis=1)

    return train, evaluate


def held_out_loss(evaluate, trainable, non_trainable, valid, captions, lengths, batch_size=100):
    """`{"all": nats/byte, "captions": nats/byte}` of the held-out pairs."""
    nats, counts = [], []
    for start in range(0, len(valid), batch_size):
        chunk = valid[start:start + batch_size]
        chunk = chunk + [chunk[-1]] * (batch_size - len(chunk))  # one shape per length
        features, labels = frame(chunk, next(length for length in lengths
                                              if length >= length_of(chunk)))
        summed, count = evaluate(trainable, non_trainable, features, labels)
        nats.append(np.asarray(summed)), counts.append(np.asarray(count))
    nats, counts = np.concatenate(nats)[:len(valid)], np.concatenate(counts)[:len(valid)]
    return {"all": round(float(nats.sum() / counts.sum()), 4),
            "captions": round(float(nats[captions].sum() / counts[captions].sum()), 4)}


def run_setting(name, values, data, args, path):
    import jax

    train_pairs, valid, captions = data
    model = build(values)
    train, evaluate = make_functions(model, values)
    trainable = [w.value for w in model.trainable_variables]
    non_trainable = [w.value for w in model.non_trainable_variables]
    zeros = [jax.numpy.zeros_like(w) for w in trainable]
    state = (trainable, non_trainable, zeros, list(zeros), list(trainable), 0.0)
    result = {"name": name, "setting": values, "device": str(jax.devices()[0]),
              "parameters": int(sum(np.prod(w.shape) for w in trainable)), "curve": [],
              "train_pairs": len(train_pairs), "valid_pairs": len(valid),
              "valid_captions": int(captions.sum()), "stopped_early": False}
    stream = batches(train_pairs, values["batch_size"], args.lengths, values["seed"])
    losses, start, step = [], time.time(), 0

    def record():
        trainable, non_trainable, _, _, average, _ = state
        result["curve"].append({
            "step": step, "seconds": round(time.time() - start, 1),
            "train_loss": round(float(np.mean(losses)), 4) if losses else None,
            "held_out": held_out_loss(evaluate, trainable, non_trainable, valid, captions,
                                      args.lengths),
            "held_out_ema": held_out_loss(evaluate, average, non_trainable, valid, captions,
                                          args.lengths)})
        losses.clear()
        with open(path + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(path + ".tmp", path)
        print(name, json.dumps(result["curve"][-1]), flush=True)

    while step < values["steps"]:
        if args.deadline and time.time() > args.deadline:
            result["stopped_early"] = True
            break
        features, labels = next(stream)
        state, _, plain, _ = train(state, features, labels, learning_rate(step, values))
        step += 1
        if step % 50 == 0:
            losses.append(float(plain))
        if step % args.eval_every == 0 and step < values["steps"]:
            record()
    result["steps"] = step
    record()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default=os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data",
        "deen"))
    parser.add_argument("--setting", action="append", required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--eval_every", type=int, default=500)
    parser.add_argument("--lengths", type=lambda s: [int(x) for x in s.split(",")],
                        default=[64, 128, TRAIN_MAX_LENGTH + 8])
    parser.add_argument("--deadline", type=float, default=0.0,
                        help="Seconds since the epoch after which no setting trains on.")
    args = parser.parse_args(argv)
    settings = [parse_setting(text) for text in args.setting]
    if max(args.lengths) < TRAIN_MAX_LENGTH + 1:
        parser.error(f"--lengths must reach {TRAIN_MAX_LENGTH + 1} (200 bytes and EOS); "
                     f"received {args.lengths}")
    data = load_data(args.data_dir)
    os.makedirs(os.path.join(args.output_dir, "claims"), exist_ok=True)
    for name, values in settings:
        try:
            os.close(os.open(os.path.join(args.output_dir, "claims", name),
                             os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            continue
        if args.deadline and time.time() > args.deadline:
            break
        run_setting(name, values, data, args, os.path.join(args.output_dir, name + ".json"))


if __name__ == "__main__":
    os.environ.setdefault("KERAS_BACKEND", "jax")  # before the first import of keras
    main()
