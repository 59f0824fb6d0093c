"""bytenet-train end to end: digits, text, resume, NaN, mirrored and two workers."""

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

from bytenet_tf.training import devices, trainer
from bytenet_tf.training.config import TrainConfig
from pipelines import datasets
from tests.conftest import PROJECT_ROOT, deen_path
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


class TrainEndToEndTest(tf.test.TestCase):

    def test_digits_run_trains_validates_and_exports(self):
        model_dir = self.get_temp_dir() + "/digits"
        results = trainer.train_and_evaluate(TrainConfig(
            data=datasets.DataSpec(name="digits", digits_config="thesis"), model_dir=model_dir,
            export_dir=model_dir + "/export", train_steps=10, checkpoint_every=5, **TINY))
        self.assertEqual(results["step"], 10)
        self.assertTrue(np.isfinite(results["train_loss"]))
        self.assertEqual(results["valid"]["sentences"], 8)
        self.assertIn("4-gram", results["valid"]["bleu_caveat"])
        self.assertTrue(os.path.isfile(os.path.join(results["export_path"], "saved_model.pb")))
        with open(os.path.join(model_dir, "config.json")) as f:
            config = json.load(f)
        self.assertEqual(config["effective_precision"], "float32")
        self.assertEqual(config["model_config"]["hidden_size"], 16)
        self.assertTrue(glob.glob(os.path.join(model_dir, "train", "events.out.tfevents.*")))

    def test_text_run_on_real_fixtures(self):
        model_dir = self.get_temp_dir() + "/text"
        data = datasets.DataSpec(
            name="text", source_file=deen_path("fixture-small.de"),
            target_file=deen_path("fixture-small.en"),
            valid_source_file=deen_path("fixture-tiny.de"),
            valid_target_file=deen_path("fixture-tiny.en"))
        results = trainer.train_and_evaluate(TrainConfig(
            model="bytenet_small", data=data, model_dir=model_dir, export=False, train_steps=6,
            checkpoint_every=3, **TINY))
        self.assertEqual(results["step"], 6)
        self.assertIsNone(results["export_path"])
        self.assertIn("BLEU", results["valid"]["signature"].upper() + "BLEU")
        self.assertIn("nrefs:1", results["valid"]["signature"])
        self.assertEqual(results["valid"]["bleu_caveat"], "")

    def test_finished_run_does_not_train_again(self):
        model_dir = self.get_temp_dir() + "/finished"
        config = TrainConfig(data=datasets.DataSpec(name="digits", digits_config="thesis"),
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
        config = TrainConfig(data=datasets.DataSpec(name="digits", digits_config="thesis"),
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
        base = dict(data=datasets.DataSpec(name="digits", digits_config="thesis"),
                    model_dir=model_dir, export=False, train_steps=2, checkpoint_every=2)
        trainer.train_and_evaluate(TrainConfig(**base, **TINY))
        with self.assertRaisesRegex(ValueError, "hidden_size: 16 there, 24 now"):
            trainer.train_and_evaluate(TrainConfig(**base, **dict(TINY, hidden_size=24)))


class ResumeTest(tf.test.TestCase):

    def test_killed_run_resumes_from_its_checkpoint(self):
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
        resumed = subprocess.run(
            _train_command(model_dir, "--dataset=digits", "--digits_config=thesis",
                           f"--train_steps={killed_at + 5}", "--checkpoint_every=5",
                           "--export=false"),
            env=_env(), capture_output=True, text=True, timeout=300)
        self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
        self.assertIn(f"at step {killed_at}.", resumed.stderr)
        self.assertEqual(json.loads(resumed.stdout.strip().splitlines()[-1])["step"], killed_at + 5)


class DistributedTest(tf.test.TestCase):

    def test_mirrored_over_two_logical_cpus_equals_one_device(self):
        completed = subprocess.run(
            [sys.executable, os.path.join(PROJECT_ROOT, "tests", "helpers", "mirrored_equivalence.py"),
             deen_path("fixture-small.de"), deen_path("fixture-small.en")],
            env=_env(), capture_output=True, text=True, timeout=300)
        self.assertEqual(completed.returncode, 0, completed.stderr[-3000:])
        result = json.loads(completed.stdout.strip().splitlines()[-1])
        self.assertEqual(result["replicas"], 2)
        self.assertAllClose(result["losses_mirrored"], result["losses_single"], atol=1e-5)
        self.assertLess(result["max_weight_difference"], 1e-5)

    def test_two_workers_on_localhost_end_with_identical_weights(self):
        model_dir = self.get_temp_dir() + "/multi_worker"
        ports = free_ports(2)
        cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
        processes = []
        for index in range(2):
            tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
            processes.append(subprocess.Popen(
                _train_command(model_dir, "--strategy=multi_worker", "--dataset=digits",
                               "--digits_config=thesis", "--train_steps=6",
                               "--checkpoint_every=3", "--export=false"),
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
        chief = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
        worker = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir + "/worker_1"))
        names = [n for n in chief.get_variable_to_shape_map() if n.startswith("model/")]
        self.assertNotEmpty(names)
        for name in names:
            self.assertAllEqual(chief.get_tensor(name), worker.get_tensor(name))
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
        self.assertEqual({b.branch_weight for b in default.decoder_blocks}, {1.0})
        with self.assertRaisesRegex(ValueError, "branch_weight=0"):
            zoo.build_model("bytenet_selu", hidden_size=8, branch_weight=0)

    def test_unknown_choices_name_the_value(self):
        with self.assertRaisesRegex(ValueError, "--precision=fp8 is unknown"):
            devices.resolve_precision("fp8")
        with self.assertRaisesRegex(ValueError, "--strategy=horovod is unknown"):
            devices.resolve_strategy("horovod")

    def test_multi_worker_without_tf_config_explains(self):
        env = dict(os.environ)
        env.pop("TF_CONFIG", None)
        with self.assertRaisesRegex(ValueError, "needs the cluster in the TF_CONFIG"):
            with mock.patch.dict(os.environ, env, clear=True):
                devices.resolve_strategy("multi_worker")


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
        for kwargs in ({}, {"clipnorm": 0.5}, {"amsgrad": True}):
            ours, theirs = self._run(Adam, **kwargs), self._run(keras.optimizers.Adam, **kwargs)
            for got, want in zip(ours, theirs):
                self.assertAllClose(got, want, rtol=1e-5, atol=1e-6)
        # The check has teeth: a different epsilon moves the weights.
        moved = self._run(Adam, epsilon=1e-1)
        self.assertNotAllClose(moved[0], self._run(keras.optimizers.Adam)[0])

    def test_trainer_uses_it(self):
        from bytenet_tf.training.config import resolve
        from bytenet_tf.training.optimizer import Adam
        config = resolve(TrainConfig())
        self.assertIsInstance(trainer.make_optimizer(config, "float32"), Adam)
        scaled = trainer.make_optimizer(config, "mixed_float16")
        self.assertIsInstance(scaled.inner_optimizer, Adam)
