"""GPT-style decoder-only language model (GPT-2 layout by default).

    x_0   = Dropout(E[tokens] + P[positions])                  embedding, embedding_dropout
    x_i   = TransformerBlock_i(x_{i-1}), causal, pre-norm      blocks[i]
    h     = LN(x_L)                       (pre-norm only)      final_norm
    logits = h Eᵀ  (tied)   or   h W (+ b)  (untied)           token_embedding reversed / head

`gpt(...)` (the builder, with presets) returns a `GPT`, a functional
`keras.Model` subclass whose parts are attributes (see `GPT`). The graph's
inputs are `token_ids` (and `padding_mask` with `with_padding_mask=True`), its
layers are named `embedding`, `embedding_dropout`, `decoder_block_{i}`,
`final_norm`, `lm_head` and the float32 output `logits` (B, T, V), as before
the class existed, so `.keras` files of either kind hold the same weights.
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

GPT_SIZES = ("vocabulary_size", "max_length", "num_layers", "num_heads", "d_model", "d_ff", "dropout")
GPT_REQUIRED = ("vocabulary_size", "max_length", "num_layers", "num_heads", "d_model")


def init_caches(batch_size, num_layers, length, num_heads, head_dim, dtype):
    """`num_layers` zero key/value caches `(batch, 2, length, heads, head_dim)`."""
    return [ops.zeros((batch_size, 2, length, num_heads, head_dim), dtype=dtype) for _ in range(num_layers)]


@keras.saving.register_keras_serializable(package="keras_tfm")
class GPT(TransformerModel):
    """Decoder-only causal language model (GPT-2 by default).

        x_0 = Dropout(E[tokens] + P[positions]);  x_i = Block_i(x_{i-1});
        logits = LN(x_L) Eᵀ (tied) or LN(x_L) W (+ b)

    Args:
        vocabulary_size, max_length, num_layers, num_heads, d_model: sizes.
        d_ff: FFN inner width; defaults to 4·d_model.
        dropout: embedding, residual and FFN dropout.
        attention_dropout: dropout on attention weights (defaults to `dropout`).
        position: "learned" (GPT-2), "sinusoidal", "rope", "alibi", "relative"
            or None.
        norm_first: pre-norm (GPT-2, adds `final_norm`) or post-norm.
        activation: FFN activation: "gelu_tanh" (GPT-2), "gelu", "relu", "silu".
        layer_norm_epsilon: LayerNorm ε.
        tie_embeddings: logits = h Eᵀ with the input embedding (GPT-2); else
            an `OutputHead` (`head`).
        use_bias: biases in every attention/FFN projection.
        lm_head_use_bias: bias of the untied head.
        key_dim: per-head size (defaults to d_model / num_heads).
        attention_impl, attention_options: attention core implementation.
        with_padding_mask: add an int `padding_mask` input (1 = real token);
            the inputs are then a dict {"token_ids", "padding_mask"}.
        embeddings_initializer, kernel_initializer: defaults N(0, 0.02).
        dtype: dtype policy of every layer; logits are float32 regardless.
        name: model name.

    Attributes:
        embedding: the `TokenAndPositionEmbedding` (token table + absolute
            positions; `embedding.position` is None for rope/alibi/relative).
        token_embedding: its `TokenEmbedding` (table `embeddings` (V, d)).
        position_embedding: its position layer (`LearnedPositionalEmbedding`
            with `position_embeddings` (P, d), `PositionalEncoding`) or None.
        embedding_dropout: the `Dropout` after the embedding.
        blocks: list of the `TransformerBlock`s (`decoder_blocks` is the same).
        final_norm: the final `LayerNormalization` (pre-norm) or None.
        head: the untied `OutputHead`, or None when tied.
        tie_embeddings: bool.
        vocabulary_size, max_length, num_layers, num_heads, d_model, head_dim.
        cache_dtype: dtype of the decoding caches (None = compute dtype);
            a runtime setting, not saved.
        config: the constructor arguments (dict).
    """

    def __init__(
        self,
        vocabulary_size,
        max_length,
        num_layers,
        num_heads,
        d_model,
        d_ff=None,
        dropout=0.0,
        attention_dropout=None,
        position="learned",
        norm_first=True,
        activation="gelu_tanh",
        layer_norm_epsilon=1e-5,
        tie_embeddings=True,
        use_bias=True,
        lm_head_use_bias=False,
        key_dim=None,
        attention_impl="auto",
        attention_options=None,
        with_padding_mask=False,
        embeddings_initializer=None,
        kernel_initializer=None,
        dtype=None,
        name="gpt",
        **kwargs,
    ):
        sizes = dict(
            vocabulary_size=vocabulary_size,
            max_length=max_length,
            num_layers=num_layers,
            num_heads=num_heads,
            d_model=d_model,
            d_ff=d_ff,
            dropout=dropout,
        )
        o = resolve_sizes("gpt", None, sizes, required=GPT_REQUIRED)
        check_options(activation, attention_impl, layer_norm_epsilon, o["dropout"], attention_dropout)
        embedding_position, attention_position = split_position(position)
        o.update(
            attention_dropout=attention_dropout,
            norm_first=check_bool("norm_first", norm_first),
            activation=activation,
            layer_norm_epsilon=float(layer_norm_epsilon),
            use_bias=check_bool("use_bias", use_bias),
            key_dim=key_dim,
            attention_impl=attention_impl,
            attention_options=attention_options,
            kernel_initializer=initializer(kernel_initializer, normal(0.02), "blocks"),
        )
        blocks_kwargs = block_kwargs(o, attention_position, dtype)

        # === Layers ===
        embedding = TokenAndPositionEmbedding(
            o["vocabulary_size"],
            o["d_model"],
            max_length=o["max_length"],
            position=embedding_position,
            scale=False,
            mask_zero=False,
            embeddings_initializer=initializer(embeddings_initializer, normal(0.02), "embedding"),
            dtype=dtype,
            name="embedding",
        )
        embedding_dropout = keras.layers.Dropout(o["dropout"], dtype=dtype, name="embedding_dropout")
        blocks = [
            TransformerBlock(
                causal=True,
                cross_attention=False,
                name=f"decoder_block_{i}",
                **clone_initializers(blocks_kwargs, i),
            )
            for i in range(o["num_layers"])
        ]
        final_norm = None
        if o["norm_first"]:
            final_norm = keras.layers.LayerNormalization(
                epsilon=o["layer_norm_epsilon"], dtype=dtype, name="final_norm"
            )
        head = None
        if not tie_embeddings:
            head = OutputHead(
                o["vocabulary_size"],
                use_bias=lm_head_use_bias,
                kernel_initializer=initializer(kernel_initializer, normal(0.02), "lm_head"),
                dtype=dtype,
                name="lm_head",
            )

        # === Functional graph ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        padding_mask = None
        inputs = token_ids
        if with_padding_mask:
            padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
            inputs = {"token_ids": token_ids, "padding_mask": padding_mask}
        x = embedding_dropout(embedding(token_ids))
        for block in blocks:
            x = block(x, padding_mask=padding_mask) if padding_mask is not None else block(x)
        if final_norm is not None:
            x = final_norm(x)
        logits = embedding(x, reverse=True) if head is None else head(x)
        logits = keras.layers.Identity(dtype="float32", name="logits")(logits)
        config = dict(
            o,
            position=position,
            kernel_initializer=kernel_initializer,
            tie_embeddings=check_bool("tie_embeddings", tie_embeddings),
            lm_head_use_bias=check_bool("lm_head_use_bias", lm_head_use_bias),
            with_padding_mask=check_bool("with_padding_mask", with_padding_mask),
            embeddings_initializer=embeddings_initializer,
            dtype=dtype,
        )
        self._init_model(inputs, logits, name, config, **kwargs)

        # === Parts ===
        self.embedding = embedding
        self.token_embedding = embedding.token_embedding
        self.position_embedding = embedding.position_embedding
        self.embedding_dropout = embedding_dropout
        self.blocks = blocks
        self.final_norm = final_norm
        self.head = head
        self.tie_embeddings = check_bool("tie_embeddings", tie_embeddings)
        self.vocabulary_size = o["vocabulary_size"]
        self.max_length = o["max_length"]
        self.num_layers = o["num_layers"]
        self.num_heads = o["num_heads"]
        self.d_model = o["d_model"]
        self.head_dim = key_dim or o["d_model"] // o["num_heads"]
        # Key/value cache dtype of `init_caches` (None: the compute dtype); set
        # `model.cache_dtype = "bfloat16"` to decode with a half-size cache.
        self.cache_dtype = None

    @property
    def decoder_blocks(self):
        """The `TransformerBlock`s (same list as `blocks`)."""
        return self.blocks

    # ------------------------------------------------------------ operations
    def embed(self, token_ids, positions=None):
        """Token + absolute position embedding (no dropout).

        Args:
            token_ids: int `(batch, T)`.
            positions: optional int `(batch, T)` position of every token
                (default 0..T-1); e.g. per-row offsets of left-padded prompts.

        Returns:
            `(batch, T, d_model)` in the compute dtype.
        """
        return self.embedding(token_ids, positions=positions)

    def compute_logits(self, hidden_states):
        """Float32 logits `(..., V)` of the last block's output (final norm, then
        the tied embedding or the head)."""
        h = hidden_states if self.final_norm is None else self.final_norm(hidden_states)
        logits = self.token_embedding(h, reverse=True) if self.head is None else self.head(h)
        return ops.cast(logits, "float32")

    def init_caches(self, batch_size, length, dtype=None):
        """One zero key/value cache `(batch, 2, length, heads, head_dim)` per block.

        `dtype` (default: the `cache_dtype` attribute, else the blocks' compute
        dtype): e.g. "bfloat16" halves the bytes a decoding step reads; keys
        and values are rounded when written, attention runs in the compute dtype.
        """
        dtype = dtype or self.cache_dtype or self.blocks[0].compute_dtype
        if dtype == "bfloat16" and self.blocks[0].compute_dtype != "bfloat16":
            dtype = "uint16"  # bfloat16 bits: Keras would cast a bfloat16 cache to the compute dtype
        return init_caches(batch_size, self.num_layers, length, self.num_heads, self.head_dim, dtype)

    def call_with_cache(
        self, token_ids, caches, cache_index, positions=None, padding_mask=None, last_only=False
    ):
        """Runs `token_ids` at cache slots `cache_index .. cache_index + T - 1`.

        Args:
            token_ids: int32 `(batch, T)`.
            caches: list from `init_caches` (one per block).
            cache_index: int32 scalar, first slot written.
            positions: optional int32 `(batch, T)` true positions (absolute
                position embeddings); default `cache_index + 0..T-1`.
            padding_mask: optional bool `(batch, cache_slots)`, True = may attend.
            last_only: compute the logits of the last position only.

        Returns:
            `(logits, caches)`: float32 `(batch, T or 1, V)` and the updated caches.
        """
        if positions is None:
            length = ops.shape(token_ids)[1]
            positions = ops.cast(cache_index, "int32") + ops.arange(length, dtype="int32")[None, :]
            positions = ops.broadcast_to(positions, ops.shape(token_ids))
        x = self.embed(token_ids, positions)
        new_caches = []
        for block, cache in zip(self.blocks, caches):
            x, cache = block(
                x, padding_mask=padding_mask, cache=cache, cache_index=cache_index, training=False
            )
            new_caches.append(cache)
        if last_only:
            x = x[:, -1:, :]
        return self.compute_logits(x), new_caches


def gpt(
    preset=None,
    *,
    vocabulary_size=None,
    max_length=None,
    num_layers=None,
    num_heads=None,
    d_model=None,
    d_ff=None,
    dropout=None,
    attention_dropout=None,
    position="learned",
    norm_first=True,
    activation="gelu_tanh",
    layer_norm_epsilon=1e-5,
    tie_embeddings=True,
    use_bias=True,
    lm_head_use_bias=False,
    key_dim=None,
    attention_impl="auto",
    attention_options=None,
    with_padding_mask=False,
    embeddings_initializer=None,
    kernel_initializer=None,
    dtype=None,
    name="gpt",
):
    """Builds a decoder-only causal language model.

    Args:
        preset: None or one of `list_presets("gpt")` ("tiny", "gpt2_small",
            "gpt2_medium"); explicit sizes override the preset's.
        vocabulary_size, max_length, num_layers, num_heads, d_model: sizes
            (required unless a preset gives them).
        d_ff, dropout, ...: see `GPT` (dropout: preset or 0).

    Returns:
        A `GPT` (functional `keras.Model`) mapping int32 `token_ids` (B, T) to
        float32 `logits` (B, T, V).

    Raises:
        ValueError: unknown preset/position/activation, missing or inconsistent
            sizes. TypeError: unknown keyword.
    """
    sizes = preset_sizes(
        "gpt",
        preset,
        dict(
            vocabulary_size=vocabulary_size,
            max_length=max_length,
            num_layers=num_layers,
            num_heads=num_heads,
            d_model=d_model,
            d_ff=d_ff,
            dropout=dropout,
        ),
        required=GPT_REQUIRED,
    )
    return GPT(
        **sizes,
        attention_dropout=attention_dropout,
        position=position,
        norm_first=norm_first,
        activation=activation,
        layer_norm_epsilon=layer_norm_epsilon,
        tie_embeddings=tie_embeddings,
        use_bias=use_bias,
        lm_head_use_bias=lm_head_use_bias,
        key_dim=key_dim,
        attention_impl=attention_impl,
        attention_options=attention_options,
        with_padding_mask=with_padding_mask,
        embeddings_initializer=embeddings_initializer,
        kernel_initializer=kernel_initializer,
        dtype=dtype,
        name=name,
    )
