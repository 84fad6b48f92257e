"""Cached generation for encoder–decoder (seq2seq) models.

The source is encoded once; every decoder block's cross-attention keys and
values are projected once (`CrossAttention.compute_cache`) and passed as
`cross_cache` at every step. The decoder then runs the same loop as GPT
(`decoding.decode` / `beam.beam_search_loop`) with its own self-attention
caches, starting from `bos_id` (or left-padded decoder prompts).
"""

import numpy as np
import tensorflow as tf
from keras import ops

from keras_tfm.generation import base, decoding
from keras_tfm.generation import beam as beam_lib
from keras_tfm.generation import cache as cache_lib
from keras_tfm.models.seq2seq import Seq2Seq


class Seq2SeqAdapter(decoding.DecoderAdapter):
    """Runs a `keras_tfm.models.Seq2Seq` with cached decoding through its
    `encode`, `compute_cross_caches`, `init_caches` and `call_with_cache`
    methods."""

    def __init__(self, model):
        if not isinstance(model, Seq2Seq):
            raise TypeError(
                f"Expected a keras_tfm Seq2Seq model (from `keras_tfm.models.seq2seq`); received "
                f"{type(model).__name__}. A model saved before the model classes existed: convert it with "
                "`keras_tfm.models.from_functional(model)`."
            )
        self.model = model
        self.vocabulary_size = model.target_vocabulary_size
        self.source_vocabulary_size = model.source_vocabulary_size
        self.max_length = model.max_length
        self.source_max_length = model.max_length
        # With mask_zero embeddings the model treats id 0 as padding anywhere.
        self.mask_token_id = 0 if model.mask_zero else None

    def encode(self, source_ids, source_lengths):
        """Encoder output and the cross-attention context of the decoder.

        Returns:
            dict `{"cross_caches": [per decoder block (B, 2, S, H, D)],
            "context_mask": bool (B, S)}`.
        """
        source_ids = ops.cast(source_ids, "int32")
        s = ops.shape(source_ids)[1]
        mask = ops.arange(s, dtype="int32")[None, :] < ops.cast(source_lengths, "int32")[:, None]
        if self.model.mask_zero:
            mask = ops.logical_and(mask, ops.not_equal(source_ids, 0))
        memory = self.model.encode(source_ids, padding_mask=mask)
        return {"cross_caches": self.model.compute_cross_caches(memory), "context_mask": mask}

    def init_caches(self, batch_size, length):
        return self.model.init_caches(batch_size, length)

    def forward(self, ids, positions, caches, cache_index, padding_mask, context=None):
        logits, caches = self.model.call_with_cache(
            ids,
            caches,
            cache_index,
            context["cross_caches"],
            context["context_mask"],
            positions=positions,
            padding_mask=padding_mask,
            last_only=True,
        )
        return logits[:, 0, :], caches


