"""experiments/long_run.py replays the text recipe off TensorFlow: its batches are the pipeline's,
its learning rate the recipe's schedule, its values the `text` preset's, its greedy decoding the
Translator's, and weights it trains under JAX score the same held-out loss under TensorFlow."""

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import tensorflow as tf

import bytenet_tf
import pytest
from bytenet_tf import decoding, inference
from bytenet_tf.training import config as train_config
from bytenet_tf.training import evaluation
from bytenet_tf.training.schedule import WarmupCosineDecay
from experiments import long_run
from pipelines import byte_codec, preprocessing
from tests.conftest import FAST_COMPILING_XLA, PROJECT_ROOT


def _random_bytes(rng, length):
    return rng.integers(0, 256, length, dtype=np.uint8).tobytes()


def _random_pairs(count, longest, seed):
    rng = np.random.default_rng(seed)
    return [tuple(_random_bytes(rng, rng.integers(1, longest)) for _ in range(2))
            for _ in range(count)]


class _InOrder:
    """Stands in for the stream's generator: every epoch in file order."""

    @staticmethod
    def permutation(count):
        return np.arange(count)


def test_batches_are_the_pipelines_for_the_same_order():
    pairs = _random_pairs(1500, 230, seed=1)  # some longer than the 200-byte filter
    stream = long_run.TokenBudgetBatches([s for s, _ in pairs], [t for _, t in pairs], 200,
                                         2560, seed=0)
    stream.rng = _InOrder()
    ours = iter(stream)
    dataset = tf.data.Dataset.from_tensor_slices(([s for s, _ in pairs], [t for _, t in pairs]))
    pipeline = preprocessing.PipelineConfig(max_length=200, tokens_per_batch=2560,
                                            shuffle_buffer=0)
    count = 0
    for features, labels in preprocessing.make_batches(dataset, pipeline).take(60):
        bucket, batch = next(ours)
        theirs = [bytes(int(i) - 3 for i in row if i >= 3) for row in features["source"].numpy()]
        assert [source for source, _ in batch] == theirs
        rows, length = long_run.padded_shape(stream, bucket)
        source, target, ours_labels = long_run.frame(batch, length, rows)
        # The same ids, padded further with PAD rows and columns.
        for mine, pipeline_ids in ((source, features["source"]), (target, features["target"]),
                                   (ours_labels, labels)):
            height, width = pipeline_ids.shape
            np.testing.assert_array_equal(mine[:height, :width], pipeline_ids.numpy())
            assert not mine[height:].any() and not mine[:, width:].any()
        count += 1
    assert count == 60


def test_pairs_with_an_empty_or_too_long_side_are_left_out():
    sources = [b"", b"a", b"b" * 199, b"c" * 200, b"d"]
    targets = [b"x", b"", b"y", b"z", b"w" * 199]
    stream = long_run.TokenBudgetBatches(sources, targets, 200, 2560, seed=0)
    assert stream.pairs == [(b"b" * 199, b"y"), (b"d", b"w" * 199)]
    assert stream.skipped == 3


def test_four_padded_shapes_hold_every_bucket():
    stream = long_run.TokenBudgetBatches([b"a"], [b"b"], 200, 2560, seed=0)
    shapes = {long_run.padded_shape(stream, b) for b in range(len(stream.boundaries))}
    assert len(shapes) == 4
    for bucket, (edge, size) in enumerate(zip(stream.boundaries, stream.sizes)):
        rows, length = long_run.padded_shape(stream, bucket)
        assert rows >= size and length >= edge


def test_the_learning_rate_is_the_recipes_schedule():
    progress = tf.Variable(0.0)
    schedule = WarmupCosineDecay(2e-3, 200, 10**6, floor=0.05, progress=progress)
    for step, done in ((0, 0.0), (99, 0.01), (199, 0.02), (5000, 0.4), (9000, 0.999), (9500, 1.0)):
        progress.assign(done)
        expected = float(schedule(tf.constant(step)))
        assert abs(long_run.learning_rate(step, done * 1800.0, 1800.0) - expected) < 1e-9


