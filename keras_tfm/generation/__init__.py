"""Text generation with keras_tfm models: cached, compiled decoding on every backend.

    generate(model, prompt_ids, max_new_tokens, sampler="greedy" | "sample", ...)
    beam_search(model, prompt_ids, max_new_tokens, num_beams=4, ...)

`generate` and `beam_search` build (once per model) a `CausalLMGenerator` for
a `GPT` or a `Seq2SeqGenerator` for a `Seq2Seq` and call it; use the
generator classes directly to choose the cache and compilation options. The
samplers are pure functions of float32 logits `[batch, vocab]`:

    greedy(logits)                  token = argmax_v logits[:, v]
    sample(logits, seed, T, k, p)   token ~ softmax(filter_top_p(filter_top_k(logits / T, k), p))

Modules: `api` (generate, beam_search), `samplers`, `causal_lm` / `seq2seq_generator`
(the generators), `base` (their shared checks and compiled-function cache),
`decoding` (the cached decoding loop and the adapters between a model and it),
`beam` (the beam-search loop), `cache` (key/value cache layout), `sliding_window`
(generation past the context length), `compiled` (the loop compiled per backend:
TensorFlow XLA, `jax.jit`, eager PyTorch), `interruptible` (TensorFlow calls that Ctrl-C
interrupts), `text` (text in, text out: the providers of `GPT.generate` / `beam_search` and
`Seq2Seq.generate` / `beam_search` / `translate`, registered in `keras_tfm.models.extensions`;
imported where TensorFlow is installed, as the tokenizers are TensorFlow ops). Greedy decoding
gives the same tokens on every backend, and so does seeded sampling (`samplers`: the random
stream is backend-independent integer arithmetic).
"""

import importlib.util as _importlib_util

if _importlib_util.find_spec("tensorflow") is not None:
    from keras_tfm.generation import text  # noqa: F401  (registers the models' text methods)

from keras_tfm.generation.api import beam_search, generate  # noqa: E402
from keras_tfm.generation.causal_lm import CausalLMGenerator  # noqa: E402
from keras_tfm.generation.samplers import filter_top_k, filter_top_p, greedy, sample  # noqa: E402
from keras_tfm.generation.seq2seq_generator import Seq2SeqGenerator  # noqa: E402

__all__ = [
    "generate",
    "beam_search",
    "CausalLMGenerator",
    "Seq2SeqGenerator",
    "greedy",
    "sample",
    "filter_top_k",
    "filter_top_p",
]
