"""The text recipe's machinery: budget schedule, time across resumes, checkpoint averaging,
selection, length-penalty tuning, the length-bound measurement, the source-blind baseline and
the precision probe."""

import json
import math
import os
from unittest import mock

import numpy as np
import tensorflow as tf

from bytenet_tf import decoding, inference, zoo
from bytenet_tf.training import checkpoints
from bytenet_tf.training import devices, evaluation, selection, trainer
from bytenet_tf.training.config import SHORT_BUDGET, TrainConfig, resolve
from bytenet_tf.training.schedule import BudgetClock, WarmupCosineDecay, make_schedule
from pipelines import datasets
from tests.conftest import synthetic_lines

TINY = dict(hidden_size=16, num_stacks=1, batch_size=8, max_length=64, warmup_steps=2,
            log_every=2, valid_size=6, progress=False, precision="float32", seed=0)


def _text_files(folder, count=40):
    """Synthetic line-aligned files (no empty side), for runs that need the text preset."""
    sources = [line or b"x" for line in synthetic_lines(count, seed=3, max_bytes=30)]
    targets = [line or b"y" for line in synthetic_lines(count, seed=4, max_bytes=30)]
    paths = os.path.join(folder, "s.txt"), os.path.join(folder, "t.txt")
    for path, lines in zip(paths, (sources, targets)):
        with open(path, "wb") as f:
            f.write(b"".join(line.replace(b"\n", b" ") + b"\n" for line in lines))
    return datasets.DataSpec(dataset="text", source_file=paths[0], target_file=paths[1],
                             valid_source_file=paths[0], valid_target_file=paths[1])


class CosineScheduleTest(tf.test.TestCase):

    def test_warmup_then_decay_to_the_floor_by_budget_progress(self):
        progress = tf.Variable(0.0)
        schedule = WarmupCosineDecay(1e-3, warmup_steps=10, total_steps=10 ** 6, floor=0.1,
                                     progress=progress)
        self.assertAllClose(schedule(4), 1e-3 * 5 / 10)  # step counted from 1
        self.assertAllClose(schedule(50), 1e-3, rtol=1e-4)  # no time spent: the peak
        progress.assign(0.5)
        self.assertAllClose(schedule(50), 1e-3 * (0.1 + 0.9 * 0.5))
        progress.assign(1.0)
        self.assertAllClose(schedule(50), 1e-4)

    def test_without_progress_the_steps_decide(self):
        schedule = WarmupCosineDecay(2.0, warmup_steps=1, total_steps=100, floor=0.0)
        self.assertAllClose(schedule(49), 1.0, atol=1e-6)  # step 50 of 100: half way
        self.assertAllClose(schedule(99), 0.0, atol=1e-6)
        self.assertAllClose(schedule(500), 0.0, atol=1e-6)  # past the end: stays at the floor

    def test_bad_arguments_name_their_values(self):
        with self.assertRaisesRegex(ValueError, "floor=1.5"):
            WarmupCosineDecay(1e-3, 10, 100, floor=1.5)


