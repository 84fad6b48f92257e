"""Cached generation for encoder–decoder (seq2seq) models.

The source is encoded once; every decoder block's cross-attention keys and
values are projected once (`CrossAttention.compute_cache`) and passed as
`cross_cache` at every step. The decoder then runs the same loop as GPT
(`decoding.decode` / `beam.beam_search_loop`) with its own self-attention
caches, starting from `bos_id` (or left-padded decoder prompts).
"""

import numpy as np
from keras import ops

from keras_tfm.checks import check_token_id
from keras_tfm.generation import base, decoding
from keras_tfm.generation import cache as cache_lib
from keras_tfm.models.seq2seq import Seq2Seq


class Seq2SeqAdapter(decoding.DecoderAdapter):
    """Runs a `keras_tfm.models.Seq2Seq` with cached decoding through its
    `encode`, `compute_cross_caches`, `init_caches` and `call_with_cache`
    methods."""

    def __init__(self, model):
        if not isinstance(model, Seq2Seq):
            raise TypeError(
                f"`model` must be a keras_tfm Seq2Seq model (from `keras_tfm.models.seq2seq`); received "
                f"{type(model).__name__}."
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
        bos_id: default first decoder token, in [1, target vocabulary size)
            (0 is padding).
        pad_id: padding id (0 for keras_tfm seq2seq models), in [0, target
            vocabulary size).
        jit_compile: compile with XLA.
        run_eagerly: no `tf.function` at all (debugging, tests).

    `generate(source_ids, max_new_tokens, ..., bos_id=None,
    source_lengths=None, decoder_prompt_ids=None)` and `beam_search` are
    `BaseGenerator`'s; `bos_id` defaults to the generator's; `bos_id` and
    `decoder_prompt_ids` together raise a ValueError (the prompts hold their
    own first token).
    """

    REQUEST_KEYS = ("bos_id", "source_lengths", "decoder_prompt_ids")

    def __init__(
        self,
        model: Seq2Seq,
        bos_id: int | None = None,
        pad_id: int = 0,
        jit_compile: bool = True,
        run_eagerly: bool = False,
        name: str | None = None,
    ):
        super().__init__(model, pad_id=pad_id, jit_compile=jit_compile, run_eagerly=run_eagerly, name=name)
        self.adapter = Seq2SeqAdapter(model)
        self.pad_id = check_token_id("pad_id", pad_id, self.adapter.vocabulary_size)
        self.bos_id = None if bos_id is None else self._bos(bos_id)

    def _bos(self, bos_id):
        """A first decoder token: an id of the target vocabulary other than 0 (padding)."""
        return check_token_id("bos_id", bos_id, self.adapter.vocabulary_size, minimum=1)

    def decoder_inputs(
        self,
        source_ids: object,
        source_lengths: object,
        decoder_prompt_ids: object,
        decoder_prompt_lengths: object,
    ) -> tuple[object, object, dict]:
        """Traceable: encodes right-padded `source_ids` `(B, S)` once; the
        decoder starts from LEFT-padded `decoder_prompt_ids` `(B, P)`
        (usually just BOS)."""
        return decoder_prompt_ids, decoder_prompt_lengths, self.adapter.encode(source_ids, source_lengths)

    def _prepare(
        self,
        source_ids,
        max_new_tokens,
        sliding=False,
        bos_id=None,
        source_lengths=None,
        decoder_prompt_ids=None,
    ):
        """`sliding` is ignored: a translation must fit the decoder's maximum length."""
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
        if decoder_prompt_ids is not None and bos_id is not None:
            raise ValueError(
                "Pass `bos_id` or `decoder_prompt_ids`, not both: the decoder prompts start with their own first "
                f"token (received bos_id={bos_id!r})."
            )
        if decoder_prompt_ids is None:
            bos_id = self.bos_id if bos_id is None else self._bos(bos_id)
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
        max_new_tokens, _ = base.check_max_new_tokens(max_new_tokens, int(dec_len.max()), a.max_length)
        cache_length = cache_lib.call_cache_length(dec.shape[1], max_new_tokens)
        return (src, src_len, dec, dec_len), max_new_tokens, cache_length, False
