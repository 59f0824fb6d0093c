"""bytenet-translate and bytenet-evaluate, run as a user runs them."""

import json
import os
import subprocess
import sys

import tensorflow as tf

import bytenet_tf
from bytenet_tf import export
from tests.conftest import PROJECT_ROOT, deen_path


def _run(module, *args, stdin=b""):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=PROJECT_ROOT)
    return subprocess.run([sys.executable, "-m", module, *args], input=stdin, env=env,
                          capture_output=True, timeout=300)


class CommandLineTest(tf.test.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        model = bytenet_tf.build_model("bytenet_small", hidden_size=16, num_stacks=1,
                                       max_length=48, seed=0)
        cls.base = os.path.join(tf.compat.v1.test.get_temp_dir(), "cli_exports")
        cls.version = export.export_saved_model(model, cls.base)
        cls.signature = tf.saved_model.load(cls.version).signatures["serving_default"]

    def _translate_one(self, line):
        return self.signature(source=tf.constant([line]))["translation"].numpy()[0]

    def test_translate_keeps_order_and_one_line_per_input(self):
        lines = [b"Guten Morgen.", b"", b"\xff\x00", b"Ein viel l\xc3\xa4ngerer Satz als die anderen.",
                 b"ja\xe2\x80\xa8nein"]
        completed = _run("bytenet_tf.translate", f"--saved_model={self.base}", "--batch_size=2",
                         stdin=b"\n".join(lines) + b"\n")
        self.assertEqual(completed.returncode, 0, completed.stderr[-2000:])
        out = completed.stdout.split(b"\n")
        self.assertEqual(out[-1], b"")
        self.assertLen(out[:-1], len(lines))
        for line, translation in zip(lines, out[:-1]):
            expected = self._translate_one(line).replace(b"\r", b" ").replace(b"\n", b" ")
            self.assertEqual(translation, expected)

    def test_translate_accepts_a_version_directory(self):
        completed = _run("bytenet_tf.translate", f"--saved_model={self.version}",
                         "--progress=false", stdin=b"Hallo\n")
        self.assertEqual(completed.returncode, 0, completed.stderr[-2000:])
        self.assertLen(completed.stdout.split(b"\n"), 2)

    def test_translate_missing_model_is_a_clear_error(self):
        completed = _run("bytenet_tf.translate", "--saved_model=/nowhere", stdin=b"x\n")
        self.assertEqual(completed.returncode, 1)
        self.assertIn(b"No SavedModel at /nowhere", completed.stderr)

    def test_evaluate_prints_json_last_and_writes_translations(self):
        output = os.path.join(self.get_temp_dir(), "hyp.en")
        completed = _run("bytenet_tf.evaluate", f"--saved_model={self.base}",
                         f"--source_file={deen_path('fixture-tiny.de')}",
                         f"--reference_file={deen_path('fixture-tiny.en')}",
                         f"--output_file={output}")
        self.assertEqual(completed.returncode, 0, completed.stderr[-2000:])
        result = json.loads(completed.stdout.decode().strip().splitlines()[-1])
        for key in ("bleu", "chrf", "signature", "sentences"):
            self.assertIn(key, result)
        self.assertEqual(result["sentences"], 20)
        self.assertIn("version:2.6.0", result["signature"])
        with open(output, "rb") as f:
            self.assertLen(f.read().split(b"\n")[:-1], 20)

    def test_evaluate_reads_newstest_from_a_sacrebleu_cache(self):
        from tests.test_sources import _write_sacrebleu_cache
        from tests.conftest import read_lines

        cache = os.path.join(self.get_temp_dir(), "sacrebleu")
        _write_sacrebleu_cache(cache, 2014, "de-en", read_lines("fixture-tiny.de", 5),
                               read_lines("fixture-tiny.en", 5))
        completed = _run("bytenet_tf.evaluate", f"--saved_model={self.base}", "--dataset=newstest",
                         "--newstest_year=2014", f"--data_dir={cache}", "--progress=false")
        self.assertEqual(completed.returncode, 0, completed.stderr[-2000:])
        self.assertEqual(json.loads(completed.stdout.decode().splitlines()[-1])["sentences"], 5)

    def test_evaluate_mismatched_files_name_both(self):
        short = os.path.join(self.get_temp_dir(), "short.en")
        with open(short, "wb") as f:
            f.write(b"one line\n")
        completed = _run("bytenet_tf.evaluate", f"--saved_model={self.base}",
                         f"--source_file={deen_path('fixture-tiny.de')}", f"--reference_file={short}")
        self.assertEqual(completed.returncode, 1)
        self.assertIn(b"has 20 lines but", completed.stderr)
        self.assertIn(b"short.en has 1", completed.stderr)
