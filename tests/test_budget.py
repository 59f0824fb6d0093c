"""The time budget is wall-clock time for the whole run: training keeps a reserve for the end
(validation, selection, the length penalty, the export), planned from measured decoding speed,
and the end leaves out what the rest of the budget cannot hold."""

import os
from unittest import mock

import tensorflow as tf

from bytenet_tf import inference, zoo
from bytenet_tf.training import evaluation, finish, schedule, selection, trainer
from bytenet_tf.training.config import TrainConfig, resolve
from pipelines import datasets
from tests.test_recipe import TINY, _text_files


class BudgetClockTest(tf.test.TestCase):

    def test_training_stops_at_the_budget_less_the_reserve(self):
        clock = schedule.BudgetClock(100.0, reserve=10.0)
        self.assertEqual(clock.training_budget, 90.0)
        clock.seconds.assign(45.0)
        clock.start()
        self.assertAllClose(clock.progress.numpy(), 0.5, atol=1e-3)
        self.assertFalse(clock.spent())
        self.assertAllClose(clock.remaining(), 55.0, atol=0.5)
        clock.plan(60.0)  # at most half of the budget is kept for the end
        self.assertEqual(clock.training_budget, 50.0)
        clock.seconds.assign(51.0)
        clock.start()
        self.assertTrue(clock.spent())

    def test_no_budget_never_ends_and_keeps_nothing(self):
        clock = schedule.BudgetClock(0.0, reserve=10.0)
        clock.start()
        self.assertFalse(clock.spent())
        self.assertEqual(clock.remaining(), float("inf"))
        self.assertEqual(clock.training_budget, 0.0)


class EndPlanTest(tf.test.TestCase):

    def test_plan_counts_the_validations_the_beam_search_and_the_export(self):
        data = datasets.DataSpec(dataset="text", source_file="a", target_file="b")
        config = resolve(TrainConfig(data=data))  # the text recipe: BLEU, average_last 5, beam 4
        plan = finish.EndPlan(config, average=True, blocks=30)
        margin = finish.MARGIN
        export = finish.EXPORT_SECONDS + 30 * finish.EXPORT_SECONDS_PER_BLOCK
        overhead = finish.OVERHEAD_SECONDS
        load = finish.CANDIDATE_LOAD_SECONDS
        # Nothing measured yet: the export and loading the 3 candidates.
        self.assertAllClose(plan.seconds(), margin * (3 * load + export) + overhead)
        plan.measured_validation(10.0)
        # The last weights, the average, the best checkpoint and the EMA: 4 greedy
        # validations, 3 of them after loading a candidate; one beam search of 4 beams; the
        # export.
        self.assertAllClose(plan.seconds(), margin * (4 * 10.0 + 3 * load + 10.0
                                                      * finish.BEAM_COST_PER_BEAM * 4 + export)
                            + overhead)
        self.assertAllClose(plan.candidate(), load + 10.0)
        plan.beam_seconds = 12.0  # measured once it has run
        self.assertAllClose(plan.tuning(), 12.0)
        plain = finish.EndPlan(resolve(TrainConfig(data=data, select_by="last", beam_size=1,
                                                   export=False)))
        plain.measured_validation(10.0)
        self.assertAllClose(plain.seconds(), margin * 10.0 + overhead)


