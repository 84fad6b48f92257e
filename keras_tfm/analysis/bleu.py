"""Translation scores with sacreBLEU (Post, 2018): cased corpus BLEU and chrF on detokenized text.

    BLEU = BP · exp(¼ Σ_{n=1..4} log p_n),  BP = min(1, exp(1 − r / c))
    chrF = (1 + β²) · chrP · chrR / (β² · chrP + chrR),  β = 2, character n-grams n = 1..6

Both are computed by `sacrebleu` on the raw, detokenized hypotheses and
references with its standard settings (BLEU: the `13a` tokenizer, cased, no
smoothing beyond its default `exp`; chrF: character 6-grams, β = 2), so the
numbers are comparable with published ones and the returned `signature`
says exactly how they were computed.

`sacrebleu` is an optional dependency (`pip install keras-tfm[examples]`, also
in the `test` extra); it is imported when a score is asked for.
"""

from collections.abc import Sequence

__all__ = ["corpus_scores"]


def _sacrebleu():
    try:
        import sacrebleu
    except ImportError as error:
        raise ImportError(
            "Translation scores need `sacrebleu`: pip install sacrebleu (or keras-tfm[examples])."
        ) from error
    return sacrebleu


def corpus_scores(
    hypotheses: Sequence[str], references: Sequence[str] | Sequence[Sequence[str]]
) -> dict[str, float | str | list[float]]:
    """Cased corpus BLEU and chrF of detokenized translations (sacreBLEU's defaults).

    Args:
        hypotheses: list of str, one translation per source sentence.
        references: list of str (one reference per sentence) or list of
            lists of str (several references per sentence), same length.

    Returns:
        dict with "bleu" and "chrf" (0..100, as sacreBLEU reports them),
        "bleu_precisions" (p_1..p_4, 0..100), "brevity_penalty",
        "bleu_signature" and "chrf_signature" (sacreBLEU's signatures).

    Raises:
        TypeError: if `hypotheses` or `references` is not a list of str (of
            lists of str).
        ValueError: if their lengths differ.
    """
    if isinstance(hypotheses, str) or not all(isinstance(h, str) for h in hypotheses):
        raise TypeError(f"`hypotheses` must be a list of str; received {type(hypotheses).__name__}.")
    references = [[r] if isinstance(r, str) else list(r) for r in references]
    if not all(r and all(isinstance(x, str) for x in r) for r in references):
        raise TypeError("`references` must be a list of str or a list of non-empty lists of str.")
    if len(hypotheses) != len(references):
        raise ValueError(
            f"`hypotheses` has {len(hypotheses)} entries but `references` has {len(references)}; "
            "expected one entry per sentence in each."
        )
    sacrebleu = _sacrebleu()
    count = max(len(r) for r in references) if references else 1
    # sacreBLEU wants one stream per reference position; a missing one is None.
    streams = [[r[i] if i < len(r) else None for r in references] for i in range(count)]
    bleu_metric, chrf_metric = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    bleu = bleu_metric.corpus_score(list(hypotheses), streams)
    chrf = chrf_metric.corpus_score(list(hypotheses), streams)
    return {
        "bleu": float(bleu.score),
        "chrf": float(chrf.score),
        "bleu_precisions": [float(p) for p in bleu.precisions],
        "brevity_penalty": float(bleu.bp),
        "bleu_signature": str(bleu_metric.get_signature()),
        "chrf_signature": str(chrf_metric.get_signature()),
    }
