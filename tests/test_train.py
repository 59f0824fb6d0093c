"""bytenet-train end to end: digits, text, resume, NaN, mirrored and two workers."""

import dataclasses
import glob
import json
import os
import signal
import subprocess
import sys
import time
from unittest import mock

import numpy as np
import tensorflow as tf

from bytenet_tf import vocabulary
from bytenet_tf.training import checkpoints, devices, trainer
from bytenet_tf.training import config as train_config
from bytenet_tf.training.config import TrainConfig
from bytenet_tf.training.optimizer import make_optimizer
from bytenet_tf.training.step import make_train_step
from pipelines.options import ConfigError
from pipelines import datasets, digits
from tests.conftest import PROJECT_ROOT, deen_path, run_concurrently, synthetic_lines
from tests.helpers.free_ports import free_ports

TINY = dict(hidden_size=16, num_stacks=1, batch_size=8, max_length=64, warmup_steps=5,
            log_every=5, valid_size=8, progress=False, precision="float32", seed=0)


def _env(**extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=PROJECT_ROOT)
    env.update(extra)
    return env


def _train_command(model_dir, *flags):
    return [sys.executable, "-m", "bytenet_tf.train", f"--model_dir={model_dir}",
            f"--export_dir={model_dir}/export", "--progress=false", "--precision=float32",
            "--hidden_size=16", "--num_stacks=1", "--batch_size=8", "--valid_size=8", *flags]


def assert_same_model_weights(test, got_dir, want_dir, atol=1e-6):
    """The newest checkpoints of two model dirs hold the same model weights."""
    want = tf.train.load_checkpoint(tf.train.latest_checkpoint(want_dir))
    got = tf.train.load_checkpoint(tf.train.latest_checkpoint(got_dir))
    # model_variables/ holds every model variable; model/ only what TF's object graph reaches.
    names = [n for n in want.get_variable_to_shape_map() if n.startswith("model_variables/")]
    test.assertGreater(len(names), 10)
    for name in names:
        test.assertAllClose(got.get_tensor(name), want.get_tensor(name), atol=atol, msg=name)


def train_digits(model_dir, train_steps, **overrides):
    """Trains `train_steps` steps of the thesis digits in `model_dir` (TINY, a shuffle buffer
    of 64 of the 128 pairs, checkpoints every 3 steps, no export), resuming what is there, with
    `overrides`."""
    return trainer.train_and_evaluate(TrainConfig(
        model_dir=model_dir, train_steps=train_steps, export=False, checkpoint_every=3,
        data=datasets.DataSpec(dataset="digits", digits_config="thesis"),
        **{**TINY, "shuffle_buffer": 64, **overrides}))


def resume_and_compare(test, **overrides):
    """Trains 6 digits steps in one go, and 3 then 3 more after a restart, with `overrides`;
    fails unless both end with the same weights. Returns the uninterrupted run's model_dir."""
    straight = test.get_temp_dir() + "/straight"
    train_digits(straight, 6, **overrides)
    resumed = test.get_temp_dir() + "/resumed"
    train_digits(resumed, 3, **overrides)
    train_digits(resumed, 6, **overrides)
    assert_same_model_weights(test, resumed, straight)
    return straight


