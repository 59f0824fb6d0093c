"""Steps or data: the text recipe's model and objective trained for more steps than a CPU budget
holds, on a GPU under Keras's JAX backend, then scored here with the project's own decoding.

    # 1. The held-out split of experiments/translator.py, written to a folder:
    python experiments/steps_limit.py split --out=DIR
    # 2. On a machine with JAX and a GPU (TensorFlow is not needed, nor imported):
    KERAS_BACKEND=jax python experiments/steps_limit.py train --data=DIR --out=OUT \\
        --name=gpu_25k --steps=25500 --deadline=EPOCH_SECONDS
    # 3. With TensorFlow, on a CPU: beam-4 and greedy scores of the weights it wrote
    python experiments/steps_limit.py score --train_dir=OUT --name=gpu_25k

`train` follows bytenet-train's `text` preset: `bytenet_selu` at hidden 256 and 3 stacks, no
dropout unless `--dropout`, the label-smoothed (0.1) cross-entropy per non-PAD target byte,
Keras's Adam (lr 2e-3, beta_2 0.999, epsilon 1e-7) with 200 warm-up steps and a cosine decay to
5% of the peak, batches of about 2,560 bytes in the trainer's length buckets
(`pipelines.buckets`), pairs of up to 200 bytes framed as the trainer frames them, and the data
of experiments/translator.py (train less 500 held-out pairs, split seed 13). Where it differs:
- Keras's JAX backend, mixed_bfloat16 (as the recipe runs on a Zen 4), a numpy input stream
  (a new shuffle of all pairs per epoch, then the trainer's buckets), and every batch padded to
  one of `SHAPES` so that XLA compiles a few programs: the extra rows and positions are PAD,
  which the loss masks and the model ignores.
- The cosine ends at `--steps`, or at `--deadline` if that comes first (as the trainer's time
  budget ends it); the result records which.
- No validation decoding, selection or averaging while training: the weights of the last step
  are kept, and the held-out cross-entropy (unsmoothed, 500 pairs) is logged every
  `--eval_every` steps beside the training objective.

`score` rebuilds the model with TensorFlow, loads those weights, chooses beam 4's length penalty
on the first 200 held-out pairs by BLEU (`selection.tune_length_penalty`, as the trainer does),
and scores all of multi30k-test2016 with beam 4 and greedily. It writes
docs/results/steps_limit_<name>.json.
"""

import argparse
import json
import math
import os
import queue
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from pipelines import buckets, byte_codec  # noqa: E402

# The `text` preset's values (bytenet_tf/training/config.py).
RECIPE = dict(hidden_size=256, learning_rate=2e-3, warmup_steps=200, floor=0.05,
              tokens_per_batch=2560, train_max_length=200, label_smoothing=0.1,
              adam_beta_1=0.9, adam_beta_2=0.999, adam_epsilon=1e-7)
# Padded lengths of the compiled programs; a bucket of edge E goes to the first length >= E.
SHAPES = (16, 32, 48, 64, 96, 128, 160, 200)
EVAL_BATCH = 64


def read_pairs(folder):
    """`pairs.de`/`pairs.en` of `folder` as two lists of bytes, without empty pairs (as the
    trainer's `parallel_text_dataset` reads them: lines split on b"\\n" only)."""
    sides = []
    for suffix in ("de", "en"):
        with open(os.path.join(folder, f"pairs.{suffix}"), "rb") as f:
            lines = f.read().split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        sides.append([line[:-1] if line.endswith(b"\r") else line for line in lines])
    if len(sides[0]) != len(sides[1]):
        raise SystemExit(f"{folder}: {len(sides[0])} German lines against {len(sides[1])} English.")
    pairs = [(s, t) for s, t in zip(*sides) if s and t]
    return [s for s, _ in pairs], [t for _, t in pairs]


def framed(sources, targets, max_length):
    """The trainer's length filter and framing: `(source ids, target ids, label ids)` per kept
    pair, as int32 arrays."""
    out = []
    for source, target in zip(sources, targets):
        if len(source) < max_length and len(target) < max_length:
            s = np.frombuffer(source, np.uint8).astype(np.int32) + byte_codec.BYTE_OFFSET
            t = np.frombuffer(target, np.uint8).astype(np.int32) + byte_codec.BYTE_OFFSET
            out.append((np.append(s, byte_codec.EOS_ID), np.insert(t, 0, byte_codec.BOS_ID),
                        np.append(t, byte_codec.EOS_ID)))
    return out


