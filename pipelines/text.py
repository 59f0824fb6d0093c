"""Local line-aligned parallel files, plain or gzip-compressed.

In: a source file and a target file whose line i are translations of each other. Out: a
`tf.data.Dataset` of `(source, target)` scalar tf.string pairs, and `ParallelStats` counts.

Lines are split on b"\\n" only (never on U+2028 or other Unicode separators), a trailing b"\\r"
is removed (CRLF files, as `tf.data.TextLineDataset` does), and the bytes are otherwise kept as
they are, invalid UTF-8 included. A pair where either side is empty is skipped and counted.
Before any data flows, one pass checks that both files have the same number of lines, so that
no line is ever paired with the wrong partner.
"""

import dataclasses
import gzip
import os

import tensorflow as tf

from pipelines.options import ConfigError, MissingFileError


@dataclasses.dataclass
class ParallelStats:
    """What the check pass found: `lines` per file, pairs `kept`, pairs `empty` (skipped)."""
    lines: int
    kept: int
    empty: int


def _open(path):
    return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")


def _lines(path):
    """Yields the lines of `path` split on b"\\n" only, without the newline or a trailing CR."""
    with _open(path) as f:
        for line in f:  # binary file iteration splits on b"\n" only
            if line.endswith(b"\n"):
                line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
            yield line


def check_exists(path, hint):
    """Raises `MissingFileError` (a `FileNotFoundError`) naming `path` and what to do (`hint`)
    when it is missing."""
    if not os.path.isfile(path):
        raise MissingFileError(f"{path} does not exist. {hint}")


def check_parallel_files(source_file, target_file):
    """Counts the lines of two parallel files and the pairs with an empty side.

    Raises:
        MissingFileError: a file is missing.
        ConfigError: the files have different numbers of lines; the message names both files and
            both counts.
    """
    hint = "Pass two existing, line-aligned parallel files."
    check_exists(source_file, hint)
    check_exists(target_file, hint)
    source_count = target_count = empty = 0
    sources, targets = _lines(source_file), _lines(target_file)
    for source in sources:
        source_count += 1
        target = next(targets, None)
        if target is None:
            continue
        target_count += 1
        empty += (not source) or (not target)
    target_count += sum(1 for _ in targets)
    if source_count != target_count:
        raise ConfigError(
            f"Parallel files differ in length: {source_file} has {source_count} lines but "
            f"{target_file} has {target_count}. Line i of one must translate line i of the other; "
            "fix the files (a stray or missing newline is the usual cause).")
    return ParallelStats(lines=source_count, kept=source_count - empty, empty=empty)


def read_aligned_lines(source_file, target_file):
    """Reads every line of both files, empty ones included, after `check_parallel_files`.

    For evaluation, where line i of the output must answer line i of the input. Returns
    `(sources, targets, stats)`: two lists of bytes of `stats.lines` items each.
    """
    stats = check_parallel_files(source_file, target_file)
    return list(_lines(source_file)), list(_lines(target_file)), stats


def read_parallel_lines(source_file, target_file):
    """Reads both files into two lists of bytes, without the pairs that have an empty side.

    For small training and validation files, with the semantics of `parallel_text_dataset`.
    Returns `(sources, targets, stats)`.
    """
    sources, targets, stats = read_aligned_lines(source_file, target_file)
    return (*_without_empty(sources, targets), stats)


def _without_empty(sources, targets):
    """Two iterables of lines, less the pairs with an empty side, as two lists."""
    pairs = [(s, t) for s, t in zip(sources, targets) if s and t]
    return [s for s, _ in pairs], [t for _, t in pairs]


def pairs_dataset(sources, targets):
    """Two lists of bytes held in memory, as a dataset of scalar tf.string pairs (its
    cardinality known)."""
    return tf.data.Dataset.from_tensor_slices((tf.constant(sources, tf.string),
                                               tf.constant(targets, tf.string)))


def _line_dataset(path):
    compression = "GZIP" if path.endswith(".gz") else ""
    return tf.data.TextLineDataset(path, compression_type=compression)


def parallel_text_dataset(source_file, target_file, in_memory_up_to=0):
    """A pair of line-aligned files as a dataset of `(source, target)` strings.

    Args:
        source_file, target_file: the files (plain or .gz).
        in_memory_up_to: int; files with at most this many non-empty pairs are read into memory,
            so that the dataset knows its cardinality and `preprocessing.make_batches` can
            permute whole epochs. Larger files (and 0) are streamed.

    Returns:
        `(dataset, stats)`: a `tf.data.Dataset` of scalar tf.string pairs without the empty
        pairs, in file order, and the `ParallelStats` of the check pass.
    """
    stats = check_parallel_files(source_file, target_file)
    if stats.kept <= in_memory_up_to:
        return pairs_dataset(*_without_empty(_lines(source_file), _lines(target_file))), stats
    dataset = tf.data.Dataset.zip((_line_dataset(source_file), _line_dataset(target_file)))
    dataset = dataset.filter(lambda s, t: tf.logical_and(tf.strings.length(s) > 0,
                                                         tf.strings.length(t) > 0))
    return dataset, stats
