"""One-call generation entry points: `generate` and `beam_search`.

Both build (once per model, cached weakly) a `CausalLMGenerator` for a
`GPT` or a `Seq2SeqGenerator` for a `Seq2Seq`, and call it.
"""

import weakref
from collections.abc import Sequence

import numpy as np

from keras_tfm.generation.causal_lm import CausalLMGenerator
from keras_tfm.generation.seq2seq_generator import Seq2SeqGenerator
from keras_tfm.models.gpt import GPT
from keras_tfm.models.seq2seq import Seq2Seq

_GENERATORS = weakref.WeakKeyDictionary()


def get_generator(
    model: GPT | Seq2Seq | CausalLMGenerator | Seq2SeqGenerator, pad_id: int | None = None
) -> CausalLMGenerator | Seq2SeqGenerator:
    """The cached generator of `model` (created on first use).

    `pad_id` None: 0 for a model, a generator's own; a generator with
    another `pad_id` than the one asked for raises a ValueError (its
    `pad_id` is fixed when it is built). `pad_id` must lie in [0, V).
    """
    if isinstance(model, (CausalLMGenerator, Seq2SeqGenerator)):
        if pad_id is not None and pad_id != model.pad_id:
            raise ValueError(
                f"`pad_id`={pad_id!r} differs from the generator's pad_id {model.pad_id}; build the "
                f"{type(model).__name__} with pad_id={pad_id!r} or pass the model itself."
            )
        return model
    pad_id = 0 if pad_id is None else pad_id
    generator = _GENERATORS.get(model)
    if generator is None or generator.pad_id != pad_id:
        if isinstance(model, Seq2Seq):
            cls = Seq2SeqGenerator
        elif isinstance(model, GPT):
            cls = CausalLMGenerator
        else:
            raise TypeError(
                f"`model` must be a keras_tfm GPT or Seq2Seq model (or a generator); received "
                f"{type(model).__name__}."
            )
        generator = cls(model, pad_id=pad_id)
        _GENERATORS[model] = generator
    return generator


def generate(
    model: GPT | Seq2Seq | CausalLMGenerator | Seq2SeqGenerator,
    prompt_ids: Sequence[Sequence[int]] | np.ndarray,
    max_new_tokens: int,
    pad_id: int | None = None,
    **options,
) -> np.ndarray | tuple[np.ndarray, ...]:
    """Cached, XLA-compiled generation with a keras_tfm GPT or seq2seq model.

    Args:
        model: a keras_tfm GPT or seq2seq model (or a generator object).
        prompt_ids: GPT: the prompts; seq2seq: the source sequences. A list
            of id sequences of any lengths or a 2-D int array.
        max_new_tokens: int in [0, `base.MAX_NEW_TOKENS`] (past the
            model's context GPT generation slides its window).
        pad_id: padding id (left-padding of prompts, finished rows), in
            [0, V); None: 0 (a generator object: its own).
        **options: those of `BaseGenerator.generate`:
            sampler: "greedy" (default) | "sample" (stochastic; the
                filters act when `top_k` > 0 / `top_p` < 1).
            temperature: finite float >= 0 (default 1; 0, or below 1e-6, =
                greedy; NaN and negative values raise a ValueError).
            top_k: int in [0, V] (0 = off; V keeps every token, i.e. off
                too); a `top_k` larger than the vocabulary size V raises a
                ValueError.
            top_p: float in (0, 1] (1 = off).
            seed: int or int32 (2,) array; same seed → same output.
            eos_id: rows stop after emitting it and then emit `pad_id`; must
                be an id of the vocabulary, [0, V) (otherwise no row could
                stop: ValueError).
            return_lengths, output_scores: extra outputs (bools).
            GPT: `prompt_lengths`; seq2seq: `bos_id` (required unless the
            generator has one or `decoder_prompt_ids` are given, not with
            them), `decoder_prompt_ids`, `source_lengths`. Any other
            keyword raises a TypeError.

    A compiled call answers Ctrl-C at once (`generation.interruptible`).

    Prompt ids outside [0, V) raise a ValueError naming `prompt_ids`. NaN
    logits (a diverged model) are never sampled inside the compiled loop (a
    NaN entry is skipped; an all-NaN row yields id 0); the eager samplers
    raise a ValueError on them (`keras_tfm.generation.samplers`).

    Returns:
        int32 numpy `(batch, max_new_tokens)` new tokens.
    """
    return get_generator(model, pad_id).generate(prompt_ids, max_new_tokens, **options)


def beam_search(
    model: GPT | Seq2Seq | CausalLMGenerator | Seq2SeqGenerator,
    prompt_ids: Sequence[Sequence[int]] | np.ndarray,
    max_new_tokens: int,
    num_beams: int = 4,
    pad_id: int | None = None,
    **options,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Beam search with GNMT length penalty ((5 + len) / 6)^α for GPT or
    seq2seq models; finished beams are frozen at EOS. `options`:
    `length_penalty` (α in [0, 5], default 0.6), `eos_id` and the model
    kind's inputs as in `generate`; `max_new_tokens` >= 1 (zero new tokens
    leave nothing to rank: a ValueError), `num_beams` in [1, V], `pad_id`
    as in `generate`.

    Returns:
        `(sequences, scores, lengths)`: int32 `(batch, num_beams,
        max_new_tokens)` best first, float32 normalised log-probs
        `(batch, num_beams)`, int32 lengths (EOS included).
    """
    return get_generator(model, pad_id).beam_search(
        prompt_ids, max_new_tokens, num_beams=num_beams, **options
    )