def shape_plan(max_length, tokens_per_batch):
    """Per trainer bucket: `(pairs per batch, padded length)`; and the batch rows of each
    padded length (the most pairs of any bucket mapped to it)."""
    boundaries = buckets.default_boundaries(max_length)
    sizes = buckets.bucket_sizes(boundaries, max_length, 32, tokens_per_batch)
    edges = list(boundaries) + [max_length]
    plan = [(size, next(length for length in SHAPES if length >= edge))
            for size, edge in zip(sizes, edges)]
    rows = {}
    for size, length in plan:
        rows[length] = max(rows.get(length, 0), size)
    return edges, plan, rows


def batches(examples, seed, max_length, tokens_per_batch):
    """Endless stream of `(source, target, labels)` int32 arrays: each epoch shuffles every
    example, fills the trainer's buckets in that order, and emits a bucket when it is full,
    padded to its shape's `(rows, length)`."""
    edges, plan, rows = shape_plan(max_length, tokens_per_batch)
    rng = np.random.default_rng(seed)
    lengths = np.array([max(len(s), len(labels)) for s, _, labels in examples])
    bucket_of = np.searchsorted(np.array(edges), lengths)  # first edge >= length
    pending = [[] for _ in edges]
    while True:
        for index in rng.permutation(len(examples)):
            bucket = bucket_of[index]
            pending[bucket].append(examples[index])
            size, length = plan[bucket]
            if len(pending[bucket]) == size:
                yield pad(pending[bucket], rows[length], length)
                pending[bucket] = []


def pad(examples, rows, length):
    arrays = [np.zeros((rows, length), np.int32) for _ in range(3)]
    for row, example in enumerate(examples):
        for array, ids in zip(arrays, example):
            array[row, :len(ids)] = ids
    return tuple(arrays)


def prefetched(iterator, depth=64):
    """Runs `iterator` in a thread, `depth` items ahead."""
    items = queue.Queue(depth)

    def fill():
        for item in iterator:
            items.put(item)

    threading.Thread(target=fill, daemon=True).start()
    while True:
        yield items.get()


def learning_rate(step, done):
    """`WarmupCosineDecay` of the preset at `step` (from 0), with `done` the share of the run
    that is over."""
    warmup = min((step + 1) / RECIPE["warmup_steps"], 1.0)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(max(done, 0.0), 1.0)))
    floor = RECIPE["floor"]
    return RECIPE["learning_rate"] * warmup * (floor + (1.0 - floor) * cosine)


