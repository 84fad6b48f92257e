"""The check of a converted LiteRT file against the TensorFlow functions it came from.

`verify(reference, candidate, quantize)` runs one probe through two runners of
`litert_runner` that differ only in their signatures (TensorFlow functions, LiteRT
interpreter) and compares every output:

* GPT: a prefill of every width, then greedy generation from a short prompt for
  W + W // 2 + 2 tokens (past the context: a window restart or a cache shift), the
  LiteRT run fed the TensorFlow run's tokens (teacher forcing), so each step compares the
  logits of the same context;
* seq2seq: encode a probe source, then greedy decoding for W - 1 tokens, the same way;
* BERT: one forward pass of a padded batch of two rows.

float32 (`quantize` None): every logit within 1e-3 of the TensorFlow scale
(max(1, max |logit|)) and the same top token at every step (unless TensorFlow's two best
logits are closer than that), else a ValueError. int8: finite outputs; the share of steps
whose top token agrees is returned (the quantization moves logits by more than float
rounding, and a near tie may flip).
"""

import numpy as np

from keras_tfm.tokenizers.special_tokens import BOS

__all__ = ["verify", "LOGIT_TOLERANCE"]

#: Largest logit difference, relative to max(1, max |logit|), of a float32 conversion.
LOGIT_TOLERANCE = 1e-3


def _probe(length, vocabulary_size):
    """`length` ordinary ids spread over the vocabulary (never 0, the padding id)."""
    return [1 + (3 + 5 * i) % (vocabulary_size - 1) for i in range(length)]


def _teacher(reference, candidate, run):
    """`run(runner, choose)` on both runners: the reference chooses greedily, the candidate
    is fed the reference's tokens. Returns the two lists of step logits."""
    ref_logits, cand_logits, tokens = [], [], []

    def greedy(logits, step):
        ref_logits.append(np.asarray(logits[0], np.float32))
        tokens.append(int(np.argmax(logits[0])))
        return tokens[-1]

    def forced(logits, step):
        cand_logits.append(np.asarray(logits[0], np.float32))
        return tokens[step]

    run(reference, greedy)
    run(candidate, forced)
    return ref_logits, cand_logits


def _gpt_pairs(reference, candidate):
    pairs = []
    vocabulary = reference.vocabulary_size
    for width in reference.metadata["prefill_lengths"]:
        context = _probe(width, vocabulary)
        pairs.append((reference._prefill(context)[0][0], candidate._prefill(context)[0][0]))
    window = reference.max_length
    prompt = _probe(min(5, window), vocabulary)
    steps = window + window // 2 + 2
    ref, cand = _teacher(reference, candidate, lambda r, choose: r._gpt_row(prompt, steps, choose, -1))
    return pairs + list(zip(ref, cand))


def _seq2seq_pairs(reference, candidate):
    source = _probe(min(5, reference.max_length), reference.source_vocabulary_size)
    bos = BOS if BOS < reference.vocabulary_size else 1
    steps = reference.max_length - 1
    row = (source, [bos])
    ref, cand = _teacher(reference, candidate, lambda r, choose: r._seq2seq_row(row, steps, choose, -1))
    return list(zip(ref, cand))


def _encoder_pairs(reference, candidate):
    width = reference.max_length
    ids = np.zeros((2, width), np.int32)
    ids[0] = _probe(width, reference.vocabulary_size)
    ids[1, : max(width // 2, 1)] = _probe(max(width // 2, 1), reference.vocabulary_size)
    return list(zip(reference.forward(ids), candidate.forward(ids)))


def verify(reference, candidate, quantize=None) -> dict:
    """Compares `candidate` (LiteRT) with `reference` (TensorFlow); see the module docstring.

    Returns:
        `{"probe_outputs", "max_abs_logit_difference", "top1_agreement"}`.

    Raises:
        ValueError: float32 outputs that differ (the file is not written).
    """
    pairs = {"causal_lm": _gpt_pairs, "seq2seq_lm": _seq2seq_pairs}.get(reference.kind, _encoder_pairs)(
        reference, candidate
    )
    ref = np.stack([p[0] for p in pairs])
    cand = np.stack([p[1] for p in pairs])
    if not np.all(np.isfinite(cand)):
        raise ValueError(
            "The converted LiteRT file computes non-finite outputs on a probe input; not written."
        )
    scale = max(1.0, float(np.max(np.abs(ref))))
    difference = float(np.max(np.abs(ref - cand)))
    top = np.argsort(-ref, axis=-1)[:, :2]
    agree = np.argmax(cand, axis=-1) == top[:, 0]
    if quantize is None:
        margin = np.take_along_axis(ref, top, axis=-1)
        tied = (margin[:, 0] - margin[:, -1]) < LOGIT_TOLERANCE * scale
        if difference > LOGIT_TOLERANCE * scale or not np.all(agree | tied):
            step = int(np.argmax(np.max(np.abs(ref - cand), axis=-1)))
            raise ValueError(
                f"The converted LiteRT file computes other outputs than TensorFlow (largest logit difference "
                f"{difference:.3g} at probe step {step}, tolerance {LOGIT_TOLERANCE * scale:.3g}); not written."
            )
    return {
        "probe_outputs": len(pairs),
        "max_abs_logit_difference": difference,
        "top1_agreement": float(np.mean(agree)),
    }
