"""One entry point for every dataset: `load_pairs` and `make_dataset`.

In: a dataset name (`digits`, `text`, `newstest`, `wmt14`, `europarl`), a split and the file or
directory options. Out: `(source, target)` string pairs in the requested direction, or the
padded batches of `pipelines.preprocessing.make_batches`.
"""

import dataclasses

from pipelines import digits as digits_lib
from pipelines import newstest, preprocessing, text, tfds_sources
from pipelines.options import ConfigError, option

DATASETS = ("digits", "europarl", "newstest", "text", "wmt14")
SPLITS = ("train", "validation", "test")


@dataclasses.dataclass
class DataSpec:
    """Where the pairs come from. Each field is also a flag of bytenet-train, by its name."""
    dataset: str = option("digits", "Training data.", choices=DATASETS)
    source_lang: str = option("de", "Source language.")
    target_lang: str = option("en", "Target language.")
    data_dir: str = option(None, "tfds data dir; sacrebleu cache for newstest; the folder with "
                           "the Europarl v7 files (or archives) for europarl.")
    source_file: str = option(None, "Training source file for dataset=text (plain or .gz).")
    target_file: str = option(None, "Training target file for dataset=text, line-aligned.")
    valid_source_file: str = option(None, "Validation source file for dataset=text.")
    valid_target_file: str = option(None, "Validation target file for dataset=text.")
    newstest_year: int = option(2014, "Year of the WMT news test set (dataset=newstest). "
                                "bytenet-train then trains, validates and tests on this one set.")
    digits_config: str = option("default", "Digits task configuration (dataset=digits); see "
                                "pipelines/digits.py.", choices=tuple(digits_lib.DIGITS_CONFIGS))
    download: bool = option(True, "Let tfds and sacrebleu download what is missing.")


def validate(spec):
    """Raises `ConfigError` naming the bad value of `spec` and the fix."""
    if spec.dataset not in DATASETS:
        raise ConfigError(f"dataset={spec.dataset!r} is unknown; choose one of: "
                         f"{', '.join(DATASETS)}")
    if spec.source_lang == spec.target_lang:
        raise ConfigError(f"`source_lang` and `target_lang` are both {spec.source_lang!r}; "
                         "choose two languages, e.g. de and en.")
    if spec.dataset == "text" and not (spec.source_file and spec.target_file):
        raise ConfigError("dataset='text' needs `source_file` and `target_file` (line-aligned "
                         "parallel text, plain or .gz).")


def load_pairs_with_stats(spec, split="train", in_memory_up_to=0):
    """Returns `(pairs, stats)`: a `tf.data.Dataset` of `(source, target)` scalar strings for
    `split`, and the `pipelines.text.ParallelStats` of local files (lines, kept, empty pairs
    skipped), or None where the source has no such count (tfds, digits).

    Local files (`text`, `newstest`) with at most `in_memory_up_to` pairs are read into memory
    (`text.parallel_text_dataset`); digits always are.

    For `digits` the source is the digit words and the target the digits, whatever the
    languages; `validation` and `test` are the same held-out numbers.
    """
    validate(spec)
    if split not in SPLITS:
        raise ValueError(f"split={split!r} is unknown; choose one of: {', '.join(SPLITS)}")
    if spec.dataset == "digits":
        train, test = digits_lib.digit_pairs(spec.digits_config)
        chosen = train if split == "train" else test
        return text.pairs_dataset([s for s, _ in chosen], [t for _, t in chosen]), None
    if spec.dataset == "text":
        if split == "train":
            files = (spec.source_file, spec.target_file)
        elif spec.valid_source_file and spec.valid_target_file:
            files = (spec.valid_source_file, spec.valid_target_file)
        else:
            raise ConfigError("dataset='text' has no validation files; pass `valid_source_file` "
                             "and `valid_target_file`.")
        return text.parallel_text_dataset(*files, in_memory_up_to=in_memory_up_to)
    if spec.dataset == "newstest":
        source_file, reference_file = newstest.newstest_files(
            spec.newstest_year, spec.source_lang, spec.target_lang, spec.data_dir)
        return text.parallel_text_dataset(source_file, reference_file,
                                          in_memory_up_to=in_memory_up_to)
    if spec.dataset == "wmt14":
        return tfds_sources.wmt14_pairs(split, spec.source_lang, spec.target_lang,
                                        spec.data_dir, spec.download), None
    return tfds_sources.europarl_pairs(split, spec.source_lang, spec.target_lang,
                                       spec.data_dir, manual_dir=spec.data_dir,
                                       download=spec.download)


def load_pairs(spec, split="train"):
    """The pairs of `load_pairs_with_stats`, without the stats."""
    return load_pairs_with_stats(spec, split)[0]


def take_pairs(spec, split, limit):
    """The first `limit` pairs of `split` as two lists of bytes (for validation BLEU)."""
    sources, targets = [], []
    for source, target in load_pairs(spec, split).take(limit).as_numpy_iterator():
        sources.append(source)
        targets.append(target)
    return sources, targets


def make_dataset(spec, config, split="train", input_context=None, length_filter=None):
    """Padded training batches of `spec`'s `split` through `preprocessing.make_batches`.

    As in bytenet-train, local files that `config.shuffle_buffer` would hold whole are read into
    memory, so each epoch is a permutation of them (`preprocessing.permuted_epochs`).
    """
    pairs, _ = load_pairs_with_stats(spec, split, in_memory_up_to=config.shuffle_buffer)
    return preprocessing.make_batches(pairs, config, input_context, length_filter)