class TextPresetTest(tf.test.TestCase):

    def test_text_preset_is_the_recipe_and_flags_still_win(self):
        data = datasets.DataSpec(dataset="text", source_file="a", target_file="b")
        resolved = resolve(TrainConfig(data=data))
        self.assertEqual(resolved.model, "bytenet_selu")
        self.assertEqual(resolved.schedule, "cosine")
        self.assertEqual(resolved.time_budget_seconds, 7200.0)
        self.assertEqual(resolved.train_max_length, 200)
        self.assertEqual(resolved.max_length, 500)  # serving still takes 500-byte sources
        self.assertEqual(resolved.tokens_per_batch, 2560)
        self.assertEqual(resolved.hidden_size, 256)
        self.assertEqual(resolved.label_smoothing, 0.1)
        self.assertEqual(resolve(TrainConfig(data=data, hidden_size=400)).hidden_size, 400)
        self.assertEqual(resolve(TrainConfig(data=data, label_smoothing=0.0)).label_smoothing, 0.0)
        # An explicit batch size means pairs per batch; an explicit budget still wins over it.
        pairs = resolve(TrainConfig(data=data, batch_size=16))
        self.assertEqual((pairs.batch_size, pairs.tokens_per_batch), (16, 0))
        both = resolve(TrainConfig(data=data, batch_size=16, tokens_per_batch=1024))
        self.assertEqual(both.tokens_per_batch, 1024)
        self.assertEqual((resolved.select_by, resolved.average_last, resolved.beam_size),
                         ("bleu", 5, 4))
        mine = resolve(TrainConfig(data=data, schedule="rsqrt", time_budget_seconds=0,
                                   model="bytenet_small", max_length=100))
        self.assertEqual((mine.schedule, mine.time_budget_seconds, mine.model),
                         ("rsqrt", 0, "bytenet_small"))
        self.assertEqual(mine.train_max_length, 100)  # never longer than max_length

    def test_a_short_budget_takes_the_short_budget_values_and_flags_still_win(self):
        data = datasets.DataSpec(dataset="text", source_file="a", target_file="b")
        bound, short = SHORT_BUDGET["text"]
        self.assertEqual(short, dict(num_stacks=2, weight_decay=0.03, label_smoothing=0.2,
                                     curriculum_epochs=2.0, train_length_share=0.85))
        long = resolve(TrainConfig(data=data))
        self.assertEqual((long.num_stacks, long.weight_decay, long.label_smoothing),
                         (3, 0.1, 0.1))
        for budget in (1800.0, bound - 1):
            with self.subTest(budget=budget):
                resolved = resolve(TrainConfig(data=data, time_budget_seconds=budget))
                self.assertEqual((resolved.num_stacks, resolved.weight_decay,
                                  resolved.label_smoothing, resolved.curriculum_epochs,
                                  resolved.train_length_share), (2, 0.03, 0.2, 2.0, 0.85))
                self.assertEqual(resolved.hidden_size, 256)  # the rest is the preset's
        for budget in (bound, 7200.0, 0.0):  # 0: no budget, the steps decide
            with self.subTest(budget=budget):
                resolved = resolve(TrainConfig(data=data, time_budget_seconds=budget))
                self.assertEqual((resolved.num_stacks, resolved.weight_decay,
                                  resolved.label_smoothing, resolved.curriculum_epochs,
                                  resolved.train_length_share), (3, 0.1, 0.1, 0.0, 1.0))
        mine = resolve(TrainConfig(data=data, time_budget_seconds=1800.0, num_stacks=3,
                                   weight_decay=0.1, label_smoothing=0.1))
        self.assertEqual((mine.num_stacks, mine.weight_decay, mine.label_smoothing),
                         (3, 0.1, 0.1))
        # Other datasets have no short-budget values.
        digits = resolve(TrainConfig(time_budget_seconds=60.0))
        self.assertEqual((digits.num_stacks, digits.weight_decay), (1, 0.0))

    def test_other_datasets_keep_their_behaviour(self):
        resolved = resolve(TrainConfig())
        self.assertEqual((resolved.model, resolved.schedule, resolved.time_budget_seconds,
                          resolved.select_by, resolved.beam_size),
                         ("bytenet_selu", "rsqrt", 0.0, "last", 1))

    def test_bad_values_are_named(self):
        for field, value in (("learning_rate_floor", 2.0), ("length_penalty", -1.0),
                             ("time_budget_seconds", -5.0), ("average_last", -1)):
            with self.assertRaisesRegex(ValueError, f"{field}={value}"):
                resolve(TrainConfig(**{field: value}))


