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


def _as_bytes(batches):
    return [(f["source"].numpy().tobytes(), f["target"].numpy().tobytes(), l.numpy().tobytes())
            for f, l in batches]


def _batches_as_bytes(dataset, count):
    return _as_bytes(dataset.take(count))


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

    def test_files_read_into_memory_give_the_streamed_pairs(self):
        tmp = self.get_temp_dir()
        cases = {"empty lines": (b"eins\n\ndrei\nvier\n", b"one\ntwo\n\nfour\n"),
                 "separators": ("a\u2028b\x85c\x0cd".encode() + b"\nzwei\n", b"one\ntwo\n"),
                 "raw bytes": (b"\xff\xfe ok\x00\n", b"\xc3(\n"),
                 "crlf, no final newline": (b"eins\r\nzwei\r\n", b"one\ntwo")}
        for name, (source_bytes, target_bytes) in cases.items():
            with self.subTest(name):
                source = _write(os.path.join(tmp, "m.de"), source_bytes)
                target = _write(os.path.join(tmp, "m.en"), target_bytes)
                streamed, stats = text.parallel_text_dataset(source, target)
                held, held_stats = text.parallel_text_dataset(source, target,
                                                              in_memory_up_to=stats.kept)
                self.assertEqual(held_stats, stats)
                self.assertEqual(int(held.cardinality()), stats.kept)
                self.assertEqual(list(held.as_numpy_iterator()),
                                 list(streamed.as_numpy_iterator()))
                # One pair more than the bound allows: streamed, so its length is unknown.
                larger, _ = text.parallel_text_dataset(source, target,
                                                       in_memory_up_to=stats.kept - 1)
                self.assertEqual(int(larger.cardinality()), tf.data.UNKNOWN_CARDINALITY)

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


def _epochs(dataset, count, epochs):
    """The first `epochs` epochs of `count` elements of a dataset of scalar pairs."""
    items = [(int(a), int(b)) for a, b in dataset.take(count * epochs).as_numpy_iterator()]
    return [items[i * count:(i + 1) * count] for i in range(epochs)]


def _numbered(count):
    return tf.data.Dataset.from_tensor_slices((tf.range(count), tf.range(count) * 10))


class LengthShareTest(tf.test.TestCase):
    """`train_length_share`'s bound: the shortest framed length that a share of the pairs fit."""

    def test_counts_frame_the_longer_side_with_eos(self):
        pairs = tf.data.Dataset.from_tensor_slices((
            tf.constant([b"ab", b"", "f\u00fcnf".encode(), b"abcdefgh"]),
            tf.constant([b"xyz", b"q", b"five", b"x"])))
        for chunk in (1, 3, 8192):  # lengths measured batch by batch add up the same
            counts = preprocessing.framed_length_counts(pairs, chunk=chunk)
            # 3 + 1, 1 + 1, 5 bytes (u-umlaut is two) + 1 and 8 + 1
            self.assertEqual(counts.tolist(), [0, 0, 1, 0, 1, 0, 1, 0, 0, 1])

    def test_bound_is_the_smallest_length_the_share_fits(self):
        counts = np.bincount([3, 5, 5, 9])
        for share, bound in ((0.25, 3), (0.26, 5), (0.5, 5), (0.75, 5), (0.8, 9), (1.0, 9)):
            self.assertEqual(preprocessing.share_length_bound(counts, share), bound, share)
        # 0.3 * 10 is 3.0000000000000004 in floating point: still 3 pairs, so length 3.
        self.assertEqual(preprocessing.share_length_bound(np.bincount(range(1, 11)), 0.3), 3)
        # A bound never goes below 2, the shortest that LengthFilter accepts.
        self.assertEqual(preprocessing.share_length_bound(np.bincount([1, 1, 4]), 0.5), 2)

    def test_bad_share_or_no_pairs_names_the_problem(self):
        for share in (0.0, -0.5, 1.5):
            with self.assertRaisesRegex(ValueError, rf"`train_length_share` must be in \(0, 1\] "
                                                    rf".*Received: train_length_share={share}$"):
                preprocessing.share_length_bound(np.bincount([3, 4]), share)
        with self.assertRaisesRegex(ValueError, "there are none"):
            preprocessing.share_length_bound(np.zeros(5, np.int64), 0.5)

    def test_filter_at_the_bound_keeps_at_least_the_share(self):
        # Real sentences: the filter at the bound keeps at least the share (ties at the bound
        # are all kept) and one byte shorter keeps less than it.
        pairs, _ = text.parallel_text_dataset(deen_path("fixture-small.de"),
                                              deen_path("fixture-small.en"), in_memory_up_to=500)
        counts = preprocessing.framed_length_counts(pairs)
        self.assertEqual(int(counts.sum()), 500)
        for share in (0.1, 0.5, 0.85, 1.0):
            bound = preprocessing.share_length_bound(counts, share)
            kept = []
            for max_length in (bound, bound - 1):
                counter = preprocessing.LengthFilter(max_length)
                list(pairs.filter(counter))
                kept.append(counter.counts()["kept"])
            self.assertGreaterEqual(kept[0], share * 500, share)
            self.assertLess(kept[1], share * 500, share)


