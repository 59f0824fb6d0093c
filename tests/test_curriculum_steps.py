"""experiments/curriculum_steps.py counts the steps of the training stream that bytenet-train
builds: with fixed-size batches every half epoch lands on a known step, and with a token budget
the curriculum's short pairs fill an epoch's worth in fewer steps than a permuted epoch."""

import os
import sys

import tensorflow as tf

from bytenet_tf.training import stream
from bytenet_tf.training.config import TrainConfig, resolve
from pipelines.datasets import DataSpec
from tests.conftest import PROJECT_ROOT

sys.path.insert(0, os.path.join(PROJECT_ROOT, "experiments"))

import curriculum_steps  # noqa: E402


class CurriculumStepsTest(tf.test.TestCase):

    def _config(self, lines, **overrides):
        folder = self.get_temp_dir()
        paths = []
        for side, texts in (("de", lines), ("en", lines)):
            path = os.path.join(folder, f"train.{side}")
            with open(path, "wb") as f:
                f.write(b"\n".join(texts) + b"\n")
            paths.append(path)
        data = DataSpec(dataset="text", source_file=paths[0], target_file=paths[1])
        return resolve(TrainConfig(data=data, time_budget_seconds=1800, **overrides))

    def test_fixed_batches_land_on_known_steps(self):
        # 100 pairs of one length, 10 per batch: half an epoch is 5 steps, with or without the
        # curriculum (its draws are pairs like any other).
        lines = [b"%05d abcdefgh" % i for i in range(100)]
        for epochs in (0.0, 1.0):
            config = self._config(lines, tokens_per_batch=0, batch_size=10,
                                  curriculum_epochs=epochs)
            count, marks = curriculum_steps.epoch_steps(config, steps=100, half_epochs=6)
            self.assertEqual(count, 100)
            self.assertEqual(marks, {0.5: 5, 1.0: 10, 1.5: 15, 2.0: 20, 2.5: 25, 3.0: 30})

    def test_curriculum_epoch_takes_fewer_steps_under_a_token_budget(self):
        # Lengths 5 to 124 bytes: the curriculum draws from the shortest pairs first, so a
        # 256-token batch holds more of them than a batch of the permuted epoch that follows
        # (a budget small against an epoch, so that batches fill and leave their buckets).
        lines = [b"x" * (5 + i % 120) for i in range(600)]
        config = self._config(lines, tokens_per_batch=256, curriculum_epochs=1.0)
        self.assertEqual(stream.pipeline_config(config).curriculum_epochs, 1.0)
        _, marks = curriculum_steps.epoch_steps(config, steps=5000, half_epochs=4)
        self.assertLess(marks[1.0], marks[2.0] - marks[1.0])
        self.assertEqual(sorted(marks), [0.5, 1.0, 1.5, 2.0])

    def test_stops_at_the_step_limit(self):
        lines = [b"%05d abcdefgh" % i for i in range(100)]
        config = self._config(lines, tokens_per_batch=0, batch_size=10, curriculum_epochs=0.0)
        _, marks = curriculum_steps.epoch_steps(config, steps=12, half_epochs=6)
        self.assertEqual(marks, {0.5: 5, 1.0: 10})


if __name__ == "__main__":
    tf.test.main()
