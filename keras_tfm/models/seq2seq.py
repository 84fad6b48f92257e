"""Encoder–decoder Transformer of "Attention Is All You Need" (Vaswani et al. 2017).

    encoder:  x_0 = Dropout(√d·E[src] + PE),  x_i = EncoderBlock_i(x_{i-1})
    decoder:  y_0 = Dropout(√d·E[tgt_in] + PE),
              y_i = DecoderBlock_i(y_{i-1}, x_N)      (masked self-attn, cross-attn, FFN)
    logits  = y_N Eᵀ   (the embedding matrix shared with both inputs, tied)

Post-norm, sinusoidal positions, ReLU FFN, embeddings scaled by √d_model,
one embedding matrix shared by source, target and the pre-softmax projection
when the vocabulary is shared. Training is teacher forcing: the data pipeline
feeds `decoder_token_ids` = [BOS] + target[:-1] and labels = target (shifted
left by one relative to the decoder input); id 0 is padding on both sides
(padding masks are derived from the ids: `mask_zero`), and the logits carry
the target padding mask, so `MaskedSparseCategoricalCrossentropy` ignores it.

T5, BART and Marian checkpoints (`keras_tfm.checkpoints`) are this class with the
options of the class docstring from `pad_id` on (padding by a model pad id, not id 0).

`seq2seq(...)` (the builder, with presets) returns a `Seq2Seq`. Its graph has the inputs
`encoder_token_ids`, `decoder_token_ids` and the layers `embedding` (shared) or `encoder_embedding` + `decoder_embedding`,
`encoder_embedding_dropout`, `decoder_embedding_dropout`, `encoder_block_{i}`,
`decoder_block_{i}`, `encoder_final_norm` / `decoder_final_norm` (pre-norm),
`lm_head` (untied) and the float32 output `logits` (B, T_target, V_target).
Cached decoding (greedy, sampling, beam search) is `keras_tfm.generation`, on the methods
`encode`, `compute_cross_caches`, `init_caches` and `call_with_cache`; the analytic parameter
count is in `keras_tfm.models.param_counts`.
"""

import types

import keras
from keras import ops

from keras_tfm.checks import check_cache_dtype
from keras_tfm.generation import text as generation_text
from keras_tfm.models.base import TransformerModel, check_tokenizer_fits, lm_loss_and_accuracy
from keras_tfm.models.options import ModelOptions, arguments
from keras_tfm.models.parts import (
    block_caches,
    cache_positions,
    embed_tokens,
    output_logits,
    resolve_vocabularies,
    seq2seq_graph,
    seq2seq_parts,
    shared_score_bias,
    zero_caches,
)
from keras_tfm.models.presets import preset_options

#: Its inputs, int32 (batch, T) each (id 0, or the model's `pad_id`, is padding).
SEQ2SEQ_INPUTS = ("encoder_token_ids", "decoder_token_ids")


