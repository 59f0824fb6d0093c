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


class BeamWidthSectionTest(tf.test.TestCase):

    def test_each_width_shows_the_scores_of_its_chosen_penalty(self):
        from experiments.reports import translation

        def valid(chosen, chrf):
            # As json.load returns beam_width.py's file: widths and penalties are strings.
            return {"chosen_length_penalty": chosen, "chrf_wins_any_penalty": 0.25,
                    "by_length_penalty": {"1.0": {"bleu": 9.0, "chrf": 30.0},
                                          str(chosen): {"bleu": 11.5, "chrf": chrf}}}

        test = {"bleu": 20.0, "chrf": 40.0, "sentences_per_second": 12.34}
        result = {"run": "r", "commit": "abc", "cpu": "Some CPU", "command": "python x",
                  "validation": {"4": valid(1.5, 41.0), "8": valid(2.0, 42.0)},
                  "test": {"4": test, "8": dict(test, bleu=21.0)}}
        lines = translation.beam_width_section({"beam_width_r": result})
        rows = [line for line in lines if line.startswith("| `r`")]
        self.assertLen(rows, 2)
        self.assertIn("| 4 | 1.5 | 11.50 / 41.00 | 0.25 | 20.00 / 40.00 | 12.3 |", rows[0])
        self.assertIn("| 8 | 2.0 | 11.50 / 42.00 | 0.25 | 21.00 / 40.00 | 12.3 |", rows[1])
        self.assertIn("- `beam_width_r`: `python x`", lines)