class TrainEndToEndTest(tf.test.TestCase):

    def test_digits_run_trains_validates_and_exports(self):
        model_dir = self.get_temp_dir() + "/digits"
        results = trainer.train_and_evaluate(TrainConfig(
            data=datasets.DataSpec(dataset="digits", digits_config="thesis"), model_dir=model_dir,
            export_dir=model_dir + "/export", train_steps=10, checkpoint_every=5, **TINY))
        self.assertEqual(results["step"], 10)
        self.assertTrue(np.isfinite(results["train_loss"]))
        self.assertEqual(results["valid"]["sentences"], 8)
        self.assertIn("4-gram", results["valid"]["bleu_caveat"])
        rows = results["exact_match_by_length"]
        self.assertEqual([row["digits"] for row in rows], [2, 3])  # the thesis config's lengths
        self.assertEqual([row["numbers"] for row in rows], [200, 200])
        self.assertEqual(rows[0]["seen_in_training"] + rows[1]["seen_in_training"],
                         sum(seen for _, seen in digits.independent_numbers("thesis")))
        self.assertTrue(os.path.isfile(os.path.join(results["export_path"], "saved_model.pb")))
        with open(os.path.join(model_dir, "config.json")) as f:
            config = json.load(f)
        self.assertEqual(config["effective_precision"], "float32")
        self.assertEqual(config["model_config"]["hidden_size"], 16)
        self.assertTrue(glob.glob(os.path.join(model_dir, "train", "events.out.tfevents.*")))
        with open(os.path.join(model_dir, "metrics.jsonl")) as f:
            logged = [json.loads(line) for line in f if "gradient_norm" in line]
        self.assertNotEmpty(logged)
        self.assertTrue(all(row["gradient_norm"] > 0 for row in logged))

    def test_text_run_on_real_fixtures(self):
        model_dir = self.get_temp_dir() + "/text"
        data = datasets.DataSpec(
            dataset="text", source_file=deen_path("fixture-small.de"),
            target_file=deen_path("fixture-small.en"),
            valid_source_file=deen_path("fixture-tiny.de"),
            valid_target_file=deen_path("fixture-tiny.en"))
        results = trainer.train_and_evaluate(TrainConfig(
            model="bytenet_small", data=data, model_dir=model_dir, export=False, train_steps=6,
            checkpoint_every=3, **TINY))
        self.assertEqual(results["step"], 6)
        self.assertIsNone(results["export_path"])
        # sacrebleu's BLEU signature (chrF's has no tok: or smooth: field), one reference each.
        self.assertRegex(results["valid"]["signature"],
                         r"^nrefs:1\|case:mixed\|eff:no\|tok:13a\|smooth:exp\|version:2\.6\.0$")
        self.assertEqual(results["valid"]["sentences"], 8)
        self.assertEqual(results["valid"]["bleu_caveat"], "")
        self.assertEqual(results["data"]["train_files"], {"lines": 500, "kept": 500, "empty": 0})

    def test_empty_pairs_are_counted_in_the_results(self):
        model_dir = self.get_temp_dir() + "/empty_pairs"
        sources = [b"eins", b"", b"drei", b"vier", b"f\xc3\xbcnf"]
        targets = [b"one", b"two", b"", b"four", b"five"]
        files = []
        for name, lines in (("e.de", sources), ("e.en", targets)):
            files.append(os.path.join(self.get_temp_dir(), name))
            with open(files[-1], "wb") as f:
                f.write(b"\n".join(lines) + b"\n")
        data = datasets.DataSpec(dataset="text", source_file=files[0], target_file=files[1],
                                 valid_source_file=files[0], valid_target_file=files[1])
        results = trainer.train_and_evaluate(TrainConfig(
            data=data, model_dir=model_dir, export=False, train_steps=2, checkpoint_every=2,
            **TINY))
        with open(os.path.join(model_dir, "results.json")) as f:
            written = json.load(f)
        for counts in (results["data"]["train_files"], written["data"]["train_files"]):
            self.assertEqual(counts, {"lines": 5, "kept": 3, "empty": 2})

    def test_length_share_sets_the_bound_from_the_data_and_resumes(self):
        # Sources of 1-20 bytes frame to 2-21 ids: the shortest half fit 11.
        files = []
        for name, lines in (("s.de", [b"a" * n for n in range(1, 21)]), ("s.en", [b"x"] * 20)):
            files.append(os.path.join(self.get_temp_dir(), name))
            with open(files[-1], "wb") as f:
                f.write(b"\n".join(lines) + b"\n")
        data = datasets.DataSpec(dataset="text", source_file=files[0], target_file=files[1],
                                 valid_source_file=files[0], valid_target_file=files[1])
        model_dir = self.get_temp_dir() + "/share"
        for steps in (2, 4):  # the second call resumes: the same bound, so it is not refused
            results = trainer.train_and_evaluate(TrainConfig(
                data=data, model_dir=model_dir, export=False, train_steps=steps,
                checkpoint_every=2, train_length_share=0.5, **TINY))
            self.assertEqual(results["step"], steps)
            with open(os.path.join(model_dir, "config.json")) as f:
                config = json.load(f)
            self.assertEqual((config["train_max_length"], config["train_length_share"]),
                             (11, 0.5))
            counts = results["data"]["length_filter"]
            self.assertGreater(counts["dropped"], 0)
            self.assertGreater(counts["kept"], 0)

    def test_resumed_run_continues_the_same_data_stream(self):
        # 3 steps, stop, resume to 6 must equal 6 steps in one go: same weights, so the model,
        # the optimizer, the dropout seeds and the data iterator all continued.
        resume_and_compare(self)

    def test_resumed_run_continues_the_same_length_curriculum(self):
        # The 6 steps' 48 pairs are all drawn by the curriculum (2 epochs of the 128 pairs,
        # held in memory), so the resumed run must continue its draws, not restart them.
        straight = resume_and_compare(self, curriculum_epochs=2.0, shuffle_buffer=128)
        with open(os.path.join(straight, "config.json")) as file:
            self.assertEqual(json.load(file)["curriculum_epochs"], 2.0)

    def test_rerun_of_a_finished_run_exports_no_new_version(self):
        model_dir = self.get_temp_dir() + "/reexport"
        config = TrainConfig(data=datasets.DataSpec(dataset="digits", digits_config="thesis"),
                             model_dir=model_dir, export_dir=model_dir + "/export",
                             train_steps=2, checkpoint_every=2, **TINY)
        first = trainer.train_and_evaluate(config)["export_path"]
        again = trainer.train_and_evaluate(config)["export_path"]
        self.assertEqual(again, first)
        self.assertEqual(sorted(os.listdir(model_dir + "/export")), ["1"])
        longer = trainer.train_and_evaluate(dataclasses.replace(config, train_steps=4))
        self.assertEqual(longer["export_path"], model_dir + "/export/2")

    def test_finished_run_does_not_train_again(self):
        model_dir = self.get_temp_dir() + "/finished"
        config = TrainConfig(data=datasets.DataSpec(dataset="digits", digits_config="thesis"),
                             model_dir=model_dir, export=False, train_steps=4,
                             checkpoint_every=2, **TINY)
        trainer.train_and_evaluate(config)
        checkpoints = sorted(os.listdir(model_dir))
        again = trainer.train_and_evaluate(config)
        self.assertEqual(again["step"], 4)
        self.assertIsNone(again["train_loss"])
        self.assertEqual(sorted(os.listdir(model_dir)), checkpoints)

    def test_nan_loss_stops_with_the_step_and_keeps_last_good_checkpoint(self):
        model_dir = self.get_temp_dir() + "/nan"
        config = TrainConfig(data=datasets.DataSpec(dataset="digits", digits_config="thesis"),
                             model_dir=model_dir, export=False, train_steps=50,
                             checkpoint_every=1, learning_rate=1e30,
                             **dict(TINY, warmup_steps=1))
        with self.assertRaisesRegex(trainer.TrainingDivergedError,
                                    r"became nan at step (\d+); .*last good checkpoint is kept: "
                                    r".*ckpt-(\d+)") as raised:
            trainer.train_and_evaluate(config)
        message = str(raised.exception)
        bad_step = int(message.split("at step ")[1].split(";")[0])
        kept = tf.train.latest_checkpoint(model_dir)
        self.assertEqual(int(kept.rsplit("-", 1)[1]), bad_step - 1)

    def test_changed_model_in_same_model_dir_is_refused(self):
        model_dir = self.get_temp_dir() + "/changed"
        base = dict(data=datasets.DataSpec(dataset="digits", digits_config="thesis"),
                    model_dir=model_dir, export=False, train_steps=2, checkpoint_every=2)
        trainer.train_and_evaluate(TrainConfig(**base, **TINY))
        with open(os.path.join(model_dir, "config.json"), "rb") as f:
            stored = f.read()
        with self.assertRaisesRegex(ConfigError, "hidden_size: 16 there, 24 now"):
            trainer.train_and_evaluate(TrainConfig(**base, **dict(TINY, hidden_size=24)))
        # Every differing setting is named, not only the first of a hand-picked few.
        with self.assertRaises(ConfigError) as raised:
            trainer.train_and_evaluate(TrainConfig(**base, branch_weight=0.5, dropout_rate=0.2,
                                                   source_blind=True, **TINY))
        message = str(raised.exception)
        for setting in ("branch_weight: 'inv_sqrt_depth' there, 0.5 now",
                        "dropout_rate: 0.05 there, 0.2 now", "source_blind: False there, True now"):
            self.assertIn(setting, message)
        self.assertNotIn("hidden_size", message)
        with open(os.path.join(model_dir, "config.json"), "rb") as f:
            self.assertEqual(f.read(), stored, "a refused run leaves config.json as it was")

    def test_changed_training_settings_in_same_model_dir_are_refused(self):
        from bytenet_tf import train

        model_dir = self.get_temp_dir() + "/changed_training"
        base = dict(data=datasets.DataSpec(dataset="digits", digits_config="thesis"),
                    model_dir=model_dir, export=False, checkpoint_every=2, **TINY)
        trainer.train_and_evaluate(TrainConfig(train_steps=2, weight_decay=0.0, **base))
        path = os.path.join(model_dir, "config.json")
        with open(path, "rb") as f:
            stored = f.read()
        with self.assertRaises(ConfigError) as raised:
            trainer.train_and_evaluate(TrainConfig(train_steps=4, weight_decay=0.03,
                                                   learning_rate=5e-4, **base))
        message = str(raised.exception)
        for part in ("holds a run trained with other settings",
                     "weight_decay: 0.0 there, 0.03 now",
                     "learning_rate: 0.003 there, 0.0005 now"):
            self.assertIn(part, message)
        self.assertNotIn("another model", message)
        self.assertIn("resume it with --learning_rate=0.003 --weight_decay=0.0",
                      train.flag_message(message))
        with open(path, "rb") as f:
            self.assertEqual(f.read(), stored, "a refused run leaves config.json as it was")
        # A config.json written before a setting existed does not record it: not checked.
        recorded = json.loads(stored)
        del recorded["weight_decay"]
        with open(path, "w") as f:
            json.dump(recorded, f)
        resumed = trainer.train_and_evaluate(TrainConfig(train_steps=4, weight_decay=0.03,
                                                         **base))
        self.assertEqual(resumed["step"], 4)

    def test_other_training_data_in_same_model_dir_is_refused(self):
        from bytenet_tf import train

        model_dir = self.get_temp_dir() + "/changed_data"
        first_dir, moved_dir = (os.path.join(self.get_temp_dir(), name)
                                for name in ("data_first", "data_moved"))
        os.makedirs(first_dir)
        lines = {"de": [b"eins zwei", b"drei", b"vier f\xc3\xbcnf"] * 4,
                 "en": [b"one two", b"three", b"four five"] * 4}
        for lang, text in lines.items():
            with open(os.path.join(first_dir, f"p.{lang}"), "wb") as f:
                f.write(b"\n".join(text) + b"\n")

        def spec(folder):
            de, en = os.path.join(folder, "p.de"), os.path.join(folder, "p.en")
            return datasets.DataSpec(dataset="text", source_file=de, target_file=en,
                                     valid_source_file=de, valid_target_file=en)

        base = dict(model_dir=model_dir, export=False, checkpoint_every=2, **TINY)
        trainer.train_and_evaluate(TrainConfig(data=spec(first_dir), train_steps=2, **base))
        path = os.path.join(model_dir, "config.json")
        with open(path, "rb") as f:
            stored = f.read()
        sizes = json.loads(stored)["data_file_bytes"]
        self.assertEqual(sizes, {"source_file": os.path.getsize(f"{first_dir}/p.de"),
                                 "target_file": os.path.getsize(f"{first_dir}/p.en")})
        # A training file rewritten in place is other data.
        with open(os.path.join(first_dir, "p.en"), "ab") as f:
            f.write(b"six\n")
        with self.assertRaises(ConfigError) as raised:
            trainer.train_and_evaluate(TrainConfig(data=spec(first_dir), train_steps=4, **base))
        message = str(raised.exception)
        self.assertIn("holds a run trained with other settings", message)
        self.assertIn(f"target_file: '{first_dir}/p.en' of {sizes['target_file']:,} bytes "
                      f"there, '{first_dir}/p.en' of {sizes['target_file'] + 4:,} bytes now",
                      message)
        self.assertNotIn("source_file", message)
        # Files under another path are refused before the data iterator would fail to reopen
        # the recorded ones, with the flags that resume the run.
        os.rename(first_dir, moved_dir)
        with self.assertRaises(ConfigError) as raised:
            trainer.train_and_evaluate(TrainConfig(data=spec(moved_dir), train_steps=4, **base))
        self.assertIn(f"source_file: '{first_dir}/p.de' there, '{moved_dir}/p.de' now",
                      str(raised.exception))
        self.assertIn(f"--source_file={first_dir}/p.de",
                      train.flag_message(str(raised.exception)))
        # Another dataset is refused (its preset builds another model too).
        with self.assertRaises(ConfigError) as raised:
            trainer.train_and_evaluate(TrainConfig(
                data=datasets.DataSpec(dataset="digits", digits_config="thesis"),
                train_steps=4, **base))
        self.assertIn("dataset: 'text' there, 'digits' now", str(raised.exception))
        with open(path, "rb") as f:
            self.assertEqual(f.read(), stored, "a refused run leaves config.json as it was")
        # The same files resume.
        os.rename(moved_dir, first_dir)
        with open(os.path.join(first_dir, "p.en"), "wb") as f:
            f.write(b"\n".join(lines["en"]) + b"\n")
        resumed = trainer.train_and_evaluate(TrainConfig(data=spec(first_dir), train_steps=4,
                                                         **base))
        self.assertEqual(resumed["step"], 4)

    def test_binary_refuses_another_branch_weight_and_keeps_config_json(self):
        model_dir = self.get_temp_dir() + "/changed_binary"
        first = subprocess.run(_train_command(model_dir, "--train_steps=2", "--export=false"),
                               env=_env(), capture_output=True, text=True, timeout=300)
        self.assertEqual(first.returncode, 0, first.stderr[-3000:])
        with open(os.path.join(model_dir, "config.json"), "rb") as f:
            stored = f.read()
        second = subprocess.run(_train_command(model_dir, "--train_steps=4", "--export=false",
                                               "--branch_weight=1"),
                                env=_env(), capture_output=True, text=True, timeout=300)
        self.assertEqual(second.returncode, 1)
        self.assertIn("bytenet-train: error: --model_dir=", second.stderr)
        self.assertIn("branch_weight: 'inv_sqrt_depth' there, 1.0 now", second.stderr)
        self.assertNotIn("Traceback", second.stderr)
        with open(os.path.join(model_dir, "config.json"), "rb") as f:
            self.assertEqual(f.read(), stored)

    def test_resumed_auto_precision_is_the_recorded_one(self):
        model_dir = self.get_temp_dir() + "/precision"
        base = dict(data=datasets.DataSpec(dataset="digits", digits_config="thesis"),
                    model_dir=model_dir, export=False, checkpoint_every=2,
                    **dict(TINY, precision="auto"))
        first = trainer.train_and_evaluate(TrainConfig(train_steps=2, **base))
        # Record the other precision, as if the run had begun on another CPU: the resumed run
        # must take it instead of measuring this machine again.
        other = "float32" if first["precision"] == "mixed_bfloat16" else "mixed_bfloat16"
        path = os.path.join(model_dir, "config.json")
        with open(path) as f:
            stored = json.load(f)
        stored["effective_precision"] = other
        with open(path, "w") as f:
            json.dump(stored, f)
        resumed = trainer.train_and_evaluate(TrainConfig(train_steps=4, **base))
        self.assertEqual(resumed["precision"], other)
        with open(path) as f:
            self.assertIn("recorded in config.json", json.load(f)["precision_reason"])


