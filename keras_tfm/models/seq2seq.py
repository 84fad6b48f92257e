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

`seq2seq(...)` (the builder, with presets) returns a `Seq2Seq`. Its graph has
the inputs `encoder_token_ids`, `decoder_token_ids` and the layers
`embedding` (shared) or `encoder_embedding` + `decoder_embedding`,
`encoder_embedding_dropout`, `decoder_embedding_dropout`, `encoder_block_{i}`,
`decoder_block_{i}`, `encoder_final_norm` / `decoder_final_norm` (pre-norm),
`lm_head` (untied) and the float32 output `logits` (B, T_target, V_target).
Cached decoding (greedy, sampling, beam search) is `keras_tfm.generation`, on
the methods `encode`, `compute_cross_caches`, `init_caches` and
`call_with_cache`; the analytic parameter count is in
`keras_tfm.models.param_counts`.
"""

import functools

import keras
from keras import ops

from keras_tfm.checks import check_bool, check_cache_dtype, check_choice, check_rate
from keras_tfm.layers import ATTENTION_IMPLS
from keras_tfm.layers.feed_forward import ACTIVATIONS
from keras_tfm.layers.output_head import OutputHead
from keras_tfm.layers.transformer_block import NORMS
from keras_tfm.models import extensions
from keras_tfm.models.base import TransformerModel, check_tokenizer_fits
from keras_tfm.models.layout import bind_sizes, model_sizes
from keras_tfm.models.parts import (
    block_caches,
    cache_positions,
    check_epsilon,
    check_head_sizes,
    check_required,
    check_size,
    initializer,
    make_blocks,
    make_embedding,
    make_norm,
    normal,
    split_position,
    zero_caches,
)
from keras_tfm.models.presets import preset_options


def resolve_vocabularies(vocabulary_size, source_vocabulary_size, target_vocabulary_size, share_embeddings):
    """(source size, target size, shared) from the vocabulary options."""
    shared_vocab_given = vocabulary_size is not None
    src = source_vocabulary_size or vocabulary_size
    tgt = target_vocabulary_size or vocabulary_size
    if src is None or tgt is None:
        raise ValueError(
            "Give `vocabulary_size` (shared) or both `source_vocabulary_size` and `target_vocabulary_size`."
        )
    if shared_vocab_given and (src != vocabulary_size or tgt != vocabulary_size):
        raise ValueError(
            f"Inconsistent vocabularies: vocabulary_size={vocabulary_size} but source_vocabulary_size={src} and "
            f"target_vocabulary_size={tgt}."
        )
    separate_given = source_vocabulary_size is not None or target_vocabulary_size is not None
    if share_embeddings is None:
        share = src == tgt and not (separate_given and not shared_vocab_given)
    else:
        share = check_bool("share_embeddings", share_embeddings)
        if share and src != tgt:
            raise ValueError(
                f"share_embeddings=True needs one vocabulary for both sides; received "
                f"source_vocabulary_size={src} and target_vocabulary_size={tgt}."
            )
    return src, tgt, share


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
        position: "sinusoidal" (paper), "learned", "rope", "alibi",
            "relative" or None. Attention-side schemes act in the encoder and
            decoder self-attention (never in cross-attention).
        norm_first: pre-norm (adds `encoder_final_norm`/`decoder_final_norm`)
            or post-norm (paper).
        activation: FFN activation ("relu" in the paper; also "gelu",
            "gelu_tanh", "silu" and the gated "swiglu" / "geglu").
        layer_norm_epsilon: ε of every norm (1e-6 as in tensor2tensor).
        norm: "layer" (LayerNorm, paper) or "rms" (RMSNorm, float32 statistics).
        tie_embeddings: logits = h Eᵀ with the decoder-side embedding; else an
            `OutputHead` "lm_head".
        scale_embeddings: multiply embeddings by √d_model (paper).
        use_bias, lm_head_use_bias, key_dim, num_key_value_heads (the
            self-attention cache and the cross-attention keys/values have
            that many heads), rope_max_wavelength, attention_impl,
            attention_options: as in `GPT`.
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
        head: the untied `OutputHead`, or None when tied.
        shared_embeddings, tie_embeddings, mask_zero: bools.
        source_vocabulary_size, target_vocabulary_size (= vocabulary_size),
        max_length, num_heads, num_key_value_heads, d_model, head_dim.
        encoder_output: the symbolic encoder output of the graph.
        config: the constructor arguments (dict).
    """

    preset_family = "seq2seq"  # from_preset: seq2seq(name) for a built-in name; no checkpoint layout

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
        embeddings_initializer=None,
        kernel_initializer="glorot_uniform",
        dtype=None,
        name: str = "seq2seq",
        **kwargs,
    ):
        # === Arguments ===
        check_required("seq2seq", max_length=max_length, num_heads=num_heads, d_model=d_model)
        vocabulary_size = check_size("vocabulary_size", vocabulary_size, allow_none=True)
        source_vocabulary_size = check_size("source_vocabulary_size", source_vocabulary_size, allow_none=True)
        target_vocabulary_size = check_size("target_vocabulary_size", target_vocabulary_size, allow_none=True)
        max_length = check_size("max_length", max_length)
        num_layers = check_size("num_layers", num_layers, allow_none=True)
        num_encoder_layers = check_size("num_encoder_layers", num_encoder_layers, allow_none=True)
        num_decoder_layers = check_size("num_decoder_layers", num_decoder_layers, allow_none=True)
        num_heads = check_size("num_heads", num_heads)
        d_model = check_size("d_model", d_model)
        d_ff = 4 * d_model if d_ff is None else check_size("d_ff", d_ff)
        dropout = check_rate("dropout", 0.0 if dropout is None else dropout)
        if attention_dropout is not None:
            check_rate("attention_dropout", attention_dropout)
        check_choice("activation", activation, ACTIVATIONS)
        check_choice("attention_impl", attention_impl, sorted(ATTENTION_IMPLS))
        check_choice("norm", norm, NORMS)
        embedding_position, attention_position = split_position(position)
        layer_norm_epsilon = check_epsilon(layer_norm_epsilon)
        norm_first = check_bool("norm_first", norm_first)
        use_bias = check_bool("use_bias", use_bias)
        check_head_sizes(d_model, num_heads, key_dim, attention_position)
        source_size, target_size, shared = resolve_vocabularies(
            vocabulary_size, source_vocabulary_size, target_vocabulary_size, share_embeddings
        )
        encoder_layers = num_encoder_layers or num_layers
        decoder_layers = num_decoder_layers or num_layers
        if encoder_layers is None or decoder_layers is None:
            raise ValueError(
                "Give `num_layers` (or `num_encoder_layers` and `num_decoder_layers`), or a `preset`."
            )
        tie_embeddings = check_bool("tie_embeddings", tie_embeddings)
        scale_embeddings = check_bool("scale_embeddings", scale_embeddings)
        lm_head_use_bias = check_bool("lm_head_use_bias", lm_head_use_bias)
        # Before any variable exists: a get_layout_map map of the current distribution checks these.
        sizes = bind_sizes(
            model_sizes(
                d_model,
                num_heads,
                d_ff,
                num_key_value_heads,
                source_size if shared else None,
                source_vocabulary=source_size,
                target_vocabulary=target_size,
                output_vocabulary=target_size,
            )
        )

        # === Layers ===
        block_initializer = initializer(kernel_initializer, "glorot_uniform", "blocks")

        def embedding_for(vocabulary, layer_name):
            return make_embedding(
                vocabulary_size=vocabulary,
                d_model=d_model,
                max_length=max_length,
                position=embedding_position,
                embeddings_initializer=initializer(embeddings_initializer, normal(d_model**-0.5), layer_name),
                dtype=dtype,
                name=layer_name,
                scale=scale_embeddings,
                mask_zero=True,
            )

        if shared:
            encoder_embedding = decoder_embedding = embedding_for(source_size, "embedding")
        else:
            encoder_embedding = embedding_for(source_size, "encoder_embedding")
            decoder_embedding = embedding_for(target_size, "decoder_embedding")
        encoder_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="encoder_embedding_dropout")
        decoder_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="decoder_embedding_dropout")
        # Every block of both stacks takes the same options; the stacks differ in masking and
        # cross-attention.
        stack = functools.partial(
            make_blocks,
            d_model=d_model,
            num_heads=num_heads,
            d_ff=d_ff,
            dropout=dropout,
            attention_dropout=attention_dropout,
            norm_first=norm_first,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            norm=norm,
            use_bias=use_bias,
            key_dim=key_dim,
            num_key_value_heads=num_key_value_heads,
            position=attention_position,
            rope_max_wavelength=rope_max_wavelength,
            attention_impl=attention_impl,
            attention_options=attention_options,
            kernel_initializer=block_initializer,
            dtype=dtype,
        )
        encoder_blocks = stack(
            "encoder_block", encoder_layers, causal=False, cross_attention=False, salt_prefix="encoder_"
        )
        decoder_blocks = stack(
            "decoder_block", decoder_layers, causal=True, cross_attention=True, salt_prefix="decoder_"
        )
        encoder_final_norm = decoder_final_norm = None
        if norm_first:
            encoder_final_norm = make_norm(norm, layer_norm_epsilon, dtype, "encoder_final_norm")
            decoder_final_norm = make_norm(norm, layer_norm_epsilon, dtype, "decoder_final_norm")
        head = None
        if not tie_embeddings:
            head = OutputHead(
                target_size,
                use_bias=lm_head_use_bias,
                kernel_initializer=initializer(kernel_initializer, "glorot_uniform", "lm_head"),
                dtype=dtype,
                name="lm_head",
            )

        # === Functional graph ===
        encoder_ids = keras.Input(shape=(None,), dtype="int32", name="encoder_token_ids")
        decoder_ids = keras.Input(shape=(None,), dtype="int32", name="decoder_token_ids")
        # Padding masks travel as Keras implicit masks (mask_zero): the encoder
        # mask reaches self-attention and, as `context_mask`, cross-attention.
        x = encoder_dropout(encoder_embedding(encoder_ids))
        for block in encoder_blocks:
            x = block(x)
        if encoder_final_norm is not None:
            x = encoder_final_norm(x)
        y = decoder_dropout(decoder_embedding(decoder_ids))
        for block in decoder_blocks:
            y = block(y, context=x)
        if decoder_final_norm is not None:
            y = decoder_final_norm(y)
        logits = decoder_embedding(y, reverse=True) if head is None else head(y)
        logits = keras.layers.Identity(dtype="float32", name="logits")(logits)
        inputs = {"encoder_token_ids": encoder_ids, "decoder_token_ids": decoder_ids}

        # === Config: the constructor arguments, checked (get_config) ===
        config = dict(
            vocabulary_size=vocabulary_size,
            source_vocabulary_size=source_vocabulary_size,
            target_vocabulary_size=target_vocabulary_size,
            share_embeddings=share_embeddings,
            max_length=max_length,
            num_layers=num_layers,
            num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers,
            num_heads=num_heads,
            d_model=d_model,
            d_ff=d_ff,
            dropout=dropout,
            attention_dropout=attention_dropout,
            position=position,
            norm_first=norm_first,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            norm=norm,
            tie_embeddings=tie_embeddings,
            scale_embeddings=scale_embeddings,
            use_bias=use_bias,
            lm_head_use_bias=lm_head_use_bias,
            key_dim=key_dim,
            num_key_value_heads=num_key_value_heads,
            rope_max_wavelength=rope_max_wavelength,
            attention_impl=attention_impl,
            attention_options=attention_options,
            embeddings_initializer=embeddings_initializer,
            kernel_initializer=kernel_initializer,
            dtype=dtype,
        )
        self._init_model(inputs, logits, name, config, layout_sizes=sizes, **kwargs)

        # === Parts ===
        self.encoder_embedding = encoder_embedding
        self.decoder_embedding = decoder_embedding
        self.encoder_token_embedding = encoder_embedding.token_embedding
        self.decoder_token_embedding = decoder_embedding.token_embedding
        self.encoder_embedding_dropout = encoder_dropout
        self.decoder_embedding_dropout = decoder_dropout
        self.encoder_blocks = encoder_blocks
        self.decoder_blocks = decoder_blocks
        self.encoder_final_norm = encoder_final_norm
        self.decoder_final_norm = decoder_final_norm
        self.head = head
        self.shared_embeddings = shared
        self.tie_embeddings = tie_embeddings
        self.mask_zero = True
        self.source_vocabulary_size = source_size
        self.target_vocabulary_size = target_size
        self.vocabulary_size = target_size
        self.max_length = max_length
        self.num_heads = num_heads
        self.num_key_value_heads = num_key_value_heads or num_heads
        self.d_model = d_model
        self.head_dim = key_dim or d_model // num_heads
        self.cache_dtype = None
        object.__setattr__(self, "encoder_output", x)

    @property
    def cache_dtype(self) -> str | None:
        """Self-attention cache dtype of `init_caches`: None (the compute
        dtype), "float32", "float16" or "bfloat16"; any other value raises a
        ValueError."""
        return self._cache_dtype

    @cache_dtype.setter
    def cache_dtype(self, value):
        self._cache_dtype = check_cache_dtype("cache_dtype", value)

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
            source_ids: int `(batch, S)`; id 0 is padding.
            padding_mask: optional bool `(batch, S)`, True at real tokens
                (combined with `source_ids != 0`).
        """
        source_ids = ops.cast(source_ids, "int32")
        mask = ops.not_equal(source_ids, 0)
        if padding_mask is not None:
            mask = ops.logical_and(mask, ops.cast(padding_mask, "bool"))
        x = self.encoder_embedding(source_ids)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=mask, training=False)
        if self.encoder_final_norm is not None:
            x = self.encoder_final_norm(x)
        return x

    def compute_cross_caches(self, encoder_output) -> list:
        """Cross-attention keys/values of every decoder block, computed once
        per source: list of `(batch, 2, S, heads, head_dim)`."""
        return [block.cross_attention_layer.compute_cache(encoder_output) for block in self.decoder_blocks]

    def embed(self, token_ids, positions=None):
        """Decoder-side token + position embedding (no dropout)."""
        return self.decoder_embedding(token_ids, positions=positions)

    def compute_logits(self, hidden_states):
        """Float32 logits `(..., V_target)` of the last decoder block's output."""
        h = hidden_states if self.decoder_final_norm is None else self.decoder_final_norm(hidden_states)
        logits = self.decoder_token_embedding(h, reverse=True) if self.head is None else self.head(h)
        return ops.cast(logits, "float32")

    def init_caches(self, batch_size: int, length: int, dtype: str | None = None) -> list:
        """Zero self-attention caches of the decoder blocks: keys and values of
        every block, in the layout of `MultiHeadSelfAttention.init_cache`.
        `dtype` (default: the `cache_dtype` attribute, else the compute dtype):
        as in `GPT.init_caches`."""
        dtype = check_cache_dtype("dtype", dtype) or self.cache_dtype
        return zero_caches(self.decoder_blocks, batch_size, length, dtype)

    def call_with_cache(
        self,
        token_ids,
        caches,
        cache_index,
        cross_caches,
        context_mask,
        positions=None,
        padding_mask=None,
        last_only=False,
    ):
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
            )
            new_caches.extend(cache)
        if last_only:
            x = x[:, -1:, :]
        return self.compute_logits(x), new_caches

    # ------------------------------------------------------------- text API
    def generate(self, inputs, max_new_tokens: int, **options):
        """Decodes each source: token ids in, exactly `keras_tfm.generation.generate(model,
        inputs, max_new_tokens, **options)` (`bos_id` or `decoder_prompt_ids` required); text in
        (with `model.tokenizer`), decoded from `BOS` to `EOS` and detokenized as `translate`.

        Args:
            inputs: a str, a list of str, or source token ids.
            max_new_tokens: int in [0, max_length - 1].
            **options: those of `keras_tfm.generation.generate` (`sampler`,
                `temperature`, `top_k`, `top_p`, `seed`, `eos_id`, `bos_id`,
                `pad_id`; ids only: `return_lengths`, `output_scores`,
                `source_lengths`, `decoder_prompt_ids`).

        Returns:
            Text in: the translations, a str for a str, a list for a list.
            Ids in: what `keras_tfm.generation.generate` returns.

        Raises:
            ValueError / TypeError: as `translate`; ids-only options with text.
        """
        provider = extensions.provided("generate_text", "Seq2Seq.generate")
        return provider(self, inputs, max_new_tokens, **options)

    def beam_search(self, inputs, max_new_tokens: int, num_beams: int = 4, **options):
        """Beam search from each source: text (the best beam's translation, as
        `generate` on text) or token ids (exactly
        `keras_tfm.generation.beam_search(model, inputs, max_new_tokens,
        num_beams, **options)`: `(sequences, scores, lengths)`).

        Args:
            inputs: a str, a list of str, or source token ids.
            max_new_tokens: int in [1, max_length - 1].
            num_beams: beams per source, in [1, target vocabulary size].
            **options: `length_penalty` (default 0.6), `eos_id`, `bos_id`
                (text: defaults `EOS`, `BOS`), `pad_id`; ids only:
                `source_lengths`, `decoder_prompt_ids`.

        Returns:
            Text in: a str (list of str). Ids in: `(sequences, scores, lengths)`.
        """
        provider = extensions.provided("beam_search_text", "Seq2Seq.beam_search")
        return provider(self, inputs, max_new_tokens, num_beams=num_beams, **options)

    def translate(
        self, texts, num_beams: int = 4, max_new_tokens: int | None = None, length_penalty: float = 0.6
    ):
        """Translates text with `model.tokenizer`: in process, what the exported
        `translate` signature answers for the same request.

        The sources are tokenized by the source tokenizer, decoded from `BOS`
        to `EOS` (`keras_tfm.tokenizers.special_tokens`), greedily for
        `num_beams=1`, else by beam search (the best beam), and the new ids
        detokenized by the target tokenizer as the served signature does.

        Args:
            texts: a str or a non-empty list of str.
            num_beams: int >= 1 (1 = greedy).
            max_new_tokens: int in [0, max_length - 1] (>= 1 with beams); None:
                `max_length - 1` (the export's default limit).
            length_penalty: α of ((5 + len) / 6)^α, in [0, 5].

        Returns:
            A str for a str, a list of str for a list.

        Raises:
            ValueError: no `model.tokenizer`, an empty list, a text with no
                tokens or longer than `max_length`, bad options (named).
            TypeError: `texts` not text (or mixing str with other items).
        """
        provider = extensions.provided("translate", "Seq2Seq.translate")
        return provider(
            self, texts, num_beams=num_beams, max_new_tokens=max_new_tokens, length_penalty=length_penalty
        )


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
