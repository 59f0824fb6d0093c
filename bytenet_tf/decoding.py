"""Decoding: cached (linear-time) greedy and beam search, and the naive quadratic reference.

In: a `ByteNet` and source ids int32 `(batch, S)` (EOS-framed, PAD-padded). Out: output ids
int32 `(batch, L)`, ending in EOS_ID and padded with PAD_ID after it (a row that reaches its
length bound has no EOS). `pipelines.byte_codec.decode` turns them into strings.

Cached decoding follows Fast WaveNet (Paine et al. 2016, arXiv:1611.09482): the encoder runs
once, and each causal dilated convolution keeps a queue of the `(kernel_size - 1) * dilation`
inputs it still needs, so one output byte costs one position per layer: O(L) for L bytes. The
naive decoder re-runs the whole decoder on the prefix for every byte, O(L^2); it is kept as the
reference that cached decoding must equal. Here the queues are TensorLists of past steps
(`_History`), read through a per-row lineage table: a step writes one element and reads two
per layer, and beam search reorders the table, never the queues. The decoder's input projection
is split by its inputs (`ByteNet.input_tables`): the encoder output's share is computed once
per source position and the target embedding's once per id, so a step adds two rows.

**Dynamic unfolding** bounds each row's output at `ceil(unfold_a * bytes + unfold_b) + margin`,
where `bytes` is the source length without EOS. Decoding stops early once every row has emitted
EOS (unless `ignore_eos`, which forces the full bound for benchmarks).

All functions are graph-friendly (`tf.while_loop`), take and return integer tensors only, and so
can be wrapped in `tf.function(jit_compile=True)` and exported.
"""

import tensorflow as tf

from bytenet_tf.models.unfolding import unfolded_length
from bytenet_tf.vocabulary import BOS_ID, EOS_ID, PAD_ID

DEFAULT_MARGIN = 10
# Beam search's length-normalization exponent where none is chosen (GNMT used 0.6-0.7);
# bytenet-train tunes it on the validation set when it exports a beam.
DEFAULT_LENGTH_PENALTY = 0.6


def output_limits(model, source, margin=DEFAULT_MARGIN, max_output_length=None):
    """Per-row output bound from dynamic unfolding: int32 `(batch,)`."""
    source_bytes = tf.reduce_sum(tf.cast(tf.not_equal(source, PAD_ID), tf.float32), axis=1) - 1.0
    limits = tf.cast(tf.math.ceil(model.unfold_a * tf.maximum(source_bytes, 0.0)
                                  + model.unfold_b), tf.int32) + margin
    if max_output_length is not None:
        limits = tf.minimum(limits, max_output_length)
    return tf.maximum(limits, 1)


def output_bound(source_bytes, unfold_a, unfold_b, max_length, margin=DEFAULT_MARGIN):
    """`output_limits` for one source of `source_bytes` bytes (no EOS), in Python.

    Serving truncates a source to `max_length - 1` bytes first. An output of this many bytes
    reached the bound: it stopped because it ran out of room, not because it emitted EOS.
    """
    source_bytes = min(source_bytes, max_length - 1)
    return max(unfolded_length(source_bytes, unfold_a, unfold_b) + margin, 1)


def _prepare(model, source, margin, max_output_length, capacity=None):
    source = tf.convert_to_tensor(source, tf.int32)
    limits = output_limits(model, source, margin, max_output_length)
    steps = tf.maximum(tf.reduce_max(tf.concat([limits, [1]], 0)), 1)
    if capacity is not None:
        steps = tf.minimum(steps, capacity)
    encoded = model.encode(source, training=False)
    memory = model.attention_memory(encoded, tf.not_equal(source, PAD_ID))
    return source, limits, steps, encoded, memory


def _step_inputs(model, encoded):
    """What each decoding step reads of the source: the encoder output's share of the input
    projection and the id table (`ByteNet.input_tables`), or the encoder output and None."""
    tables = model.input_tables(encoded)
    return (encoded, None) if tables is None else tables


def _encoded_at(encoded, t):
    """Encoder output at position t, or zeros past the end (dynamic unfolding).

    A clamped gather rather than a data-dependent pad keeps every shape static under XLA.
    """
    length = tf.shape(encoded)[1]
    inside = tf.cast(t < length, encoded.dtype)
    return tf.gather(encoded, tf.minimum(t, length - 1), axis=1) * inside


def _running(t, steps, finished, ignore_eos):
    """Whether a greedy loop goes on: steps left, and a row still running (or `ignore_eos`)."""
    running = tf.logical_not(tf.reduce_all(finished))
    return tf.logical_and(t < steps, tf.logical_or(running, ignore_eos))