class Seq2SeqGenerator(base.BaseGenerator):
    """Compiled cached generation for a keras_tfm seq2seq model.

    Args:
        model: a `keras_tfm.models.Seq2Seq`.
        bos_id: default first decoder token (non-zero: 0 is padding).
        pad_id: padding id (0 for keras_tfm seq2seq models).
        jit_compile: compile with XLA.
        run_eagerly: no `tf.function` at all (debugging, tests).
    """

    def __init__(self, model, bos_id=None, pad_id=0, jit_compile=True, run_eagerly=False, name=None):
        super().__init__(model, pad_id=pad_id, jit_compile=jit_compile, run_eagerly=run_eagerly, name=name)
        self.adapter = Seq2SeqAdapter(model)
        self.bos_id = base.check_int("bos_id", bos_id, minimum=1, allow_none=True)

    # ----------------------------------------------------------- traceable
    def generate_fn(
        self,
        source_ids,
        source_lengths,
        decoder_prompt_ids,
        decoder_prompt_lengths,
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
        """Traceable generation: right-padded `source_ids` `(B, S)` with
        `source_lengths`, LEFT-padded `decoder_prompt_ids` `(B, P)` (usually
        just BOS) with lengths; other arguments as in
        `CausalLMGenerator.generate_fn`."""
        context = self.adapter.encode(source_ids, source_lengths)
        select = decoding.make_selector(sampler, seed, temperature, top_k, top_p)
        return decoding.decode(
            self.adapter,
            decoder_prompt_ids,
            decoder_prompt_lengths,
            max_new_tokens,
            select,
            cache_length=cache_length,
            eos_id=eos_id,
            pad_id=self.pad_id,
            context=context,
            output_scores=output_scores,
        )

    def beam_search_fn(
        self,
        source_ids,
        source_lengths,
        decoder_prompt_ids,
        decoder_prompt_lengths,
        max_new_tokens,
        length_penalty,
        eos_id,
        *,
        num_beams,
        cache_length,
    ):
        context = self.adapter.encode(source_ids, source_lengths)
        return beam_lib.beam_search_loop(
            self.adapter,
            decoder_prompt_ids,
            decoder_prompt_lengths,
            max_new_tokens,
            num_beams=num_beams,
            cache_length=cache_length,
            length_penalty=length_penalty,
            eos_id=eos_id,
            pad_id=self.pad_id,
            context=context,
        )

    # ------------------------------------------------------------- eager API
    def _prepare(self, source_ids, source_lengths, max_new_tokens, bos_id, decoder_prompt_ids):
        a = self.adapter
        src, src_len = base.pad_prompts(
            "source_ids", source_ids, source_lengths, 0, a.source_vocabulary_size, side="right"
        )
        if a.source_max_length is not None and int(src_len.max()) > a.source_max_length:
            raise ValueError(
                f"A source of {int(src_len.max())} tokens exceeds the model's max_length {a.source_max_length}."
            )
        if a.source_max_length is not None:
            src = src[:, : max(a.source_max_length, int(src_len.max()))]
        if decoder_prompt_ids is None:
            bos_id = self.bos_id if bos_id is None else base.check_int("bos_id", bos_id, minimum=1)
            if bos_id is None:
                raise ValueError(
                    "`bos_id` is required (the first decoder token), or pass `decoder_prompt_ids`."
                )
            decoder_prompt_ids = np.full((src.shape[0], 1), bos_id, np.int32)
        dec, dec_len = base.pad_prompts(
            "decoder_prompt_ids",
            decoder_prompt_ids,
            None,
            self.pad_id,
            a.vocabulary_size,
            side="left",
            minimum=1,
        )
        if dec.shape[0] != src.shape[0]:
            raise ValueError(f"{dec.shape[0]} decoder prompts for {src.shape[0]} sources.")
        max_new_tokens = base.check_max_new_tokens(max_new_tokens, int(dec_len.max()), a.max_length)
        cache_length = cache_lib.cache_bucket(dec.shape[1] + max(max_new_tokens, 1))
        return src, src_len, dec, dec_len, max_new_tokens, cache_length

    def generate(
        self,
        source_ids,
        max_new_tokens,
        sampler="greedy",
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        seed=None,
        eos_id=None,
        bos_id=None,
        source_lengths=None,
        decoder_prompt_ids=None,
        return_lengths=False,
        output_scores=False,
    ):
        """Generates up to `max_new_tokens` target tokens per source.

        Args:
            source_ids: list of id sequences, or a 2-D int array (0 = pad).
            max_new_tokens: int >= 0; decoder prompt + new tokens must fit
                the model's max_length.
            bos_id: first decoder token (defaults to the generator's).
            decoder_prompt_ids: optional forced decoder prefixes (include BOS).
            Other arguments: as in `CausalLMGenerator.generate`.

        Returns:
            int32 numpy `(batch, max_new_tokens)` (0 after EOS), plus lengths
            / scores when requested.
        """
        temperature, top_k, top_p = base.check_sampler(
            sampler, temperature, top_k, top_p, self.adapter.vocabulary_size
        )
        eos = self._eos(eos_id)
        src, src_len, dec, dec_len, max_new_tokens, cache_length = self._prepare(
            source_ids, source_lengths, max_new_tokens, bos_id, decoder_prompt_ids
        )
        seed = base.make_seed(seed)
        key = ("generate", sampler, cache_length, bool(output_scores))
        fn = self._compiled(
            key,
            lambda *a: self.generate_fn(
                *a, cache_length=cache_length, sampler=sampler, output_scores=output_scores
            ),
        )
        out = fn(
            tf.constant(src),
            tf.constant(src_len),
            tf.constant(dec),
            tf.constant(dec_len),
            tf.constant(max_new_tokens, tf.int32),
            tf.constant(seed),
            tf.constant(temperature, tf.float32),
            tf.constant(top_k, tf.int32),
            tf.constant(top_p, tf.float32),
            tf.constant(eos, tf.int32),
        )
        result = (out["tokens"].numpy()[:, :max_new_tokens],)
        if return_lengths:
            result += (out["lengths"].numpy(),)
        if output_scores:
            result += (out["scores"].numpy()[:, :max_new_tokens],)
        return result[0] if len(result) == 1 else result

    def beam_search(
        self,
        source_ids,
        max_new_tokens,
        num_beams=4,
        length_penalty=0.6,
        eos_id=None,
        bos_id=None,
        source_lengths=None,
        decoder_prompt_ids=None,
    ):
        """Beam search; returns `(sequences (B, K, max_new), scores (B, K),
        lengths (B, K))`, best first."""
        num_beams = base.check_int("num_beams", num_beams, minimum=1)
        length_penalty = beam_lib.check_length_penalty(length_penalty)
        eos = self._eos(eos_id)
        src, src_len, dec, dec_len, max_new_tokens, cache_length = self._prepare(
            source_ids, source_lengths, max_new_tokens, bos_id, decoder_prompt_ids
        )
        beam_lib.check_num_beams(num_beams, self.adapter.vocabulary_size)
        key = ("beam", num_beams, cache_length)
        fn = self._compiled(
            key, lambda *a: self.beam_search_fn(*a, num_beams=num_beams, cache_length=cache_length)
        )
        out = fn(
            tf.constant(src),
            tf.constant(src_len),
            tf.constant(dec),
            tf.constant(dec_len),
            tf.constant(max_new_tokens, tf.int32),
            tf.constant(length_penalty, tf.float32),
            tf.constant(eos, tf.int32),
        )
        return (
            out["sequences"].numpy()[:, :, :max_new_tokens],
            out["scores"].numpy(),
            out["lengths"].numpy(),
        )
