"""experiments/report.py and its renderers: tables name the command of every row."""

import os
import tempfile
from unittest import mock

import tensorflow as tf


def _check(flags, commit, **extra):
    command = ("bytenet-train --model=bytenet_selu --dataset=text --time_budget_seconds=600 "
               f"{flags} --model_dir=runs/x")
    return dict(command=command, commit=commit, steps=10, first_seconds_at_bleu_90=None,
                best_bleu=1.0, final_bleu=1.0, final_chrf=2.0, passed=False,
                curve=[{"step": 4, "train_seconds": 3.0}, {"step": 4, "valid_bleu": 1.0}], **extra)


class CheckSectionTest(tf.test.TestCase):

    def test_each_row_names_the_flags_that_its_command_adds(self):
        from experiments.reports import memorization

        results = {"old": _check("--eval_every=40", "aaa"),
                   "new": _check("--schedule=rsqrt --eval_every=40 --branch_weight=1", "bbb",
                                 precision="float32", cpu="Some CPU (family 1, model 2)")}
        with tempfile.TemporaryDirectory() as folder, mock.patch.object(memorization, "DOCS", folder):
            lines = memorization.check_section(results)
            self.assertTrue(os.path.exists(os.path.join(folder, "memorize_check.png")))
        text = "\n".join(lines)
        self.assertIn("`bytenet-train --model=bytenet_selu --dataset=text "
                      "--time_budget_seconds=600 --eval_every=40`", text)
        rows = {line.split(" | ")[0][2:]: line for line in lines if line.startswith("| old")
                or line.startswith("| new")}
        self.assertIn("`(none)` | aaa | not recorded | not recorded |", rows["old"])
        self.assertIn("`--schedule=rsqrt --branch_weight=1` | bbb | float32 | "
                      "Some CPU (family 1, model 2) |", rows["new"])
        self.assertNotIn("model_dir", text)
