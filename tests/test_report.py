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

    def test_each_width_shows_the_scores_of_the_penalty_each_metric_chose(self):
        from experiments.reports import translation

        def valid(by_chrf, by_bleu):
            # As json.load returns beam_width.py's file: widths and penalties are strings.
            return {"chosen_by_chrf": by_chrf, "chosen_by_bleu": by_bleu,
                    "chrf_wins_any_penalty": 0.25, "bleu_wins_any_penalty": 0.75,
                    "by_length_penalty": {str(by_bleu): {"bleu": 11.5, "chrf": 30.0},
                                          str(by_chrf): {"bleu": 9.0, "chrf": 31.0}}}

        def test(bleu):
            return {"sentences_per_second": 12.34,
                    "chosen_by_chrf": {"bleu": bleu, "chrf": 40.0},
                    "chosen_by_bleu": {"bleu": bleu + 2, "chrf": 39.0}}

        result = {"run": "r", "commit": "abc", "cpu": "Some CPU", "command": "python x",
                  "validation": {"4": valid(2.0, 1.0), "8": valid(3.0, 0.6)},
                  "test": {"4": test(18.0), "8": test(19.0)}}
        lines = translation.beam_width_section({"beam_width_r": result})
        rows = [line for line in lines if line.startswith("| `r`")]
        self.assertLen(rows, 4)
        self.assertIn("| 4 | chrF | 2.0 | 9.00 / 31.00 | 0.25 | 18.00 / 40.00 | 12.3 |", rows[0])
        self.assertIn("| 4 | BLEU | 1.0 | 11.50 / 30.00 | 0.75 | 20.00 / 39.00 | 12.3 |", rows[1])
        self.assertIn("| 8 | chrF | 3.0 | 9.00 / 31.00 | 0.25 | 19.00 / 40.00 | 12.3 |", rows[2])
        self.assertIn("| 8 | BLEU | 0.6 | 11.50 / 30.00 | 0.75 | 21.00 / 39.00 | 12.3 |", rows[3])
        self.assertIn("- `beam_width_r`: `python x`", lines)


class TranslatorSectionTest(tf.test.TestCase):

    def _run(self, metric):
        from experiments.reports import translation

        scores = {"bleu": 20.0, "chrf": 40.0, "reached_bound": 0.0}
        test = {name: dict(scores) for name in ("multi30k-test2016",) + translation.NEWS_SETS}
        test["multi30k-test2016"]["examples"] = []
        tried = {"0.0": {"bleu": 22.94, "chrf": 42.37, "reached_bound": 0.0, "std": 1.4,
                         "wins": 0.65},
                 "1.0": {"bleu": 22.73, "chrf": 42.49, "reached_bound": 0.0, "std": 1.39,
                         "wins": 0.35}}
        return {"command": "python t", "commit": "abc", "seed": 0, "steps": 10, "test": test,
                "results": {"selection": {"chosen": "last", "metric": metric,
                                          "candidates": {"last": {"bleu": 1.0, "chrf": 2.0}}},
                            "length_penalty": {"value": 0.0, "tuned_on_validation": tried}}}

    def test_the_length_penalty_spread_names_the_metric_that_chose_it(self):
        from experiments.reports import translation

        by_bleu = "\n".join(translation.translator_section({"x": self._run("bleu")}))
        self.assertIn("0.0: BLEU 22.94, chrF 42.37 (BLEU std 1.40, best in 65% of bootstrap "
                      "resamples), bound 0.000", by_bleu)
        by_chrf = "\n".join(translation.translator_section({"x": self._run("chrf")}))
        self.assertIn("1.0: BLEU 22.73, chrF 42.49 (chrF std 1.39, best in 35% of bootstrap "
                      "resamples)", by_chrf)

    def test_a_rescored_run_shows_all_sentences_and_the_command_that_scored_them(self):
        from experiments.reports import translation

        run = dict(self._run("bleu"), test_sentences=100)
        lines = translation.translator_section({"x": run})
        self.assertIn("| 100 |", next(line for line in lines if line.startswith("| x |")))
        self.assertNotIn("scored again", "\n".join(lines))
        run.update(test_sentences=0, rescored={
            "command": "python r --test_sentences=0", "commit": "fff", "cpu": "AMD EPYC",
            "previous_test_sentences": 100})
        lines = translation.translator_section({"x": run})
        self.assertIn("| all |", next(line for line in lines if line.startswith("| x |")))
        self.assertIn("Test sets scored again (news and FLORES had 100 sentences each before) "
                      "by `python r --test_sentences=0` at commit `fff`, on AMD EPYC.",
                      "\n".join(lines))

    def test_a_candidate_left_out_says_why_instead_of_scores(self):
        from experiments.reports import translation

        run = self._run("bleu")
        run["results"]["selection"]["candidates"]["best_validated"] = {
            "step": 4800, "skipped": "time budget"}
        text = "\n".join(translation.translator_section({"x": run}))
        self.assertIn("of each candidate: last BLEU 1.00 chrF 2.00; best_validated left out "
                      "(time budget: not validated).", text)
        self.assertNotIn("nan", text)