class BoundTest(tf.test.TestCase):

    def test_python_bound_equals_the_decoder_bound(self):
        model = zoo.build_model("bytenet_selu", hidden_size=8, num_stacks=1, max_length=20)
        # 25 bytes: float32(1.2) * 25 rounds up to 31 in the decoder, as here.
        sources = [b"", b"a", b"abc", b"w" * 5, b"x" * 18, b"y" * 19, b"v" * 25, b"z" * 40]
        ids = inference.source_ids(tf.constant(sources), model.max_length)
        limits = decoding.output_limits(model, ids).numpy()
        for source, limit in zip(sources, limits):
            self.assertEqual(decoding.output_bound(len(source), model.unfold_a, model.unfold_b,
                                                   model.max_length), limit, msg=source)

    def test_xla_capacity_rounds_like_the_decoder(self):
        # The jit-compiled Translator sizes its output from `model.max_output_length`; for a
        # longest source of 25 bytes (1.2 * 25 = 30 in float64) it must hold the decoder's 31 + 10.
        model = zoo.build_model("bytenet_selu", hidden_size=8, num_stacks=1, max_length=26)
        for length in range(0, 41):
            self.assertEqual(model.max_output_length(length) + decoding.DEFAULT_MARGIN,
                             decoding.output_bound(length, model.unfold_a, model.unfold_b, 100),
                             msg=length)
        self.assertEqual(model.max_output_length(25), 31)
        translator = inference.Translator(model, jit_compile=True)
        ids = inference.source_ids(tf.constant([b"v" * 25]), model.max_length)
        self.assertEqual(translator.capacity, int(decoding.output_limits(model, ids)[0]))

    def test_untrained_model_runs_to_the_bound_and_is_counted(self):
        # An untrained model often runs to its bound (it rarely draws EOS among 259 ids); the
        # share counts exactly the outputs whose length is the decoder's bound.
        model = zoo.build_model("bytenet_selu", hidden_size=8, num_stacks=1, max_length=40)
        translator = inference.Translator(model)
        sources = [line or b"q" for line in synthetic_lines(12, seed=7, max_bytes=30)]
        outputs = translator(sources)
        at_bound = [len(o) == translator.output_bound(s) for s, o in zip(sources, outputs)]
        share = evaluation.reached_bound(sources, outputs, translator.output_bound)
        self.assertAlmostEqual(share, sum(at_bound) / len(sources))
        self.assertGreater(share, 0.0)
        self.assertEqual(evaluation.reached_bound([b"ab"], [b"a"], lambda s: 5), 0.0)
        self.assertEqual(evaluation.reached_bound([b"ab"], [b"abcde"], lambda s: 5), 1.0)


class SourceBlindTest(tf.test.TestCase):

    def test_blind_model_ignores_the_source_but_trains_its_decoder(self):
        model = zoo.build_model("bytenet_selu", hidden_size=8, num_stacks=1, source_blind=True,
                                seed=1)
        target = tf.constant([[1, 70, 71, 72]])
        a = model({"source": tf.constant([[65, 66, 2]]), "target": target})
        b = model({"source": tf.constant([[90, 91, 92, 93, 2]]), "target": target})
        self.assertAllClose(a, b)
        seeing = zoo.build_model("bytenet_selu", hidden_size=8, num_stacks=1, seed=1)
        c = seeing({"source": tf.constant([[65, 66, 2]]), "target": target})
        d = seeing({"source": tf.constant([[90, 91, 92, 93, 2]]), "target": target})
        self.assertNotAllClose(c, d)
        self.assertTrue(zoo.build_model("bytenet_selu", **{
            k: v for k, v in model.get_config().items()
            if k in ("hidden_size", "num_stacks", "source_blind")}).source_blind)


