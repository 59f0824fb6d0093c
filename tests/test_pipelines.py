"""Datasets and the shared pipeline steps: digits, local text, framing, buckets, seeds."""

import gzip
import os
import tempfile

import numpy as np
import tensorflow as tf

from pipelines import byte_codec, datasets, digits, preprocessing, text
from tests.conftest import deen_path, run_python, write_parallel_files


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def _batches_as_bytes(dataset, count):
    return [(f["source"].numpy().tobytes(), f["target"].numpy().tobytes(), l.numpy().tobytes())
            for f, l in dataset.take(count)]


class DigitsTest(tf.test.TestCase):

    def test_thesis_draws_reproduce_the_thesis_test_fixture(self):
        # code/dataset/test/test_synthetic_digits.py in AndreasMadsen/master-thesis, seed 99.
        self.assertEqual(digits.thesis_rng_items(99, 10),
                         ["388", "849", "28", "54", "730", "704", "119", "41", "671", "407"])

    def test_thesis_config_is_the_thesis_data_with_its_overlap(self):
        train, test = digits.digit_pairs("thesis")
        self.assertEqual([t.decode() for _, t in train], digits.thesis_rng_items(10, 128))
        self.assertEqual([t.decode() for _, t in test], digits.thesis_rng_items(11, 128))
        for source, target in train + test:
            self.assertIn(len(target), (2, 3))
            self.assertEqual(source.decode(), " ".join(digits.WORDS[int(d)] for d in target.decode()))
        seen = {t for _, t in train}
        self.assertEqual(sum(t in seen for _, t in test), 28)  # 22% of the test items

    def test_test_numbers_never_in_training(self):
        for config in ("thesis_clean", "default"):
            train, test = digits.digit_pairs(config)
            self.assertEmpty({t for _, t in train} & {t for _, t in test})

    def test_recombined_thesis_config_keeps_tests_out(self):
        train, test = digits.digit_pairs("thesis_recombined")
        thesis_train, thesis_test = digits.digit_pairs("thesis_clean")
        self.assertEqual(test, thesis_test)
        self.assertEqual(train[:128], thesis_train)
        train_numbers = [t for _, t in train]
        self.assertLen(set(train_numbers), len(train_numbers))
        self.assertEmpty(set(train_numbers) & {t for _, t in test})
        self.assertLen(train, 1100 - 128)  # every 2-3 digit number except the test ones

    def test_default_covers_one_to_five_digits(self):
        train, _ = digits.digit_pairs("default")
        self.assertEqual({len(t) for _, t in train}, {1, 2, 3, 4, 5})

    def test_default_gives_every_length_a_share_by_its_digits(self):
        # Drawn without replacement, the ten one-digit numbers were 10 of 20,000 pairs.
        train, _ = digits.digit_pairs("default")
        lengths = np.array([len(t) for _, t in train])
        for length in range(1, 6):
            self.assertAllClose((lengths == length).mean(), length / 15, atol=0.01)

    def test_independent_numbers_mark_those_seen_in_training(self):
        drawn = digits.independent_numbers("default", per_length=50, seed=1)
        self.assertLen(drawn, 250)
        train = {t.decode() for _, t in digits.digit_pairs("default")[0]}
        self.assertEqual([seen for _, seen in drawn], [n in train for n, _ in drawn])
        self.assertTrue(all(seen for n, seen in drawn if len(n) <= 2))
        self.assertFalse(all(seen for n, seen in drawn if len(n) == 5))

    def test_spelling_is_lowercase_single_spaced(self):
        self.assertEqual(digits.spell("104"), "one zero four")

    def test_unknown_config_lists_choices(self):
        with self.assertRaisesRegex(ValueError, "choose one of: thesis, thesis_clean, default, thesis_recombined"):
            digits.digit_pairs("huge")


