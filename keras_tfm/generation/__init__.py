"""Text generation with keras_tfm models: cached, compiled decoding on every backend.

    generate(model, prompt_ids, max_new_tokens, sampler=None | "greedy" | "sample", ...)
    beam_search(model, prompt_ids, max_new_tokens, num_beams=4, ...)

`generate` and `beam_search` run one `Generator` per model (`generator`), which compiles
the decoding loops written once in `keras.ops`: `decoding` (prefill, then one cached step per
token), `beam` (beam search), `sliding_window` (past the context), over the key/value
caches of `cache`, choosing tokens with `samplers` (pure functions of float32 logits):

    greedy(logits)                  token = argmax_v logits[:, v]
    sample(logits, seed, T, k, p)   token ~ softmax(filter_top_p(filter_top_k(logits / T, k), p))

`compiled` compiles them per backend (TensorFlow XLA, `jax.jit`, PyTorch) and lets Ctrl-C
interrupt a TensorFlow call; `prompts` checks and pads a request's ids; `text` is the work
of the models' text methods (`GPT.generate("text")`, `Seq2Seq.translate`). Greedy decoding
gives the same tokens on every backend, and so does seeded sampling (the random stream is
backend-independent integer arithmetic). A model is generated from through its decoder
protocol (`init_caches`, `decode_step`, `encode_context`; see `generator`), so this package
imports no model class.
"""

from keras_tfm.generation.generator import Generator, beam_search, generate
from keras_tfm.generation.samplers import filter_top_k, filter_top_p, greedy, sample

__all__ = [
    "Generator",
    "beam_search",
    "filter_top_k",
    "filter_top_p",
    "generate",
    "greedy",
    "sample",
]
