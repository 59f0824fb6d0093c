"""experiments/lever_screen.py trains as bytenet-train would: its jitted JAX step equals Keras's
Adam with the recipe's warm-up and cosine schedule on the label-smoothed loss, its held-out
pairs are experiments/translator.py's, and a bad setting is refused with its key named."""

import importlib.util
import json
import os
import subprocess
import sys

import tensorflow as tf

from tests.conftest import PROJECT_ROOT

sys.path.insert(0, os.path.join(PROJECT_ROOT, "experiments"))

import lever_screen  # noqa: E402

# Runs under KERAS_BACKEND=jax with TensorFlow unimportable: five steps of the screen's update
# and five of Keras's Adam (same schedule, the same smoothed loss through Keras's own
# label-smoothed categorical cross-entropy), from the same seeded weights.
KERAS_REFERENCE = r"""
import json, math, os, sys
sys.modules["tensorflow"] = None
sys.path[:0] = [sys.argv[1], os.path.join(sys.argv[1], "experiments")]
import jax, keras, numpy as np
import lever_screen as screen

values = dict(screen.RECIPE, hidden_size=16, num_stacks=1, dropout_rate=0.0, steps=10,
              warmup_steps=3, label_smoothing=0.1)
pairs = [(b"Ein Hund", b"A dog"), (b"Zwei Katzen laufen", b"Two cats run"), (b"x", b"y")] * 2
features, labels = screen.frame(pairs, 24)
model = screen.build(values)
train, _ = screen.make_functions(model, values)
weights = [w.value for w in model.trainable_variables]
zeros = [jax.numpy.zeros_like(w) for w in weights]
state = (weights, [w.value for w in model.non_trainable_variables], zeros, list(zeros),
         list(weights), 0.0)
for step in range(5):
    state, _, _, _ = train(state, features, labels, screen.learning_rate(step, values))

class Schedule(keras.optimizers.schedules.LearningRateSchedule):
    def __call__(self, step):
        step = keras.ops.cast(step, "float32") + 1.0
        warmup = keras.ops.minimum(step / values["warmup_steps"], 1.0)
        cosine = 0.5 * (1.0 + keras.ops.cos(math.pi * keras.ops.minimum(step / values["steps"], 1.0)))
        return values["learning_rate"] * warmup * (values["floor"] + (1 - values["floor"]) * cosine)

def loss(y, logits):
    y = keras.ops.cast(y, "int32")
    smoothed = keras.losses.categorical_crossentropy(
        keras.ops.one_hot(y, logits.shape[-1]), logits, from_logits=True,
        label_smoothing=values["label_smoothing"])
    mask = keras.ops.cast(y != 0, "float32")
    return keras.ops.sum(smoothed * mask) / keras.ops.sum(mask)

reference = screen.build(values)
reference.compile(optimizer=keras.optimizers.Adam(Schedule(), beta_2=0.999, epsilon=1e-7),
                  loss=loss)
for step in range(5):
    reference.train_on_batch(features, labels)
moved = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b.value))))
            for a, b in zip(weights, reference.trainable_variables))
differ = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b.value))))
             for a, b in zip(state[0], reference.trainable_variables))
print(json.dumps({"largest_difference": differ, "largest_move": moved,
                  "tensorflow_loaded": any(n.startswith("tensorflow") and sys.modules[n] is not None
                                           for n in sys.modules)}))
"""


class LeverScreenTest(tf.test.TestCase):

    def test_update_equals_keras_adam_with_the_recipe_schedule(self):
        if importlib.util.find_spec("jax") is None:
            self.skipTest("jax is not installed here (pip install 'bytenet_tf[test]' installs it)")
        completed = subprocess.run(
            [sys.executable, "-c", KERAS_REFERENCE, PROJECT_ROOT], capture_output=True, text=True,
            timeout=300, env=dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"))
        self.assertEqual(completed.returncode, 0, completed.stderr[-3000:])
        result = json.loads(completed.stdout.strip().splitlines()[-1])
        self.assertFalse(result["tensorflow_loaded"])
        # Five steps moved the weights by far more than the two updates differ.
        self.assertGreater(result["largest_move"], 1e-3)
        self.assertLess(result["largest_difference"], 1e-5)

    def test_learning_rate_is_the_recipe_schedule(self):
        from bytenet_tf.training.schedule import WarmupCosineDecay

        values = dict(lever_screen.RECIPE, steps=1000)
        schedule = WarmupCosineDecay(2e-3, 200, 1000, 0.05)
        for step in (0, 99, 199, 200, 500, 999, 1500):
            self.assertAllClose(lever_screen.learning_rate(step, values),
                                float(schedule(step)), rtol=1e-5)

    def test_held_out_pairs_are_the_translator_split(self):
        data_dir = os.path.join(PROJECT_ROOT, "..", "shared", "data", "deen")
        if not os.path.exists(os.path.join(data_dir, "train.origin")):
            self.skipTest(f"needs ../shared/data/deen/train.* beside the project ({data_dir})")
        import translator

        folder = self.get_temp_dir()
        _, _, valid_de, valid_en, counts = translator.held_out_split(folder)
        with open(valid_de, "rb") as f:
            sources = f.read().split(b"\n")[:-1]
        with open(valid_en, "rb") as f:
            targets = f.read().split(b"\n")[:-1]
        fits = [(s, t) for s, t in zip(sources, targets) if max(len(s), len(t)) <= 200]
        train, valid, captions = lever_screen.load_data(data_dir)
        self.assertEqual(valid, fits)
        self.assertGreater(len(valid), 450)
        self.assertEqual(int(captions.sum()), sum(n for origin, n in counts.items()
                                                  if origin.startswith("multi30k")))
        self.assertEmpty(set(valid) & set(train[:5000]))

    def test_bad_setting_names_the_key(self):
        name, values = lever_screen.parse_setting("wide:hidden_size=512,steps=1950")
        self.assertEqual((name, values["hidden_size"], values["steps"]), ("wide", 512, 1950))
        with self.assertRaisesRegex(ValueError, "'hiden_size'.*known keys"):
            lever_screen.parse_setting("wide:hiden_size=512")
        with self.assertRaisesRegex(ValueError, "no name"):
            lever_screen.parse_setting(":steps=10")


if __name__ == "__main__":
    tf.test.main()