def _greedy_choice(logits, t, finished, limits, ignore_eos):
    """The argmax byte of each row at step `t` (PAD for finished rows), and who is finished."""
    chosen = tf.argmax(logits, axis=-1, output_type=tf.int32)
    chosen = tf.where(finished, PAD_ID, chosen)
    finished = finished | (tf.equal(chosen, EOS_ID) & (not ignore_eos)) | (t + 1 >= limits)
    return chosen, finished


def _take(structure, indices):
    """Rows `indices` (axis 0) of every tensor in a nested structure."""
    return tf.nest.map_structure(lambda x: tf.gather(x, indices), structure)


def _free_rows(structure):
    """Shape invariants with a free first axis, for loop variables whose rows leave the batch."""
    return tf.nest.map_structure(lambda x: tf.TensorShape([None]).concatenate(x.shape[1:]),
                                 structure)


class _History:
    """One causal convolution's past inputs during cached decoding, read along each row's lineage.

    What `DilatedConv1D.step` reads and writes in place of its ring-buffer queue. The inputs of
    step `s`, `(rows at s, channels)`, are element `s mod length` of a TensorList of `length`
    (the convolution's `queue_length`) elements. A step reads two elements' rows and writes one
    element, and nothing else is copied; a tensor queue is copied whole by every write and every
    reorder (about 38 MB per step for 256 rows at hidden 400 and 3 stacks). Each element keeps
    the rows of its own step: running row `r` finds its input from `lag` steps back in row
    `ancestors[r, lag - 1]` of that step's element. Beam search reorders this small table
    instead of the histories, and a row that leaves the batch leaves only the table.

    Args:
        handle: the TensorList, a variant scalar (`empty`, or the last step's `write`).
        length: int, the number of elements.
        position: int32 scalar, the step being decoded.
        ancestors: int32 `(running, max_lag)` (`_lineage`).
        dtype: the elements' dtype.
    """

    def __init__(self, handle, length, position, ancestors, dtype):
        self.handle, self.length, self.position = handle, length, position
        self.ancestors, self.dtype = ancestors, dtype

    @staticmethod
    def empty(length, rows, channels, dtype):
        """A TensorList of `length` zero elements `(rows, channels)`: the inputs before step 0."""
        return tf.raw_ops.TensorListFromTensor(tensor=tf.zeros([length, rows, channels], dtype),
                                               element_shape=tf.constant([-1, channels]))

    def read(self, lags):
        """The inputs `lag` steps back of every running row: a list of `(running, channels)`."""
        return [tf.gather(tf.raw_ops.TensorListGetItem(
            input_handle=self.handle, index=tf.math.floormod(self.position - lag, self.length),
            element_shape=tf.constant([-1, -1]), element_dtype=self.dtype),
            self.ancestors[:, lag - 1]) for lag in lags]

    def write(self, inputs):
        """The history with `inputs` `(running, channels)` as this step's element."""
        handle = tf.raw_ops.TensorListSetItem(
            input_handle=self.handle, index=tf.math.floormod(self.position, self.length),
            item=inputs)
        return _History(handle, self.length, self.position, self.ancestors, self.dtype)


def _empty_histories(model, rows):
    """Zero histories of every decoder block (TensorList handles), and the lineage table of
    `rows` rows that reads them (every past input of row `r` in row `r`)."""
    convs = [block.dilated_conv for block in model.decoder_blocks]
    handles = [_History.empty(conv.queue_length, rows, conv.input_dim, conv.compute_dtype)
               for conv in convs]
    max_lag = max(conv.queue_length for conv in convs)
    return handles, tf.tile(tf.range(rows)[:, tf.newaxis], [1, max_lag])


def _lineage(ancestors, parents, parent_rows=None):
    """The lineage table after a step: row `r` continues row `parents[r]` of this step.

    `ancestors[r, lag - 1]` is the row, in the numbering of the step `lag` steps back, of row
    `r`'s input there: after the step, lag 1 is the parent's row in this step's history element
    (`parent_rows`, by default the parent itself) and older lags are the parent's.
    """
    parent_rows = parents if parent_rows is None else parent_rows
    return tf.concat([parent_rows[:, tf.newaxis], tf.gather(ancestors, parents)[:, :-1]], axis=1)


def _decoder_step(model, encoded_t, previous, handles, t, ancestors, memory, id_table):
    """`model.decoder_step` with every block reading and writing a `_History`.

    Returns:
        `(logits, new_handles)`.
    """
    histories = [_History(handle, block.dilated_conv.queue_length, t, ancestors,
                          block.dilated_conv.compute_dtype)
                 for block, handle in zip(model.decoder_blocks, handles)]
    logits, histories = model.decoder_step(encoded_t, previous, histories, memory, t, id_table)
    return logits, [history.handle for history in histories]


