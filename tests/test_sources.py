"""Downloadable datasets, exercised offline on files laid out like the real ones."""

import io
import os
import tarfile
import urllib.error
from unittest import mock

import tensorflow as tf

from pipelines import datasets, newstest, tfds_sources
from tests.conftest import synthetic_lines


def _write_sacrebleu_cache(root, year, langpair, sources, references):
    """Writes the files sacrebleu leaves in its cache for a WMT test set."""
    name = f"wmt{year % 100}"
    folder = os.path.join(root, name)
    os.makedirs(folder, exist_ok=True)
    count = len(sources)
    fields = {"src": sources, "ref": references, "docid": [b"doc1"] * count,
              "genre": [b"news"] * count, "origlang": [b"de"] * count}
    for field, lines in fields.items():
        with open(os.path.join(folder, f"{name}.{langpair}.{field}"), "wb") as f:
            f.write(b"\n".join(lines) + b"\n")


def _no_network(*args, **kwargs):
    raise urllib.error.URLError("no network in this test")


class NewstestTest(tf.test.TestCase):

    def test_reads_the_sacrebleu_cache_layout(self):
        root = self.get_temp_dir()
        sources = [line or b"leer" for line in synthetic_lines(20, 5)]
        references = [line or b"empty" for line in synthetic_lines(20, 6)]
        _write_sacrebleu_cache(root, 2013, "de-en", sources, references)
        with mock.patch("sacrebleu.dataset.base.download_file", _no_network):
            source_file, reference_file = newstest.newstest_files(2013, "de", "en", root)
            spec = datasets.DataSpec(dataset="newstest", newstest_year=2013, data_dir=root)
            pairs = list(datasets.load_pairs(spec).as_numpy_iterator())
        self.assertEqual(source_file, os.path.join(root, "wmt13", "wmt13.de-en.src"))
        self.assertEqual(reference_file, os.path.join(root, "wmt13", "wmt13.de-en.ref"))
        self.assertEqual(pairs, list(zip(sources, references)))

    def test_missing_set_names_path_and_how_to_download(self):
        root = self.get_temp_dir()
        with mock.patch("sacrebleu.dataset.base.download_file", _no_network):
            with self.assertRaisesRegex(FileNotFoundError,
                                        r"newstest2015 \(de-en\) is not cached at .*wmt15\.de-en\.src"
                                        r".*sacrebleu -t wmt15 -l de-en"):
                newstest.newstest_files(2015, "de", "en", os.path.join(root, "empty"))

    def test_unknown_year_lists_years(self):
        with self.assertRaisesRegex(ValueError, "newstest year 2031 is unknown; choose one of: 2013"):
            newstest.newstest_files(2031)


def _add_file(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


class EuroparlTest(tf.test.TestCase):

    DE = b"Wiederaufnahme der Sitzungsperiode\n\nIch bitte Sie.\n"
    EN = b"Resumption of the session\n(empty partner)\nPlease rise.\n"

    def _expected(self, reverse=False):
        pairs = [(b"Wiederaufnahme der Sitzungsperiode", b"Resumption of the session"),
                 (b"Ich bitte Sie.", b"Please rise.")]
        return [(t, s) for s, t in pairs] if reverse else pairs

    def _pairs(self, manual_dir, source_lang="de", target_lang="en"):
        spec = datasets.DataSpec(dataset="europarl", data_dir=manual_dir, source_lang=source_lang,
                                 target_lang=target_lang, download=False)
        return list(datasets.load_pairs(spec).as_numpy_iterator())

    def test_plain_files_in_manual_dir(self):
        root = self.get_temp_dir()
        for suffix, data in (("de", self.DE), ("en", self.EN)):
            with open(os.path.join(root, f"europarl-v7.de-en.{suffix}"), "wb") as f:
                f.write(data)
        self.assertEqual(self._pairs(root), self._expected())
        self.assertEqual(self._pairs(root, "en", "de"), self._expected(reverse=True))
        spec = datasets.DataSpec(dataset="europarl", data_dir=root, download=False)
        _, stats = datasets.load_pairs_with_stats(spec)
        self.assertEqual((stats.lines, stats.kept, stats.empty), (3, 2, 1))

    def test_wmt_archive_layout(self):
        root = os.path.join(self.get_temp_dir(), "wmt")
        os.makedirs(root)
        with tarfile.open(os.path.join(root, "training-parallel-europarl-v7.tgz"), "w:gz") as tar:
            _add_file(tar, "training/europarl-v7.de-en.de", self.DE)
            _add_file(tar, "training/europarl-v7.de-en.en", self.EN)
            _add_file(tar, "training/europarl-v7.fr-en.fr", b"Reprise\n")
        self.assertEqual(self._pairs(root), self._expected())

    def test_europarl_site_archive_layout(self):
        root = os.path.join(self.get_temp_dir(), "site")
        os.makedirs(root)
        with tarfile.open(os.path.join(root, "de-en.tgz"), "w:gz") as tar:
            _add_file(tar, "europarl-v7.de-en.de", self.DE)
            _add_file(tar, "europarl-v7.de-en.en", self.EN)
        self.assertEqual(self._pairs(root), self._expected())

    def test_tfds_builder_uses_only_the_europarl_subset(self):
        builder_class = tfds_sources.europarl_builder_class()
        config = builder_class.BUILDER_CONFIGS[0]
        self.assertEqual(config.subsets["train"], ["europarl_v7"])
        self.assertEqual(config.language_pair, ("de", "en"))

    def test_tfds_path_with_mock_data(self):
        import tensorflow_datasets as tfds

        with tfds.testing.mock_data(num_examples=6):
            dataset, stats = tfds_sources.europarl_pairs("train", "de", "en",
                                                         data_dir=self.get_temp_dir())
            pairs = list(dataset.as_numpy_iterator())
        self.assertIsNone(stats)
        self.assertLen(pairs, 6)
        self.assertTrue(all(isinstance(s, bytes) and isinstance(t, bytes) for s, t in pairs))


class Wmt14Test(tf.test.TestCase):

    def test_wmt14_through_tfds_mock_data(self):
        import tensorflow_datasets as tfds

        spec = datasets.DataSpec(dataset="wmt14", data_dir=self.get_temp_dir())
        with tfds.testing.mock_data(num_examples=5):
            pairs = list(datasets.load_pairs(spec, "train").as_numpy_iterator())
            reverse = list(datasets.load_pairs(
                datasets.DataSpec(dataset="wmt14", source_lang="en", target_lang="de",
                                  data_dir=self.get_temp_dir()), "train").as_numpy_iterator())
        self.assertLen(pairs, 5)
        self.assertEqual([(t, s) for s, t in pairs], reverse)