class CheckpointContentTest(tf.test.TestCase):

    def test_checkpoint_restores_every_variable_with_batch_norm_statistics(self):
        from bytenet_tf import zoo
        model_dir = self.get_temp_dir() + "/bn"
        trainer.train_and_evaluate(TrainConfig(
            model="bytenet_thesis", data=datasets.DataSpec(dataset="digits",
                                                           digits_config="thesis"),
            model_dir=model_dir, export=False, train_steps=4, checkpoint_every=4, **TINY))
        fresh = zoo.build_model("bytenet_thesis", hidden_size=16, num_stacks=1, max_length=64,
                                seed=0)
        initial = {v.path: v.numpy().copy() for v in fresh.variables}
        checkpoints.restore_model(fresh, tf.train.latest_checkpoint(model_dir))
        moved = {v.path for v in fresh.variables if not np.array_equal(initial[v.path], v.numpy())}
        statistics = [path for path in initial if "moving_mean" in path]
        self.assertNotEmpty(statistics)
        self.assertContainsSubset(statistics, moved)  # batch norm's statistics came back
        kernels = [path for path in initial if "block" in path and path.endswith("kernel")]
        self.assertLen(kernels, 3 * 10)
        self.assertContainsSubset(kernels, moved)  # so did every block's weights

    def test_restore_into_a_second_model_of_the_same_process(self):
        # Dropout seed generators take process-wide names (seed_generator_<n>); restoring
        # into a model built after the trained one must not depend on them.
        from bytenet_tf import zoo
        model_dir = self.get_temp_dir() + "/selu"
        trainer.train_and_evaluate(TrainConfig(
            model="bytenet_selu", data=datasets.DataSpec(dataset="digits",
                                                         digits_config="thesis"),
            model_dir=model_dir, export=False, train_steps=2, checkpoint_every=2,
            dropout_rate=0.1, **TINY))
        zoo.build_model("bytenet_selu", hidden_size=16, num_stacks=1, dropout_rate=0.1)
        fresh = zoo.build_model("bytenet_selu", hidden_size=16, num_stacks=1, max_length=64,
                                dropout_rate=0.1, seed=0)
        checkpoints.restore_model(fresh, tf.train.latest_checkpoint(model_dir))
        reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
        kernel = fresh.decoder_blocks[0].convs[0].kernel
        key = ("model_variables/" + kernel.path.replace("/", ".S")
               + "/.ATTRIBUTES/VARIABLE_VALUE")
        self.assertAllEqual(kernel.numpy(), reader.get_tensor(key))

    def test_model_only_checkpoint_is_refused_with_the_reason(self):
        from bytenet_tf import zoo
        model = zoo.build_model("bytenet_selu", hidden_size=16, num_stacks=1)
        path = tf.train.Checkpoint(model=model).save(self.get_temp_dir() + "/old/ckpt")
        with self.assertRaisesRegex(ValueError, "has no `model_variables`"):
            checkpoints.restore_model(model, path)