class LongRunSectionTest(tf.test.TestCase):

    def _result(self, reached_budget):
        curve = [{"step": 1000, "epochs": 0, "learning_rate": 2e-3, "train_loss": 1.6,
                  "valid_loss": 1.4},
                 {"step": 2000, "epochs": 1, "learning_rate": 1e-3, "train_loss": 1.2,
                  "valid_loss": 1.25, "valid_greedy": {"bleu": 7.0, "chrf": 25.0},
                  "test_greedy": {"bleu": 13.0, "chrf": 32.0}, "weights_step": 2000},
                 {"step": 3000, "epochs": 1, "learning_rate": 5e-4, "train_loss": 1.1,
                  "valid_loss": 1.3}]
        if reached_budget:
            curve[-1].update(curve[1], step=3000)
        return {"trained_by": "KERAS_BACKEND=jax python t", "trained_at": "abc", "commit": "def",
                "trained_on": "[CudaDevice(id=0)]", "command": "python s", "scored_on": "CPU",
                "parameters": 1234, "weights_step": 3000 if reached_budget else 2000,
                "weights_epochs": 1, "weights_learning_rate": 1e-3, "budget_seconds": 330.0,
                "reached_budget": reached_budget, "last_logged_step": 3000,
                "test_set": "multi30k-test2016", "curve": curve,
                "test_beam4": {"bleu": 20.5, "chrf": 40.25, "length_penalty": 1.0},
                "test_greedy": {"bleu": 18.0, "chrf": 38.0}}

    def test_a_run_stopped_before_its_budget_says_which_weights_were_scored(self):
        from experiments.reports import translation

        lines = translation.long_run_section({"long_run_x": self._result(False)})
        text = "\n".join(lines)
        self.assertIn("Weights of step 2,000 (epochs done: 1, learning rate 1.00e-03); stopped at "
                      "step 3,000, before its 5.5-minute budget ended", text)
        self.assertIn("beam 4, length penalty 1.0: BLEU 20.50, chrF 40.25; greedy: BLEU 18.00",
                      text)
        self.assertIn("| 2,000 | 1 | 1.00e-03 | 1.200 | 1.250 | 7.00 / 13.00 |", lines)
        self.assertIn("| 3,000 | 1 | 5.00e-04 | 1.100 | 1.300 |  |", lines)
        self.assertIn("![long_run_x](results/long_run_x.png)", lines)
        finished = "\n".join(translation.long_run_section({"long_run_x": self._result(True)}))
        self.assertIn("Weights of step 3,000 (epochs done: 1, learning rate 1.00e-03).", finished)
        self.assertNotIn("stopped", finished)