def train(args):
    import jax
    import jax.numpy as jnp
    import keras

    import bytenet_tf

    if keras.backend.backend() != "jax":
        raise SystemExit("train runs under Keras's JAX backend: set KERAS_BACKEND=jax.")
    started = time.time()
    sources, targets = read_pairs(os.path.join(args.data, "train"))
    valid_sources, valid_targets = read_pairs(os.path.join(args.data, "valid"))
    max_length = RECIPE["train_max_length"]
    examples = framed(sources, targets, max_length)
    valid = framed(valid_sources, valid_targets, max_length)
    keras.utils.set_random_seed(args.seed)
    model = bytenet_tf.build_model("bytenet_selu", hidden_size=args.hidden_size,
                                   dropout_rate=args.dropout, seed=args.seed, dtype=args.precision)
    smoothing = RECIPE["label_smoothing"]
    beta_1, beta_2, epsilon = (RECIPE[k] for k in ("adam_beta_1", "adam_beta_2", "adam_epsilon"))

    def losses(trainable, non_trainable, source, target, labels, training):
        logits, non_trainable = model.stateless_call(
            trainable, non_trainable, {"source": source, "target": target}, training=training)
        log_probs = jax.nn.log_softmax(logits.astype(jnp.float32))
        mask = (labels != byte_codec.PAD_ID).astype(jnp.float32)
        nll = -jnp.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
        plain = jnp.sum(nll * mask)
        smoothed = (1.0 - smoothing) * plain + smoothing * jnp.sum(-log_probs.mean(-1) * mask)
        return smoothed, plain, jnp.sum(mask), non_trainable

    def objective(trainable, non_trainable, source, target, labels):
        smoothed, plain, count, non_trainable = losses(trainable, non_trainable, source, target,
                                                       labels, True)
        count = jnp.maximum(count, 1.0)
        return smoothed / count, (plain, count, non_trainable)

    def step(state, source, target, labels, lr):
        trainable, non_trainable, m, v, t = state
        grads, (plain, count, non_trainable) = jax.grad(objective, has_aux=True)(
            trainable, non_trainable, source, target, labels)
        t = t + 1.0
        alpha = lr * jnp.sqrt(1.0 - beta_2 ** t) / (1.0 - beta_1 ** t)
        m = [mi + (1.0 - beta_1) * (g - mi) for mi, g in zip(m, grads)]
        v = [vi + (1.0 - beta_2) * (g * g - vi) for vi, g in zip(v, grads)]
        trainable = [w - alpha * mi / (jnp.sqrt(vi) + epsilon)
                     for w, mi, vi in zip(trainable, m, v)]
        return (trainable, non_trainable, m, v, t), plain, count

    def held_out(trainable, non_trainable, source, target, labels):
        _, plain, count, _ = losses(trainable, non_trainable, source, target, labels, False)
        return plain, count

    step = jax.jit(step, donate_argnums=0)
    held_out = jax.jit(held_out)
    trainable = [jnp.asarray(w.value) for w in model.trainable_variables]
    non_trainable = [jnp.asarray(w.value) for w in model.non_trainable_variables]
    state = (trainable, non_trainable, [jnp.zeros_like(w) for w in trainable],
             [jnp.zeros_like(w) for w in trainable], jnp.zeros((), jnp.float32))
    valid_batches = [pad(valid[i:i + EVAL_BATCH], EVAL_BATCH, max_length)
                     for i in range(0, len(valid), EVAL_BATCH)]

    def valid_loss(state):
        sums = [held_out(state[0], state[1], *batch) for batch in valid_batches]
        return float(sum(p for p, _ in sums) / sum(c for _, c in sums))

    # Compile every shape before the clock of the schedule starts.
    _, _, rows = shape_plan(max_length, RECIPE["tokens_per_batch"])
    compiled = {}
    for length, count in rows.items():
        zeros = jnp.zeros((count, length), jnp.int32)
        compiled[length] = step.lower(state, zeros, zeros, zeros, 0.0).compile()
    initial_loss = valid_loss(state)
    compile_seconds = time.time() - started
    print(f"{args.name}: {len(examples)} training pairs, {len(valid)} held out; compiled "
          f"{len(compiled)} shapes in {compile_seconds:.0f} s", flush=True)
    curve = [dict(step=0, held_out_loss=initial_loss, seconds=0.0)]
    stream = prefetched(batches(examples, args.seed, max_length, RECIPE["tokens_per_batch"]))
    train_start = time.time()
    train_seconds = max(args.deadline - args.reserve - train_start, 1.0)
    window, cut = [], False
    step_count = 0
    while step_count < args.steps:
        elapsed = time.time() - train_start
        if elapsed >= train_seconds:
            cut = True
            break
        done = max((step_count + 1) / args.steps, elapsed / train_seconds)
        source, target, labels = next(stream)
        state, plain, count = compiled[source.shape[1]](
            state, source, target, labels, learning_rate(step_count, done))
        window.append((plain, count))
        step_count += 1
        if step_count % args.eval_every == 0 or step_count == args.steps:
            train_loss = float(sum(p for p, _ in window) / sum(c for _, c in window))
            window = []
            row = dict(step=step_count, train_loss=train_loss, held_out_loss=valid_loss(state),
                       seconds=time.time() - train_start, learning_rate=learning_rate(
                           step_count - 1, done))
            curve.append(row)
            print(json.dumps(row), flush=True)
    jax.block_until_ready(state)
    seconds = time.time() - train_start
    final = dict(step=step_count, held_out_loss=valid_loss(state), seconds=seconds)
    if curve[-1]["step"] != step_count:
        curve.append(final)
    for variable, value in zip(model.trainable_variables, state[0]):
        variable.assign(value)
    for variable, value in zip(model.non_trainable_variables, state[1]):
        variable.assign(value)
    os.makedirs(args.out, exist_ok=True)
    model.save_weights(os.path.join(args.out, f"{args.name}.weights.h5"))
    summary = dict(
        name=args.name, steps_asked=args.steps, steps=step_count, cut_by_deadline=cut,
        seed=args.seed, hidden_size=args.hidden_size, dropout_rate=args.dropout,
        precision=args.precision,
        recipe=RECIPE, shapes=SHAPES, training_pairs=len(examples), held_out_pairs=len(valid),
        compile_seconds=compile_seconds, train_seconds=seconds,
        steps_per_second=step_count / seconds, device=str(jax.devices()[0].device_kind),
        jax=jax.__version__, keras=keras.__version__, final_held_out_loss=final["held_out_loss"],
        curve=curve)
    with open(os.path.join(args.out, f"{args.name}.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"{args.name}: {step_count} steps in {seconds:.0f} s "
          f"({step_count / seconds:.1f}/s), held-out loss {final['held_out_loss']:.4f}",
          flush=True)


def split(args):
    from experiments.translator import held_out_split
    held_out_split(args.out)


def score(args):
    import types

    import tensorflow as tf

    import bytenet_tf
    from bytenet_tf import inference
    from bytenet_tf.training import evaluation, selection
    from experiments.common import cpu_name, write_results
    from pipelines import datasets, text
    from shared_data import deen

    with open(os.path.join(args.train_dir, f"{args.name}.json")) as f:
        trained = json.load(f)
    model = bytenet_tf.build_model("bytenet_selu", hidden_size=trained["hidden_size"],
                                   dropout_rate=trained["dropout_rate"], seed=trained["seed"])
    model({"source": tf.constant([[65, 2]]), "target": tf.constant([[1, 66]])})
    model.load_weights(os.path.join(args.train_dir, f"{args.name}.weights.h5"))
    train_de, train_en = (os.path.join(args.data, "train", f"pairs.{s}") for s in ("de", "en"))
    data = datasets.DataSpec(dataset="text", source_file=train_de, target_file=train_en,
                             valid_source_file=os.path.join(args.data, "valid", "pairs.de"),
                             valid_target_file=os.path.join(args.data, "valid", "pairs.en"))
    config = types.SimpleNamespace(data=data, valid_size=200, beam_size=4, select_by="bleu",
                                   progress=False)
    # The transfer check: TensorFlow's held-out loss of the loaded weights (float32) against
    # the one the training backend logged for them (in its precision).
    held = [(s, t) for s, t in zip(*read_pairs(os.path.join(args.data, "valid")))
            if len(s) < RECIPE["train_max_length"] and len(t) < RECIPE["train_max_length"]]
    check = evaluation.cross_entropy(model, [s for s, _ in held], [t for _, t in held])
    print(f"{args.name}: held-out loss {check['nats_per_byte']:.4f} here, "
          f"{trained['final_held_out_loss']:.4f} where it trained", flush=True)
    started = time.time()
    alpha, tried = selection.tune_length_penalty(config, model)
    sources, references, _ = text.read_parallel_lines(deen("multi30k-test2016.de"),
                                                      deen("multi30k-test2016.en"))
    test = {}
    for label, translator in (("beam4", inference.Translator(model, 4, alpha)),
                              ("greedy", inference.Translator(model))):
        scores, hypotheses = evaluation.validate(translator, sources, references)
        scores["examples"] = [{"source": s.decode(), "hypothesis": h.decode("utf-8", "replace"),
                               "reference": r.decode()}
                              for s, h, r in list(zip(sources, hypotheses, references))[:5]]
        test[label] = scores
        print(f"{args.name} multi30k-test2016 {label}: BLEU {scores['bleu']:.2f} "
              f"chrF {scores['chrf']:.2f}", flush=True)
    command = (f"python experiments/steps_limit.py score --train_dir=<train out> "
               f"--name={args.name}")
    print("wrote", write_results(f"steps_limit_{args.name}", dict(
        trained, length_penalty={"value": alpha, "tuned_on_validation": tried},
        test={"multi30k-test2016": test}, scored_on=cpu_name(),
        held_out_loss_tensorflow_float32=check["nats_per_byte"],
        score_seconds=time.time() - started, scored_by=command)))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    split_parser = sub.add_parser("split", help="write the held-out split")
    split_parser.add_argument("--out", required=True)
    train_parser = sub.add_parser("train", help="train under KERAS_BACKEND=jax")
    train_parser.add_argument("--data", required=True, help="a folder that `split` wrote")
    train_parser.add_argument("--out", required=True)
    train_parser.add_argument("--name", required=True)
    train_parser.add_argument("--steps", type=int, required=True)
    train_parser.add_argument("--deadline", type=float, default=float("inf"),
                              help="Unix time by which training ends (the cosine with it)")
    train_parser.add_argument("--reserve", type=float, default=30.0,
                              help="seconds kept before --deadline for the last held-out loss "
                                   "and the weights")
    train_parser.add_argument("--dropout", type=float, default=0.0)
    train_parser.add_argument("--hidden_size", type=int, default=RECIPE["hidden_size"])
    train_parser.add_argument("--seed", type=int, default=0)
    train_parser.add_argument("--precision", default="mixed_bfloat16")
    train_parser.add_argument("--eval_every", type=int, default=1000)
    score_parser = sub.add_parser("score", help="score trained weights with TensorFlow")
    score_parser.add_argument("--train_dir", required=True)
    score_parser.add_argument("--name", required=True)
    score_parser.add_argument("--data", required=True, help="the folder that `split` wrote")
    args = parser.parse_args()
    {"split": split, "train": train, "score": score}[args.mode](args)


if __name__ == "__main__":
    main()