class AverageAndSelectTest(tf.test.TestCase):

    def test_average_of_checkpoints_is_the_mean_of_each_variable(self):
        model = zoo.build_model("bytenet_small", hidden_size=8, num_stacks=1)
        model({"source": tf.constant([[65, 2]]), "target": tf.constant([[1, 66]])})
        variables = checkpoints.model_variables(model)
        paths, draws = [], []
        for index in range(3):
            values = [np.random.default_rng(index).normal(size=v.shape).astype("float32")
                      for v in variables.values()]
            for variable, value in zip(variables.values(), values):
                variable.assign(value)
            draws.append(values)
            paths.append(tf.train.Checkpoint(model_variables=variables).save(
                os.path.join(self.get_temp_dir(), f"c{index}")))
        checkpoints.average_checkpoints(model, paths)
        for position, variable in enumerate(variables.values()):
            self.assertAllClose(variable.numpy(), np.mean([d[position] for d in draws], axis=0),
                                atol=1e-6)

    def test_text_run_selects_the_best_candidate_and_records_the_tuned_penalty(self):
        model_dir = self.get_temp_dir() + "/select"
        config = TrainConfig(data=_text_files(self.get_temp_dir()), model_dir=model_dir,
                             export_dir=model_dir + "/export", train_steps=12, checkpoint_every=3,
                             eval_every=3, beam_size=2, learning_rate=3e-3, ema_decay=0.9,
                             **dict(TINY, max_length=40))
        with mock.patch.object(selection, "LENGTH_PENALTY_GRID", (0.0, 1.0)):
            results = trainer.train_and_evaluate(config)
        picked = results["selection"]
        metric = picked["metric"]
        self.assertEqual(metric, "bleu")  # the text preset's select_by
        self.assertIn("average_last_4", picked["candidates"])
        self.assertEqual(picked["candidates"]["average_last_4"]["checkpoints"],
                         ["ckpt-3", "ckpt-6", "ckpt-9", "ckpt-12"])
        scores = {name: c[metric] for name, c in picked["candidates"].items()}
        self.assertEqual(picked["chosen"], max(scores, key=scores.get))
        # The exported weights are the chosen ones: their validation is the chosen score.
        self.assertAlmostEqual(results["valid"][metric], scores[picked["chosen"]], places=3)
        tried = results["length_penalty"]["tuned_on_validation"]
        self.assertEqual(sorted(tried), [0.0, 1.0])
        best = max(tried, key=lambda alpha: tried[alpha][metric])
        self.assertEqual(results["length_penalty"]["value"], best)
        with open(os.path.join(model_dir, "config.json")) as f:
            stored = json.load(f)
        self.assertEqual(stored["effective_length_penalty"], best)
        self.assertEqual(stored["exported_weights"], picked["chosen"])
        with open(os.path.join(model_dir, "best", "best.json")) as f:
            self.assertIn(json.load(f)["step"], (3, 6, 9, 12))
        # Every candidate rebuilt from the run folder, as experiments/selection_spread.py
        # decodes it, scores on the validation set what the selection recorded for it.
        from experiments import selection_spread, translator
        sources, references = datasets.take_pairs(config.data, "validation", config.valid_size)
        names = selection_spread.candidates_of(results)
        self.assertEqual(names, list(picked["candidates"]))
        for name in names:
            model = translator.exported_weights(model_dir, results, stored["model_config"], name)
            rebuilt, _ = evaluation.validate(inference.Translator(model), sources, references)
            for score in ("bleu", "chrf"):
                self.assertAlmostEqual(rebuilt[score], picked["candidates"][name][score],
                                       places=3, msg=f"{name} {score}")
        self.assertIn("ema", names)
        with self.assertRaisesRegex(ValueError, "candidate='average_last_9'"):
            translator.exported_weights(model_dir, results, stored["model_config"],
                                        "average_last_9")


