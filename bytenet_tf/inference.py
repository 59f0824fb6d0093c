"""Inference: translating byte strings with a `ByteNet` or with an exported SavedModel.

The one home of translation, used by validation during training, the exporter,
bytenet-translate and bytenet-evaluate alike:

- `Translator`: strings in, strings out, around a model: encode, decode (cached greedy or beam
  search, `bytenet_tf.decoding`), decode bytes. Its `translate` is the SavedModel signature;
  calling it on a list of bytes returns a list of bytes.
- `load_saved_model(path)`: the `serving_default` signature of an export (base or version).
- `as_translate_fn(signature)`: the same list-to-list function over a loaded signature (it takes
  and returns the tensors of `Translator.translate`).
- `translate_batches(translate_fn, sources)`: length-sorted batches, longest first, two
  decoding at once (`concurrent_batches`), results in input order.
- `share_cores(concurrent_batches)`: TensorFlow's intra-op threads set so that the batches in
  flight split the CPU's cores between them (bytenet-evaluate and bytenet-translate).
- `read_lines` / `one_line`: line I/O that stays aligned on b"\\n".
"""

import concurrent.futures
import functools
import os
import sys

import numpy as np
import tensorflow as tf
from absl import logging
from tqdm import tqdm

from bytenet_tf import decoding, vocabulary
from pipelines.options import MissingFileError


# Sentences per decoding batch where none is given: bytenet-evaluate, bytenet-translate and
# validation. A decoding step is one small product per layer over every running beam, so more
# sentences per batch use the CPU's matrix units better (docs/results.md, "Translation speed").
DEFAULT_BATCH_SIZE = 256
# Batches decoding at once where none is given. A decoding step is a chain of small ops, many of
# them on one thread; two batches in flight keep both of a 2-core CPU's cores busy
# (docs/results.md, "Translation speed").
DEFAULT_CONCURRENT_BATCHES = 2
# Padded source bytes per decoding batch where none is given (sentences times the longest, EOS
# counted): 256 sentences of up to 127 bytes, fewer of longer ones. A batch of long sentences
# decodes for many steps; smaller ones keep the batches' times closer, so the cores finish
# together (docs/results.md, "Which batches decode first, and how large").
DEFAULT_BATCH_BYTES = 32768


def _check_concurrent_batches(concurrent_batches):
    if concurrent_batches < 1:
        raise ValueError("`concurrent_batches` must be >= 1 (1: one batch at a time). Received: "
                         f"concurrent_batches={concurrent_batches}")