def test_a_step_count_ends_the_decay_when_it_comes_before_the_budget():
    progress = tf.Variable(0.0)
    schedule = WarmupCosineDecay(2e-3, 200, 5000, floor=0.05, progress=progress)
    for step, done in ((0, 0.0), (199, 0.5), (2499, 0.1), (2499, 0.9), (4999, 0.2)):
        progress.assign(done)
        expected = float(schedule(tf.constant(step)))
        got = long_run.learning_rate(step, done * 1800.0, 1800.0, total_steps=5000)
        assert abs(got - expected) < 1e-9, (step, done)


@pytest.mark.parametrize("weight_decay", [0.0, 3.0])
def test_the_update_is_the_trainers_adam_with_keras_weight_decay(weight_decay):
    from bytenet_tf.training.optimizer import Adam

    rng = np.random.default_rng(5)
    start = [rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=4).astype(np.float32)]
    variables = [tf.Variable(w) for w in start]
    optimizer = Adam(1e-2, beta_2=0.999, epsilon=1e-7, weight_decay=weight_decay or None)
    weights, moments = start, tuple([np.zeros_like(w) for w in start] for _ in range(2))
    for step in range(4):
        grads = [rng.normal(size=w.shape).astype(np.float32) for w in start]
        optimizer.apply_gradients(zip([tf.constant(g) for g in grads], variables))
        weights, moments = long_run.adam_update(weights, grads, moments, step, 1e-2, weight_decay)
        for ours, theirs in zip(weights, variables):
            np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-5, atol=1e-6)
    moved = [w - s for w, s in zip(weights, start)]
    assert min(float(np.abs(m).max()) for m in moved) > 1e-3


def test_the_recorded_training_command_keeps_every_flag_off_its_default_and_the_presets():
    args = vars(long_run.build_parser().parse_args(
        ["train", "--data=d", "--out=o", "--decode_every=0", "--steps=12000"]))
    assert long_run.training_command(args) == (
        "KERAS_BACKEND=jax python experiments/long_run.py train --decode_every=0 "
        "--dropout_rate=0.0 --hidden_size=256 --label_smoothing=0.1 --steps=12000 "
        "--weight_decay=0.1")
    args["weight_decay"] = 0.0
    assert long_run.training_command(args).endswith("--steps=12000 --weight_decay=0.0")


def test_the_recipe_is_the_text_preset():
    preset = dict(train_config.DEFAULTS, **train_config.PRESETS["text"])
    for key in ("model", "hidden_size", "dropout_rate", "label_smoothing", "weight_decay",
                "learning_rate", "warmup_steps", "tokens_per_batch", "train_max_length"):
        assert long_run.RECIPE[key] == preset[key], key
    fields = {field.name: field.default for field in
              dataclasses.fields(train_config.TrainConfig)}
    for key in ("learning_rate_floor", "adam_beta_2", "adam_epsilon"):
        assert long_run.RECIPE[key] == fields[key], key
    assert long_run.DECODE_MARGIN == decoding.DEFAULT_MARGIN


def test_greedy_translation_is_the_translators():
    model = bytenet_tf.build_model("bytenet_selu", hidden_size=16, num_stacks=1, max_length=40,
                                   seed=4)
    rng = np.random.default_rng(5)
    sources = [b"", b"\x00", b"Ein Hund.", b"\xff\xfe invalid", _random_bytes(rng, 60),
               b"Zwei M\xc3\xa4nner sitzen auf einer Bank."] + [
        _random_bytes(rng, n) for n in rng.integers(1, 45, 10)]

    def next_ids(source, target, t):
        return np.argmax(model({"source": source, "target": target}).numpy()[:, t], axis=-1)

    ours = long_run.greedy_translate(next_ids, sources, model.max_length, model.unfold_a,
                                     model.unfold_b, batch_size=7, round_to=16)
    assert ours == inference.Translator(model)(sources)