class PermutedEpochsTest(tf.test.TestCase):

    def test_each_epoch_holds_every_pair_once_in_its_own_order(self):
        count = 997  # not a power of two: the permutation's range is not a round number
        epochs = _epochs(preprocessing.permuted_epochs(_numbered(count), count, seed=3), count, 3)
        for epoch in epochs:
            self.assertEqual(sorted(epoch), [(i, 10 * i) for i in range(count)])
        self.assertNotEqual(epochs[0], epochs[1])
        self.assertNotEqual(epochs[1], epochs[2])
        self.assertNotEqual([a for a, _ in epochs[0]], list(range(count)))

    def test_seeded(self):
        def first(seed):
            return _epochs(preprocessing.permuted_epochs(_numbered(50), 50, seed), 50, 2)
        self.assertEqual(first(1), first(1))
        self.assertNotEqual(first(1), first(2))

    def test_one_epoch_without_repeat_and_a_single_pair(self):
        once = preprocessing.permuted_epochs(_numbered(40), 40, seed=0, repeat=False)
        self.assertEqual(sorted(int(a) for a, _ in once.as_numpy_iterator()), list(range(40)))
        single = preprocessing.permuted_epochs(_numbered(1), 1, seed=0)
        self.assertEqual(_epochs(single, 1, 3), [[(0, 0)]] * 3)

    def test_make_batches_permutes_when_the_buffer_would_hold_every_pair(self):
        count = 300
        pairs = tf.data.Dataset.from_tensor_slices(
            ([b"%d" % i for i in range(count)], [b"x" * (1 + i % 7) for i in range(count)]))
        for buffer in (count, 10 * count):
            with self.subTest(shuffle_buffer=buffer):
                config = preprocessing.PipelineConfig(batch_size=count, bucketing=False,
                                                      shuffle_buffer=buffer, seed=5)
                features, _ = next(iter(preprocessing.make_batches(pairs, config)))
                sources = byte_codec.decode(features["source"]).numpy()
                expected = [int(a) for a, _ in preprocessing.permuted_epochs(
                    pairs, count, 5).take(count).as_numpy_iterator()]
                self.assertEqual([int(s) for s in sources], expected)

    def _write(self, iterator, name):
        """Writes a checkpoint that holds `iterator` alone: its path and its size in bytes."""
        path = tf.train.Checkpoint(iterator=iterator).write(os.path.join(self.get_temp_dir(), name))
        return path, sum(os.path.getsize(os.path.join(os.path.dirname(path), file))
                         for file in os.listdir(os.path.dirname(path))
                         if file.startswith(os.path.basename(path)))

    def _iterator_checkpoint(self, pairs, count, buffer, steps):
        config = preprocessing.PipelineConfig(tokens_per_batch=512, shuffle_buffer=buffer,
                                              seed=2)
        iterator = iter(preprocessing.make_batches(pairs, config))
        for _ in range(steps):
            next(iterator)
        path, size = self._write(iterator, f"it_{count}_{buffer}")
        after = _as_bytes(next(iterator) for _ in range(5))
        resumed = iter(preprocessing.make_batches(pairs, config))
        tf.train.Checkpoint(iterator=resumed).read(path).assert_consumed()
        return size, after, _as_bytes(next(resumed) for _ in range(5))

    def test_checkpointed_stream_resumes_exactly_and_stays_small(self):
        sizes, streams = {}, {}
        for count in (2000, 8000):
            pairs = tf.data.Dataset.from_tensor_slices(
                ([b"quelle %d " % i * 3 for i in range(count)],
                 [b"target %d" % i for i in range(count)]))
            for buffer, kind in ((count, "permuted"), (count // 2, "buffer")):
                size, after, resumed = self._iterator_checkpoint(pairs, count, buffer, steps=7)
                self.assertEqual(resumed, after, (count, kind))
                sizes[count, kind] = size
            # The streams alone, without the elements that asynchronous stages have ready (as
            # many as the machine's load allows): tf.data's default optimizations add a
            # prefetch and a parallel map, whose buffers enter the checkpoint, so they are off.
            unbuffered = tf.data.Options()
            unbuffered.experimental_optimization.apply_default_optimizations = False
            unbuffered.autotune.enabled = False
            for kind, stream in (("permuted", preprocessing.permuted_epochs(pairs, count, 2)),
                                 ("buffer", pairs.shuffle(count // 2, seed=2).repeat())):
                iterator = iter(stream.with_options(unbuffered))
                for _ in range(300):
                    next(iterator)
                _, streams[count, kind] = self._write(iterator, f"{kind}_{count}")
        # A buffer's state grows with the pairs it holds; the permutation's does not.
        self.assertGreater(streams[8000, "buffer"], 3 * streams[2000, "buffer"])
        self.assertGreater(sizes[8000, "buffer"], 3 * sizes[2000, "buffer"])
        self.assertEqual(streams[8000, "permuted"], streams[2000, "permuted"])
        self.assertLess(sizes[8000, "permuted"], sizes[8000, "buffer"] / 10)


def _lengths_in_random_order(count, seed=0):
    """`count` (source, target) string pairs whose longer side has a distinct length, 1 to
    `count` bytes, in a random order: the source is `n` bytes and the target shorter."""
    lengths = np.random.default_rng(seed).permutation(np.arange(1, count + 1))
    sources = [b"s" * int(n) for n in lengths]
    targets = [b"t" * (int(n) // 2) for n in lengths]
    return tf.data.Dataset.from_tensor_slices((sources, targets)), lengths


class CurriculumTest(tf.test.TestCase):

    def test_competence_is_the_square_root_schedule(self):
        drawn = np.array([0, 1, 125, 250, 500, 1000])
        got = preprocessing.curriculum_competence(drawn, 500).numpy()
        want = np.minimum(1, np.sqrt(0.01 ** 2 + (1 - 0.01 ** 2) * drawn / 500))
        self.assertAllClose(got, want, rtol=1e-12)
        self.assertAllClose(got[[0, -2, -1]], [0.01, 1.0, 1.0])

    def test_each_draw_comes_from_the_shortest_competent_share(self):
        count, curriculum = 1000, 500
        pairs, _ = _lengths_in_random_order(count)
        stream = preprocessing.permuted_epochs(pairs, count, seed=4, curriculum_pairs=curriculum)
        # A pair's rank in length order is its length - 1 (lengths are 1..count).
        ranks = np.array([len(s) - 1 for s, _ in stream.take(curriculum).as_numpy_iterator()])
        pools = np.ceil(np.sqrt(1e-4 + (1 - 1e-4) * np.arange(curriculum) / curriculum) * count)
        self.assertTrue(np.all(ranks < pools), ranks[ranks >= pools])
        self.assertLess(ranks[0], 10)  # the shortest 1% first
        # Draws spread over their pool, and the pool reaches the longest pairs by the end.
        self.assertGreater(ranks[-50:].max(), 900)
        self.assertGreater(np.mean(ranks[-100:] / pools[-100:]), 0.35)
        self.assertLess(np.mean(ranks[-100:] / pools[-100:]), 0.65)

    def test_the_permuted_epochs_follow_unchanged(self):
        count, curriculum = 300, 120
        pairs, _ = _lengths_in_random_order(count)
        with_curriculum = [s for s, _ in preprocessing.permuted_epochs(
            pairs, count, seed=7, curriculum_pairs=curriculum).take(curriculum + 2 * count)
            .as_numpy_iterator()]
        without = [s for s, _ in preprocessing.permuted_epochs(pairs, count, seed=7)
                   .take(2 * count).as_numpy_iterator()]
        self.assertEqual(with_curriculum[curriculum:], without)
        once = preprocessing.permuted_epochs(pairs, count, seed=7, repeat=False,
                                             curriculum_pairs=curriculum)
        self.assertLen(list(once.as_numpy_iterator()), curriculum + count)

    def test_seeded(self):
        pairs, _ = _lengths_in_random_order(200)

        def draws(seed):
            return [s for s, _ in preprocessing.permuted_epochs(
                pairs, 200, seed, curriculum_pairs=100).take(100).as_numpy_iterator()]
        self.assertEqual(draws(3), draws(3))
        self.assertNotEqual(draws(3), draws(4))

    def test_make_batches_draws_it_and_resumes_it_exactly(self):
        count = 400
        pairs, _ = _lengths_in_random_order(count)
        config = preprocessing.PipelineConfig(max_length=500, batch_size=4, bucketing=False,
                                              shuffle_buffer=count, curriculum_epochs=0.5,
                                              seed=1)
        iterator = iter(preprocessing.make_batches(pairs, config))
        first = [next(iterator) for _ in range(5)]
        # Draw 19 of the curriculum's 200 picks among the shortest ceil(0.3084 * 400) = 124
        # sources; 20 draws from all 400 would pass 124 bytes with probability 1 - 0.31**20.
        longest = max(int(tf.reduce_max(tf.reduce_sum(tf.cast(
            features["source"] != byte_codec.PAD_ID, tf.int32), axis=1))) for features, _ in first)
        self.assertLessEqual(longest - 1, 124)  # EOS is not a byte of the pair
        path = tf.train.Checkpoint(iterator=iterator).write(
            os.path.join(self.get_temp_dir(), "curriculum"))
        after = _as_bytes(next(iterator) for _ in range(60))  # past the curriculum's 200 pairs
        resumed = iter(preprocessing.make_batches(pairs, config))
        tf.train.Checkpoint(iterator=resumed).read(path).assert_consumed()
        self.assertEqual(_as_bytes(next(resumed) for _ in range(60)), after)

    def test_bad_settings_name_the_value_and_the_fix(self):
        pairs, _ = _lengths_in_random_order(50)
        with self.assertRaisesRegex(ValueError, r"`curriculum_epochs` must be >= 0 .*Received: "
                                                r"curriculum_epochs=-1$"):
            preprocessing.make_batches(pairs, preprocessing.PipelineConfig(curriculum_epochs=-1))
        with self.assertRaisesRegex(ValueError, r"needs the pairs in memory: set `shuffle_buffer` "
                                                r"to at least their number \(shuffle_buffer=49, "
                                                r"pairs: 50\), or curriculum_epochs=0"):
            preprocessing.make_batches(pairs, preprocessing.PipelineConfig(
                shuffle_buffer=49, curriculum_epochs=1))

    def test_an_optional_curriculum_gives_way_on_data_too_large_for_memory(self):
        pairs, _ = _lengths_in_random_order(50)

        def first_batches(**kwargs):
            config = preprocessing.PipelineConfig(max_length=500, batch_size=4, bucketing=False,
                                                  shuffle_buffer=49, seed=2, **kwargs)
            return _as_bytes(preprocessing.make_batches(pairs, config).take(15))
        with self.assertLogs(level="WARNING") as logs:
            optional = first_batches(curriculum_epochs=1, curriculum_optional=True)
        self.assertIn("Training without the preset's length curriculum (curriculum_epochs=1): "
                      "it needs the training pairs in memory, and they are more than "
                      "shuffle_buffer=49 (pairs: 50)", "\n".join(logs.output))
        self.assertEqual(optional, first_batches())
        # In memory, the optional curriculum is drawn as an asked-for one.
        config = dict(max_length=500, batch_size=4, bucketing=False, shuffle_buffer=50, seed=2,
                      curriculum_epochs=1)
        drawn = [_as_bytes(preprocessing.make_batches(pairs, preprocessing.PipelineConfig(
            **config, curriculum_optional=optional)).take(15)) for optional in (True, False)]
        self.assertEqual(drawn[0], drawn[1])
        self.assertNotEqual(drawn[0], _as_bytes(preprocessing.make_batches(
            pairs, preprocessing.PipelineConfig(**dict(config, curriculum_epochs=0))).take(15)))