class StepsSectionTest(tf.test.TestCase):

    @staticmethod
    def _cpu_run(steps, **model):
        model = dict(dict(hidden_size=256, num_stacks=3, dropout_rate=0.0, source_blind=False,
                          cross_attention="none"), **model)
        return {"steps": steps, "cpu": "CPU", "precision": "float32",
                "effective_config": {"tokens_per_batch": 2560, "label_smoothing": 0.1,
                                     "model_config": model},
                "test": {"multi30k-test2016": {"bleu": 19.5, "chrf": 39.0}},
                "test_greedy_same_weights": {"multi30k-test2016": {"bleu": 17.0, "chrf": 37.0}}}

    @staticmethod
    def _gpu_run(name, steps, asked, dropout=0.0):
        return {"name": name, "steps": steps, "steps_asked": asked,
                "cut_by_deadline": steps < asked, "dropout_rate": dropout,
                "trained_by": f"python t --name={name} --steps={asked} --dropout={dropout:g}",
                "scored_by": f"python s --name={name}",
                "training_machine": "a GPU", "scored_on": "a CPU", "commit": "abc",
                "final_held_out_loss": 1.01, "held_out_loss_tensorflow_float32": 1.0099,
                "length_penalty": {"value": 1.0},
                "curve": [{"step": 0, "held_out_loss": 6.0},
                          {"step": 1000, "train_loss": 1.5, "held_out_loss": 1.4},
                          {"step": steps, "held_out_loss": 1.01}],
                "test": {"multi30k-test2016": {"beam4": {"bleu": 21.23, "chrf": 40.7},
                                               "greedy": {"bleu": 18.7, "chrf": 38.8}}}}

    def test_the_cpu_table_holds_the_smoothed_preset_alone(self):
        from experiments.reports import steps

        runs = {"preset": self._cpu_run(4897),
                "blind": self._cpu_run(4914, source_blind=True),
                "dropout": self._cpu_run(4800, dropout_rate=0.1),
                "wide": self._cpu_run(3000, hidden_size=400),
                "attention": self._cpu_run(4000, cross_attention="branch"),
                "decay": self._cpu_run(4000)}
        runs["decay"]["effective_config"]["weight_decay"] = 0.03
        self.assertEqual(list(steps.preset_cpu_runs(runs)), ["preset"])

    def test_each_gpu_run_shows_its_steps_and_whether_the_deadline_ended_it(self):
        from experiments.reports import steps

        gpu = {"steps_limit_a": self._gpu_run("a", 6536, 25500),
               "steps_limit_b": self._gpu_run("b", 4900, 4900)}
        with tempfile.TemporaryDirectory() as folder, mock.patch.object(steps, "DOCS", folder):
            os.makedirs(os.path.join(folder, "results"))
            lines = steps.steps_limit_section(gpu, {})
            self.assertTrue(os.path.exists(os.path.join(folder, "results", "steps_limit.png")))
        rows = [line for line in lines if line.startswith("| `")]
        self.assertEqual(rows[0], "| `b` | 4,900 (4,900) | 0 | 1.500 | 1.0100 / 1.0099 | 1 | "
                                  "21.23 (40.7) | 18.70 (38.8) |")
        self.assertTrue(rows[1].startswith("| `a` | 6,536 (25,500, ended by the deadline) |"))
        self.assertIn("`python t --name=<name> --steps=<steps> --dropout=<dropout>` per run",
                      "\n".join(lines))