def greedy_decode(model, source, margin=DEFAULT_MARGIN, max_output_length=None,
                  ignore_eos=False, return_logits=False, capacity=None):
    """Cached greedy decoding.

    A row that is finished (EOS, or its bound) leaves the batch, so later steps compute only
    the rows still running; under XLA (`capacity`) and with `return_logits` every row stays.

    Args:
        model: a `ByteNet`.
        source: int32 `(batch, S)`.
        margin: int, bytes added to the unfolding bound.
        max_output_length: int or None, a hard cap on the output length.
        ignore_eos: bool, decode every row to its bound (for timing).
        return_logits: bool, also return float32 logits `(batch, L, VOCAB_SIZE)` (not under XLA).
        capacity: a Python int, for XLA: the output buffer's static width. Outputs are then
            `(batch, capacity)` with PAD_ID after the last step, and decoding stops at `capacity`.

    Returns:
        int32 ids `(batch, L)`, and the logits when `return_logits`.
    """
    source, limits, steps, encoded, memory = _prepare(model, source, margin, max_output_length,
                                                      capacity)
    encoded, id_table = _step_inputs(model, encoded)
    compact = capacity is None and not return_logits
    batch = tf.shape(source)[0]
    # Unwritten entries stay 0, which is PAD_ID.
    ids = tf.zeros([capacity if capacity is not None else steps, batch], tf.int32)
    all_logits = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[None, None])
    # What each running row carries: its row in the output, its own inputs, the rows that hold
    # its inputs of past steps (`_History`), and the attention memory.
    handles, ancestors = _empty_histories(model, batch)
    rows = (tf.range(batch), tf.fill([batch], BOS_ID), tf.zeros([batch], tf.bool), limits,
            ancestors, () if memory is None else memory)

    def cond(t, rows, handles, ids, all_logits):
        return _running(t, steps, rows[2], ignore_eos)

    def body(t, rows, handles, ids, all_logits):
        index, previous, finished, limits, ancestors, memory = rows
        logits, handles = _decoder_step(model, tf.gather(_encoded_at(encoded, t), index),
                                        previous, handles, t, ancestors, memory or None,
                                        id_table)
        if return_logits:
            all_logits = all_logits.write(t, logits)
        chosen, finished = _greedy_choice(logits, t, finished, limits, ignore_eos)
        ids = tf.tensor_scatter_nd_update(
            ids, tf.stack([tf.fill(tf.shape(index), t), index], axis=1), chosen)
        ancestors = _lineage(ancestors, tf.range(tf.shape(index)[0]))  # each row continues itself
        rows = (index, chosen, finished, limits, ancestors, memory)
        if compact:
            rows = tf.cond(tf.reduce_any(finished),
                           lambda: _take(rows, tf.where(tf.logical_not(finished))[:, 0]),
                           lambda: rows)
        return t + 1, rows, handles, ids, all_logits

    loop_vars = (tf.constant(0), rows, handles, ids, all_logits)
    length, _, _, ids, all_logits = tf.while_loop(
        cond, body, loop_vars,
        shape_invariants=(tf.TensorShape([]), _free_rows(rows) if compact else
                          tf.nest.map_structure(lambda x: x.shape, rows),
                          [tf.TensorShape([])] * len(handles), ids.shape, tf.TensorShape(None)))
    output = tf.transpose(ids, [1, 0])
    if capacity is None:
        output = output[:, :length]
    if return_logits:
        vocab = model.output_projection.filters
        return output, tf.reshape(tf.transpose(all_logits.stack(), [1, 0, 2]), [batch, -1, vocab])
    return output