@keras.saving.register_keras_serializable(package="keras_tfm")
class Seq2Seq(TransformerModel):
    """The encoder–decoder Transformer (see the module docstring).

    Args:
        vocabulary_size: shared source/target vocabulary (one embedding
            `embedding` for both sides and the output projection).
        source_vocabulary_size, target_vocabulary_size: separate vocabularies
            (`encoder_embedding` / `decoder_embedding`); each defaults to
            `vocabulary_size`.
        share_embeddings: force (True) or forbid (False) one shared embedding;
            default: shared iff the vocabulary is given as `vocabulary_size`
            (or both sizes are equal and come from it). True with different
            source/target sizes is a ValueError.
        max_length: maximum source and target length.
        num_layers: encoder and decoder depth; `num_encoder_layers` /
            `num_decoder_layers` override each side.
        num_heads, d_model, d_ff (default 4·d_model), dropout,
        attention_dropout: sizes and rates.
        position: "sinusoidal" (paper), "sinusoidal_halves" (Marian's column
            order), "learned", "rope", "alibi", "relative" or None.
            Attention-side schemes act in the encoder and decoder
            self-attention (never in cross-attention).
        norm_first: pre-norm (adds `encoder_final_norm`/`decoder_final_norm`)
            or post-norm (paper).
        activation: FFN activation ("relu" in the paper; also "gelu",
            "gelu_tanh", "silu" and the gated "swiglu" / "geglu" / "geglu_tanh").
        layer_norm_epsilon: ε of every norm (1e-6 as in tensor2tensor).
        norm: "layer" (LayerNorm, paper) or "rms" (RMSNorm, float32 statistics).
        tie_embeddings: logits = h Eᵀ with the decoder-side embedding; else an
            `OutputHead` "lm_head".
        scale_embeddings: multiply embeddings by √d_model (paper).
        use_bias, lm_head_use_bias, key_dim, num_key_value_heads (the
            self-attention cache and the cross-attention keys/values have
            that many heads), rope_max_wavelength, attention_impl,
            attention_options: as in `GPT`.
        pad_id: None: id 0 is padding on both sides (`mask_zero`). An id (a
            checkpoint's: T5 0, BART 1, Marian V-1): sources are masked where
            `ids == pad_id` (generation: by their lengths), the decoder's keys
            only causally (as in HuggingFace), the loss ignores that label;
            0 and `pad_id` are ordinary decoder tokens (T5 and Marian start
            decoding from the pad id).
        attention_scale: score scale of every attention; None: 1/√d_k (T5: 1).
        relative_num_buckets, relative_max_distance: of position="relative".
        share_position_bias: position="relative" with one table per stack
            (`encoder_position_bias`, `decoder_position_bias`), as T5.
        separate_positions: shared embeddings with a learned position table
            per side (BART); False: one (`embedding`).
        embedding_norm: a norm after each side's embedding (BART).
        logits_scale: logits = (h · logits_scale) Eᵀ (T5 v1.0: d_model^-0.5).
        logits_bias: a learned `(V_target,)` logits bias (BART, Marian).
        generation_config: a checkpoint's generation defaults, keys of
            `keras_tfm.generation.constraints.GENERATION_CONFIG_KEYS`.
        embeddings_initializer: default N(0, d_model^-0.5) (so √d-scaled
            embeddings have unit variance). kernel_initializer: default Glorot.
        dtype: dtype policy of every layer; logits are float32.
        name: model name.

    Attributes:
        encoder_embedding, decoder_embedding: the `TokenAndPositionEmbedding`s
            (the same layer when `shared_embeddings`).
        encoder_token_embedding, decoder_token_embedding: their `TokenEmbedding`s.
        encoder_embedding_dropout, decoder_embedding_dropout: `Dropout`s.
        encoder_blocks, decoder_blocks: lists of `TransformerBlock`s (the
            decoder blocks have cross-attention).
        encoder_final_norm, decoder_final_norm: norms (pre-norm) or None.
        encoder_embedding_norm, decoder_embedding_norm: norms or None.
        encoder_position_bias, decoder_position_bias: shared tables or None.
        head: the untied `OutputHead`, or None when tied.
        logits_bias: the `LogitsBias` or None.
        shared_embeddings, tie_embeddings, mask_zero: bools.
        pad_id, source_pad_id, decoder_start_id, generation_config,
        logits_scale: the special ids and output scale (above).
        source_vocabulary_size, target_vocabulary_size (= vocabulary_size),
        max_length, num_heads, num_key_value_heads, d_model, key_dim.
        encoder_output: the symbolic encoder output of the graph.
        config: the constructor arguments (dict).
    """

    preset_family = "seq2seq"  # from_preset: seq2seq(name) for a built-in name
    checkpoint_task = "seq2seq_lm"  # its task: from_preset of a checkpoint, the kind of its export

    @classmethod
    def _build_preset(cls, preset, **options):
        return cls(**seq2seq_options(preset, options))

    def __init__(
        self,
        vocabulary_size: int | None = None,
        source_vocabulary_size: int | None = None,
        target_vocabulary_size: int | None = None,
        share_embeddings: bool | None = None,
        max_length: int | None = None,
        num_layers: int | None = None,
        num_encoder_layers: int | None = None,
        num_decoder_layers: int | None = None,
        num_heads: int | None = None,
        d_model: int | None = None,
        d_ff: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float | None = None,
        position: str | None = "sinusoidal",
        norm_first: bool = False,
        activation: str = "relu",
        layer_norm_epsilon: float = 1e-6,
        norm: str = "layer",
        tie_embeddings: bool = True,
        scale_embeddings: bool = True,
        use_bias: bool = True,
        lm_head_use_bias: bool = False,
        key_dim: int | None = None,
        num_key_value_heads: int | None = None,
        rope_max_wavelength: float = 10000.0,
        attention_impl: str = "auto",
        attention_options: dict | None = None,
        pad_id: int | None = None,
        attention_scale: float | None = None,
        relative_num_buckets: int = 32,
        relative_max_distance: int = 128,
        share_position_bias: bool = False,
        separate_positions: bool = False,
        embedding_norm: bool = False,
        logits_scale: float = 1.0,
        logits_bias: bool = False,
        generation_config: dict | None = None,
        embeddings_initializer=None,
        kernel_initializer="glorot_uniform",
        dtype=None,
        name: str = "seq2seq",
        **kwargs,
    ):
        o = ModelOptions("seq2seq", arguments(locals()), required=("max_length", "num_heads", "d_model"))
        source_size, target_size, shared = resolve_vocabularies(
            o.vocabulary_size, o.source_vocabulary_size, o.target_vocabulary_size, share_embeddings
        )
        vocabularies = dict(source_vocabulary=source_size, target_vocabulary=target_size)
        sizes = o.layout_sizes(source_size if shared else None, output_vocabulary=target_size, **vocabularies)
        parts = seq2seq_parts(o, source_size, target_size, shared, embeddings_initializer, kernel_initializer)
        p = types.SimpleNamespace(**parts)

        # === Functional graph (`seq2seq_graph`: masks by `mask_zero`, or by `pad_id`) ===
        inputs = {n: keras.Input(shape=(None,), dtype="int32", name=n) for n in SEQ2SEQ_INPUTS}
        x, logits = seq2seq_graph(p, inputs, o.pad_id, o.logits_scale)
        self._init_model(inputs, logits, name, o.config, layout_sizes=sizes, **kwargs)

        # === Parts ===
        sizes = dict(o.sizes("pad_id", "logits_scale", "generation_config"), vocabulary_size=target_size)
        sizes.update(source_vocabulary_size=source_size, target_vocabulary_size=target_size)
        self._set_parts(
            dict(sizes, shared_embeddings=shared, mask_zero=o.pad_id is None),
            tie_embeddings=o.tie_embeddings,
            encoder_token_embedding=p.encoder_embedding.token_embedding,
            decoder_token_embedding=p.decoder_embedding.token_embedding,
            **parts,
        )
        object.__setattr__(self, "encoder_output", x)
        self._compile_defaults()  # `TransformerModel.compile`'s; a user's compile replaces them

    def _default_loss(self):
        """The teacher-forcing loss: token cross-entropy from logits, target padding (id 0, or the
        model's `pad_id`) excluded, and `MaskedAccuracy`."""
        return lm_loss_and_accuracy(self.source_pad_id)

    @property
    def source_pad_id(self) -> int:
        """The id sources are padded with: `pad_id`, else 0."""
        return 0 if self.pad_id is None else self.pad_id

    @property
    def decoder_start_id(self) -> int | None:
        """The first decoder token of a checkpoint's `generation_config`, else None."""
        return (self.generation_config or {}).get("decoder_start_id")

    # ------------------------------------------------------------ operations
    def _check_tokenizer(self, tokenizer):
        """One tokenizer for both sides (a shared vocabulary) or a `(source, target)` pair."""
        if isinstance(tokenizer, (tuple, list)):
            if len(tokenizer) != 2:
                raise ValueError(
                    "`tokenizer` of a seq2seq model: one tokenizer or a (source, target) pair; received "
                    f"{len(tokenizer)} items."
                )
            return (
                check_tokenizer_fits("tokenizer[0] (source)", tokenizer[0], self.source_vocabulary_size),
                check_tokenizer_fits("tokenizer[1] (target)", tokenizer[1], self.target_vocabulary_size),
            )
        limit = min(self.source_vocabulary_size, self.target_vocabulary_size)
        return check_tokenizer_fits("tokenizer", tokenizer, limit)

    def encode(self, source_ids, padding_mask=None):
        """Encoder output `(batch, S, d_model)` (inference: no dropout).

        Args:
            source_ids: int `(batch, S)`; `source_pad_id` (0, or the model's `pad_id`) is padding.
            padding_mask: optional bool `(batch, S)`, True at real tokens
                (combined with `source_ids != source_pad_id`).
        """
        source_ids = ops.cast(source_ids, "int32")
        mask = ops.not_equal(source_ids, self.source_pad_id)
        if padding_mask is not None:
            mask = ops.logical_and(mask, ops.cast(padding_mask, "bool"))
        x = embed_tokens(self.encoder_embedding, self.encoder_embedding_norm, source_ids)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=mask, training=False)
        if self.encoder_final_norm is not None:
            x = self.encoder_final_norm(x)
        return x

    def compute_cross_caches(self, encoder_output) -> list:
        """Cross-attention keys/values of every decoder block, computed once
        per source: list of `(batch, 2, S, heads, key_dim)`."""
        return [block.cross_attention_layer.compute_cache(encoder_output) for block in self.decoder_blocks]

    def embed(self, token_ids, positions=None):
        """Decoder-side token + position embedding (and embedding norm; no dropout)."""
        return embed_tokens(self.decoder_embedding, self.decoder_embedding_norm, token_ids, positions)

    def compute_logits(self, hidden_states):
        """Float32 logits `(..., V_target)` of the last decoder block's output."""
        h = hidden_states if self.decoder_final_norm is None else self.decoder_final_norm(hidden_states)
        return ops.cast(output_logits(self, h, self.logits_scale), "float32")

    def init_caches(self, batch_size: int, length: int, dtype: str | None = None) -> list:
        """Zero self-attention caches of the decoder blocks: keys and values of
        every block, in the layout of `MultiHeadSelfAttention.init_cache`.
        `dtype` (default: the `cache_dtype` attribute, else the compute dtype):
        as in `GPT.init_caches`."""
        dtype = check_cache_dtype("dtype", dtype) or self.cache_dtype
        return zero_caches(self.decoder_blocks, batch_size, length, dtype)

    def call_with_cache(
        self, token_ids, caches, cache_index, cross_caches, context_mask, positions=None, padding_mask=None,
        last_only=False,
    ):  # fmt: skip
        """Runs decoder `token_ids` at cache slots `cache_index ..`.

        Args:
            token_ids: int32 `(batch, T)`.
            caches: list from `init_caches`.
            cache_index: int32 scalar, first slot written.
            cross_caches: list from `compute_cross_caches`.
            context_mask: bool `(batch, S)`, True at real source tokens.
            positions: optional int32 `(batch, T)` true positions.
            padding_mask: optional bool `(batch, cache_slots)`.
            last_only: logits of the last position only.

        Returns:
            `(logits, caches)`.
        """
        x = self.embed(token_ids, cache_positions(token_ids, cache_index, positions))
        score_bias = shared_score_bias(self.decoder_position_bias, token_ids, caches, cache_index)
        new_caches = []
        for block, cache, cross in zip(self.decoder_blocks, block_caches(caches), cross_caches):
            x, cache = block(
                x,
                padding_mask=padding_mask,
                context_mask=context_mask,
                cache=cache,
                cache_index=cache_index,
                cross_cache=cross,
                training=False,
                score_bias=score_bias,
            )
            new_caches.extend(cache)
        if last_only:
            x = x[:, -1:, :]
        return self.compute_logits(x), new_caches

    def encode_context(self, source_ids, source_lengths) -> dict:
        """The decoder protocol of `keras_tfm.generation` (`generator`): the per-row context of
        cached decoding, computed once per source.

        Args:
            source_ids: int `(batch, S)`, right-padded.
            source_lengths: int `(batch,)`, real tokens per row.

        Returns:
            `{"cross_caches": compute_cross_caches(encode(...)), "context_mask": bool (batch, S)}`.
        """
        source_ids = ops.cast(source_ids, "int32")
        s = ops.shape(source_ids)[1]
        mask = ops.arange(s, dtype="int32")[None, :] < ops.cast(source_lengths, "int32")[:, None]
        if self.mask_zero:
            mask = ops.logical_and(mask, ops.not_equal(source_ids, 0))
        memory = self.encode(source_ids, padding_mask=mask)
        return {"cross_caches": self.compute_cross_caches(memory), "context_mask": mask}

    def decode_step(self, token_ids, positions, caches, cache_index, padding_mask, context=None):
        """The decoder protocol of `keras_tfm.generation`: `call_with_cache` over `context`
        (from `encode_context`), the last position's float32 logits `(batch, V)` and the caches."""
        cross = (context["cross_caches"], context["context_mask"])
        logits, caches = self.call_with_cache(
            token_ids, caches, cache_index, *cross, positions, padding_mask, True
        )
        return logits[:, 0, :], caches

    # ------------------------------------------------------------- text API
    def generate(self, inputs, max_new_tokens: int, **options):
        """Decodes each source: token ids in, exactly `keras_tfm.generation.generate(model,
        inputs, max_new_tokens, **options)` (`bos_id` or `decoder_prompt_ids` required); text in
        (with `model.tokenizer`), decoded from `BOS` to `EOS` and detokenized as `translate`.

        Args:
            inputs: a str, a list of str, or source token ids.
            max_new_tokens: int in [0, max_length - 1].
            **options: those of `keras_tfm.generation.generate` (`sampler`, `temperature`, `top_k`,
                `top_p`, `seed`, `eos_id`, `bos_id`, `pad_id`, the token constraints; ids only:
                `return_lengths`, `output_scores`, `source_lengths`, `decoder_prompt_ids`).

        Returns:
            Text in: the translations, a str for a str, a list for a list.
            Ids in: what `keras_tfm.generation.generate` returns.

        Raises: ValueError / TypeError: as `translate`; ids-only options with text.
        """
        return generation_text.generate_text(self, inputs, max_new_tokens, **options)

    def beam_search(self, inputs, max_new_tokens: int, num_beams: int = 4, **options):
        """Beam search from each source: text (the best beam's translation, as `generate` on
        text) or token ids (exactly `keras_tfm.generation.beam_search(model, inputs,
        max_new_tokens, num_beams, **options)`: `(sequences, scores, lengths)`).

        Args:
            inputs: a str, a list of str, or source token ids.
            max_new_tokens: int in [1, max_length - 1].
            num_beams: beams per source, in [1, target vocabulary size].
            **options: `length_penalty` (default 0.6), `eos_id`, `bos_id` (text: defaults `EOS`,
                `BOS`), `pad_id`; ids only: `source_lengths`, `decoder_prompt_ids`.

        Returns:
            Text in: a str (list of str). Ids in: `(sequences, scores, lengths)`.
        """
        return generation_text.beam_search_text(self, inputs, max_new_tokens, num_beams=num_beams, **options)

    def translate(
        self,
        texts,
        num_beams: int = 4,
        max_new_tokens: int | None = None,
        length_penalty: float | None = None,
    ):
        """Translates text with `model.tokenizer`: in process, what the exported `translate`
        signature answers: sources tokenized by the source tokenizer, decoded from the start id to
        the stop id (`generation.text.seq2seq_ids`), greedily (`num_beams=1`) or by beam search
        (the best beam), new ids detokenized by the target tokenizer.

        Args:
            texts: a str or a non-empty list of str.
            num_beams: int >= 1 (1 = greedy).
            max_new_tokens: int in [0, max_length - 1] (>= 1 with beams); None: `max_length - 1`.
            length_penalty: α in [0, 5]; None: the model's (a checkpoint's, else GNMT's 0.6).

        Returns:
            A str for a str, a list of str for a list.

        Raises:
            ValueError: no `model.tokenizer`, an empty list, a text with no tokens or longer than
                `max_length`, bad options (named).
            TypeError: `texts` not text (or mixing str with other items).
        """
        options = dict(num_beams=num_beams, max_new_tokens=max_new_tokens, length_penalty=length_penalty)
        return generation_text.translate(self, texts, **options)