class ResumeTest(tf.test.TestCase):

    def test_killed_run_resumes_from_its_checkpoint(self):
        # The binary's default buffer (10,000) would hold all 128 pairs, so they are permuted in
        # memory and the checkpointed iterator is a counter into the permutations
        # (`resume_and_compare` covers a buffer smaller than the data).
        model_dir = self.get_temp_dir() + "/killed"
        command = _train_command(model_dir, "--dataset=digits", "--digits_config=thesis",
                                 "--train_steps=100000", "--checkpoint_every=5", "--export=false")
        process = subprocess.Popen(command, env=_env(), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        deadline = time.time() + 240
        try:
            while time.time() < deadline:
                latest = tf.train.latest_checkpoint(model_dir)
                if latest and int(latest.rsplit("-", 1)[1]) >= 10:
                    break
                time.sleep(0.5)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait()
        killed_at = int(tf.train.latest_checkpoint(model_dir).rsplit("-", 1)[1])
        self.assertGreaterEqual(killed_at, 10)
        # Resumed, and a run that was never killed, to the same step, side by side.
        straight_dir = self.get_temp_dir() + "/never_killed"
        resumed, straight = run_concurrently(
            [_train_command(directory, "--dataset=digits", "--digits_config=thesis",
                            f"--train_steps={killed_at + 5}", "--checkpoint_every=5",
                            "--export=false") for directory in (model_dir, straight_dir)],
            env=_env())
        for completed in (resumed, straight):
            self.assertEqual(completed.returncode, 0, completed.stderr[-3000:])
        self.assertIn(f"at step {killed_at}.", resumed.stderr)
        self.assertEqual(json.loads(resumed.stdout.strip().splitlines()[-1])["step"], killed_at + 5)
        # The weights continue from the checkpoint (and the data from its iterator): they equal
        # those of a run that was never killed.
        assert_same_model_weights(self, model_dir, straight_dir)


class DistributedTest(tf.test.TestCase):

    def test_mirrored_over_two_logical_cpus_equals_one_device(self):
        completed = subprocess.run(
            [sys.executable, os.path.join(PROJECT_ROOT, "tests", "helpers", "mirrored_equivalence.py")],
            env=_env(), capture_output=True, text=True, timeout=300)
        self.assertEqual(completed.returncode, 0, completed.stderr[-3000:])
        result = json.loads(completed.stdout.strip().splitlines()[-1])
        self.assertEqual(result["replicas"], 2)
        self.assertAllClose(result["losses_mirrored"], result["losses_single"], atol=1e-5)
        # The weights moved (SGD at 0.5), so equal weights mean equal training, not no training.
        self.assertGreater(result["max_weight_change"], 1e-2)
        self.assertLess(result["max_weight_difference"], 1e-5)

    def test_two_workers_on_localhost_read_their_own_shards_and_end_equal(self):
        model_dir = self.get_temp_dir() + "/multi_worker"
        # Line i is too long for max_length when i % 4 == 1. Sharded by 2, worker 0 reads only
        # even lines and drops nothing; worker 1 drops half of its lines. Unsharded, both
        # would read every line and drop the same share.
        short = synthetic_lines(64, seed=4, max_bytes=30)
        sources = [b"x" * 100 if i % 4 == 1 else (line or b"kurz") for i, line in enumerate(short)]
        targets = [line or b"short" for line in synthetic_lines(64, seed=5, max_bytes=30)]
        files = []
        for name, lines in (("src.de", sources), ("tgt.en", targets)):
            files.append(os.path.join(self.get_temp_dir(), name))
            with open(files[-1], "wb") as f:
                f.write(b"\n".join(lines) + b"\n")
        data_flags = ["--dataset=text", f"--source_file={files[0]}", f"--target_file={files[1]}",
                      f"--valid_source_file={files[0]}", f"--valid_target_file={files[1]}",
                      "--max_length=64"]
        ports = free_ports(2)
        cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
        processes = []
        # Worker 1 asks for another precision; every worker must compute as the chief does.
        precision = {0: "--precision=float32", 1: "--precision=mixed_bfloat16"}
        for index in range(2):
            tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
            processes.append(subprocess.Popen(
                _train_command(model_dir, "--strategy=multi_worker", *data_flags,
                               "--train_steps=6", "--checkpoint_every=3", "--export=false",
                               precision[index]),
                env=_env(TF_CONFIG=tf_config), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True))
        outputs = []
        try:
            for process in processes:
                outputs.append(process.communicate(timeout=400))
        finally:
            for process in processes:
                process.kill()
        for process, (_, stderr) in zip(processes, outputs):
            self.assertEqual(process.returncode, 0, stderr[-3000:])
        self.assertIn("MultiWorkerMirroredStrategy, 2 replicas", outputs[0][1])
        results = [json.loads(stdout.strip().splitlines()[-1]) for stdout, _ in outputs]
        self.assertEqual([result["precision"] for result in results], ["float32", "float32"])
        self.assertIn("Precision: float32 (the chief's choice", outputs[1][1])
        counts = [result["data"]["length_filter"] for result in results]
        self.assertEqual(counts[0]["dropped"], 0)
        self.assertGreater(counts[1]["dropped"], 0)
        assert_same_model_weights(self, model_dir + "/worker_1", model_dir, atol=0)
        chief = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
        self.assertEqual(chief.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE"), 6)


class DevicesTest(tf.test.TestCase):

    def test_auto_precision_choices(self):
        self.assertEqual(devices.resolve_precision("auto", gpus=[("gpu0", (8, 0))], tpu=False)[0],
                         "mixed_float16")
        self.assertEqual(devices.resolve_precision("auto", gpus=[("gpu0", (6, 1))], tpu=False)[0],
                         "float32")
        self.assertEqual(devices.resolve_precision("auto", gpus=[], tpu=True)[0], "mixed_bfloat16")
        self.assertEqual(devices.resolve_precision("auto", gpus=[], tpu=False,
                                                   cpu_bfloat16=True)[0], "mixed_bfloat16")
        self.assertEqual(devices.resolve_precision("auto", gpus=[], tpu=False,
                                                   cpu_bfloat16=False)[0], "float32")

    def test_branch_weight_flag_reaches_every_block(self):
        from absl import flags

        from bytenet_tf import train, zoo
        from bytenet_tf.training.config import model_overrides, resolve

        flags.FLAGS(["bytenet-train", "--branch_weight=0.3", "--hidden_size=8", "--num_stacks=1"])
        try:
            config = train.config_from_flags()
        finally:
            flags.FLAGS.unparse_flags()
        model = zoo.build_model("bytenet_selu", **model_overrides(resolve(config)))
        weights = {block.branch_weight for block in model.encoder_blocks + model.decoder_blocks}
        self.assertEqual(weights, {0.3})
        default = zoo.build_model("bytenet_selu", **model_overrides(resolve(TrainConfig(hidden_size=8))))
        # The zoo default: 1/sqrt(blocks per side), 5 blocks at one stack.
        self.assertEqual(default.branch_weight, "inv_sqrt_depth")
        self.assertAllClose([b.branch_weight for b in default.decoder_blocks], [5 ** -0.5] * 5)
        with self.assertRaisesRegex(ValueError, "branch_weight=0"):
            zoo.build_model("bytenet_selu", hidden_size=8, branch_weight=0)

    def test_unknown_choices_name_the_value(self):
        with self.assertRaisesRegex(ValueError, "precision='fp8' is unknown"):
            devices.resolve_precision("fp8")
        with self.assertRaisesRegex(ValueError, "strategy='horovod' is unknown"):
            devices.resolve_strategy("horovod")

    def test_multi_worker_without_tf_config_explains(self):
        env = dict(os.environ)
        env.pop("TF_CONFIG", None)
        with self.assertRaisesRegex(ValueError, "needs the cluster in the TF_CONFIG"):
            with mock.patch.dict(os.environ, env, clear=True):
                devices.resolve_strategy("multi_worker")


class GradientNormTest(tf.test.TestCase):

    def test_train_step_reports_the_global_gradient_norm(self):
        import keras

        from bytenet_tf import zoo
        source, target, labels = vocabulary.frame_batch([b"eins zwei", b"drei"], [b"one two", b"3"])
        batch = ({"source": tf.constant(source), "target": tf.constant(target)},
                 tf.constant(labels))
        keras.utils.set_random_seed(0)
        model = zoo.build_model("bytenet_selu", hidden_size=16, num_stacks=1, dropout_rate=0.0)
        with tf.GradientTape() as tape:
            logits = model(batch[0], training=True)
            mask = tf.cast(tf.not_equal(batch[1], vocabulary.PAD_ID), tf.float32)
            loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(
                batch[1], logits) * mask) / tf.reduce_sum(mask)
        want = float(tf.linalg.global_norm(tape.gradient(loss, model.trainable_variables)))
        optimizer = keras.optimizers.SGD(0.0)
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64)
        train_step = make_train_step(tf.distribute.get_strategy(), model, optimizer, step)
        got = float(train_step(iter(tf.data.Dataset.from_tensors(batch).repeat()))[3])
        self.assertGreater(want, 0.0)
        self.assertAllClose(got, want, rtol=1e-5)