def naive_greedy_decode(model, source, margin=DEFAULT_MARGIN, max_output_length=None,
                        ignore_eos=False, return_logits=False):
    """Greedy decoding that re-runs the full decoder on the prefix for every byte: O(L^2).

    Same arguments and results as `greedy_decode`; the reference it must equal.
    """
    source, limits, steps, encoded, _ = _prepare(model, source, margin, max_output_length)
    source_mask = tf.not_equal(source, PAD_ID)
    batch = tf.shape(source)[0]
    vocab = model.output_projection.filters
    prefix = tf.fill([batch, 1], BOS_ID)
    logits_so_far = tf.zeros([batch, 0, vocab])

    def cond(t, prefix, finished, logits_so_far):
        return _running(t, steps, finished, ignore_eos)

    def body(t, prefix, finished, logits_so_far):
        # `decode` pads the encoder output with zeros past the source end.
        logits = model.decode(encoded, prefix, training=False, source_mask=source_mask)[:, -1]
        if return_logits:
            logits_so_far = tf.concat([logits_so_far, logits[:, tf.newaxis]], axis=1)
        chosen, finished = _greedy_choice(logits, t, finished, limits, ignore_eos)
        return t + 1, tf.concat([prefix, chosen[:, tf.newaxis]], axis=1), finished, logits_so_far

    _, prefix, _, logits_so_far = tf.while_loop(
        cond, body, (tf.constant(0), prefix, tf.zeros([batch], tf.bool), logits_so_far),
        shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, None]),
                          tf.TensorShape([None]), tf.TensorShape([None, None, vocab])))
    if return_logits:
        return prefix[:, 1:], logits_so_far
    return prefix[:, 1:]


def _length_penalty(length, alpha):
    # GNMT (Wu et al. 2016): ((5 + length) / 6) ** alpha.
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def best_beam(scores, lengths, length_alpha):
    """The beam that `beam_search_decode` chooses at `length_alpha`, from its `return_beams`.

    Args:
        scores: float32 `(batch, beam_size)` summed log-probabilities.
        lengths: int32 `(batch, beam_size)`.
        length_alpha: float.

    Returns:
        int32 `(batch,)` beam indices.
    """
    return tf.argmax(scores / _length_penalty(lengths, length_alpha), axis=1,
                     output_type=tf.int32)


