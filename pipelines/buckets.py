"""Length buckets of the training batches, in plain Python (no TensorFlow), so that every
backend's input code batches as `pipelines.preprocessing.batch` does."""


def default_boundaries(max_length, growth=1.1):
    """Bucket edges from 8 up to `max_length`, each about `growth` times the last.

    Narrow buckets keep padding low; with a large enough shuffle buffer they still fill.
    """
    boundaries, edge = [], 8
    while edge < max_length:
        boundaries.append(edge)
        edge = max(edge + 1, int(edge * growth))
    return tuple(boundaries) + (max_length,)


def bucket_sizes(boundaries, max_length, batch_size, tokens_per_batch):
    """Pairs per batch of each bucket: one more bucket than `boundaries` (lengths past the
    last edge, up to `max_length`). With a token budget, a bucket whose edge is E holds
    `tokens_per_batch // E` pairs (at least 1); without one (0), `batch_size` each."""
    if not tokens_per_batch:
        return [batch_size] * (len(boundaries) + 1)
    edges = list(boundaries) + [max(max_length, boundaries[-1])]
    return [max(1, tokens_per_batch // edge) for edge in edges]