class TimeBudgetTest(tf.test.TestCase):

    def test_training_time_is_checkpointed_and_a_resumed_run_honours_the_budget(self):
        model_dir = self.get_temp_dir() + "/budget"
        base = dict(data=datasets.DataSpec(dataset="digits", digits_config="thesis"),
                    model_dir=model_dir, export=False, checkpoint_every=2, **TINY)
        first = trainer.train_and_evaluate(TrainConfig(train_steps=4, **base))
        reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
        seconds = float(reader.get_tensor("train_seconds/.ATTRIBUTES/VARIABLE_VALUE"))
        self.assertGreater(seconds, 0.0)
        # The run's clock ticks once more after its last checkpoint is written, so it may also
        # count that write, which under a loaded suite has taken 1.8 s for this tiny run.
        self.assertBetween(first["total_train_seconds"] - seconds, 0.0, 10.0)
        # A budget smaller than the time already spent: the rerun trains no more.
        again = trainer.train_and_evaluate(TrainConfig(
            train_steps=100, time_budget_seconds=seconds / 2, **base))
        self.assertEqual(again["step"], 4)
        self.assertIsNone(again["train_loss"])
        # A larger budget continues, and the time keeps adding up.
        more = trainer.train_and_evaluate(TrainConfig(train_steps=6, time_budget_seconds=1e6,
                                                      **base))
        self.assertEqual(more["step"], 6)
        self.assertGreater(more["total_train_seconds"], seconds)

    def test_cosine_schedule_follows_the_budget_in_the_trainer(self):
        config = resolve(TrainConfig(schedule="cosine", learning_rate=1.0, warmup_steps=1,
                                     learning_rate_floor=0.0, train_steps=10 ** 6,
                                     time_budget_seconds=100.0))
        clock = BudgetClock(config.time_budget_seconds)
        schedule = make_schedule(config, clock.progress)
        clock.seconds.assign(50.0)
        clock.start()
        self.assertAllClose(schedule(10), 0.5, atol=1e-3)


class PrecisionProbeTest(tf.test.TestCase):

    def test_auto_uses_bfloat16_only_where_it_measures_faster(self):
        with mock.patch.object(devices, "cpu_has_native_bfloat16", return_value=False):
            self.assertEqual(devices.resolve_precision("auto", gpus=[], tpu=False)[0], "float32")
        with mock.patch.object(devices, "cpu_has_native_bfloat16", return_value=True):
            with mock.patch.object(devices, "cpu_bfloat16_speedup", return_value=0.56):
                policy, reason = devices.resolve_precision("auto", gpus=[], tpu=False)
                self.assertEqual(policy, "float32")
                self.assertIn("0.56x", reason)
            with mock.patch.object(devices, "cpu_bfloat16_speedup", return_value=1.6):
                self.assertEqual(devices.resolve_precision("auto", gpus=[], tpu=False)[0],
                                 "mixed_bfloat16")

    def test_speedup_is_a_positive_ratio(self):
        speedup = devices.cpu_bfloat16_speedup()
        self.assertTrue(math.isfinite(speedup) and speedup > 0)


class HeldOutSplitTest(tf.test.TestCase):

    def test_split_partitions_train_into_aligned_train_and_validation(self):
        from tests.conftest import deen_path
        from experiments import translator

        de, en = deen_path("train.de"), deen_path("train.en")  # skips without ../shared
        folder = self.get_temp_dir()
        train_de, train_en, valid_de, valid_en, counts = translator.held_out_split(folder)
        read = lambda path: open(path, "rb").read().split(b"\n")[:-1]  # noqa: E731
        pairs = list(zip(read(de), read(en)))
        train, valid = list(zip(read(train_de), read(train_en))), list(zip(read(valid_de),
                                                                           read(valid_en)))
        self.assertLen(valid, translator.VALID_PAIRS)
        self.assertEqual(sum(counts.values()), translator.VALID_PAIRS)
        self.assertLen(train, len(pairs) - translator.VALID_PAIRS)
        # Every pair lands on one side, aligned as it was; the order of each side is kept.
        self.assertCountEqual(train + valid, pairs)
        held = set(valid)
        self.assertEqual(train, [p for p in pairs if p not in held])  # train has no duplicates
        again = translator.held_out_split(self.get_temp_dir() + "/again")
        self.assertEqual(read(again[2]), read(valid_de))  # the same seed, the same split
        # The published results (docs/results.md, "Real translation" and "The residual branch")
        # were measured on this split: a change to the reader or the seed must show here, not
        # silently move their held-out set.
        with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                               "docs", "results", "translator_recipe_120min.json")) as f:
            self.assertEqual(counts, json.load(f)["held_out_validation"])


