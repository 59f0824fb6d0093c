"""One entry point for every dataset: `load_pairs` and `make_dataset`.

In: a dataset name (`digits`, `text`, `newstest`, `wmt14`, `europarl`), a split and the file or
directory options. Out: `(source, target)` string pairs in the requested direction, or the
padded batches of `pipelines.preprocessing.make_batches`.
"""

import dataclasses

import tensorflow as tf

from pipelines import digits as digits_lib
from pipelines import newstest, preprocessing, text, tfds_sources

DATASETS = ("digits", "europarl", "newstest", "text", "wmt14")
SPLITS = ("train", "validation", "test")


@dataclasses.dataclass
class DataSpec:
    """Where the pairs come from.

    Attributes:
        name: one of `DATASETS`.
        source_lang, target_lang: the direction, `de`->`en` by default.
        data_dir: tfds data directory, sacrebleu cache for `newstest`, manual directory for
            `europarl`.
        source_file, target_file: training files for `text`.
        valid_source_file, valid_target_file: validation files for `text`.
        newstest_year: the year for `newstest` (every split reads that one set).
        digits_config: a name in `pipelines.digits.DIGITS_CONFIGS`.
        download: let tfds and sacrebleu download what is missing.
    """
    name: str = "digits"
    source_lang: str = "de"
    target_lang: str = "en"
    data_dir: str = None
    source_file: str = None
    target_file: str = None
    valid_source_file: str = None
    valid_target_file: str = None
    newstest_year: int = 2013
    digits_config: str = "default"
    download: bool = True


def validate(spec):
    """Raises `ValueError` naming the bad value of `spec` and the fix."""
    if spec.name not in DATASETS:
        raise ValueError(f"--dataset={spec.name} is unknown; choose one of: {', '.join(DATASETS)}")
    if spec.source_lang == spec.target_lang:
        raise ValueError(f"--source_lang and --target_lang are both {spec.source_lang!r}; "
                         "choose two languages, e.g. de and en.")
    if spec.name == "text" and not (spec.source_file and spec.target_file):
        raise ValueError("--dataset=text needs --source_file and --target_file (line-aligned "
                         "parallel text, plain or .gz).")


def _pairs_from_lists(sources, targets):
    return tf.data.Dataset.from_tensor_slices((tf.constant(sources, tf.string),
                                               tf.constant(targets, tf.string)))


def load_pairs(spec, split="train"):
    """Returns a `tf.data.Dataset` of `(source, target)` scalar strings for `split`.

    For `digits` the source is the digit words and the target the digits, whatever the
    languages; `validation` and `test` are the same held-out numbers.
    """
    validate(spec)
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is unknown; choose one of: {', '.join(SPLITS)}")
    if spec.name == "digits":
        train, test = digits_lib.digit_pairs(spec.digits_config)
        chosen = train if split == "train" else test
        return _pairs_from_lists([s for s, _ in chosen], [t for _, t in chosen])
    if spec.name == "text":
        if split == "train":
            files = (spec.source_file, spec.target_file)
        elif spec.valid_source_file and spec.valid_target_file:
            files = (spec.valid_source_file, spec.valid_target_file)
        else:
            raise ValueError("--dataset=text has no validation files; pass --valid_source_file "
                             "and --valid_target_file.")
        dataset, _ = text.parallel_text_dataset(*files)
        return dataset
    if spec.name == "newstest":
        source_file, reference_file = newstest.newstest_files(
            spec.newstest_year, spec.source_lang, spec.target_lang, spec.data_dir)
        dataset, _ = text.parallel_text_dataset(source_file, reference_file)
        return dataset
    if spec.name == "wmt14":
        return tfds_sources.wmt14_pairs(split, spec.source_lang, spec.target_lang,
                                        spec.data_dir, spec.download)
    return tfds_sources.europarl_pairs(split, spec.source_lang, spec.target_lang,
                                       spec.data_dir, manual_dir=spec.data_dir,
                                       download=spec.download)


def take_pairs(spec, split, limit):
    """The first `limit` pairs of `split` as two lists of bytes (for validation BLEU)."""
    sources, targets = [], []
    for source, target in load_pairs(spec, split).take(limit).as_numpy_iterator():
        sources.append(source)
        targets.append(target)
    return sources, targets


def make_dataset(spec, config, split="train", input_context=None):
    """Padded training batches of `spec`'s `split` through `preprocessing.make_batches`.

    Returns:
        `(dataset, length_filter)`; see `pipelines.preprocessing`.
    """
    return preprocessing.make_batches(load_pairs(spec, split), config, input_context)
