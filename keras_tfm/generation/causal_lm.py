"""Cached generation for decoder-only (GPT) models."""

import tensorflow as tf

from keras_tfm.generation import base, decoding
from keras_tfm.generation import beam as beam_lib
from keras_tfm.generation import cache as cache_lib
from keras_tfm.models.gpt import GPT


class CausalLMAdapter(decoding.DecoderAdapter):
    """Runs a `keras_tfm.models.GPT` with key/value caches through its
    `init_caches` and `call_with_cache` methods."""

    def __init__(self, model):
        if not isinstance(model, GPT):
            raise TypeError(
                f"Expected a keras_tfm GPT model (from `keras_tfm.models.gpt`); received {type(model).__name__}. "
                "A model saved before the model classes existed: convert it with "
                "`keras_tfm.models.from_functional(model)`."
            )
        self.model = model
        self.vocabulary_size = model.vocabulary_size
        self.max_length = model.max_length

    def init_caches(self, batch_size, length):
        return self.model.init_caches(batch_size, length)

    def forward(self, ids, positions, caches, cache_index, padding_mask, context=None):
        logits, caches = self.model.call_with_cache(
            ids, caches, cache_index, positions=positions, padding_mask=padding_mask, last_only=True
        )
        return logits[:, 0, :], caches