def beam_search_decode(model, source, beam_size=4, length_alpha=DEFAULT_LENGTH_PENALTY,
                       margin=DEFAULT_MARGIN, max_output_length=None, return_scores=False,
                       capacity=None, return_beams=False):
    """Cached beam search; each beam reads its past along its lineage (`_History`).

    Finished beams are extended with PAD at log-probability 0; among the final beams the one
    with the best length-normalized log-probability (score / ((5 + length) / 6) ** `length_alpha`)
    wins. The decoder steps only the beams still running, and a sentence whose beams are all
    finished leaves the batch (not under XLA, whose shapes are static: there every beam of every
    sentence steps to the end).

    Args:
        model: a `ByteNet`.
        source: int32 `(batch, S)`.
        beam_size: int >= 1.
        length_alpha: float, 0 for no length normalization.
        margin, max_output_length: as in `greedy_decode`.
        return_scores: bool, also return the chosen beams' summed log-probabilities `(batch,)`.
        capacity: a Python int for XLA, as in `greedy_decode`.
        return_beams: bool, return every final beam instead of the chosen one: ids
            `(batch, beam_size, L)`, summed log-probabilities `(batch, beam_size)` and lengths
            `(batch, beam_size)` (bytes up to and including EOS). The beams do not depend on
            `length_alpha`, which only chooses among them (`best_beam`), so one search serves
            every length penalty.

    Returns:
        int32 ids `(batch, L)`, and the scores when `return_scores`.
    """
    if beam_size < 1:
        raise ValueError(f"`beam_size` must be >= 1. Received: beam_size={beam_size}")
    source, limits, steps, encoded, memory = _prepare(model, source, margin, max_output_length,
                                                      capacity)
    encoded, id_table = _step_inputs(model, encoded)
    compact = capacity is None
    batch = tf.shape(source)[0]
    width = capacity if capacity is not None else steps
    k = beam_size
    flat = batch * k
    # The beams of a row share its source, so the attention memory is never reordered.
    memory = () if memory is None else tuple(tf.repeat(part, k, axis=0) for part in memory)
    # Only the first beam is live at the start, so the k beams do not all pick the same byte.
    scores = tf.tile(tf.concat([[0.0], tf.fill([k - 1], -1e9)], 0)[tf.newaxis], [batch, 1])
    positions = tf.range(width)
    # Per running sentence: its row in the output, its k beams' scores, lengths and bytes
    # (batch, k, ...); per beam (batch * k, ...): the last byte, whether it is finished, its
    # bound, the rows that hold its inputs of past steps (`_History`), and the attention memory.
    sentences = (tf.range(batch), scores, tf.zeros([batch, k], tf.int32),
                 tf.zeros([batch, k, width], tf.int32))
    handles, ancestors = _empty_histories(model, flat)
    beams = (tf.fill([flat], BOS_ID), tf.zeros([flat], tf.bool), tf.repeat(limits, k, axis=0),
             ancestors, memory)
    # The results of every sentence, written when it leaves the batch and at the end.
    results = (tf.zeros([batch, k]), tf.zeros([batch, k], tf.int32),
               tf.zeros([batch, k, width], tf.int32))

    def store(results, sentences):
        index = sentences[0][:, tf.newaxis]
        return tuple(tf.tensor_scatter_nd_update(result, index, value)
                     for result, value in zip(results, sentences[1:]))

    def cond(t, sentences, beams, handles, results):
        return tf.logical_and(t < steps, tf.logical_not(tf.reduce_all(beams[1])))

    def body(t, sentences, beams, handles, results):
        index, scores, lengths, sequences = sentences
        previous, finished, limits, ancestors, memory = beams
        running = tf.shape(index)[0]
        # The decoder steps only the beams still running: a finished beam's one continuation is
        # PAD at log-probability 0, whatever the decoder would say. This step's history element
        # holds the rows of `active` in order (every beam's on the static path, under XLA).
        if compact:
            running_beams = tf.logical_not(finished)
            active = tf.cast(tf.where(running_beams)[:, 0], tf.int32)
            row_at_step = tf.cumsum(tf.cast(running_beams, tf.int32)) - 1
        else:
            active = row_at_step = tf.range(running * k)
        encoded_t = tf.gather(_encoded_at(encoded, t), tf.gather(index, active // k))
        logits, handles = _decoder_step(model, encoded_t, tf.gather(previous, active), handles,
                                        t, tf.gather(ancestors, active),
                                        _take(memory, active) or None, id_table)
        log_probs = tf.nn.log_softmax(logits)
        vocab = tf.shape(log_probs)[-1]
        # Every beam's row of `log_probs` (a finished beam's holds another's, replaced below).
        log_probs = tf.gather(log_probs, tf.maximum(row_at_step, 0))
        pad_only = tf.where(tf.equal(tf.range(vocab), PAD_ID), 0.0, -1e9)
        log_probs = tf.where(finished[:, tf.newaxis], pad_only[tf.newaxis], log_probs)
        candidates = tf.reshape(scores, [running * k, 1]) + log_probs
        candidates = tf.reshape(candidates, [running, k * vocab])
        scores, best = tf.math.top_k(candidates, k=k)
        parents = best // vocab
        chosen = best % vocab
        flat_parents = tf.reshape(parents + tf.range(running)[:, tf.newaxis] * k, [running * k])
        # A child of a finished beam is finished and never reads its table row again.
        ancestors = _lineage(ancestors, flat_parents, tf.gather(row_at_step, flat_parents))
        finished = tf.gather(finished, flat_parents)
        lengths = tf.gather(lengths, parents, batch_dims=1)
        sequences = tf.gather(sequences, parents, batch_dims=1)
        sequences = tf.where(tf.equal(positions, t)[tf.newaxis, tf.newaxis],
                             chosen[..., tf.newaxis], sequences)
        lengths = lengths + tf.cast(tf.logical_not(tf.reshape(finished, [running, k])), tf.int32)
        chosen = tf.reshape(chosen, [running * k])
        finished = finished | tf.equal(chosen, EOS_ID) | (t + 1 >= limits)
        sentences = (index, scores, lengths, sequences)
        beams = (chosen, finished, limits, ancestors, memory)
        if compact:
            done = tf.reduce_all(tf.reshape(finished, [running, k]), axis=1)

            def leave():
                kept = tf.where(tf.logical_not(done))[:, 0]
                kept_beams = tf.reshape(kept[:, tf.newaxis] * k + tf.range(k, dtype=kept.dtype),
                                        [-1])
                return (store(results, _take(sentences, tf.where(done)[:, 0])),
                        _take(sentences, kept), _take(beams, kept_beams))

            results, sentences, beams = tf.cond(tf.reduce_any(done), leave,
                                                 lambda: (results, sentences, beams))
        return t + 1, sentences, beams, handles, results

    def invariants(structure):
        return _free_rows(structure) if compact else tf.nest.map_structure(
            lambda x: x.shape, structure)

    length, sentences, _, _, results = tf.while_loop(
        cond, body, (tf.constant(0), sentences, beams, handles, results),
        shape_invariants=(tf.TensorShape([]), invariants(sentences), invariants(beams),
                          [tf.TensorShape([])] * len(handles),
                          tf.nest.map_structure(lambda x: x.shape, results)))
    scores, lengths, sequences = store(results, sentences)
    if capacity is None:
        sequences = sequences[:, :, :length]
    if return_beams:
        return sequences, scores, lengths
    best = best_beam(scores, lengths, length_alpha)
    output = tf.gather(sequences, best, batch_dims=1)
    if return_scores:
        return output, tf.gather(scores, best, batch_dims=1)
    return output
