"""Metrics only: sacrebleu's BLEU and chrF, and exact match, over hypotheses and references.

`score(hypotheses, references)` returns BLEU and chrF from sacrebleu with their signatures, and
the exact-match rate; `character_error_rate` is the thesis's per-character misclassification
rate. Translating is `bytenet_tf.inference`'s job.
"""

import numpy as np


def _text(value):
    # sacrebleu scores text; bytes that are not UTF-8 become U+FFFD rather than an error.
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


def bleu_caveat(references):
    """A note for logs when corpus BLEU cannot be above 0 on `references`, else "".

    sacrebleu's BLEU multiplies 1- to 4-gram precisions, so when no reference has 4 words (the
    digits task: `104`) every 4-gram precision is 0 and BLEU is 0 however good the output.
    """
    if references and max(len(_text(r).split()) for r in references) < 4:
        return (" (no reference has 4 words, so BLEU, a 4-gram score, is 0 by construction: "
                "read exact match and chrF)")
    return ""


def score(hypotheses, references):
    """Scores hypotheses against one reference each.

    Returns:
        dict with `bleu`, `chrf`, `signature` (BLEU's), `chrf_signature`, `exact_match` and
        `sentences`.
    """
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    hyps = [_text(h) for h in hypotheses]
    refs = [_text(r) for r in references]
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    bleu_score = bleu.corpus_score(hyps, [refs])
    chrf_score = chrf.corpus_score(hyps, [refs])
    exact = float(np.mean([h == r for h, r in zip(hyps, refs)])) if hyps else 0.0
    return {"bleu": round(bleu_score.score, 4), "chrf": round(chrf_score.score, 4),
            "signature": str(bleu.get_signature()), "chrf_signature": str(chrf.get_signature()),
            "exact_match": exact, "sentences": len(hyps)}


def bootstrap_spread(hypothesis_sets, references, metric="chrf", samples=1000, seed=0):
    """How firmly corpus `metric` ranks several outputs for the same sources: a paired bootstrap.

    Each resample draws `len(references)` sentence indices with replacement (the same draw for
    every set, so the comparison is paired) and recomputes the corpus score of every set from
    sacrebleu's per-sentence statistics, as `sacrebleu --paired-bs` does.

    Args:
        hypothesis_sets: list of K lists of hypotheses (bytes or str), each aligned with
            `references`.
        references: list of N references.
        metric: "bleu" or "chrf".
        samples: int >= 1, bootstrap resamples.
        seed: int, seeds the draws.

    Returns:
        `{"std": [K floats], "wins": [K floats]}`: each set's standard deviation of the score
        over the resamples, and the share of resamples in which it scores highest (a tie gives
        each of the tied sets its share).
    """
    import sacrebleu

    if metric not in ("bleu", "chrf"):
        raise ValueError(f"`metric` must be 'bleu' or 'chrf'. Received: metric={metric!r}")
    scorer = sacrebleu.metrics.BLEU() if metric == "bleu" else sacrebleu.metrics.CHRF()
    refs = [[_text(r) for r in references]]
    stats = []
    for hypotheses in hypothesis_sets:
        if len(hypotheses) != len(references):
            raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
        stats.append(np.array(scorer._extract_corpus_statistics(
            [_text(h) for h in hypotheses], refs), dtype=np.int64))
    rng = np.random.default_rng(seed)
    count = len(references)
    scores = np.zeros((samples, len(stats)))
    for sample in range(samples):
        weights = np.bincount(rng.integers(0, count, count), minlength=count)
        for k, table in enumerate(stats):
            scores[sample, k] = scorer._compute_score_from_stats(
                (weights @ table).tolist()).score
    best = scores == scores.max(axis=1, keepdims=True)
    wins = (best / best.sum(axis=1, keepdims=True)).mean(axis=0)
    return {"std": [round(float(x), 4) for x in scores.std(axis=0)],
            "wins": [round(float(x), 4) for x in wins]}


def character_error_rate(hypotheses, references):
    """The thesis's misclassification rate: wrong output bytes over reference bytes plus EOS.

    The thesis's `MisclassificationRate` (`code/metric/misclassification_rate.py`) compares the
    greedy output with the target position by position, over the target's non-padding
    positions: its bytes and its end-of-sequence. Here each reference is read as its bytes then
    EOS, each hypothesis as its bytes, EOS, then padding; position i of the reference counts as
    an error when the hypothesis differs there. Output past the reference's EOS is ignored, so
    `"104" -> "1049"` is wrong at one position (4 of 4 positions counted: `1`, `0`, `4`, EOS).

    Returns:
        `(errors, positions)`: ints; the rate is their quotient.
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    errors = positions = 0
    for hypothesis, reference in zip(hypotheses, references):
        hypothesis, reference = _bytes(hypothesis), _bytes(reference)
        framed = list(hypothesis) + [None]  # None stands for EOS, then padding
        for i, byte in enumerate(list(reference) + [None]):
            errors += (framed[i] if i < len(framed) else "pad") != byte
        positions += len(reference) + 1
    return errors, positions


def _bytes(value):
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)