def test_weights_trained_under_jax_give_the_same_held_out_loss_under_tensorflow():
    if importlib.util.find_spec("jax") is None:
        pytest.skip("JAX is not installed (it is in the [test] extra)")
    pairs = _random_pairs(120, 40, seed=2)
    with tempfile.TemporaryDirectory() as folder:
        data, out = os.path.join(folder, "data"), os.path.join(folder, "out")
        os.makedirs(data)
        for split, chunk in (("train", pairs[:100]), ("valid", pairs[100:110]),
                             ("test", pairs[110:])):
            for side, language in ((0, "de"), (1, "en")):
                with open(os.path.join(data, f"{split}.{language}"), "wb") as f:
                    f.write(b"".join(p[side].replace(b"\n", b" ") + b"\n" for p in chunk))
        env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", **FAST_COMPILING_XLA)
        command = [sys.executable, os.path.join(PROJECT_ROOT, "experiments", "long_run.py"),
                   "train", f"--data={data}", f"--out={out}", "--minutes=0.01",
                   "--hidden_size=8", "--num_stacks=1", "--eval_every=4", "--decode_every=1000",
                   "--dropout_rate=0.1", "--label_smoothing=0.1"]
        finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        assert finished.returncode == 0, finished.stderr[-3000:]
        with open(os.path.join(out, "curve.json")) as f:
            curve = json.load(f)["curve"]
        with open(os.path.join(out, "model.json")) as f:
            spec = json.load(f)
        assert "test_greedy" in curve[-1]
        assert spec["overrides"]["dropout_rate"] == 0.1
        assert curve[-1]["end"] and long_run.saved_step(
            os.path.join(out, long_run.WEIGHTS)) == curve[-1]["step"]
        # The budget is spent: the last step ran at the end of the cosine decay.
        assert curve[-1]["learning_rate"] == pytest.approx(
            long_run.learning_rate(curve[-1]["step"] - 1, 1.0, 1.0))
        model = bytenet_tf.build_model(spec["model"], dtype="mixed_bfloat16", **spec["overrides"])
        model.load_weights(os.path.join(out, "last.weights.h5"))
        valid = list(zip(*long_run.read_pairs(data, "valid")))
        source, target, labels = long_run.frame(valid, 64, len(valid))
        logits = model({"source": source, "target": target}).numpy()
        log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        nll = -np.take_along_axis(log_p, labels[..., None], -1)[..., 0]
        mask = labels != 0
        assert abs(nll[mask].mean() - curve[-1]["valid_loss"]) < 2e-2 * curve[-1]["valid_loss"]


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_the_objective_is_the_trainers_smoothed_cross_entropy(smoothing):
    if importlib.util.find_spec("jax") is None:
        pytest.skip("JAX is not installed (it is in the [test] extra)")
    rng = np.random.default_rng(4)
    logits = rng.normal(0.0, 3.0, (3, 7, byte_codec.VOCAB_SIZE)).astype(np.float32)
    labels = rng.integers(1, byte_codec.VOCAB_SIZE, (3, 7)).astype(np.int32)
    labels[0, 4:] = labels[2, 1:] = 0  # PAD_ID: no byte there
    objective, plain, count = (float(x) for x in long_run.cross_entropy_sums(
        logits, labels, smoothing))
    expected, expected_plain, mask = evaluation.smoothed_cross_entropy(
        tf.constant(labels), tf.constant(logits), smoothing)
    assert count == float(tf.reduce_sum(mask)) == 21 - 3 - 6
    assert plain == pytest.approx(float(expected_plain), rel=1e-5)
    assert objective == pytest.approx(float(expected), rel=1e-5)
    assert (objective == plain) == (smoothing == 0.0)


def test_saved_weights_name_their_step_and_load_as_keras_weights():
    model = bytenet_tf.build_model("bytenet_selu", hidden_size=8, num_stacks=1, seed=3)
    values = [np.full(v.shape, 0.5, v.dtype) for v in model.trainable_variables]
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, long_run.WEIGHTS)
        model.save_weights(path)
        assert long_run.saved_step(path) is None  # a file from model.save_weights alone
        long_run.save_weights(model, values, path, step=7)
        assert long_run.saved_step(path) == 7
        assert os.listdir(folder) == [long_run.WEIGHTS]
        fresh = bytenet_tf.build_model("bytenet_selu", hidden_size=8, num_stacks=1, seed=4)
        fresh.load_weights(path)
        for variable in fresh.trainable_variables:
            np.testing.assert_array_equal(variable.numpy(), 0.5)