class CausalLMGenerator(base.BaseGenerator):
    """Compiled cached generation for a keras_tfm GPT model.

    Holds no state besides the model (its variables) and a cache of compiled
    `tf.function`s. The traceable entry points `generate_fn` and
    `beam_search_fn` take only tensors besides static Python options, so they
    can be wrapped in a `tf.function` with an `input_signature` for export.

    Args:
        model: a `keras_tfm.models.GPT`.
        pad_id: id used to left-pad prompts and emitted by finished rows.
        jit_compile: compile with XLA.
        run_eagerly: no `tf.function` at all (debugging, tests).

    Example:
        gen = CausalLMGenerator(model)
        tokens = gen.generate([[5, 6, 7], [8]], max_new_tokens=20, eos_id=2)
    """

    def __init__(self, model, pad_id=0, jit_compile=True, run_eagerly=False, name=None):
        super().__init__(model, pad_id=pad_id, jit_compile=jit_compile, run_eagerly=run_eagerly, name=name)
        self.adapter = CausalLMAdapter(model)

    # ----------------------------------------------------------- traceable
    def generate_fn(
        self,
        prompt_ids,
        prompt_lengths,
        max_new_tokens,
        seed,
        temperature,
        top_k,
        top_p,
        eos_id,
        *,
        cache_length,
        sampler="greedy",
        output_scores=False,
    ):
        """Traceable generation. `prompt_ids` int32 `(batch, P)` LEFT-padded,
        `prompt_lengths` `(batch,)`, scalars `max_new_tokens`, `eos_id` (-1 =
        none), `seed` int32 `(2,)`, sampling parameters as scalars or
        `(batch,)`. Returns `decoding.decode`'s dict."""
        select = decoding.make_selector(sampler, seed, temperature, top_k, top_p)
        return decoding.decode(
            self.adapter,
            prompt_ids,
            prompt_lengths,
            max_new_tokens,
            select,
            cache_length=cache_length,
            eos_id=eos_id,
            pad_id=self.pad_id,
            output_scores=output_scores,
        )

    def beam_search_fn(
        self, prompt_ids, prompt_lengths, max_new_tokens, length_penalty, eos_id, *, num_beams, cache_length
    ):
        """Traceable beam search; see `beam.beam_search_loop`."""
        return beam_lib.beam_search_loop(
            self.adapter,
            prompt_ids,
            prompt_lengths,
            max_new_tokens,
            num_beams=num_beams,
            cache_length=cache_length,
            length_penalty=length_penalty,
            eos_id=eos_id,
            pad_id=self.pad_id,
        )

    # ------------------------------------------------------------- eager API
    def _prepare(self, prompt_ids, prompt_lengths, max_new_tokens):
        ids, lengths = base.pad_prompts(
            "prompt_ids", prompt_ids, prompt_lengths, self.pad_id, self.adapter.vocabulary_size, side="left"
        )
        max_new_tokens = base.check_max_new_tokens(
            max_new_tokens, int(lengths.max()), self.adapter.max_length
        )
        cache_length = cache_lib.cache_bucket(ids.shape[1] + max(max_new_tokens, 1))
        return ids, lengths, max_new_tokens, cache_length

    def generate(
        self,
        prompt_ids,
        max_new_tokens,
        sampler="greedy",
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        seed=None,
        eos_id=None,
        prompt_lengths=None,
        return_lengths=False,
        output_scores=False,
    ):
        """Generates up to `max_new_tokens` tokens after each prompt.

        Args:
            prompt_ids: list of id sequences (any lengths), or a 2-D int array
                (with `prompt_lengths` if rows are right-padded).
            max_new_tokens: int >= 0; prompt + new tokens must fit the
                model's maximum length.
            sampler: "greedy", or "sample" (also "temperature", "top_k",
                "top_p") for stochastic sampling.
            temperature, top_k, top_p: sampling parameters (ignored by greedy).
            seed: int or int32 `(2,)`; same seed → same output. None: random.
            eos_id: rows stop after this id (then emit `pad_id`).
            return_lengths: also return the number of new tokens per row.
            output_scores: also return the step logits `(batch, max_new, V)`.

        Returns:
            int32 numpy `(batch, max_new_tokens)`; or a tuple with lengths
            (and scores) when requested.
        """
        temperature, top_k, top_p = base.check_sampler(
            sampler, temperature, top_k, top_p, self.adapter.vocabulary_size
        )
        eos = self._eos(eos_id)
        ids, lengths, max_new_tokens, cache_length = self._prepare(prompt_ids, prompt_lengths, max_new_tokens)
        seed = base.make_seed(seed)
        key = ("generate", sampler, cache_length, bool(output_scores))
        fn = self._compiled(
            key,
            lambda *a: self.generate_fn(
                *a, cache_length=cache_length, sampler=sampler, output_scores=output_scores
            ),
        )
        out = fn(
            tf.constant(ids),
            tf.constant(lengths),
            tf.constant(max_new_tokens, tf.int32),
            tf.constant(seed),
            tf.constant(temperature, tf.float32),
            tf.constant(top_k, tf.int32),
            tf.constant(top_p, tf.float32),
            tf.constant(eos, tf.int32),
        )
        tokens = out["tokens"].numpy()[:, :max_new_tokens]
        result = (tokens,)
        if return_lengths:
            result += (out["lengths"].numpy(),)
        if output_scores:
            result += (out["scores"].numpy()[:, :max_new_tokens],)
        return result[0] if len(result) == 1 else result

    def beam_search(
        self, prompt_ids, max_new_tokens, num_beams=4, length_penalty=0.6, eos_id=None, prompt_lengths=None
    ):
        """Beam search with GNMT length penalty; see `keras_tfm.generation.beam_search`.

        Returns:
            `(sequences, scores, lengths)`: int32 `(batch, num_beams,
            max_new_tokens)` best first, float32 length-normalised log-probs
            `(batch, num_beams)`, int32 `(batch, num_beams)`.
        """
        num_beams = base.check_int("num_beams", num_beams, minimum=1)
        length_penalty = beam_lib.check_length_penalty(length_penalty)
        eos = self._eos(eos_id)
        ids, lengths, max_new_tokens, cache_length = self._prepare(prompt_ids, prompt_lengths, max_new_tokens)
        beam_lib.check_num_beams(num_beams, self.adapter.vocabulary_size)
        key = ("beam", num_beams, cache_length)
        fn = self._compiled(
            key, lambda *a: self.beam_search_fn(*a, num_beams=num_beams, cache_length=cache_length)
        )
        out = fn(
            tf.constant(ids),
            tf.constant(lengths),
            tf.constant(max_new_tokens, tf.int32),
            tf.constant(length_penalty, tf.float32),
            tf.constant(eos, tf.int32),
        )
        return (
            out["sequences"].numpy()[:, :, :max_new_tokens],
            out["scores"].numpy(),
            out["lengths"].numpy(),
        )