class LearnedGatesTest(tf.test.TestCase):

    def test_reads_every_block_gate_in_order_and_none_without_gates(self):
        from experiments import residual_text

        model = zoo.build_model("bytenet_selu", hidden_size=8, num_stacks=1, residual_gate=True)
        model({"source": tf.constant([[5, 2]]), "target": tf.constant([[1, 6]])})
        blocks = model.encoder_blocks + model.decoder_blocks
        for i, block in enumerate(blocks):
            block.gate.assign(0.01 * (i + 1))
        gates = residual_text.learned_gates(model)
        count = len(model.encoder_blocks)
        self.assertAllClose(gates["encoder"], [0.01 * (i + 1) for i in range(count)])
        self.assertAllClose(gates["decoder"],
                            [0.01 * (i + 1) for i in range(count, len(blocks))])
        fixed = zoo.build_model("bytenet_selu", hidden_size=8, num_stacks=1)
        self.assertIsNone(residual_text.learned_gates(fixed))


class BranchSharesTest(tf.test.TestCase):
    """`residual_text.branch_shares`: mean square of w f(x) over that of x, per block."""

    PAIRS = (["ein Haus", "", "x" * 40], ["a house", "nothing", "y" * 30])

    def shares(self, **overrides):
        from experiments import residual_text

        model = zoo.build_model("bytenet_selu", hidden_size=8, num_stacks=1, seed=3, **overrides)
        model({"source": tf.constant([[5, 2]]), "target": tf.constant([[1, 6]])})
        return model, residual_text.branch_shares(model, *self.PAIRS)

    def test_scales_with_the_square_of_the_branch_weight(self):
        _, small = self.shares(branch_weight=0.2)
        _, large = self.shares(branch_weight=0.4)
        self.assertEqual(len(small["encoder"]), 5)
        self.assertEqual(len(small["decoder"]), 5)
        self.assertGreater(small["encoder"][0], 0.0)
        # The first encoder block sees the embedded source whatever w is; every later block
        # (the decoder's too: it reads the encoder's output) sees an input that depends on w.
        self.assertAllClose(large["encoder"][0], 4 * small["encoder"][0], rtol=1e-5)
        self.assertGreater(small["decoder"][0], 0.0)

    def test_reads_a_learned_gate_and_leaves_the_model_as_it_was(self):
        from experiments import residual_text

        model, closed = self.shares(residual_gate=True)
        self.assertEqual(closed["encoder"] + closed["decoder"], [0.0] * 10)  # gates start at 0
        before = evaluation.cross_entropy(model, *self.PAIRS)
        for block in model.encoder_blocks + model.decoder_blocks:
            block.gate.assign(0.1)
        low = residual_text.branch_shares(model, *self.PAIRS)
        model.encoder_blocks[0].gate.assign(0.3)
        high = residual_text.branch_shares(model, *self.PAIRS)
        self.assertAllClose(high["encoder"][0], 9 * low["encoder"][0], rtol=1e-5)
        for block in model.encoder_blocks + model.decoder_blocks:
            self.assertNotIn("_residual", vars(block))  # the hook is removed
            block.gate.assign(0.0)
        self.assertEqual(evaluation.cross_entropy(model, *self.PAIRS), before)


