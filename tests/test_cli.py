"""The binaries run as a user runs them: bytenet-translate and bytenet-evaluate on an export,
and every binary's --help and errors."""

import json
import os
import subprocess
import sys
import unittest

import tensorflow as tf

import bytenet_tf
from bytenet_tf import export, inference
from tests.conftest import (PROJECT_ROOT, run_concurrently, run_python, synthetic_lines,
                            write_parallel_files)


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
        cls.source_file, cls.reference_file = write_parallel_files(cls.base, 20, seed=11)

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
                         f"--source_file={self.source_file}",
                         f"--reference_file={self.reference_file}", f"--output_file={output}")
        self.assertEqual(completed.returncode, 0, completed.stderr[-2000:])
        result = json.loads(completed.stdout.decode().strip().splitlines()[-1])
        for key in ("bleu", "chrf", "signature", "sentences"):
            self.assertIn(key, result)
        self.assertEqual(result["sentences"], 20)
        self.assertIn("version:2.6.0", result["signature"])
        # The batches in flight split the cores: one thread per op for two batches on 2 cores.
        self.assertEqual(result["intra_op_threads"], inference.threads_per_batch(
            inference.DEFAULT_CONCURRENT_BATCHES))
        with open(output, "rb") as f:
            self.assertLen(f.read().split(b"\n")[:-1], 20)

    def test_sizes_below_one_are_clear_errors(self):
        files = [f"--source_file={self.source_file}", f"--reference_file={self.reference_file}"]
        for module, args, flag in (("bytenet_tf.evaluate", files, "--concurrent_batches=0"),
                                   ("bytenet_tf.translate", [], "--batch_size=-1"),
                                   ("bytenet_tf.translate", [], "--batch_bytes=0")):
            completed = _run(module, f"--saved_model={self.base}", *args, flag, stdin=b"x\n")
            self.assertEqual(completed.returncode, 1, completed.stderr[-2000:])
            name = flag[2:].split("=")[0]
            self.assertIn(f"error: --{name} must be >= 1. Received: {flag}".encode(),
                          completed.stderr)

    def test_evaluate_reads_newstest_from_a_sacrebleu_cache(self):
        from tests.test_sources import _write_sacrebleu_cache

        cache = os.path.join(self.get_temp_dir(), "sacrebleu")
        _write_sacrebleu_cache(cache, 2014, "de-en", synthetic_lines(5, 7), synthetic_lines(5, 8))
        completed = _run("bytenet_tf.evaluate", f"--saved_model={self.base}", "--dataset=newstest",
                         "--newstest_year=2014", f"--data_dir={cache}", "--progress=false")
        self.assertEqual(completed.returncode, 0, completed.stderr[-2000:])
        self.assertEqual(json.loads(completed.stdout.decode().splitlines()[-1])["sentences"], 5)

    def test_evaluate_mismatched_files_name_both(self):
        short = os.path.join(self.get_temp_dir(), "short.en")
        with open(short, "wb") as f:
            f.write(b"one line\n")
        completed = _run("bytenet_tf.evaluate", f"--saved_model={self.base}",
                         f"--source_file={self.source_file}", f"--reference_file={short}")
        self.assertEqual(completed.returncode, 1)
        self.assertIn(b"has 20 lines but", completed.stderr)
        self.assertIn(b"short.en has 1", completed.stderr)

    def test_evaluate_translates_and_scores_every_line_including_empty_ones(self):
        # Written here, not read from ../shared: an empty source line, an empty reference line.
        sources = [b"Guten Morgen.", b"", b"Danke sehr.", b"Ja"]
        references = [b"Good morning.", b"Hello.", b"", b"Yes"]
        paths = {}
        for name, lines in (("src.de", sources), ("ref.en", references)):
            paths[name] = os.path.join(self.get_temp_dir(), name)
            with open(paths[name], "wb") as f:
                f.write(b"\n".join(lines) + b"\n")
        output = os.path.join(self.get_temp_dir(), "hyp_empty.en")
        completed = _run("bytenet_tf.evaluate", f"--saved_model={self.base}",
                         f"--source_file={paths['src.de']}", f"--reference_file={paths['ref.en']}",
                         f"--output_file={output}", "--progress=false")
        self.assertEqual(completed.returncode, 0, completed.stderr[-2000:])
        result = json.loads(completed.stdout.decode().strip().splitlines()[-1])
        self.assertEqual(result["sentences"], 4)
        self.assertEqual((result["empty_sources"], result["empty_references"]), (1, 1))
        with open(output, "rb") as f:
            hypotheses = f.read().split(b"\n")
        self.assertEqual(hypotheses[-1], b"")
        self.assertEqual(hypotheses[:-1], [self._translate_one(s).replace(b"\r", b" ")
                                           .replace(b"\n", b" ") for s in sources])
        # The score is sacrebleu's on the four lines, as `sacrebleu ref < hyp` computes it.
        import sacrebleu
        expected = sacrebleu.corpus_bleu([h.decode("utf-8", "replace") for h in hypotheses[:-1]],
                                         [[r.decode() for r in references]])
        self.assertAlmostEqual(result["bleu"], round(expected.score, 4), places=4)


def _binary_commands(module, script):
    """How a user starts a binary: `python -m module`, and the installed console script when
    this environment has it (pip install puts it beside the interpreter)."""
    commands = [[sys.executable, "-m", module]]
    installed = os.path.join(os.path.dirname(sys.executable), script)
    if os.path.exists(installed):
        commands.append([installed])
    return commands


class HelpAndErrorsTest(unittest.TestCase):

    def test_help_lists_each_binarys_own_flags(self):
        expected = {"bytenet-train": ("--model:", "--dataset:", "--source_file:", "--precision:"),
                    "bytenet-translate": ("--saved_model:", "--batch_size:"),
                    "bytenet-evaluate": ("--saved_model:", "--reference_file:",
                                         "--newstest_year:")}
        runs = [(script, command + ["--help"]) for script in expected
                for command in _binary_commands("bytenet_tf." + script.split("-")[1], script)]
        completed = run_concurrently([command for _, command in runs],
                                     env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                                              PYTHONPATH=PROJECT_ROOT))
        for (script, command), done in zip(runs, completed):
            with self.subTest(command=command[-2]):
                # The usage, from the binary's docstring, then its flags.
                self.assertIn(f"{script}:", done.stdout)
                for name in expected[script]:
                    self.assertIn(name, done.stdout)

    def _run_main(self, error):
        code = ("from bytenet_tf import cli\n"
                "from pipelines.options import ConfigError\n"
                f"def main(argv):\n    raise {error}\n"
                "cli.run(main, __name__, 'prog')\n")
        return run_python(code)

    def test_a_configuration_error_is_a_message_in_flag_terms(self):
        completed = self._run_main("ConfigError('`batch_size` must be >= 1')")
        self.assertEqual(completed.returncode, 1)
        self.assertIn("prog: error: `batch_size` must be >= 1", completed.stderr)
        self.assertNotIn("Traceback", completed.stderr)

    def test_any_other_error_is_a_bug_and_keeps_its_traceback(self):
        completed = self._run_main("ValueError('a shape mismatch deep in Keras')")
        self.assertNotEqual(completed.returncode, 0)
        self.assertIn("Traceback", completed.stderr)
        self.assertIn("ValueError: a shape mismatch deep in Keras", completed.stderr)
        self.assertNotIn("prog: error", completed.stderr)
