"""Metrics only: sacrebleu's BLEU and chrF, and exact match, over hypotheses and references.

`score(hypotheses, references)` returns BLEU and chrF from sacrebleu with their signatures, and
the exact-match rate; translating is `bytenet_tf.inference`'s job.
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
