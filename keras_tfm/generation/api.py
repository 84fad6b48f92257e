"""One-call generation entry points: `generate` and `beam_search`.

Both build (once per model, cached weakly) a `CausalLMGenerator` or a
`Seq2SeqGenerator` depending on the model's inputs, and call it.
"""

import weakref

from keras_tfm.generation.causal_lm import CausalLMGenerator
from keras_tfm.generation.seq2seq_generator import Seq2SeqGenerator

_GENERATORS = weakref.WeakKeyDictionary()


def is_seq2seq(model):
    names = {getattr(t, "name", "") for t in getattr(model, "inputs", None) or ()}
    names = {n.split(":")[0] for n in names}
    if "decoder_token_ids" in names:
        return True
    try:
        model.get_layer("encoder_block_0")
        return True
    except ValueError:
        return False


def get_generator(model, pad_id=0):
    """The cached generator of `model` (created on first use)."""
    if isinstance(model, (CausalLMGenerator, Seq2SeqGenerator)):
        return model
    generator = _GENERATORS.get(model)
    if generator is None or generator.pad_id != pad_id:
        cls = Seq2SeqGenerator if is_seq2seq(model) else CausalLMGenerator
        generator = cls(model, pad_id=pad_id)
        _GENERATORS[model] = generator
    return generator


def generate(
    model,
    prompt_ids,
    max_new_tokens,
    sampler="greedy",
    temperature=1.0,
    top_k=0,
    top_p=1.0,
    seed=None,
    eos_id=None,
    pad_id=0,
    **kwargs,
):
    """Cached, XLA-compiled generation with a keras_tfm GPT or seq2seq model.

    Args:
        model: a keras_tfm GPT or seq2seq model (or a generator object).
        prompt_ids: GPT: the prompts; seq2seq: the source sequences. A list
            of id sequences of any lengths or a 2-D int array.
        max_new_tokens: int >= 0.
        sampler: "greedy" | "sample" | "temperature" | "top_k" | "top_p"
            (the last four are the same stochastic sampler; the filters act
            when `top_k` > 0 / `top_p` < 1).
        temperature: float >= 0 (0 = greedy).
        top_k: int >= 0 (0 = off).
        top_p: float in (0, 1] (1 = off).
        seed: int or int32 (2,) array; same seed → same output.
        eos_id: rows stop after emitting it and then emit `pad_id`.
        pad_id: padding id (left-padding of prompts, finished rows).
        **kwargs: seq2seq: `bos_id` (required), `decoder_prompt_ids`,
            `source_lengths`; both: `return_lengths`, `output_scores`,
            GPT: `prompt_lengths`.

    Returns:
        int32 numpy `(batch, max_new_tokens)` new tokens.
    """
    generator = get_generator(model, pad_id)
    return generator.generate(
        prompt_ids,
        max_new_tokens,
        sampler=sampler,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        seed=seed,
        eos_id=eos_id,
        **kwargs,
    )


def beam_search(
    model, prompt_ids, max_new_tokens, num_beams=4, length_penalty=0.6, eos_id=None, pad_id=0, **kwargs
):
    """Beam search with GNMT length penalty ((5 + len) / 6)^α for GPT or
    seq2seq models; finished beams are frozen at EOS.

    Returns:
        `(sequences, scores, lengths)`: int32 `(batch, num_beams,
        max_new_tokens)` best first, float32 normalised log-probs
        `(batch, num_beams)`, int32 lengths (EOS included).
    """
    generator = get_generator(model, pad_id)
    return generator.beam_search(
        prompt_ids,
        max_new_tokens,
        num_beams=num_beams,
        length_penalty=length_penalty,
        eos_id=eos_id,
        **kwargs,
    )
