"""Past the CPU budget: the text recipe's model and training math on another Keras backend (JAX
on a GPU) for longer than a CPU run holds, then scored on TensorFlow as the recipe scores it.

    python experiments/long_run.py prepare --data=DATA          # TensorFlow: the held-out split
    KERAS_BACKEND=jax python experiments/long_run.py train --data=DATA --out=OUT --minutes=7
    python experiments/long_run.py score --data=DATA --out=OUT --name=NAME

`prepare` writes `experiments/translator.py`'s split (train.* less 500 held-out pairs, seed
13) and multi30k-test2016 to DATA as line files, so that `train` reads text and needs neither
TensorFlow nor ../shared.

`train` runs the `text` preset's training math without `tf.data` or the trainer: `bytenet_selu`
with the preset's overrides (dropout 0, label smoothing 0.1, weight decay 0.1; `--dropout_rate`,
`--label_smoothing` and `--weight_decay` screen other amounts of regularization,
`--cross_attention` the zoo's readout of the encoder output), pairs whose sides are shorter
than `train_max_length` (200) bytes, the whole set shuffled once per epoch, the token-budget
buckets of `pipelines.preprocessing.batch` (2,560 padded bytes; each bucket emits a batch when it
fills), the per-byte mean cross-entropy over real target bytes, Adam (beta_2 0.999, epsilon 1e-7;
`adam_update`) with a 200-step linear warm-up and a cosine
decay to 5% that ends when `--minutes` of training time are spent (as the preset's budget does), or
after `--steps` steps if those come first (so a GPU trains the step count that a CPU budget holds),
in mixed_bfloat16. Batches are padded up to four shapes (all-PAD rows and columns, which add
nothing to the loss) so that a compiling backend compiles four steps. Every `--eval_every` steps it
logs the training loss and the held-out cross-entropy; every `--decode_every` steps, and at the
end (unless it is 0), greedy BLEU and chrF on the held-out pairs and on multi30k-test2016 (read
only: nothing is chosen on either). At every logging point it writes OUT/curve.json, then the
weights, in float32, to OUT/last.weights.h5 with their step in the file (so a run stopped early
keeps those of its last logging point); and OUT/model.json. Compiling and decoding come on top
of `--minutes`: at hidden 400 on an H200, a 5.5-minute budget with decoding every 8,000 steps
needed more than 560 s in all; two runs side by side at hidden 256 on an H100 took 245 s to reach
step 4,200 after 80 s of training each, most of the rest compiling.

`score` (TensorFlow, float32, the CPU) loads those weights into the same model, runs one beam-4
search over the 500 held-out pairs, takes the length penalty with the best validation BLEU (as
the preset's `select_by=bleu` does), and scores that penalty and greedy decoding on all of
multi30k-test2016. Writes docs/results/long_run_<name>.json.

What differs from `bytenet-train --dataset=text`: the backend, device and kernels; the
shuffle's random order; the training time, counted on the device; and there is no checkpoint
selection (the last weights are scored: with the decay at its floor they were the recipe's
choice or near it in every run so far).
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bytenet_tf.models.unfolding import unfolded_length  # noqa: E402
from pipelines.buckets import bucket_sizes, default_boundaries  # noqa: E402
from pipelines.byte_codec import BOS_ID, BYTE_OFFSET, EOS_ID, PAD_ID  # noqa: E402

TEST_SET = "multi30k-test2016"
# The `text` preset's values (bytenet_tf.training.config.PRESETS["text"]); tests check them.
RECIPE = dict(model="bytenet_selu", hidden_size=256, dropout_rate=0.0, label_smoothing=0.1,
              weight_decay=0.1, learning_rate=2e-3, warmup_steps=200, learning_rate_floor=0.05,
              tokens_per_batch=2560, train_max_length=200,
              adam_beta_1=0.9, adam_beta_2=0.999, adam_epsilon=1e-7)
# Padded shapes of the training batches: lengths up to each edge share one shape.
SHAPE_EDGES = (32, 64, 128)
DECODE_MARGIN = 10  # bytenet_tf.decoding.DEFAULT_MARGIN
WEIGHTS = "last.weights.h5"


def read_lines(path):
    """The lines of `path` as bytes, split on b"\\n" only (as `pipelines.text` reads them)."""
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    return lines[:-1] if lines and lines[-1] == b"" else lines


def read_pairs(data, split):
    sources, targets = read_lines(os.path.join(data, f"{split}.de")), read_lines(
        os.path.join(data, f"{split}.en"))
    if len(sources) != len(targets):
        raise ValueError(f"{data}/{split}.de has {len(sources)} lines and {split}.en "
                         f"{len(targets)}: run `prepare` again.")
    return sources, targets


class TokenBudgetBatches:
    """An endless stream of training batches as `pipelines.preprocessing.batch` makes them:
    `(bucket, pairs)`.

    Pairs with an empty side, or a side of `max_length` bytes or more, are left out (as the text
    reader and `LengthFilter` do). Each epoch is a new random order of the rest; each pair goes
    to the bucket of its length `max(len(source), len(target)) + 1` (EOS included), and a
    bucket whose edge is E yields a batch when it holds `tokens_per_batch // E` pairs.

    Args:
        sources, targets: lists of bytes.
        max_length: int, `train_max_length`.
        tokens_per_batch: int.
        seed: int, the shuffle's seed.
    """

    def __init__(self, sources, targets, max_length, tokens_per_batch, seed):
        self.pairs = [(s, t) for s, t in zip(sources, targets)
                      if s and t and len(s) < max_length and len(t) < max_length]
        self.skipped = len(sources) - len(self.pairs)
        self.boundaries = default_boundaries(max_length)
        self.sizes = bucket_sizes(self.boundaries, max_length, None, tokens_per_batch)
        self.rng = np.random.default_rng(seed)
        self.epochs = 0

    def bucket(self, length):
        """The bucket of an element of `length` ids: the first edge that is >= it."""
        for index, edge in enumerate(self.boundaries):
            if length <= edge:
                return index
        return len(self.boundaries)

    def __iter__(self):
        buckets = [[] for _ in self.sizes]
        while True:
            for index in self.rng.permutation(len(self.pairs)):
                source, target = self.pairs[index]
                number = self.bucket(max(len(source), len(target)) + 1)
                buckets[number].append((source, target))
                if len(buckets[number]) == self.sizes[number]:
                    yield number, buckets[number]
                    buckets[number] = []
            self.epochs += 1


def ids(text):
    return [byte + BYTE_OFFSET for byte in text]


def frame(pairs, length, rows):
    """`(source, target, labels)` int32 arrays of shape `(rows, length)`, PAD-padded: sources
    `bytes + EOS`, decoder inputs `BOS + bytes`, labels `bytes + EOS`."""
    arrays = np.full((3, rows, length), PAD_ID, np.int32)
    for row, (source, target) in enumerate(pairs):
        for array, values in zip(arrays, (ids(source) + [EOS_ID], [BOS_ID] + ids(target),
                                          ids(target) + [EOS_ID])):
            array[row, :len(values)] = values
    return arrays


def padded_shape(stream, bucket):
    """`(rows, length)`: the shape that batches of `bucket` are padded to. Buckets whose edges
    reach the same one of `SHAPE_EDGES` (then `max_length`) share it, with as many rows as the
    largest batch among them."""
    edges = [edge for edge in SHAPE_EDGES if edge < stream.boundaries[-1]]
    edges.append(stream.boundaries[-1])
    length = next(edge for edge in edges if stream.boundaries[bucket] <= edge)
    floor = max([edge for edge in edges if edge < length], default=0)
    rows = max(size for size, edge in zip(stream.sizes, stream.boundaries)
               if floor < edge <= length)
    return rows, length


def cross_entropy_sums(logits, labels, smoothing=0.0):
    """Cross-entropy sums over the real (non-PAD) target bytes, under JAX.

    Args:
        logits: `(batch, T, VOCAB_SIZE)`, any float dtype (taken in float32).
        labels: int `(batch, T)`, PAD_ID where there is no byte.
        smoothing: float in [0, 1): the objective's label smoothing, with the target of
            `bytenet_tf.training.evaluation.smoothed_cross_entropy` (1 - e on the label, e / V
            on every id).

    Returns:
        `(objective, plain, count)`: scalars; the objective equals the plain sum when
        `smoothing` is 0.
    """
    import jax
    import jax.numpy as jnp

    labels = jnp.asarray(labels)
    log_p = jax.nn.log_softmax(jnp.asarray(logits).astype(jnp.float32))
    nll = -jnp.take_along_axis(log_p, labels[..., None], axis=-1)[..., 0]
    mask = (labels != PAD_ID).astype(jnp.float32)
    plain = jnp.sum(nll * mask)
    objective = plain
    if smoothing:
        uniform = -jnp.mean(log_p, axis=-1)
        objective = (1.0 - smoothing) * plain + smoothing * jnp.sum(uniform * mask)
    return objective, plain, jnp.sum(mask)


def learning_rate(step, seconds, budget_seconds, recipe=RECIPE, total_steps=0):
    """`bytenet_tf.training.schedule.WarmupCosineDecay` at `step` (from 0) when `done` is the
    larger of the share of the time budget spent and `(step + 1) / total_steps` (0: no step
    count, as the preset's `train_steps` never binds first)."""
    warmup = min((step + 1) / recipe["warmup_steps"], 1.0)
    done = seconds / budget_seconds
    if total_steps:
        done = max(done, (step + 1) / total_steps)
    done = min(max(done, 0.0), 1.0)
    floor = recipe["learning_rate_floor"]
    cosine = 0.5 * (1.0 + math.cos(math.pi * done))
    return recipe["learning_rate"] * warmup * (floor + (1.0 - floor) * cosine)


def adam_update(weights, grads, moments, step, lr, weight_decay=0.0, recipe=RECIPE):
    """One Adam step of `weights` (lists of arrays; numpy or JAX), as `bytenet_tf.training.
    optimizer.Adam` takes it, after Keras's decoupled weight decay (`weight_decay=` of a Keras
    optimizer: every variable first shrinks by `lr * weight_decay` of itself).

    Args:
        weights, grads: lists of arrays of the same shapes.
        moments: `(first, second)`, the lists of Adam's moment estimates.
        step: the step number, from 0.
        lr: the learning rate of this step.
        weight_decay: the decoupled decay per unit of learning rate (0: none).

    Returns:
        `(weights, (first, second))` after the step.
    """
    beta_1, beta_2 = recipe["adam_beta_1"], recipe["adam_beta_2"]
    t = step + 1.0
    alpha = lr * (1.0 - beta_2 ** t) ** 0.5 / (1.0 - beta_1 ** t)
    first = [m + (1 - beta_1) * (g - m) for m, g in zip(moments[0], grads)]
    second = [v + (1 - beta_2) * (g * g - v) for v, g in zip(moments[1], grads)]
    weights = [w - w * (lr * weight_decay) for w in weights]
    weights = [w - alpha * m / (v ** 0.5 + recipe["adam_epsilon"])
               for w, m, v in zip(weights, first, second)]
    return weights, (first, second)


def greedy_translate(next_ids, sources, max_length, unfold_a, unfold_b, batch_size=500,
                     round_to=64):
    """Greedy translations of `sources` (bytes) by re-running the model on the whole prefix,
    as `bytenet_tf.decoding.naive_greedy_decode` does, with fixed padded shapes.

    Args:
        next_ids: callable `(source, target, t) -> (batch,)` ints: the argmax id at target
            position `t` for int32 `source` `(batch, S)` and decoder input `target` `(batch,
            T)` (what follows position `t` in `target` is PAD and does not matter to a
            causal decoder).
        sources: list of bytes; each is truncated to `max_length - 1` bytes, as serving does.
        max_length, unfold_a, unfold_b: the model's.
        batch_size: sources per call.
        round_to: sources and decoder inputs are padded to a multiple of this.

    Returns:
        list of bytes, one translation per source.
    """
    translations = []
    for start in range(0, len(sources), batch_size):
        chunk = [source[:max_length - 1] for source in sources[start:start + batch_size]]
        limits = np.array([max(unfolded_length(len(s), unfold_a, unfold_b) + DECODE_MARGIN, 1)
                           for s in chunk])
        steps = int(limits.max())
        width = -(-max(len(s) + 1 for s in chunk) // round_to) * round_to
        source = np.full((len(chunk), width), PAD_ID, np.int32)
        for row, text in enumerate(chunk):
            source[row, :len(text) + 1] = ids(text) + [EOS_ID]
        target = np.full((len(chunk), -(-steps // round_to) * round_to), PAD_ID, np.int32)
        target[:, 0] = BOS_ID
        output = np.full((len(chunk), steps), PAD_ID, np.int32)
        finished = np.zeros(len(chunk), bool)
        for t in range(steps):
            chosen = np.where(finished, PAD_ID, np.asarray(next_ids(source, target, t)))
            output[:, t] = chosen
            finished |= (chosen == EOS_ID) | (t + 1 >= limits)
            if finished.all():
                break
            if t + 1 < target.shape[1]:
                target[:, t + 1] = chosen
        for row in output:
            text = bytearray()
            for value in row:
                if value == EOS_ID:
                    break
                if value >= BYTE_OFFSET:
                    text.append(value - BYTE_OFFSET)
            translations.append(bytes(text))
    return translations


def prepare(args):
    from experiments.translator import held_out_split
    from shared_data import deen

    os.makedirs(args.data, exist_ok=True)
    scratch = os.path.join(args.data, "split")
    train_de, train_en, valid_de, valid_en, counts = held_out_split(scratch)
    for split, (de, en) in {"train": (train_de, train_en), "valid": (valid_de, valid_en),
                            "test": (deen(f"{TEST_SET}.de"), deen(f"{TEST_SET}.en"))}.items():
        for path, language in ((de, "de"), (en, "en")):
            with open(path, "rb") as f, open(os.path.join(args.data, f"{split}.{language}"),
                                             "wb") as out:
                out.write(f.read())
    print(f"wrote {args.data}: held-out pairs by origin {counts}")


def train(args):
    import jax
    import jax.numpy as jnp
    import keras

    import bytenet_tf
    from bytenet_tf import scoring

    if keras.backend.backend() != "jax":
        raise SystemExit("`train` runs on the JAX backend: set KERAS_BACKEND=jax.")
    os.makedirs(args.out, exist_ok=True)
    keras.utils.set_random_seed(args.seed)
    overrides = {"dropout_rate": args.dropout_rate, "seed": args.seed}
    for key in ("hidden_size", "num_stacks"):
        if getattr(args, key):
            overrides[key] = getattr(args, key)
    if args.cross_attention != "none":
        overrides["cross_attention"] = args.cross_attention
    model = bytenet_tf.build_model(RECIPE["model"], dtype=args.precision, **overrides)
    with open(os.path.join(args.out, "model.json"), "w") as f:
        json.dump({"model": RECIPE["model"], "overrides": overrides}, f)
    stream = TokenBudgetBatches(*read_pairs(args.data, "train"), RECIPE["train_max_length"],
                                RECIPE["tokens_per_batch"], args.seed)
    valid, test = read_pairs(args.data, "valid"), read_pairs(args.data, "test")
    print(f"{jax.devices()}; {len(stream.pairs)} training pairs ({stream.skipped} left out); "
          f"{model.count_params():,} parameters", flush=True)

    trainable = [v.value for v in model.trainable_variables]
    fixed = [v.value for v in model.non_trainable_variables]
    decay = jnp.float32(args.weight_decay)

    def loss_sums(weights, state, source, target, labels, training=True):
        """`cross_entropy_sums` of a batch (smoothed in training only), and the new
        non-trainable state: the dropout layers' seed generators advance in training."""
        logits, state = model.stateless_call(weights, state, {"source": source, "target": target},
                                             training=training)
        smoothing = args.label_smoothing if training else 0.0
        return (*cross_entropy_sums(logits, labels, smoothing), state)

    def mean_objective(weights, state, source, target, labels):
        objective, plain, count, state = loss_sums(weights, state, source, target, labels)
        return objective / jnp.maximum(count, 1.0), (plain, count, state)

    @jax.jit
    def train_step(weights, state, moments, step, lr, source, target, labels):
        (_, (total, count, state)), grads = jax.value_and_grad(mean_objective, has_aux=True)(
            weights, state, source, target, labels)
        # The decay is an argument, not a constant, so that runs that differ in it alone share
        # one compiled step (and a persistent compilation cache).
        weights, moments = adam_update(weights, grads, moments, step.astype(jnp.float32), lr,
                                       decay)
        return weights, state, moments, total, count

    @jax.jit
    def eval_sums(weights, source, target, labels):
        """The plain cross-entropy sum and byte count, without dropout."""
        _, plain, count, _ = loss_sums(weights, fixed, source, target, labels, training=False)
        return plain, count

    @jax.jit
    def argmax_at(weights, source, target, t):
        logits, _ = model.stateless_call(weights, fixed, {"source": source, "target": target})
        return jnp.argmax(jax.lax.dynamic_index_in_dim(logits, t, axis=1, keepdims=False), -1)

    def held_out_loss(weights):
        sources, targets = valid
        total = count = 0.0
        for start in range(0, len(sources), 250):
            pairs = list(zip(sources[start:start + 250], targets[start:start + 250]))
            length = -(-max(max(len(s), len(t)) + 1 for s, t in pairs) // 64) * 64
            sums = eval_sums(weights, *frame(pairs, length, 250))
            total, count = total + float(sums[0]), count + float(sums[1])
        return total / count

    def greedy_scores(weights, pairs):
        hypotheses = greedy_translate(lambda s, tg, t: argmax_at(weights, s, tg, t), pairs[0],
                                      model.max_length, model.unfold_a, model.unfold_b)
        scores = scoring.score(hypotheses, pairs[1])
        return {"bleu": scores["bleu"], "chrf": scores["chrf"]}, hypotheses

    moments = ([jnp.zeros_like(w) for w in trainable], [jnp.zeros_like(w) for w in trainable])
    shapes = [padded_shape(stream, b) for b in range(len(stream.boundaries))]
    # Compile every batch shape before the clock starts (the results are thrown away).
    for rows, length in sorted(set(shapes)):
        empty = np.full((rows, length), PAD_ID, np.int32)
        jax.block_until_ready(train_step(trainable, fixed, moments, jnp.int32(0),
                                         jnp.float32(0.0), empty, empty, empty))
    budget = args.minutes * 60.0
    curve, losses, tokens, examples = [], [], 0.0, []
    # Training time: the wall clock less the held-out loss and decoding (the device queue is
    # drained before each of those, when their inputs are read back).
    step, started, excluded, state = 0, time.time(), 0.0, fixed
    for bucket, pairs in stream:
        trained = time.time() - started - excluded
        rows, length = shapes[bucket]
        source, target, labels = frame(pairs, length, rows)
        lr = learning_rate(step, trained, budget, total_steps=args.steps)
        trainable, state, moments, total, count = train_step(
            trainable, state, moments, jnp.int32(step), jnp.float32(lr), source, target, labels)
        losses.append((total, count))
        step += 1
        last = trained >= budget or step == args.steps
        if step % args.eval_every and not last:
            continue
        total = sum(float(t) for t, _ in losses)  # waits for the queued steps
        count = sum(float(c) for _, c in losses)
        paused = time.time()
        point = {"step": step, "train_seconds": round(paused - started - excluded, 1),
                 "learning_rate": lr, "epochs": stream.epochs, "train_loss": total / count,
                 "valid_loss": held_out_loss(trainable)}
        tokens, losses = tokens + count, []
        if args.decode_every and (step % args.decode_every == 0 or last):
            point["valid_greedy"], _ = greedy_scores(trainable, valid)
            point["test_greedy"], hypotheses = greedy_scores(trainable, test)
            examples = [h.decode("utf-8", "replace") for h in hypotheses[:5]]
        if last:
            point["end"] = True
        curve.append(point)
        print(json.dumps(point), flush=True)
        with open(os.path.join(args.out, "curve.json"), "w") as f:
            json.dump({"curve": curve, "devices": str(jax.devices()),
                       "device_kind": jax.devices()[0].device_kind,
                       "parameters": model.count_params(), "budget_seconds": budget,
                       "wall_seconds": round(time.time() - started, 1),
                       "target_bytes": tokens, "test_examples": examples,
                       "args": vars(args)}, f, indent=1)
        # After the curve that names them, so that a run stopped in between keeps weights
        # whose step its curve.json holds: every logging point's, not only the decoding ones.
        save_weights(model, trainable, os.path.join(args.out, WEIGHTS), step)
        excluded += time.time() - paused
        if last:
            break
    print(f"{step} steps in {curve[-1]['train_seconds']:.0f} s of training; wrote {args.out}",
          flush=True)


def save_weights(model, values, path, step):
    """Writes `values` (the trainable variables' arrays) as `model`'s weights to `path`, with
    `step` as an attribute of the file, replacing any older file only once it is complete."""
    import h5py

    for variable, value in zip(model.trainable_variables, values):
        variable.assign(value)
    partial = path[:-len(".weights.h5")] + ".partial.weights.h5"
    model.save_weights(partial)
    with h5py.File(partial, "a") as f:
        f.attrs["step"] = step
    os.replace(partial, path)


def saved_step(path):
    """The step that `save_weights` wrote into `path`, or None for a file without one."""
    import h5py

    with h5py.File(path, "r") as f:
        return int(f.attrs["step"]) if "step" in f.attrs else None


def plot_curve(name, curve, path):
    """Training and held-out loss against step, and greedy BLEU on the way."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    steps = [point["step"] for point in curve]
    left.plot(steps, [point["train_loss"] for point in curve], label="training (mean since last)")
    left.plot(steps, [point["valid_loss"] for point in curve], label="held-out 500 pairs")
    left.set(xlabel="step", ylabel="cross-entropy (nats/byte)", title=name)
    left.legend()
    for key, label in (("test_greedy", TEST_SET), ("valid_greedy", "held-out 500 pairs")):
        points = [(point["step"], point[key]["bleu"]) for point in curve if key in point]
        right.plot(*zip(*points), marker="o", label=label)
    right.set(xlabel="step", ylabel="greedy BLEU")
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def score(args):
    import bytenet_tf
    from bytenet_tf import inference
    from bytenet_tf.training import evaluation
    from experiments.beam_width import beam_outputs
    from experiments.common import RESULTS, cpu_name, write_results

    with open(os.path.join(args.out, "model.json")) as f:
        spec = json.load(f)
    with open(os.path.join(args.out, "curve.json")) as f:
        run = json.load(f)
    curve = run["curve"]
    weights = os.path.join(args.out, WEIGHTS)
    step = saved_step(weights)
    if step is None:  # a file from before steps were stored: saved at decoding points only
        saved = [point for point in curve if "weights_step" in point][-1]
    else:
        saved = next(point for point in curve if point["step"] == step)
    model = bytenet_tf.build_model(spec["model"], **spec["overrides"])
    model.load_weights(weights)
    bound = inference.Translator(model).output_bound
    valid, test = read_pairs(args.data, "valid"), read_pairs(args.data, "test")
    by_alpha, _ = beam_outputs(model, 4, *valid, bound)
    rows = {alpha: scores for alpha, (_, scores) in by_alpha.items()}
    alpha = max(rows, key=lambda a: rows[a]["bleu"])
    print(f"validation: length penalty {alpha} (BLEU {rows[alpha]['bleu']:.2f})", flush=True)
    by_alpha, seconds = beam_outputs(model, 4, *test, bound)
    beam = dict(by_alpha[alpha][1], length_penalty=alpha)
    greedy = evaluation.score_translations(
        test[0], inference.translate_batches(inference.Translator(model), test[0]), test[1],
        bound)
    print(f"{TEST_SET}: beam 4 BLEU {beam['bleu']:.2f} chrF {beam['chrf']:.2f}; greedy BLEU "
          f"{greedy['bleu']:.2f} chrF {greedy['chrf']:.2f}", flush=True)
    trained_by = training_command(run["args"])
    plot_curve(args.name, curve, os.path.join(RESULTS, f"long_run_{args.name}.png"))
    path = write_results(f"long_run_{args.name}", {
        "command": f"python experiments/long_run.py score --name={args.name}",
        "trained_by": trained_by, "trained_at": args.trained_at,
        "trained_on": run.get("device_kind", run["devices"]),
        "scored_on": cpu_name(), "decoding_precision": "float32", "model": spec,
        "parameters": run["parameters"], "budget_seconds": run["budget_seconds"],
        "reached_budget": (saved is curve[-1] if step is None else bool(saved.get("end"))),
        "last_logged_step": curve[-1]["step"],
        "weights_step": saved["step"], "weights_train_seconds": saved["train_seconds"],
        "weights_learning_rate": saved["learning_rate"], "weights_epochs": saved["epochs"],
        "validation_pairs": len(valid[0]),
        "validation_by_length_penalty": {a: {k: r[k] for k in ("bleu", "chrf")}
                                         for a, r in rows.items()},
        "test_set": TEST_SET, "test_beam4": beam, "test_greedy": greedy,
        "beam4_decode_seconds": round(seconds, 1), "curve": curve,
        "greedy_test_examples_on_device": run["test_examples"]})
    print(f"wrote {path}")


def training_command(run_args):
    """The `train` command line of a run's recorded arguments (curve.json's `args`): every flag
    whose value differs from this script's default, without the paths, and every flag whose
    default is the preset's (`RECIPE`) always, since the preset is not the same at every
    commit."""
    defaults = vars(build_parser().parse_args(["train", "--data=-"]))
    flags = " ".join(f"--{key}={value}" for key, value in sorted(run_args.items())
                     if key not in ("command", "data", "out", "name", "trained_at")
                     and (value != defaults.get(key) or key in RECIPE))
    return f"KERAS_BACKEND=jax python experiments/long_run.py train {flags}".rstrip()


def build_parser():
    from bytenet_tf.layers.cross_attention import CROSS_ATTENTION

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("command", choices=("prepare", "train", "score"))
    parser.add_argument("--data", required=True, help="the folder `prepare` writes")
    parser.add_argument("--out", help="train: where it writes; score: what it reads")
    parser.add_argument("--name", help="score: the results' name")
    parser.add_argument("--trained_at", default="unknown",
                        help="score: the commit that `train` ran at, for the results")
    parser.add_argument("--minutes", type=float, default=7.0, help="training time budget")
    parser.add_argument("--steps", type=int, default=0,
                        help="train: end training, and the cosine decay, after this many steps "
                             "if the budget has not ended them first (0: the budget alone)")
    parser.add_argument("--hidden_size", type=int, default=RECIPE["hidden_size"],
                        help="the model's width (default: the text preset's)")
    parser.add_argument("--num_stacks", type=int, default=0, help="0: the model's (3)")
    parser.add_argument("--cross_attention", default="none", choices=CROSS_ATTENTION,
                        help="train: the model's cross-attention readout (bytenet-train's "
                             "--cross_attention; the preset's: none)")
    parser.add_argument("--precision", default="mixed_bfloat16",
                        choices=("float32", "mixed_bfloat16"))
    parser.add_argument("--dropout_rate", type=float, default=RECIPE["dropout_rate"],
                        help="train: the zoo model's AlphaDropout rate (the preset's: 0)")
    parser.add_argument("--label_smoothing", type=float, default=RECIPE["label_smoothing"],
                        help="train: label smoothing of the training objective (the preset's: "
                             "0.1); the logged losses stay unsmoothed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval_every", type=int, default=1000)
    parser.add_argument("--decode_every", type=int, default=5000,
                        help="train: greedy BLEU every this many steps and at the end (0: never)")
    parser.add_argument("--weight_decay", type=float, default=RECIPE["weight_decay"],
                        help="train: Keras's decoupled weight decay per unit of learning rate "
                             "(the preset's: 0.03; 0 for none)")
    return parser


def main():
    args = build_parser().parse_args()
    if args.command != "prepare" and not args.out:
        raise SystemExit(f"`{args.command}` needs --out.")
    if not 0.0 <= args.weight_decay < 1.0 / RECIPE["learning_rate"]:
        raise SystemExit(f"--weight_decay must be in [0, {1.0 / RECIPE['learning_rate']:g}) "
                         f"(each step shrinks the weights by learning rate x decay); got "
                         f"{args.weight_decay}.")
    for key in ("dropout_rate", "label_smoothing"):
        if not 0.0 <= getattr(args, key) < 1.0:
            raise SystemExit(f"--{key} must be in [0, 1); got {getattr(args, key)}.")
    if args.steps < 0:
        raise SystemExit(f"--steps must be 0 (no step count) or positive; got {args.steps}.")
    if args.command == "score" and not args.name:
        raise SystemExit("`score` needs --name.")
    {"prepare": prepare, "train": train, "score": score}[args.command](args)


if __name__ == "__main__":
    main()
