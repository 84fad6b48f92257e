"""Corpus BLEU (Papineni et al., 2002), pure Python.

    p_n  = Σ_sentences Σ_{g ∈ n-grams(hyp)} min(count_hyp(g), max_ref count_ref(g))
           / Σ_sentences |n-grams(hyp)|                         (modified precision, n = 1..N)
    BP   = 1                 if c > r
           exp(1 − r / c)    otherwise                          (c = Σ |hyp|, r = Σ closest |ref|)
    BLEU = BP · exp(Σ_n w_n log p_n),  w_n = 1/N               (0 if some p_n = 0)

Counts are summed over the whole corpus before dividing (corpus BLEU, not
an average of sentence scores). With several references, an n-gram's clip
count is its largest count in any one reference, and `r` uses, per
sentence, the reference length closest to the hypothesis length (the shorter
one on ties), as in the original BLEU script and sacreBLEU. No smoothing.
"""

import collections
import math

__all__ = ["corpus_bleu", "ngram_counts", "simple_tokenize"]


def simple_tokenize(text):
    """Lower-cases and splits words and punctuation (the `WordTokenizer` convention)."""
    import re

    return re.findall(r"\w+|[^\w\s]", text.lower())


def ngram_counts(tokens, n):
    """Counter of the n-grams (tuples) of a token list."""
    return collections.Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def corpus_bleu(hypotheses, references, max_order=4, tokenize=None):
    """Corpus-level BLEU-`max_order` with brevity penalty.

    Args:
        hypotheses: list of hypotheses, each a list of tokens (or a str when
            `tokenize` is given).
        references: list (same length) of references: each a list of tokens
            or a list of several token lists (or str / list of str with
            `tokenize`).
        max_order: largest n-gram order N (4 for BLEU-4).
        tokenize: optional callable str -> list of tokens.

    Returns:
        dict with "bleu" (in [0, 1]), "precisions" (p_1..p_N), "brevity_penalty",
        "ratio" (c / r), "hypothesis_length" (c), "reference_length" (r),
        "matches" and "totals" per order.
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references.")
    if isinstance(max_order, bool) or not isinstance(max_order, int) or max_order < 1:
        raise ValueError(f"`max_order` must be a positive int; received {max_order!r}.")
    matches = [0] * max_order
    totals = [0] * max_order
    hyp_len = ref_len = 0
    for hyp, refs in zip(hypotheses, references):
        if tokenize is not None:
            hyp = tokenize(hyp) if isinstance(hyp, str) else hyp
            refs = [refs] if isinstance(refs, str) else refs
            refs = [tokenize(r) if isinstance(r, str) else r for r in refs]
        elif refs and not isinstance(refs[0], (list, tuple)):
            refs = [refs]
        hyp = list(hyp)
        refs = [list(r) for r in refs]
        if not refs:
            raise ValueError("Every hypothesis needs at least one reference.")
        hyp_len += len(hyp)
        ref_len += min((abs(len(r) - len(hyp)), len(r)) for r in refs)[1]
        for n in range(1, max_order + 1):
            counts = ngram_counts(hyp, n)
            max_ref = collections.Counter()
            for r in refs:
                for gram, count in ngram_counts(r, n).items():
                    max_ref[gram] = max(max_ref[gram], count)
            matches[n - 1] += sum(min(count, max_ref[gram]) for gram, count in counts.items())
            totals[n - 1] += max(len(hyp) - n + 1, 0)
    precisions = [m / t if t else 0.0 for m, t in zip(matches, totals)]
    if hyp_len == 0:
        bp = 0.0
    elif hyp_len > ref_len:
        bp = 1.0
    else:
        bp = math.exp(1.0 - ref_len / hyp_len)
    if min(precisions) > 0:
        bleu = bp * math.exp(sum(math.log(p) for p in precisions) / max_order)
    else:
        bleu = 0.0
    return {
        "bleu": bleu,
        "precisions": precisions,
        "brevity_penalty": bp,
        "ratio": hyp_len / ref_len if ref_len else 0.0,
        "hypothesis_length": hyp_len,
        "reference_length": ref_len,
        "matches": matches,
        "totals": totals,
    }