def available_cores():
    """The CPU cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def threads_per_batch(concurrent_batches, cores=None):
    """Intra-op threads that give each of `concurrent_batches` batches its share of `cores`
    (default: `available_cores()`): `cores // concurrent_batches`, at least 1."""
    _check_concurrent_batches(concurrent_batches)
    cores = available_cores() if cores is None else cores
    return max(1, cores // concurrent_batches)


def share_cores(concurrent_batches):
    """Sets TensorFlow's intra-op threads to `threads_per_batch(concurrent_batches)`.

    A decoding op is small, and with two batches in flight each op splitting itself over every
    core only adds hand-offs: on a 2-core CPU, one thread per op decoded 1000 captions 1.05x as
    fast on average as two threads per op, with the same translations (docs/results.md,
    "Translation speed"). The thread count is fixed when TensorFlow runs its first op, so call
    this before loading a model.

    Returns:
        The intra-op threads now in effect: the new value, or TensorFlow's own if it had
        already started (a warning says so; translations are the same either way), where 0
        means TensorFlow's default, one thread per core.
    """
    threads = threads_per_batch(concurrent_batches)
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    except RuntimeError:
        current = tf.config.threading.get_intra_op_parallelism_threads()
        logging.warning("TensorFlow had already started; decoding keeps its %s intra-op "
                        "threads instead of %d.",
                        current or "default number of", threads)
    return tf.config.threading.get_intra_op_parallelism_threads()


def source_ids(strings, max_length):
    """Encodes `(batch,)` strings as EOS-framed int32 ids `(batch, S)`, truncated to fit.

    A string longer than `max_length - 1` bytes keeps its first `max_length - 1` bytes.
    """
    ids = vocabulary.encode(strings)[:, :max_length - 1]
    eos = tf.fill([ids.nrows(), 1], vocabulary.EOS_ID)
    return tf.concat([ids, tf.RaggedTensor.from_tensor(eos)], axis=1).to_tensor(vocabulary.PAD_ID)


class Translator(tf.Module):
    """Strings in, strings out: encode, decode (greedy or beam), and decode bytes.

    Args:
        model: a `ByteNet`.
        beam_size: int, 1 for greedy decoding.
        length_alpha: float, beam search length normalization.
        jit_compile: bool, compile the integer-only decoding loop with XLA (no strings reach
            XLA). XLA compiles once per distinct input shape `(batch, padded length)`, so this
            suits servers that batch to a few fixed shapes.
    """

    def __init__(self, model, beam_size=1, length_alpha=decoding.DEFAULT_LENGTH_PENALTY,
                 jit_compile=False):
        super().__init__(name="translator")
        if beam_size < 1:
            raise ValueError(f"`beam_size` must be >= 1. Received: beam_size={beam_size}")
        self.model = model
        self.beam_size = beam_size
        self.length_alpha = length_alpha
        # XLA needs a static output width: the unfolding bound of the longest accepted source.
        self.capacity = (model.max_output_length(model.max_length - 1) + decoding.DEFAULT_MARGIN
                         if jit_compile else None)
        self._decode_ids = tf.function(self._decode_ids_python, jit_compile=jit_compile)

    def _decode_ids_python(self, ids):
        if self.beam_size == 1:
            return decoding.greedy_decode(self.model, ids, capacity=self.capacity)
        return decoding.beam_search_decode(self.model, ids, beam_size=self.beam_size,
                                           length_alpha=self.length_alpha, capacity=self.capacity)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="source")])
    def translate(self, source):
        """`(batch,)` tf.string in; `{"translation": (batch,) tf.string}` out."""
        def run():
            ids = source_ids(source, self.model.max_length)
            return vocabulary.decode(self._decode_ids(ids))

        translation = tf.cond(tf.size(source) > 0, run, lambda: tf.zeros([0], tf.string))
        return {"translation": translation}

    def output_bound(self, source):
        """The output length (bytes) at which `source` (bytes) stops without EOS."""
        return decoding.output_bound(len(source), self.model.unfold_a, self.model.unfold_b,
                                     self.model.max_length)

    def __call__(self, sources):
        """Translates a list of bytes to a list of bytes."""
        return translate_list(self.translate, sources)


class BeamCandidates:
    """Every final beam of a beam search, for choosing the length penalty afterwards.

    The beams do not depend on the length penalty (`decoding.beam_search_decode`), so one
    search gives what `Translator(model, beam_size, length_alpha)` returns for every
    `length_alpha`: `choose(candidates, length_alpha)`.

    Args:
        model: a `ByteNet`.
        beam_size: int >= 1.
    """

    def __init__(self, model, beam_size):
        self.model = model
        self.beam_size = beam_size
        self._search = tf.function(lambda ids: decoding.beam_search_decode(
            model, ids, beam_size=beam_size, return_beams=True))

    def __call__(self, sources):
        """A list of bytes in; per source `(hypotheses, scores, lengths)`: a list of
        `beam_size` bytes, and float32 and int32 arrays `(beam_size,)`."""
        ids = source_ids(tf.constant(sources, tf.string), self.model.max_length)
        sequences, scores, lengths = self._search(ids)
        texts = vocabulary.decode(tf.reshape(sequences, [-1, tf.shape(sequences)[2]])).numpy()
        texts = texts.reshape(len(sources), self.beam_size)
        return [(list(row), s, n) for row, s, n in zip(texts, scores.numpy(), lengths.numpy())]

    @staticmethod
    def choose(candidates, length_alpha):
        """The translations at `length_alpha`: a list of bytes, one per source of `candidates`
        (what `__call__` returned)."""
        if not candidates:
            return []
        scores = np.stack([scores for _, scores, _ in candidates])
        lengths = np.stack([lengths for _, _, lengths in candidates])
        best = decoding.best_beam(scores, lengths, length_alpha).numpy()
        return [hypotheses[index] for (hypotheses, _, _), index in zip(candidates, best)]


def translate_list(signature, sources):
    """`sources` (list of bytes) through a translate signature, as a list of bytes.

    Args:
        signature: `Translator.translate` or a loaded SavedModel's `serving_default`: called as
            `signature(source=(batch,) tf.string)`, it returns `{"translation": ...}`.
        sources: list of bytes.
    """
    outputs = signature(source=tf.constant(sources, tf.string))["translation"]
    return list(outputs.numpy())


def as_translate_fn(signature):
    """A function from a list of bytes to a list of bytes over `signature` (`translate_list`)."""
    return functools.partial(translate_list, signature)


def resolve_saved_model(path):
    """A version directory, or the newest integer version under an export base."""
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return path
    if os.path.isdir(path):
        versions = [int(n) for n in os.listdir(path)
                    if n.isdigit() and os.path.isfile(os.path.join(path, n, "saved_model.pb"))]
        if versions:
            return os.path.join(path, str(max(versions)))
    raise MissingFileError(f"No SavedModel at {path}: expected {path}/saved_model.pb or "
                           f"{path}/<version>/saved_model.pb. Export one with bytenet-train "
                           "(--export_dir).")


def load_saved_model(path):
    """Returns `(signature, version_dir)`: the `serving_default` of the export at `path`.

    `path` may be a version directory or an export base (the newest version is used). Needs
    only tensorflow: the serving graph holds core ops.
    """
    version_dir = resolve_saved_model(path)
    return tf.saved_model.load(version_dir).signatures["serving_default"], version_dir


def cut_batches(lengths, batch_size=DEFAULT_BATCH_SIZE, batch_bytes=DEFAULT_BATCH_BYTES):
    """Index batches of sources with `lengths` (bytes), longest first.

    The sources are sorted longest first (ties in input order) and cut in that order: a batch
    takes the next source while it holds fewer than `batch_size` and, with the source, at most
    `batch_bytes` padded bytes (its sources times its longest plus an EOS; None: no such
    limit). A source longer than `batch_bytes` is a batch of its own. The shortest batches
    come last, where they fill the cores that the long ones leave free as they finish.

    Returns:
        A list of int arrays, together every index once.
    """
    if batch_size < 1:
        raise ValueError(f"`batch_size` must be >= 1. Received: batch_size={batch_size}")
    if batch_bytes is not None and batch_bytes < 1:
        raise ValueError("`batch_bytes` must be >= 1, or None for no limit. Received: "
                         f"batch_bytes={batch_bytes}")
    order = np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
    batches, start = [], 0
    while start < len(order):
        rows = batch_size
        if batch_bytes is not None:
            rows = max(1, min(rows, batch_bytes // (int(lengths[order[start]]) + 1)))
        batches.append(order[start:start + rows])
        start += rows
    return batches


def translate_batches(translate_fn, sources, batch_size=DEFAULT_BATCH_SIZE, progress=False,
                      description="translate", concurrent_batches=DEFAULT_CONCURRENT_BATCHES,
                      batch_bytes=DEFAULT_BATCH_BYTES):
    """Translates `sources` (list of bytes) in length-sorted batches, keeping their order.

    Every source is translated, the empty string included. The batches are `cut_batches`'s,
    longest first, the same whatever `concurrent_batches` is, so each source gets the
    translation that one batch at a time gives it; up to `concurrent_batches` of them are
    decoding at once, in threads (a TensorFlow call releases the GIL).

    Args:
        translate_fn: list of bytes -> list of bytes: a `Translator`, or `as_translate_fn`.
            With `concurrent_batches > 1` it is called from several threads at once, which a
            SavedModel's signature and a `Translator` allow.
        sources: list of bytes.
        batch_size: int >= 1.
        progress: bool, show a progress bar on stderr.
        description: str, the progress bar's label.
        concurrent_batches: int >= 1, batches decoding at once (1: one after another).
        batch_bytes: int >= 1, or None: padded source bytes per batch (`cut_batches`).

    Returns:
        list of bytes, `translations[i]` for `sources[i]`.
    """
    _check_concurrent_batches(concurrent_batches)
    batches = cut_batches([len(s) for s in sources], batch_size, batch_bytes)

    def translate(indices):
        return translate_fn([sources[i] for i in indices])

    outputs = [None] * len(sources)
    with tqdm(total=len(sources), desc=description, unit="sent", file=sys.stderr,
              disable=not progress) as bar:
        workers = min(concurrent_batches, len(batches))
        if workers <= 1:
            results = map(translate, batches)
        else:
            pool = concurrent.futures.ThreadPoolExecutor(workers, "translate_batches")
            results = pool.map(translate, batches)
        try:
            for indices, translations in zip(batches, results):
                for index, translation in zip(indices, translations):
                    outputs[index] = translation
                bar.update(len(indices))
        finally:
            if workers > 1:
                pool.shutdown(cancel_futures=True)
    return outputs


def read_lines(stream):
    """Reads a binary stream as lines split on b"\\n" only (a final newline ends the last line)."""
    data = stream.read()
    if not data:
        return []
    lines = data.split(b"\n")
    return lines[:-1] if data.endswith(b"\n") else lines


def one_line(translation):
    """A translation made safe for line-aligned output: newline bytes become spaces."""
    return translation.replace(b"\r", b" ").replace(b"\n", b" ")