class ConfigurationSourceTest(tf.test.TestCase):

    def test_every_config_field_is_a_flag_with_its_help_and_default(self):
        from absl import flags

        from bytenet_tf import train

        names = {field.name for field in train._fields()}
        self.assertEqual(names, {f.name for f in dataclasses.fields(TrainConfig)
                                 if f.name not in ("data", "curriculum_optional")}
                         | {f.name for f in dataclasses.fields(datasets.DataSpec)})
        self.assertNotIn("curriculum_optional", flags.FLAGS)
        for name in names:
            self.assertIn(name, flags.FLAGS)
        self.assertEqual(flags.FLAGS["dataset"].default, "digits")
        self.assertIn("Default: 32 (digits preset: 64; text preset: 32).",
                      flags.FLAGS["batch_size"].help)
        # A field without a global default still names what the presets set.
        self.assertIn("(digits preset: 128; text preset: 256).", flags.FLAGS["hidden_size"].help)
        # A preset's values for short budgets are named with their bound.
        bound = train_config.SHORT_BUDGET["text"][0]
        self.assertIn(f"text preset: 0.1, 0.03 with a time budget under {bound:g} s).",
                      flags.FLAGS["weight_decay"].help)
        self.assertIn(f"text preset: the model's, 2 with a time budget under {bound:g} s).",
                      flags.FLAGS["num_stacks"].help)
        self.assertIn(f"text preset: 0.1, 0.2 with a time budget under {bound:g} s).",
                      flags.FLAGS["label_smoothing"].help)
        self.assertEqual(flags.FLAGS["ops_policy"].parser.enum_values,
                         ["auto", "reference", "cpu", "cpu_fused"])

    def test_only_a_preset_curriculum_is_optional(self):
        from bytenet_tf.training.config import resolve

        def resolved(**kwargs):
            config = resolve(TrainConfig(data=datasets.DataSpec(dataset="text"), **kwargs))
            return config.curriculum_epochs, config.curriculum_optional
        self.assertEqual(resolved(time_budget_seconds=1800.0), (2.0, True))
        # Asked for, even at the preset's own value, it is not the preset's to drop.
        self.assertEqual(resolved(time_budget_seconds=1800.0, curriculum_epochs=2.0),
                         (2.0, False))
        self.assertEqual(resolved(time_budget_seconds=1800.0, curriculum_epochs=0.0),
                         (0.0, False))
        self.assertEqual(resolved(), (0.0, False))  # the 2-hour preset
        self.assertEqual(resolved(time_budget_seconds=1800.0, shuffle_buffer=10),
                         (2.0, True))
        once = resolve(TrainConfig(data=datasets.DataSpec(dataset="text"),
                                   time_budget_seconds=1800.0))
        self.assertEqual(resolve(once), once)  # resolving twice keeps the preset's mark

    def test_length_share_out_of_range_names_the_value(self):
        from bytenet_tf.training.config import resolve

        for share in (0.0, 1.01):
            with self.assertRaisesRegex(ConfigError, r"^`train_length_share` must be in \(0, 1\] "
                                        rf".*Received: train_length_share={share}$"):
                resolve(TrainConfig(train_length_share=share))
        self.assertEqual(resolve(TrainConfig()).train_length_share, 1.0)

    def test_library_errors_name_arguments_and_the_binary_names_flags(self):
        from bytenet_tf.training.config import resolve

        with self.assertRaisesRegex(ValueError, r"^`batch_size` must be >= 1. Received: "
                                                r"batch_size=0$") as raised:
            resolve(TrainConfig(batch_size=0))
        from bytenet_tf import train

        self.assertEqual(train.flag_message(str(raised.exception)),
                         "--batch_size must be >= 1. Received: --batch_size=0")
        # Names that are not flags stay as they are.
        self.assertEqual(train.flag_message("`rate` must be < 1. Received: rate=2"),
                         "`rate` must be < 1. Received: rate=2")

    def test_binary_reports_a_bad_flag_value_in_flag_terms(self):
        completed = subprocess.run(
            _train_command(self.get_temp_dir() + "/bad", "--batch_size=0"), env=_env(),
            capture_output=True, text=True, timeout=300)
        self.assertEqual(completed.returncode, 1)
        self.assertIn("bytenet-train: error: --batch_size must be >= 1. Received: --batch_size=0",
                      completed.stderr)