class WeightDecaySectionTest(tf.test.TestCase):

    @staticmethod
    def _result(decay, steps, valid_losses, asked=12000, bleu=22.0):
        flags = f" --weight_decay={decay}" if decay else ""
        curve = [{"step": 1000 * (i + 1), "train_loss": 1.0 - 0.01 * i, "valid_loss": loss}
                 for i, loss in enumerate(valid_losses)]
        curve[-1]["step"] = steps
        return {"trained_by": f"python t train --steps={asked}{flags}", "trained_at": "abc",
                "trained_on": "a GPU", "commit": "def", "weights_step": steps,
                "reached_budget": True, "curve": curve,
                "validation_by_length_penalty": {"1.0": {"bleu": 12.5, "chrf": 32.0}},
                "test_beam4": {"bleu": bleu, "chrf": 42.0, "length_penalty": 1.0},
                "test_greedy": {"bleu": 20.0, "chrf": 40.0}}

    def test_rows_are_ordered_by_decay_with_the_lowest_held_out_loss_and_cut_runs(self):
        from experiments.reports import steps

        results = {"long_run_wd0.1": self._result(0.1, 3000, [1.3, 1.1, 1.05], asked=3000,
                                                  bleu=22.72),
                   "long_run_wd0": self._result(0, 3000, [1.3, 1.0, 1.09], asked=3000),
                   "long_run_wd0.3": self._result(0.3, 2800, [1.4, 1.2, 1.15], asked=3000)}
        with tempfile.TemporaryDirectory() as folder, mock.patch.object(steps, "DOCS", folder):
            os.makedirs(os.path.join(folder, "results"))
            lines = steps.weight_decay_section(results)
            self.assertTrue(os.path.exists(os.path.join(folder, "results",
                                                        "weight_decay_steps.png")))
        rows = [line for line in lines if line.startswith("| `")]
        self.assertEqual([row.split("`")[1] for row in rows],
                         ["long_run_wd0", "long_run_wd0.1", "long_run_wd0.3"])
        self.assertEqual(rows[0], "| `long_run_wd0` | 0 | 3,000 | 0.980 | 1.0900 (1.0000, 2,000) "
                                  "| 12.50 | 22.00 (42.0) | 20.00 (40.0) |")
        self.assertIn("| 0.1 | 3,000 | 0.980 | 1.0500 (1.0500, 3,000) | 12.50 | 22.72 (42.0) |",
                      rows[1])
        self.assertIn("| 0.3 | 2,800 of 3,000, ended by its --minutes |", rows[2])


class CheckpointSectionTest(tf.test.TestCase):

    def test_both_streams_show_their_write_times_and_sizes(self):
        from experiments.reports import speed

        result = {"command": "python benchmarks/checkpoint_cost.py", "commit": "abc",
                  "cpu": "some CPU", "pairs": 1500, "shuffle_buffer": 2000,
                  "tokens_per_batch": 512, "rounds": 2, "batches_between_writes": 3,
                  "seconds_to_first_batch": {"buffer": 4.25, "permuted": 0.5},
                  "write_seconds_per_round": {"buffer": [1.5, 1.7], "permuted": [0.01, 0.02]},
                  "write_seconds_median": {"buffer": 1.6, "permuted": 0.015},
                  "checkpoint_bytes": {"buffer": 38_900_000, "permuted": 410_000}}
        lines = speed.checkpoint_section(result)
        self.assertIn("Command: `python benchmarks/checkpoint_cost.py` at commit `abc`.", lines)
        self.assertIn("| a shuffle buffer holding every pair | 4.2 s | 1.600 s | 1.500, 1.700 "
                      "| 38,900,000 |", lines)
        self.assertIn("| the pairs in memory, each epoch permuted | 0.5 s | 0.015 s | 0.010, "
                      "0.020 | 410,000 |", lines)
        self.assertIn("1,500 training pairs, shuffle buffer 2,000", lines[3])


