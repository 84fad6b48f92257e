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
`lm_head` (untied) and the float32 output `logits` (B, T_target, V_target),
as before the class existed. Cached decoding (greedy, sampling, beam search)
is `keras_tfm.generation`; functions over a built model (its encoder half,
layer names) are in `keras_tfm.models.seq2seq_helpers`, the analytic parameter
count in `keras_tfm.models.param_counts`.
"""

import keras
from keras import ops

from keras_tfm.checks import check_bool
from keras_tfm.layers.initializers import clone_initializers
from keras_tfm.layers.transformer_block import TransformerBlock
from keras_tfm.models.base import TransformerModel
from keras_tfm.models.parts import (
    block_caches,
    builder_signature,
    cache_positions,
    make_embedding,
    make_final_norm,
    make_lm_head,
    normal,
    preset_options,
    resolve_architecture,
    set_size_attributes,
    zero_caches,
)
from keras_tfm.models.presets import SIZES


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

    def __init__(
        self,
        vocabulary_size=None,
        source_vocabulary_size=None,
        target_vocabulary_size=None,
        share_embeddings=None,
        max_length=None,
        num_layers=None,
        num_encoder_layers=None,
        num_decoder_layers=None,
        num_heads=None,
        d_model=None,
        d_ff=None,
        dropout=0.0,
        attention_dropout=None,
        position="sinusoidal",
        norm_first=False,
        activation="relu",
        layer_norm_epsilon=1e-6,
        norm="layer",
        tie_embeddings=True,
        scale_embeddings=True,
        use_bias=True,
        lm_head_use_bias=False,
        key_dim=None,
        num_key_value_heads=None,
        rope_max_wavelength=10000.0,
        attention_impl="auto",
        attention_options=None,
        embeddings_initializer=None,
        kernel_initializer="glorot_uniform",
        dtype=None,
        name="seq2seq",
        **kwargs,
    ):
        o, embedding_position, blocks_kwargs = resolve_architecture(
            "seq2seq", locals(), ("max_length", "num_heads", "d_model"), "glorot_uniform"
        )
        src, tgt, share = resolve_vocabularies(
            o["vocabulary_size"], o["source_vocabulary_size"], o["target_vocabulary_size"], share_embeddings
        )
        n_enc = o["num_encoder_layers"] or o["num_layers"]
        n_dec = o["num_decoder_layers"] or o["num_layers"]
        if n_enc is None or n_dec is None:
            raise ValueError(
                "Give `num_layers` (or `num_encoder_layers` and `num_decoder_layers`), or a `preset`."
            )
        o.update(
            tie_embeddings=check_bool("tie_embeddings", tie_embeddings),
            scale_embeddings=check_bool("scale_embeddings", scale_embeddings),
            lm_head_use_bias=check_bool("lm_head_use_bias", lm_head_use_bias),
        )
        dtype = o["dtype"]

        # === Layers ===
        def embedding_for(vocabulary, layer_name):
            return make_embedding(
                o,
                vocabulary,
                embedding_position,
                normal(o["d_model"] ** -0.5),
                layer_name,
                scale=o["scale_embeddings"],
                mask_zero=True,
            )

        if share:
            encoder_embedding = decoder_embedding = embedding_for(src, "embedding")
        else:
            encoder_embedding = embedding_for(src, "encoder_embedding")
            decoder_embedding = embedding_for(tgt, "decoder_embedding")
        encoder_dropout = keras.layers.Dropout(o["dropout"], dtype=dtype, name="encoder_embedding_dropout")
        decoder_dropout = keras.layers.Dropout(o["dropout"], dtype=dtype, name="decoder_embedding_dropout")
        encoder_blocks, decoder_blocks = (
            [
                TransformerBlock(
                    causal=side == "decoder",
                    cross_attention=side == "decoder",
                    name=f"{side}_block_{i}",
                    **clone_initializers(blocks_kwargs, f"{side}_{i}"),
                )
                for i in range(count)
            ]
            for side, count in (("encoder", n_enc), ("decoder", n_dec))
        )
        encoder_final_norm = make_final_norm(o, "encoder_final_norm")
        decoder_final_norm = make_final_norm(o, "decoder_final_norm")
        head = make_lm_head(o, tgt, "glorot_uniform")

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
        self._init_model(inputs, logits, name, o, **kwargs)

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
        self.shared_embeddings = share
        self.tie_embeddings = o["tie_embeddings"]
        self.mask_zero = True
        self.source_vocabulary_size = src
        self.target_vocabulary_size = tgt
        self.vocabulary_size = tgt
        set_size_attributes(self, o, ("max_length",))
        object.__setattr__(self, "encoder_output", x)

    # ------------------------------------------------------------ operations
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

    def compute_cross_caches(self, encoder_output):
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

    def init_caches(self, batch_size, length):
        """Zero self-attention caches of the decoder blocks: keys and values of
        every block, in the layout of `MultiHeadSelfAttention.init_cache`."""
        return zero_caches(self, self.decoder_blocks, batch_size, length)

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


SEQ2SEQ_SIZES = SIZES + (
    "source_vocabulary_size",
    "target_vocabulary_size",
    "num_encoder_layers",
    "num_decoder_layers",
)


def seq2seq_options(preset, options):
    """The `Seq2Seq` arguments of `seq2seq(preset, **options)`: with separate
    vocabularies given, the preset's shared size only fills a missing side."""
    merged = preset_options(Seq2Seq, "seq2seq", preset, options, SEQ2SEQ_SIZES)
    separate = any(options.get(k) is not None for k in ("source_vocabulary_size", "target_vocabulary_size"))
    if options.get("vocabulary_size") is None and separate:
        preset_vocabulary = merged.pop("vocabulary_size", None)
        for key in ("source_vocabulary_size", "target_vocabulary_size"):
            merged[key] = merged.get(key) or preset_vocabulary
    return merged


def seq2seq(preset=None, **options):
    """Builds the encoder–decoder Transformer.

    Args:
        preset: None or one of `list_presets("seq2seq")` ("tiny",
            "transformer_base", "transformer_big"); explicit arguments
            override the preset's. With separate vocabularies given, the
            preset's shared `vocabulary_size` only fills a missing side.
        **options: the arguments of `Seq2Seq`.

    Returns:
        A `Seq2Seq` (functional `keras.Model`) with dict inputs {"encoder_token_ids",
        "decoder_token_ids"} and float32 `logits` (B, T_target, V_target).
    """
    return Seq2Seq(**seq2seq_options(preset, options))


seq2seq.__signature__ = builder_signature(Seq2Seq, SEQ2SEQ_SIZES)