class TextFilesTest(tf.test.TestCase):

    def test_real_fixture_pairs_stay_aligned(self):
        de, en = deen_path("fixture-small.de"), deen_path("fixture-small.en")
        pairs = list(text.parallel_text_dataset(de, en)[0].as_numpy_iterator())
        with open(de, "rb") as f:
            de_lines = f.read().split(b"\n")
        with open(en, "rb") as f:
            en_lines = f.read().split(b"\n")
        self.assertLen(pairs, 500)
        self.assertEqual(pairs[0], (de_lines[0], en_lines[0]))
        self.assertEqual(pairs[499], (de_lines[499], en_lines[499]))

    def test_mismatched_line_counts_name_both_files_and_counts(self):
        tmp = self.get_temp_dir()
        source = _write(os.path.join(tmp, "a.de"), b"eins\nzwei\ndrei\n")
        target = _write(os.path.join(tmp, "a.en"), b"one\ntwo\n")
        with self.assertRaisesRegex(ValueError, r"a\.de has 3 lines but .*a\.en has 2"):
            text.parallel_text_dataset(source, target)

    def test_empty_lines_are_skipped_and_counted(self):
        tmp = self.get_temp_dir()
        source = _write(os.path.join(tmp, "e.de"), b"eins\n\ndrei\nvier\n")
        target = _write(os.path.join(tmp, "e.en"), b"one\ntwo\n\nfour\n")
        dataset, stats = text.parallel_text_dataset(source, target)
        self.assertEqual((stats.lines, stats.kept, stats.empty), (4, 2, 2))
        self.assertEqual(list(dataset.as_numpy_iterator()), [(b"eins", b"one"), (b"vier", b"four")])

    def test_unicode_separators_do_not_split_lines(self):
        tmp = self.get_temp_dir()
        separators = "a\u2028b\u2029c\x85d\x0be\x0cf".encode()
        source = _write(os.path.join(tmp, "u.de"), separators + b"\nzwei\n")
        target = _write(os.path.join(tmp, "u.en"), b"one\ntwo\n")
        pairs = list(text.parallel_text_dataset(source, target)[0].as_numpy_iterator())
        self.assertEqual(pairs, [(separators, b"one"), (b"zwei", b"two")])

    def test_invalid_utf8_and_nul_are_kept_as_raw_bytes(self):
        tmp = self.get_temp_dir()
        source = _write(os.path.join(tmp, "b.de"), b"\xff\xfe ok\x00\n")
        target = _write(os.path.join(tmp, "b.en"), b"\xc3(\n")
        pairs = list(text.parallel_text_dataset(source, target)[0].as_numpy_iterator())
        self.assertEqual(pairs, [(b"\xff\xfe ok\x00", b"\xc3(")])

    def test_gzip_and_crlf_files(self):
        tmp = self.get_temp_dir()
        source = os.path.join(tmp, "g.de.gz")
        with gzip.open(source, "wb") as f:
            f.write(b"eins\r\nzwei\r\n")
        target = _write(os.path.join(tmp, "g.en"), b"one\ntwo")  # no final newline
        dataset, stats = text.parallel_text_dataset(source, target)
        self.assertEqual(stats.lines, 2)
        self.assertEqual(list(dataset.as_numpy_iterator()), [(b"eins", b"one"), (b"zwei", b"two")])

    def test_missing_file_names_the_path_and_the_fix(self):
        with self.assertRaisesRegex(FileNotFoundError, r"/nowhere/x\.de does not exist\. Pass "
                                                       r"two existing, line-aligned parallel"):
            text.parallel_text_dataset("/nowhere/x.de", "/nowhere/x.en")

    def test_text_dataset_needs_files(self):
        with self.assertRaisesRegex(ValueError, "dataset='text' needs `source_file`"):
            datasets.load_pairs(datasets.DataSpec(dataset="text"))

    def test_unknown_dataset_lists_choices(self):
        with self.assertRaisesRegex(ValueError, "dataset='europal' is unknown; choose one of: digits"):
            datasets.load_pairs(datasets.DataSpec(dataset="europal"))


_SYNTHETIC = {}


def _fixture_spec():
    """500 synthetic line-aligned pairs of 1 to 60 bytes, written once per test process."""
    if not _SYNTHETIC:
        _SYNTHETIC["files"] = write_parallel_files(tempfile.mkdtemp(), 500, seed=21)
    source_file, target_file = _SYNTHETIC["files"]
    return datasets.DataSpec(dataset="text", source_file=source_file, target_file=target_file)