def seq2seq_options(preset, options):
    """The `Seq2Seq` arguments of `seq2seq(preset, **options)`: with separate
    vocabularies given, the preset's shared size only fills a missing side."""
    merged = preset_options(Seq2Seq, "seq2seq", preset, options)
    separate = any(options.get(k) is not None for k in ("source_vocabulary_size", "target_vocabulary_size"))
    if options.get("vocabulary_size") is None and separate:
        preset_vocabulary = merged.pop("vocabulary_size", None)
        for key in ("source_vocabulary_size", "target_vocabulary_size"):
            merged[key] = merged.get(key) or preset_vocabulary
    return merged


def seq2seq(preset: str | None = None, **options) -> Seq2Seq:
    """Builds the encoder–decoder Transformer.

    Args:
        preset: None or one of `list_presets("seq2seq")` ("tiny",
            "transformer_base", "transformer_big"); explicit arguments
            override the preset's. With separate vocabularies given, the
            preset's shared `vocabulary_size` only fills a missing side.
        **options: the arguments of `Seq2Seq` (a size given as None is not
            given).

    Returns:
        A `Seq2Seq` (functional `keras.Model`) with dict inputs {"encoder_token_ids",
        "decoder_token_ids"} and float32 `logits` (B, T_target, V_target).

    Raises:
        ValueError: unknown preset or option value, missing or inconsistent
            sizes or vocabularies. TypeError: unknown keyword.
    """
    return Seq2Seq(**seq2seq_options(preset, options))
