"""Encoder–decoder Transformer of "Attention Is All You Need" (Vaswani et al. 2017).

One concept, one module: the `Seq2Seq` class (with the encode / cross-cache /
cached-decoding methods that generation and export call), its builder and the
small public helpers over it; past 600 lines only because of those methods.

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
is `keras_tfm.generation`.
"""

import keras
from keras import ops

from keras_tfm.checks import check_bool
from keras_tfm.layers.embeddings import TokenAndPositionEmbedding
from keras_tfm.layers.initializers import clone_initializers
from keras_tfm.layers.output_head import OutputHead
from keras_tfm.layers.transformer_block import TransformerBlock
from keras_tfm.models._common import (
    block_kwargs,
    check_options,
    initializer,
    normal,
    preset_sizes,
    resolve_sizes,
    split_position,
)
from keras_tfm.models.base import TransformerModel
from keras_tfm.models.gpt import init_caches
from keras_tfm.models.presets import get_preset

SEQ2SEQ_SIZES = (
    "vocabulary_size",
    "source_vocabulary_size",
    "target_vocabulary_size",
    "max_length",
    "num_layers",
    "num_encoder_layers",
    "num_decoder_layers",
    "num_heads",
    "d_model",
    "d_ff",
    "dropout",
)


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
        vocabulary_size: shared source/target vocabulary (one embedding for
            both sides and the output projection).
        source_vocabulary_size, target_vocabulary_size: separate vocabularies.
        share_embeddings: force (True) or forbid (False) one shared embedding;
            default: shared iff the vocabulary is given as `vocabulary_size`.
        max_length, num_layers (or num_encoder_layers / num_decoder_layers),
        num_heads, d_model, d_ff, dropout, attention_dropout, position,
        norm_first, activation, layer_norm_epsilon, tie_embeddings,
        scale_embeddings, use_bias, lm_head_use_bias, key_dim,
        attention_impl, attention_options, embeddings_initializer,
        kernel_initializer, dtype, name: see `seq2seq`.

    Attributes:
        encoder_embedding, decoder_embedding: the `TokenAndPositionEmbedding`s
            (the same layer when `shared_embeddings`).
        encoder_token_embedding, decoder_token_embedding: their `TokenEmbedding`s.
        encoder_embedding_dropout, decoder_embedding_dropout: `Dropout`s.
        encoder_blocks, decoder_blocks: lists of `TransformerBlock`s (the
            decoder blocks have cross-attention).
        encoder_final_norm, decoder_final_norm: LayerNorms (pre-norm) or None.
        head: the untied `OutputHead`, or None when tied.
        shared_embeddings, tie_embeddings, mask_zero: bools.
        source_vocabulary_size, target_vocabulary_size (= vocabulary_size),
        max_length, num_heads, d_model, head_dim.
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
        tie_embeddings=True,
        scale_embeddings=True,
        use_bias=True,
        lm_head_use_bias=False,
        key_dim=None,
        attention_impl="auto",
        attention_options=None,
        embeddings_initializer=None,
        kernel_initializer="glorot_uniform",
        dtype=None,
        name="seq2seq",
        **kwargs,
    ):
        o = resolve_sizes(
            "seq2seq",
            None,
            dict(
                vocabulary_size=vocabulary_size,
                source_vocabulary_size=source_vocabulary_size,
                target_vocabulary_size=target_vocabulary_size,
                max_length=max_length,
                num_layers=num_layers,
                num_encoder_layers=num_encoder_layers,
                num_decoder_layers=num_decoder_layers,
                num_heads=num_heads,
                d_model=d_model,
                d_ff=d_ff,
                dropout=dropout,
            ),
            required=("max_length", "num_heads", "d_model"),
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
        check_options(activation, attention_impl, layer_norm_epsilon, o["dropout"], attention_dropout)
        embedding_position, attention_position = split_position(position)
        config = dict(
            o,
            share_embeddings=share_embeddings,
            attention_dropout=attention_dropout,
            position=position,
            norm_first=check_bool("norm_first", norm_first),
            activation=activation,
            layer_norm_epsilon=float(layer_norm_epsilon),
            tie_embeddings=check_bool("tie_embeddings", tie_embeddings),
            scale_embeddings=check_bool("scale_embeddings", scale_embeddings),
            use_bias=check_bool("use_bias", use_bias),
            lm_head_use_bias=check_bool("lm_head_use_bias", lm_head_use_bias),
            key_dim=key_dim,
            attention_impl=attention_impl,
            attention_options=attention_options,
            embeddings_initializer=embeddings_initializer,
            kernel_initializer=kernel_initializer,
            dtype=dtype,
        )
        o.update(config, kernel_initializer=initializer(kernel_initializer, "glorot_uniform", "blocks"))
        blocks_kwargs = block_kwargs(o, attention_position, dtype)
        d = o["d_model"]

        # === Layers ===
        def make_embedding(vocab, layer_name):
            return TokenAndPositionEmbedding(
                vocab,
                d,
                max_length=o["max_length"],
                position=embedding_position,
                scale=bool(scale_embeddings),
                mask_zero=True,
                embeddings_initializer=initializer(embeddings_initializer, normal(d**-0.5), layer_name),
                dtype=dtype,
                name=layer_name,
            )

        if share:
            encoder_embedding = decoder_embedding = make_embedding(src, "embedding")
        else:
            encoder_embedding = make_embedding(src, "encoder_embedding")
            decoder_embedding = make_embedding(tgt, "decoder_embedding")
        encoder_dropout = keras.layers.Dropout(o["dropout"], dtype=dtype, name="encoder_embedding_dropout")
        decoder_dropout = keras.layers.Dropout(o["dropout"], dtype=dtype, name="decoder_embedding_dropout")
        encoder_blocks = [
            TransformerBlock(
                causal=False,
                cross_attention=False,
                name=f"encoder_block_{i}",
                **clone_initializers(blocks_kwargs, f"encoder_{i}"),
            )
            for i in range(n_enc)
        ]
        decoder_blocks = [
            TransformerBlock(
                causal=True,
                cross_attention=True,
                name=f"decoder_block_{i}",
                **clone_initializers(blocks_kwargs, f"decoder_{i}"),
            )
            for i in range(n_dec)
        ]
        encoder_final_norm = decoder_final_norm = None
        if o["norm_first"]:
            encoder_final_norm = keras.layers.LayerNormalization(
                epsilon=o["layer_norm_epsilon"], dtype=dtype, name="encoder_final_norm"
            )
            decoder_final_norm = keras.layers.LayerNormalization(
                epsilon=o["layer_norm_epsilon"], dtype=dtype, name="decoder_final_norm"
            )
        head = None
        if not tie_embeddings:
            head = OutputHead(
                tgt,
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
        self._init_model(inputs, logits, name, config, **kwargs)

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
        self.tie_embeddings = check_bool("tie_embeddings", tie_embeddings)
        self.mask_zero = True
        self.source_vocabulary_size = src
        self.target_vocabulary_size = tgt
        self.vocabulary_size = tgt
        self.max_length = o["max_length"]
        self.num_heads = o["num_heads"]
        self.d_model = d
        self.head_dim = key_dim or d // o["num_heads"]
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
        """One zero self-attention cache `(batch, 2, length, heads, head_dim)` per decoder block."""
        return init_caches(
            batch_size,
            len(self.decoder_blocks),
            length,
            self.num_heads,
            self.head_dim,
            self.decoder_blocks[0].compute_dtype,
        )

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
        if positions is None:
            length = ops.shape(token_ids)[1]
            positions = ops.cast(cache_index, "int32") + ops.arange(length, dtype="int32")[None, :]
            positions = ops.broadcast_to(positions, ops.shape(token_ids))
        x = self.embed(token_ids, positions)
        new_caches = []
        for block, cache, cross in zip(self.decoder_blocks, caches, cross_caches):
            x, cache = block(
                x,
                padding_mask=padding_mask,
                context_mask=context_mask,
                cache=cache,
                cache_index=cache_index,
                cross_cache=cross,
                training=False,
            )
            new_caches.append(cache)
        if last_only:
            x = x[:, -1:, :]
        return self.compute_logits(x), new_caches


def seq2seq(
    preset=None,
    *,
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
    dropout=None,
    attention_dropout=None,
    position="sinusoidal",
    norm_first=False,
    activation="relu",
    layer_norm_epsilon=1e-6,
    tie_embeddings=True,
    scale_embeddings=True,
    use_bias=True,
    lm_head_use_bias=False,
    key_dim=None,
    attention_impl="auto",
    attention_options=None,
    embeddings_initializer=None,
    kernel_initializer="glorot_uniform",
    dtype=None,
    name="seq2seq",
):
    """Builds the encoder–decoder Transformer.

    Args:
        preset: None or one of `list_presets("seq2seq")` ("tiny",
            "transformer_base", "transformer_big").
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
        num_heads, d_model, d_ff (default 4·d_model), dropout (preset or 0),
        attention_dropout: sizes and rates.
        position: "sinusoidal" (paper), "learned", "rope", "alibi",
            "relative" or None. Attention-side schemes act in the encoder and
            decoder self-attention (never in cross-attention).
        norm_first: pre-norm (adds `encoder_final_norm`/`decoder_final_norm`)
            or post-norm (paper).
        activation: FFN activation ("relu" in the paper).
        layer_norm_epsilon: LayerNorm ε (1e-6 as in tensor2tensor).
        tie_embeddings: logits = h Eᵀ with the decoder-side embedding; else an
            `OutputHead` "lm_head".
        scale_embeddings: multiply embeddings by √d_model (paper).
        use_bias, lm_head_use_bias, key_dim, attention_impl, attention_options:
            as in `gpt`.
        embeddings_initializer: default N(0, d_model^-0.5) (so √d-scaled
            embeddings have unit variance). kernel_initializer: default Glorot.
        dtype: dtype policy of every layer; logits are float32.
        name: model name.

    Returns:
        A `Seq2Seq` (functional `keras.Model`) with dict inputs {"encoder_token_ids",
        "decoder_token_ids"} and float32 `logits` (B, T_target, V_target).
    """
    sizes = preset_sizes(
        "seq2seq",
        preset,
        dict(
            vocabulary_size=vocabulary_size,
            source_vocabulary_size=source_vocabulary_size,
            target_vocabulary_size=target_vocabulary_size,
            max_length=max_length,
            num_layers=num_layers,
            num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers,
            num_heads=num_heads,
            d_model=d_model,
            d_ff=d_ff,
            dropout=dropout,
        ),
    )
    if vocabulary_size is None and (source_vocabulary_size is not None or target_vocabulary_size is not None):
        # Separate vocabularies given: the preset's shared size only fills the missing side.
        preset_vocabulary = sizes.pop("vocabulary_size")
        sizes["source_vocabulary_size"] = sizes["source_vocabulary_size"] or preset_vocabulary
        sizes["target_vocabulary_size"] = sizes["target_vocabulary_size"] or preset_vocabulary
    return Seq2Seq(
        **sizes,
        share_embeddings=share_embeddings,
        attention_dropout=attention_dropout,
        position=position,
        norm_first=norm_first,
        activation=activation,
        layer_norm_epsilon=layer_norm_epsilon,
        tie_embeddings=tie_embeddings,
        scale_embeddings=scale_embeddings,
        use_bias=use_bias,
        lm_head_use_bias=lm_head_use_bias,
        key_dim=key_dim,
        attention_impl=attention_impl,
        attention_options=attention_options,
        embeddings_initializer=embeddings_initializer,
        kernel_initializer=kernel_initializer,
        dtype=dtype,
        name=name,
    )


def seq2seq_layer_names(model):
    """Names of the structural layers of a `Seq2Seq` model.

    Returns:
        dict with "encoder_embedding", "decoder_embedding" (both "embedding"
        when shared), "encoder_blocks", "decoder_blocks" (lists),
        "encoder_final_norm", "decoder_final_norm" (None for post-norm),
        "lm_head" (None when tied), "tied" (bool).
    """
    check_seq2seq(model)

    def name(layer):
        return None if layer is None else layer.name

    return {
        "encoder_embedding": model.encoder_embedding.name,
        "decoder_embedding": model.decoder_embedding.name,
        "encoder_blocks": [b.name for b in model.encoder_blocks],
        "decoder_blocks": [b.name for b in model.decoder_blocks],
        "encoder_final_norm": name(model.encoder_final_norm),
        "decoder_final_norm": name(model.decoder_final_norm),
        "lm_head": name(model.head),
        "tied": model.head is None,
    }


def check_seq2seq(model):
    if not isinstance(model, Seq2Seq):
        raise TypeError(
            f"`model` must be a keras_tfm Seq2Seq (from `seq2seq`); received {type(model).__name__}. A model "
            "saved before the model classes existed: convert it with `keras_tfm.models.from_functional(model)`."
        )
    return model


def seq2seq_encoder(model):
    """The encoder half of a `Seq2Seq` as a functional model sharing its
    weights: `encoder_token_ids` (B, S) → encoder output (B, S, d_model)
    (the memory the decoder blocks cross-attend to; it carries the source
    padding mask as a Keras mask)."""
    check_seq2seq(model)
    return keras.Model(model.input["encoder_token_ids"], model.encoder_output, name=f"{model.name}_encoder")


def seq2seq_greedy_decode(model, encoder_token_ids, bos_id, max_length, eos_id=None, batch_size=256):
    """Greedy decoding: `keras_tfm.generation.generate(model, encoder_token_ids,
    max_length, bos_id=bos_id, eos_id=eos_id)` (kept for old callers).

    Returns:
        int32 NumPy array (B, max_length) of generated ids (BOS excluded,
        0 after EOS).
    """
    import numpy as np

    from keras_tfm.generation import generate  # generation builds on models

    check_seq2seq(model)
    if not bos_id:
        raise ValueError(f"`bos_id` must be a non-zero id (0 is padding); received {bos_id!r}.")
    ids = np.asarray(encoder_token_ids, dtype="int32")
    if ids.ndim != 2:
        raise ValueError(f"`encoder_token_ids` must have shape (batch, length); received {ids.shape}.")
    parts = [
        generate(model, ids[i : i + batch_size], max_length, bos_id=bos_id, eos_id=eos_id)
        for i in range(0, len(ids), batch_size)
    ]
    return np.concatenate(parts, axis=0).astype("int32")


def seq2seq_num_params(preset=None, **options):
    """Analytic parameter count of `seq2seq(preset, **options)` for the default
    layout options (biases, shared tied or untied embeddings; sinusoidal or
    attention-side positions without weights; learned positions add
    max_length·d per embedding), without building the model."""
    o = get_preset("seq2seq", preset) if preset else {}
    o.update({k: v for k, v in options.items() if v is not None})
    d, ff = o["d_model"], o.get("d_ff") or 4 * o["d_model"]
    n_enc = o.get("num_encoder_layers") or o["num_layers"]
    n_dec = o.get("num_decoder_layers") or o["num_layers"]
    src = o.get("source_vocabulary_size") or o.get("vocabulary_size")
    tgt = o.get("target_vocabulary_size") or o.get("vocabulary_size")
    shared = options.get("share_embeddings")
    if shared is None:  # same rule as `seq2seq`
        separate = options.get("source_vocabulary_size") or options.get("target_vocabulary_size")
        shared = src == tgt and not (separate and options.get("vocabulary_size") is None)
    attention = 4 * (d * d + d)
    norm = 2 * d
    ffn = 2 * d * ff + ff + d
    enc_layer = attention + norm + ffn + norm
    dec_layer = enc_layer + attention + norm
    embeddings = src * d if shared else (src + tgt) * d
    if o.get("position") == "learned":
        embeddings += o["max_length"] * d * (1 if shared else 2)
    total = embeddings + n_enc * enc_layer + n_dec * dec_layer
    if o.get("norm_first"):
        total += 2 * norm
    if o.get("tie_embeddings") is False:
        total += tgt * d
    return int(total)


__all__ = [
    "Seq2Seq",
    "seq2seq",
    "seq2seq_layer_names",
    "seq2seq_encoder",
    "seq2seq_greedy_decode",
    "seq2seq_num_params",
]
