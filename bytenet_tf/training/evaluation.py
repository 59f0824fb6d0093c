"""Validation during and after training: BLEU, chrF and exact match, and the digits check.

In: a translate function (list of bytes -> list of bytes, `bytenet_tf.inference`) and a
resolved `TrainConfig`. Out: score dicts, written to TensorBoard and `metrics.jsonl` by the
trainer.
"""

import collections

from absl import logging

from bytenet_tf import inference, scoring
from pipelines import datasets, digits


def reached_bound(sources, hypotheses, output_bound):
    """The share of `hypotheses` as long as their bound: runaway outputs that never emitted EOS.

    Args:
        sources, hypotheses: lists of bytes, aligned.
        output_bound: callable, source bytes -> the output length at which decoding stops
            (`bytenet_tf.inference.Translator.output_bound`).
    """
    if not sources:
        return 0.0
    return sum(len(h) >= output_bound(s) for s, h in zip(sources, hypotheses)) / len(sources)


def validate(translate_fn, sources, references, progress=False):
    """Translates `sources` with `translate_fn` and scores them against `references`.

    Returns:
        `(scores, hypotheses)`; see `bytenet_tf.scoring.score`. `scores` also holds
        `bleu_caveat` (see `bytenet_tf.scoring.bleu_caveat`) and, when `translate_fn` has an
        `output_bound` (a `Translator`), `reached_bound` (see `reached_bound`).
    """
    hypotheses = inference.translate_batches(translate_fn, sources, batch_size=64,
                                             progress=progress, description="validate")
    scores = scoring.score(hypotheses, references)
    scores["bleu_caveat"] = scoring.bleu_caveat(references)
    if hasattr(translate_fn, "output_bound"):
        scores["reached_bound"] = reached_bound(sources, hypotheses, translate_fn.output_bound)
    return scores, hypotheses


def validation_scores(config, translate_fn):
    """`validate` on the first `config.valid_size` pairs of the validation split."""
    sources, references = datasets.take_pairs(config.data, "validation", config.valid_size)
    scores, _ = validate(translate_fn, sources, references, progress=config.progress)
    return scores


def digits_exact_match_by_length(config, translate_fn, per_length=200):
    """Exact match per number of digits, on numbers drawn independently of the digits sets.

    Returns:
        list of dicts `{digits, numbers, exact_match, seen_in_training,
        exact_match_unseen}` (the last is None when every number was seen in training).
    """
    drawn = digits.independent_numbers(config.data.digits_config, per_length)
    sources = [digits.spell(number).encode() for number, _ in drawn]
    outputs = inference.translate_batches(translate_fn, sources, batch_size=256)
    groups = collections.defaultdict(list)
    for (number, seen), output in zip(drawn, outputs):
        groups[len(number)].append((output == number.encode(), seen))
    rows = []
    for length, results in sorted(groups.items()):
        unseen = [correct for correct, seen in results if not seen]
        rows.append({
            "digits": length, "numbers": len(results),
            "exact_match": sum(correct for correct, _ in results) / len(results),
            "seen_in_training": sum(seen for _, seen in results),
            "exact_match_unseen": sum(unseen) / len(unseen) if unseen else None})
        logging.info("Digits, %d digit(s): exact match %.4f on %d independent numbers (%d seen "
                     "in training)", length, rows[-1]["exact_match"], len(results),
                     rows[-1]["seen_in_training"])
    return rows