class BeamTuningTest(tf.test.TestCase):

    def test_one_search_scores_every_penalty_as_its_own_translator_would(self):
        model_dir = self.get_temp_dir()
        config = resolve(TrainConfig(data=_text_files(model_dir), beam_size=3,
                                     **dict(TINY, max_length=40)))
        model = zoo.build_model("bytenet_selu", hidden_size=16, num_stacks=1, max_length=40,
                                seed=2)
        grid = (0.0, 1.0, 3.0)
        best, tried = selection.tune_length_penalty(config, model, grid)
        for alpha in grid:
            translator = inference.Translator(model, beam_size=3, length_alpha=alpha)
            scores = evaluation.validation_scores(config, translator)
            self.assertEqual({key: tried[alpha][key] for key in ("bleu", "chrf", "reached_bound")},
                             {key: scores[key] for key in ("bleu", "chrf", "reached_bound")})
            self.assertGreaterEqual(tried[alpha]["std"], 0.0)
        metric = selection.selection_metric(config)
        self.assertEqual(best, max(grid, key=lambda alpha: tried[alpha][metric]))
        self.assertAllClose(sum(tried[alpha]["wins"] for alpha in grid), 1.0, atol=1e-3)


class BudgetedRunTest(tf.test.TestCase):

    def _config(self, name, **overrides):
        model_dir = os.path.join(self.get_temp_dir(), name)
        values = dict(data=_text_files(self.get_temp_dir()), model_dir=model_dir,
                      export_dir=model_dir + "/export", train_steps=10 ** 6, checkpoint_every=4,
                      eval_every=4, beam_size=2, average_last=3, learning_rate=3e-3,
                      **dict(TINY, max_length=40))
        values.update(overrides)
        return TrainConfig(**values)

    def test_a_budgeted_run_ends_with_its_export_inside_the_budget(self):
        budget = 25.0
        results = trainer.train_and_evaluate(self._config("inside", time_budget_seconds=budget))
        spent = results["budget"]
        self.assertIsNotNone(results["export_path"])
        self.assertLessEqual(spent["seconds"], 1.05 * budget)
        # Training stopped before the budget, leaving what the plan measured for the end.
        self.assertLess(results["total_train_seconds"], budget - 0.5 * spent["reserved_for_the_end"])
        self.assertGreater(spent["validation_seconds"], 0.0)
        self.assertGreater(spent["beam_search_seconds"], 0.0)
        self.assertNotIn("skipped", str(results["selection"]))

    def test_a_candidate_that_would_leave_the_search_short_is_left_out_for_it(self):
        # Room for a candidate's validation, the search and the export, but not for loading
        # the candidate's weights as well: the candidates give way to the length penalty.
        config = self._config("priority", time_budget_seconds=1e6, train_steps=8)
        plans = []

        def plan_seconds(plan):
            plans.append(plan)
            return 0.0

        def remaining(clock):
            if not plans:
                return 1e6
            plan = plans[-1]
            return (plan.validation() + plan.tuning() + plan.export()
                    + 0.5 * finish.CANDIDATE_LOAD_SECONDS)

        with mock.patch.object(finish.EndPlan, "seconds", plan_seconds), \
                mock.patch.object(schedule.BudgetClock, "remaining", remaining):
            results = trainer.train_and_evaluate(config)
        self.assertGreater(plans[-1].tuning(), 0.0)
        skipped = {name: c.get("skipped") for name, c in results["selection"]["candidates"].items()
                   if name != "last"}
        self.assertEqual(set(skipped.values()), {"time budget"})
        self.assertIsNotNone(results["length_penalty"]["tuned_on_validation"])
        self.assertIsNotNone(results["export_path"])

    def test_the_end_leaves_out_what_the_budget_cannot_hold(self):
        config = self._config("over", time_budget_seconds=1e6, train_steps=8)
        with mock.patch.object(schedule.BudgetClock, "remaining", return_value=0.0):
            results = trainer.train_and_evaluate(config)
        candidates = results["selection"]["candidates"]
        self.assertEqual(results["selection"]["chosen"], "last")
        skipped = {name: c.get("skipped") for name, c in candidates.items() if name != "last"}
        self.assertIn("average_last_2", skipped)
        self.assertEqual(set(skipped.values()), {"time budget"})
        # No time for the length penalty's search either: the default, and still an export.
        self.assertIsNone(results["length_penalty"]["tuned_on_validation"])
        self.assertIsNotNone(results["export_path"])
