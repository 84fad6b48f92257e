"""BERT (Devlin et al. 2019) encoder: the published architecture, weight for weight.

    e   = E_tok[token] + E_pos[position] + E_seg[segment]
    x_0 = Dropout(LN(e))                                  ε = 1e-12
    x_i = LN(x + Dropout(FFN(LN(x + Dropout(MHA(x))))))   post-norm, exact-erf GELU
    sequence_output = x_L
    pooled_output   = tanh(x_L[:, 0] W_p + b_p)           ([CLS] pooler)

`bert_encoder(...)` (the builder, with presets) returns a `BertEncoder`. Inputs
(dict): `token_ids`, `segment_ids`, `padding_mask` (int32 (B, T), padding_mask
1 = real token). Outputs (dict): `sequence_output` (B, T, d), `pooled_output`
(B, d). The heads (masked LM, sequence and token classifiers) are in
`keras_tfm.models.bert_heads`, the checkpoint mapping in
`keras_tfm.models.bert_weights`.
"""

import keras

from keras_tfm.checks import check_bool
from keras_tfm.layers.embeddings import TokenAndPositionEmbedding
from keras_tfm.layers.initializers import clone_initializers
from keras_tfm.layers.transformer_block import TransformerBlock
from keras_tfm.models._common import (
    block_kwargs,
    check_options,
    initializer,
    preset_sizes,
    resolve_sizes,
    split_position,
    truncated_normal,
)
from keras_tfm.models.base import TransformerModel
from keras_tfm.models.heads import SequencePooling

BERT_REQUIRED = ("vocabulary_size", "max_length", "num_layers", "num_heads", "d_model")


@keras.saving.register_keras_serializable(package="keras_tfm")
class BertEncoder(TransformerModel):
    """The BERT encoder (published architecture by default).

    Args:
        vocabulary_size, max_length, num_layers, num_heads, d_model: sizes.
        num_segments: number of segment (token type) ids (2 in BERT).
        d_ff: FFN width (default 4·d_model). dropout: residual/FFN/embedding.
        attention_dropout: defaults to `dropout`.
        position: "learned" (BERT), "sinusoidal", "rope", "alibi",
            "relative" or None.
        norm_first: post-norm (False, BERT) or pre-norm (adds `final_norm`).
        activation: "gelu" (exact erf, BERT), "gelu_tanh", "relu", "silu".
        layer_norm_epsilon: ε of every LayerNorm (1e-12 in BERT).
        use_bias, key_dim, attention_impl, attention_options: block options.
        embeddings_initializer, kernel_initializer: default truncated
            N(0, 0.02) (BERT).
        dtype: dtype policy of every layer.
        name: model name.

    Attributes:
        embedding: the `TokenAndPositionEmbedding` (token + position).
        token_embedding: its `TokenEmbedding` (`embeddings` (V, d)).
        position_embedding: its position layer, or None.
        segment_embedding: `keras.layers.Embedding` (S, d).
        embedding_norm, embedding_dropout: LayerNorm and Dropout of the embedding.
        blocks: list of `TransformerBlock`s (`encoder_blocks` is the same).
        final_norm: LayerNorm after the blocks (pre-norm only) or None.
        pooler: the tanh `Dense` on [CLS] (`pooled_output`).
        vocabulary_size, max_length, num_segments, num_layers, num_heads,
        d_model, head_dim, dropout: sizes.
        config: the constructor arguments (dict).
    """

    def __init__(
        self,
        vocabulary_size,
        max_length,
        num_layers,
        num_heads,
        d_model,
        num_segments=2,
        d_ff=None,
        dropout=0.0,
        attention_dropout=None,
        position="learned",
        norm_first=False,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        use_bias=True,
        key_dim=None,
        attention_impl="auto",
        attention_options=None,
        embeddings_initializer=None,
        kernel_initializer=None,
        dtype=None,
        name="bert",
        **kwargs,
    ):
        sizes = dict(
            vocabulary_size=vocabulary_size,
            max_length=max_length,
            num_segments=2 if num_segments is None else num_segments,
            num_layers=num_layers,
            num_heads=num_heads,
            d_model=d_model,
            d_ff=d_ff,
            dropout=dropout,
        )
        o = resolve_sizes("bert", None, sizes, required=BERT_REQUIRED)
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
            kernel_initializer=initializer(kernel_initializer, truncated_normal(0.02), "blocks"),
        )
        blocks_kwargs = block_kwargs(o, attention_position, dtype)
        d, eps = o["d_model"], o["layer_norm_epsilon"]

        # === Layers ===
        embedding = TokenAndPositionEmbedding(
            o["vocabulary_size"],
            d,
            max_length=o["max_length"],
            position=embedding_position,
            scale=False,
            mask_zero=False,
            embeddings_initializer=initializer(embeddings_initializer, truncated_normal(0.02), "embedding"),
            dtype=dtype,
            name="embedding",
        )
        segment_embedding = keras.layers.Embedding(
            o["num_segments"],
            d,
            embeddings_initializer=initializer(
                embeddings_initializer, truncated_normal(0.02), "segment_embedding"
            ),
            dtype=dtype,
            name="segment_embedding",
        )
        embedding_add = keras.layers.Add(dtype=dtype, name="embedding_add")
        embedding_norm = keras.layers.LayerNormalization(epsilon=eps, dtype=dtype, name="embedding_norm")
        embedding_dropout = keras.layers.Dropout(o["dropout"], dtype=dtype, name="embedding_dropout")
        blocks = [
            TransformerBlock(
                causal=False,
                cross_attention=False,
                name=f"encoder_block_{i}",
                **clone_initializers(blocks_kwargs, i),
            )
            for i in range(o["num_layers"])
        ]
        final_norm = None
        if o["norm_first"]:
            final_norm = keras.layers.LayerNormalization(epsilon=eps, dtype=dtype, name="final_norm")
        cls_token = SequencePooling("cls", dtype=dtype, name="cls_token")
        pooler = keras.layers.Dense(
            d,
            activation="tanh",
            kernel_initializer=initializer(kernel_initializer, truncated_normal(0.02), "pooler"),
            dtype=dtype,
            name="pooler",
        )

        # === Functional graph ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        x = embedding_add([embedding(token_ids), segment_embedding(segment_ids)])
        x = embedding_dropout(embedding_norm(x))
        for block in blocks:
            x = block(x, padding_mask=padding_mask)
        if final_norm is not None:
            x = final_norm(x)
        pooled = pooler(cls_token(x))
        inputs = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        config = dict(
            o,
            position=position,
            kernel_initializer=kernel_initializer,
            embeddings_initializer=embeddings_initializer,
            dtype=dtype,
        )
        self._init_model(inputs, {"sequence_output": x, "pooled_output": pooled}, name, config, **kwargs)

        # === Parts ===
        self.embedding = embedding
        self.token_embedding = embedding.token_embedding
        self.position_embedding = embedding.position_embedding
        self.segment_embedding = segment_embedding
        self.embedding_add = embedding_add
        self.embedding_norm = embedding_norm
        self.embedding_dropout = embedding_dropout
        self.blocks = blocks
        self.final_norm = final_norm
        self.cls_token = cls_token
        self.pooler = pooler
        self.vocabulary_size = o["vocabulary_size"]
        self.max_length = o["max_length"]
        self.num_segments = o["num_segments"]
        self.num_layers = o["num_layers"]
        self.num_heads = o["num_heads"]
        self.d_model = d
        self.head_dim = key_dim or d // o["num_heads"]
        self.dropout = o["dropout"]
        self.activation = activation
        self.layer_norm_epsilon = eps

    @property
    def encoder_blocks(self):
        """The `TransformerBlock`s (same list as `blocks`)."""
        return self.blocks

    def embed(self, token_ids, segment_ids, positions=None):
        """LN(E_tok[token] + E_pos[position] + E_seg[segment]) (no dropout)."""
        x = self.embedding_add(
            [self.embedding(token_ids, positions=positions), self.segment_embedding(segment_ids)]
        )
        return self.embedding_norm(x)