class MergeResultsTest(tf.test.TestCase):
    """`residual_text.py --merge`: later seeds join their sweep's results file."""

    def write(self, folder, name, seeds, steps=2800, commit="aaaaaaa", **extra):
        results = {"command": f"python experiments/residual_text.py --seeds={seeds}",
                   "steps": steps, "weights": {"w0.3": 0.3}, "valid_sentences": 100,
                   "held_out_validation": {"newstest2010": 22}, "commit": commit,
                   "runs": [{"setting": setting, "seed": seed, "heldout_nats": 1.0 + seed}
                            for seed in seeds for setting in ("w0.3", "gate")], **extra}
        with open(os.path.join(folder, f"{name}.json"), "w") as f:
            json.dump(results, f)
        return results

    def read(self, folder, name):
        with open(os.path.join(folder, f"{name}.json")) as f:
            return json.load(f)

    def test_moves_the_runs_records_their_command_and_refuses_another_sweep(self):
        from experiments import common, residual_text

        folder = self.get_temp_dir()
        with mock.patch.object(residual_text, "RESULTS", folder), \
                mock.patch.object(common, "RESULTS", folder):
            first = self.write(folder, "sweep", [0, 1])
            later = self.write(folder, "later", [2], commit="bbbbbbb")
            merged = residual_text.merge_results("later", "sweep")
            self.assertEqual(self.read(folder, "sweep"), merged)
            self.assertFalse(os.path.exists(os.path.join(folder, "later.json")))
            self.assertEqual(merged["runs"], first["runs"] + later["runs"])
            self.assertEqual(merged["commit"], "aaaaaaa")  # the file keeps its own commit
            self.assertEqual(merged["merged"], [{
                "command": later["command"], "commit": "bbbbbbb",
                "settings_and_seeds": [["gate", 2], ["w0.3", 2]]}])

            # Another sweep (other steps), or a setting and seed already there: refused, and
            # neither file changes.
            self.write(folder, "short", [3], steps=400)
            self.write(folder, "again", [2])
            for source, says in (("short", "`steps` differs"), ("again", "('gate', 2)"),
                                 ("missing", "no results file"), ("sweep", "the same file")):
                with self.assertRaisesRegex(ValueError, says.replace("(", r"\(")
                                            .replace(")", r"\)")):
                    residual_text.merge_results(source, "sweep")
            self.assertEqual(self.read(folder, "sweep"), merged)
            self.assertTrue(os.path.exists(os.path.join(folder, "short.json")))
            self.assertTrue(os.path.exists(os.path.join(folder, "again.json")))

    def test_a_file_without_a_model_is_bytenet_selu_and_other_models_are_refused(self):
        from experiments import common, residual_text

        folder = self.get_temp_dir()
        with mock.patch.object(residual_text, "RESULTS", folder), \
                mock.patch.object(common, "RESULTS", folder):
            self.write(folder, "old", [0])  # written before --model existed
            self.write(folder, "selu", [1], model="bytenet_selu")
            self.write(folder, "small", [2], model="bytenet_small")
            merged = residual_text.merge_results("selu", "old")
            self.assertLen(merged["runs"], 4)
            with self.assertRaisesRegex(ValueError, "`model` differs \\(bytenet_small vs "
                                        "bytenet_selu\\)"):
                residual_text.merge_results("small", "old")


class ResidualSettingsTest(tf.test.TestCase):
    """Setting names of the residual sweeps, and where a run of another model lives."""

    def test_learning_rate_suffix_and_its_error(self):
        from experiments.residual_sweep import setting_overrides

        self.assertEqual(setting_overrides("w1+lr1e-3"),
                         {"branch_weight": 1.0, "learning_rate": 1e-3})
        self.assertEqual(setting_overrides("gate+constant+lr3e-3"),
                         {"residual_gate": True, "decay_learning_rate": False,
                          "learning_rate": 3e-3})
        with self.assertRaisesRegex(ValueError, "'lrfast' is not `lr` and a number"):
            setting_overrides("w1+lrfast")
        with self.assertRaisesRegex(ValueError, "'slow' is unknown.*or lr<rate>"):
            setting_overrides("w1+slow")

    def test_run_config_trains_the_model_asked_for_in_its_own_folder(self):
        from experiments import residual_text

        data = datasets.DataSpec(dataset="text", source_file="a", target_file="b")
        selu = residual_text.run_config("w1", 0, 10, data, "float32", runs="/r")
        small = residual_text.run_config("w1+lr1e-3", 1, 10, data, "float32", runs="/r",
                                         model="bytenet_small")
        self.assertEqual((selu.model, selu.model_dir),
                         ("bytenet_selu", "/r/residual_text/w1_seed0"))
        self.assertEqual((small.model, small.model_dir, small.learning_rate, small.branch_weight),
                         ("bytenet_small", "/r/residual_text/bytenet_small_w1+lr1e-3_seed1",
                          1e-3, 1.0))