class PreprocessingTest(tf.test.TestCase):

    def test_framing(self):
        features, labels = preprocessing.frame(tf.constant(b"ab"), tf.constant(b"xyz"))
        a, b = byte_codec.encode_python(b"ab")
        x, y, z = byte_codec.encode_python(b"xyz")
        self.assertEqual(features["source"].numpy().tolist(), [a, b, byte_codec.EOS_ID])
        self.assertEqual(features["target"].numpy().tolist(), [byte_codec.BOS_ID, x, y, z])
        self.assertEqual(labels.numpy().tolist(), [x, y, z, byte_codec.EOS_ID])

    def test_empty_source_is_framed_with_eos(self):
        features, _ = preprocessing.frame(tf.constant(b""), tf.constant(b"x"))
        self.assertEqual(features["source"].numpy().tolist(), [byte_codec.EOS_ID])

    def test_length_filter_drops_and_counts(self):
        pairs = tf.data.Dataset.from_tensor_slices(
            (tf.constant([b"a" * 9, b"a" * 10, b"a", b"b"]), tf.constant([b"x", b"x", b"x" * 10, b"y"])))
        config = preprocessing.PipelineConfig(max_length=10, batch_size=8, shuffle_buffer=0,
                                              repeat=False, bucketing=False)
        counter = preprocessing.LengthFilter(10)
        dataset = preprocessing.make_batches(pairs, config, length_filter=counter)
        (features, labels), = list(dataset)
        self.assertEqual(features["source"].shape[0], 2)  # 9 bytes + EOS fits, 10 + EOS does not
        self.assertEqual(counter.counts(), {"kept": 2, "dropped": 2})

    def test_batches_are_aligned_and_padded_with_pad(self):
        config = preprocessing.PipelineConfig(batch_size=16, seed=0, shuffle_buffer=0, repeat=False)
        dataset = datasets.make_dataset(_fixture_spec(), config)
        for features, labels in dataset.take(5):
            self.assertEqual(features["target"].shape, labels.shape)
            shifted = features["target"][:, 1:]
            self.assertAllEqual(shifted[shifted != 0], labels[:, :-1][shifted != 0])
            self.assertAllEqual(features["target"][:, 0],
                                tf.fill([labels.shape[0]], byte_codec.BOS_ID))

    def test_bucketing_lowers_padding(self):
        # Real sentence lengths: what bucketing is for.
        spec = datasets.DataSpec(dataset="text", source_file=deen_path("fixture-small.de"),
                                 target_file=deen_path("fixture-small.en"))
        bucketed = datasets.make_dataset(spec, preprocessing.PipelineConfig(batch_size=16))
        plain = datasets.make_dataset(spec, preprocessing.PipelineConfig(batch_size=16,
                                                                           bucketing=False))
        with_buckets = preprocessing.padding_fraction(bucketed, 30)
        without = preprocessing.padding_fraction(plain, 30)
        print(f"padding fraction: {without:.3f} without buckets, {with_buckets:.3f} with")
        self.assertLess(with_buckets, 0.6 * without)

    def test_token_budget_bounds_batch_tokens(self):
        config = preprocessing.PipelineConfig(tokens_per_batch=2048)
        dataset = datasets.make_dataset(_fixture_spec(), config)
        for features, labels in dataset.take(20):
            longest = max(features["source"].shape[1], labels.shape[1])
            bucket_edge = min(e for e in preprocessing.default_boundaries(500) + (500,) if e >= longest)
            self.assertLessEqual(features["source"].shape[0] * bucket_edge, 2048)

    def test_same_seed_same_batches_byte_for_byte(self):
        config = preprocessing.PipelineConfig(batch_size=8, seed=7)
        first = _batches_as_bytes(datasets.make_dataset(_fixture_spec(), config), 10)
        second = _batches_as_bytes(datasets.make_dataset(_fixture_spec(), config), 10)
        self.assertEqual(first, second)

    def test_different_seed_different_order(self):
        first = _batches_as_bytes(datasets.make_dataset(
            _fixture_spec(), preprocessing.PipelineConfig(batch_size=8, seed=7)), 10)
        second = _batches_as_bytes(datasets.make_dataset(
            _fixture_spec(), preprocessing.PipelineConfig(batch_size=8, seed=8)), 10)
        self.assertNotEqual(first, second)

    def test_shards_are_disjoint_and_complete(self):
        config = preprocessing.PipelineConfig(batch_size=1000, shuffle_buffer=0, repeat=False,
                                              bucketing=False)
        def rows(input_context):
            dataset = datasets.make_dataset(_fixture_spec(), config, input_context=input_context)
            features, _ = next(iter(dataset))
            return [row.tobytes().rstrip(b"\x00") for row in features["source"].numpy()]

        shards = [rows(tf.distribute.InputContext(2, worker)) for worker in range(2)]
        self.assertEqual((len(shards[0]), len(shards[1])), (250, 250))
        # Together the shards hold every pair exactly once (lines may repeat, so compare
        # multisets).
        self.assertEqual(sorted(shards[0] + shards[1]), sorted(rows(None)))

    def test_unicode_normalization_keeps_invalid_bytes(self):
        source, target = preprocessing.normalize_unicode(
            tf.constant("\ufb01le".encode()), tf.constant(b"\xff\xfe"), "NFKC")
        self.assertEqual(source.numpy(), b"file")
        self.assertEqual(target.numpy(), b"\xff\xfe")

    def test_unicode_normalization_without_tensorflow_text_names_the_extra(self):
        code = ("import sys; sys.modules['tensorflow_text'] = None\n"
                "import tensorflow as tf\n"
                "from pipelines import preprocessing\n"
                "from pipelines.options import ConfigError\n"
                "pairs = tf.data.Dataset.from_tensor_slices(([b'a'], [b'b']))\n"
                "try:\n"
                "    preprocessing.make_batches(pairs, preprocessing.PipelineConfig("
                "unicode_normalization='NFC'))\n"
                "except ConfigError as error:\n"
                "    print('ConfigError:', error)\n")
        result = run_python(code)
        self.assertEqual(result.returncode, 0, result.stderr[-2000:])
        self.assertIn("ConfigError: `unicode_normalization` needs tensorflow-text", result.stdout)
        self.assertIn("pip install 'bytenet_tf[text]'", result.stdout)

    def test_digits_dataset_batches(self):
        spec = datasets.DataSpec(dataset="digits", digits_config="thesis")
        config = preprocessing.PipelineConfig(batch_size=16, max_length=64)
        features, labels = next(iter(datasets.make_dataset(spec, config)))
        decoded = byte_codec.decode(labels).numpy()
        self.assertTrue(all(d.isdigit() for d in decoded))
        self.assertEqual(np.asarray(features["source"]).dtype, np.int32)