def bert_encoder(
    preset=None,
    *,
    vocabulary_size=None,
    max_length=None,
    num_segments=None,
    num_layers=None,
    num_heads=None,
    d_model=None,
    d_ff=None,
    dropout=None,
    attention_dropout=None,
    position="learned",
    norm_first=False,
    activation="gelu",
    layer_norm_epsilon=1e-12,
    use_bias=True,
    key_dim=None,
    attention_impl="auto",
    attention_options=None,
    embeddings_initializer=None,
    kernel_initializer=None,
    dtype=None,
    name="bert",
):
    """Builds the BERT encoder (published architecture by default).

    Args:
        preset: None or one of `list_presets("bert")` ("tiny", "bert_base",
            "bert_large"); explicit sizes override the preset's.
        vocabulary_size, max_length, num_layers, num_heads, d_model: sizes.
        num_segments: number of segment (token type) ids (preset or 2).
        Other options: see `BertEncoder` (dropout: preset or 0).

    Returns:
        A `BertEncoder` (functional `keras.Model`): dict inputs {"token_ids",
        "segment_ids", "padding_mask"} → dict outputs {"sequence_output",
        "pooled_output"}.
    """
    sizes = preset_sizes(
        "bert",
        preset,
        dict(
            vocabulary_size=vocabulary_size,
            max_length=max_length,
            num_segments=num_segments,
            num_layers=num_layers,
            num_heads=num_heads,
            d_model=d_model,
            d_ff=d_ff,
            dropout=dropout,
        ),
        required=BERT_REQUIRED,
    )
    return BertEncoder(
        **sizes,
        attention_dropout=attention_dropout,
        position=position,
        norm_first=norm_first,
        activation=activation,
        layer_norm_epsilon=layer_norm_epsilon,
        use_bias=use_bias,
        key_dim=key_dim,
        attention_impl=attention_impl,
        attention_options=attention_options,
        embeddings_initializer=embeddings_initializer,
        kernel_initializer=kernel_initializer,
        dtype=dtype,
        name=name,
    )