class FusedAdamTest(tf.test.TestCase):

    def _run(self, optimizer_cls, steps=5, **kwargs):
        import keras
        rng = np.random.default_rng(0)
        variables = [keras.Variable(rng.normal(size=shape).astype(np.float32))
                     for shape in [(4, 3), (3,)]]
        optimizer = optimizer_cls(learning_rate=0.01, **kwargs)
        for step in range(steps):
            grads = [tf.constant(rng.normal(size=v.shape).astype(np.float32)) for v in variables]
            optimizer.apply(grads, variables)
        return [v.numpy() for v in variables] + [m.numpy() for m in optimizer._velocities]

    def test_matches_keras_adam(self):
        import keras
        from bytenet_tf.training.optimizer import Adam
        for kwargs in ({}, {"clipnorm": 0.5}, {"amsgrad": True}, {"weight_decay": 2.0}):
            ours, theirs = self._run(Adam, **kwargs), self._run(keras.optimizers.Adam, **kwargs)
            for got, want in zip(ours, theirs):
                self.assertAllClose(got, want, rtol=1e-5, atol=1e-6)
        # The check has teeth: a different epsilon moves the weights.
        moved = self._run(Adam, epsilon=1e-1)
        self.assertNotAllClose(moved[0], self._run(keras.optimizers.Adam)[0])

    def test_snn_paper_settings_reach_the_optimizer(self):
        from bytenet_tf.training.config import resolve
        optimizer = make_optimizer(
            resolve(TrainConfig(adam_beta_2=0.99, adam_epsilon=0.01)), "float32")
        self.assertEqual((optimizer.beta_2, optimizer.epsilon), (0.99, 0.01))

    def test_weight_decay_shrinks_each_weight_by_rate_times_decay(self):
        import keras
        from bytenet_tf.training.config import resolve
        # A zero gradient leaves Adam's own update at zero: the decay alone moves the weights.
        config = resolve(TrainConfig(weight_decay=5.0, learning_rate=0.01, warmup_steps=0,
                                     decay_learning_rate=False))
        optimizer = make_optimizer(config, "float32")
        start = np.array([[1.5, -2.0], [0.25, 4.0]], np.float32)
        variable = keras.Variable(start)
        for _ in range(3):
            optimizer.apply([tf.zeros_like(start)], [variable])
        self.assertAllClose(variable.numpy(), start * (1 - 0.01 * 5.0) ** 3, rtol=1e-6)
        self.assertIsNone(make_optimizer(resolve(TrainConfig()), "float32").weight_decay)

    def test_weight_decay_out_of_range_names_the_value(self):
        from bytenet_tf.training.config import resolve
        for decay in (-0.1, 1000.0):
            with self.assertRaisesRegex(ConfigError, f"below 1 / learning_rate .*weight_decay="
                                                     f"{decay}"):
                resolve(TrainConfig(weight_decay=decay, learning_rate=2e-3))

    def test_trainer_uses_it(self):
        from bytenet_tf.training.config import resolve
        from bytenet_tf.training.optimizer import Adam
        config = resolve(TrainConfig())
        self.assertIsInstance(make_optimizer(config, "float32"), Adam)
        scaled = make_optimizer(config, "mixed_float16")
        self.assertIsInstance(scaled.inner_optimizer, Adam)