class ThreadsSectionTest(tf.test.TestCase):

    def test_each_run_shows_its_threads_speed_and_whether_outputs_match(self):
        from experiments.reports import speed

        def run(pair, threads, speed_, digest):
            row = {"set": "captions", "sentences": 10, "sentences_per_s": speed_,
                   "fraction_of_float32_peak": 0.4567, "outputs_sha256": digest}
            return {"pair": pair, "intra_op_threads": threads, "matmul_peak_gflop_per_s": 210.4,
                    "rows": [row]}

        result = {"command": "python benchmarks/translate_speed.py", "commit": "abc",
                  "cpu": "some CPU", "weights": "some weights", "how": "two at once",
                  "runs": [run(1, 0, 80.25, "aa"), run(1, 1, 90.0, "aa"), run(2, 1, 91.0, "bb")]}
        lines = speed.threads_section(result)
        self.assertIn("Command: `python benchmarks/translate_speed.py` at commit `abc`.", lines)
        self.assertIn("| 1 | TensorFlow's default | captions (10) | 80.2 | 45.7% | 210 | same as "
                      "the first run |", lines)
        self.assertIn("| 1 | 1 | captions (10) | 90.0 | 45.7% | 210 | same as the first run |",
                      lines)
        self.assertIn("| 2 | 1 | captions (10) | 91.0 | 45.7% | 210 | differ from the first "
                      "run |", lines)


class SourceGapSectionTest(tf.test.TestCase):

    @staticmethod
    def _run(blind, losses, seed=0, label_smoothing=0.2, commit="abc"):
        """A translator result whose training loss is `losses[i]` at step 50 * (i + 1)."""
        model = {"name": "bytenet_selu", "hidden_size": 256}
        if blind:
            model["source_blind"] = True
        curve = [{"step": 50 * (i + 1), "loss": loss} for i, loss in enumerate(losses)]
        curve += [{"step": 100, "valid_bleu": 3.0 if blind else 7.5},
                  {"step": 200, "valid_bleu": 1.0 if blind else 9.25}]
        return {"seed": seed, "minutes": 30.0, "steps": 50 * len(losses), "commit": commit,
                "curve": curve,
                "effective_config": {"label_smoothing": label_smoothing, "model_config": model,
                                     "source_blind": True if blind else None,
                                     "model_dir": f"runs/{blind}", "exported_weights": "last"}}

    def test_each_blind_run_meets_the_run_that_trained_alike_and_shows_the_gap_by_window(self):
        from experiments.reports import translation

        runs = {"reading": self._run(False, [2.0, 1.0, 0.5, 0.25]),
                "reading_other_seed": self._run(False, [2.0, 1.0, 0.5, 0.25], seed=1),
                "reading_other_smoothing": self._run(False, [2.0, 1.0, 0.5, 0.25],
                                                     label_smoothing=0.1),
                "blind": self._run(True, [2.5, 1.5, 1.5, 1.25, 1.0], commit="def")}
        self.assertEqual(translation.source_gap_pairs(runs), [("reading", "blind")])
        lines = translation.source_gap_section(runs, window=100)
        self.assertIn("`reading` (abc) against `blind` (def); 30-minute budget, 200 and 250 "
                      "steps.", lines)
        # Windows end at the shorter run's last step: the blind run's fifth log is left out.
        self.assertIn("| 1-100 | 1.500 | 2.000 | 0.500 | 7.5 / 3.0 |", lines)
        self.assertIn("| 101-200 | 0.375 | 1.375 | 1.000 | 9.2 / 1.0 |", lines)
        self.assertLen([line for line in lines if line.startswith("| 1")], 2)
        # A last window shorter than the others ends at that step too, for both runs.
        lines = translation.source_gap_section(runs, window=150)
        self.assertIn("| 1-150 | 1.167 | 1.833 | 0.667 | 7.5 / 3.0 |", lines)
        self.assertIn("| 151-200 | 0.250 | 1.250 | 1.000 | 9.2 / 1.0 |", lines)

    def test_no_pair_no_section(self):
        from experiments.reports import translation

        runs = {"reading": self._run(False, [1.0]),
                "blind": self._run(True, [1.0], label_smoothing=0.1)}
        self.assertEqual(translation.source_gap_section(runs), [])
