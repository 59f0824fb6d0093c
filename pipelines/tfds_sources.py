"""WMT14 and Europarl v7 through tensorflow-datasets, and Europarl v7 from local files.

In: a split and a language pair. Out: a `tf.data.Dataset` of `(source, target)` scalar tf.string
pairs. tensorflow-datasets is imported only inside these functions.

- `wmt14`: the `wmt14_translate/de-en` builder (Europarl v7, Common Crawl and News Commentary
  v9 for training; newstest2013 for validation; newstest2014 for test).
- `europarl`: Europarl v7 de-en alone. With the real files in a manual directory
  (`europarl-v7.de-en.de` and `.en`, at its top or under `training/`, or one of the archives
  `de-en.tgz` / `training-parallel-europarl-v7.tgz` that hold them), they are read directly and
  need no network. Otherwise `EuroparlV7Translate`, a WMT builder whose training split is the
  `europarl_v7` subset only, downloads and prepares them.
"""

import os
import tarfile

from pipelines.options import ConfigError
from pipelines.text import parallel_text_dataset

EUROPARL_ARCHIVES = {
    "de-en.tgz": "",  # the Europarl site's archive: the files at its top
    "training-parallel-europarl-v7.tgz": "training/",  # WMT's archive, read by tfds
}


def _tfds_split(split):
    return {"train": "train", "validation": "validation", "test": "test"}[split]


def _pairs_from_tfds(builder, split, source_lang, target_lang, download):
    import tensorflow_datasets as tfds

    if download:
        builder.download_and_prepare()
    dataset = builder.as_dataset(split=_tfds_split(split), shuffle_files=False,
                                 read_config=tfds.ReadConfig(shuffle_seed=0))
    return dataset.map(lambda example: (example[source_lang], example[target_lang]))


def wmt14_pairs(split="train", source_lang="de", target_lang="en", data_dir=None, download=True):
    """WMT14 de-en `split` through tfds `wmt14_translate/de-en`, as `(source, target)` strings."""
    import tensorflow_datasets as tfds

    builder = tfds.builder("wmt14_translate/de-en", data_dir=data_dir)
    return _pairs_from_tfds(builder, split, source_lang, target_lang, download)


def europarl_builder_class():
    """Returns the tfds builder for Europarl v7 de-en alone (defined on first use)."""
    import tensorflow_datasets as tfds
    from tensorflow_datasets.translate import wmt

    global _EuroparlV7Translate
    if "_EuroparlV7Translate" not in globals():
        class EuroparlV7Translate(wmt.WmtTranslate):
            """WMT builder whose training split is Europarl v7 only; validation newstest2013."""

            VERSION = tfds.core.Version("1.0.0")
            BUILDER_CONFIGS = [wmt.WmtConfig(
                description="Europarl v7 de-en alone.",
                url="https://www.statmt.org/europarl/",
                language_pair=("de", "en"),
                version=VERSION,
                subsets={tfds.Split.TRAIN: ["europarl_v7"],
                         tfds.Split.VALIDATION: ["newstest2013"]})]

        _EuroparlV7Translate = EuroparlV7Translate
    return _EuroparlV7Translate


def find_europarl_files(manual_dir):
    """Returns `(de_file, en_file)` of Europarl v7 in `manual_dir`, or None.

    Looks for the plain files at the top of `manual_dir` or under `training/`, then for one of the
    archives in `EUROPARL_ARCHIVES`, which it extracts once into `manual_dir/extracted/`.
    """
    names = ("europarl-v7.de-en.de", "europarl-v7.de-en.en")
    for prefix in ("", "training/", "extracted/", "extracted/training/"):
        paths = tuple(os.path.join(manual_dir, prefix + name) for name in names)
        if all(os.path.isfile(path) for path in paths):
            return paths
    for archive, prefix in EUROPARL_ARCHIVES.items():
        archive_path = os.path.join(manual_dir, archive)
        if not os.path.isfile(archive_path):
            continue
        target = os.path.join(manual_dir, "extracted")
        with tarfile.open(archive_path) as tar:
            members = [tar.getmember(prefix + name) for name in names]
            tar.extractall(target, members=members, filter="data")
        return tuple(os.path.join(target, prefix + name) for name in names)
    return None


def europarl_pairs(split="train", source_lang="de", target_lang="en", data_dir=None,
                   manual_dir=None, download=True):
    """Europarl v7 de-en as `(pairs, stats)`: `(source, target)` strings and their counts.

    Reads the real files from `manual_dir` when they are there (training split only; `stats` is
    their `pipelines.text.ParallelStats`), else goes through `EuroparlV7Translate` (`stats` is
    None).
    """
    if {source_lang, target_lang} != {"de", "en"}:
        raise ConfigError(f"europarl here is de-en only. Received: {source_lang}-{target_lang}")
    files = find_europarl_files(manual_dir) if manual_dir and split == "train" else None
    if files is not None:
        by_lang = {"de": files[0], "en": files[1]}
        return parallel_text_dataset(by_lang[source_lang], by_lang[target_lang])
    builder = europarl_builder_class()(config="de-en", data_dir=data_dir)
    return _pairs_from_tfds(builder, split, source_lang, target_lang, download), None
