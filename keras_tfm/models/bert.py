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
`keras_tfm.models.bert_tasks`; HuggingFace checkpoints load with
`keras_tfm.checkpoints.from_pretrained`.
"""

import keras

from keras_tfm.checks import check_bool, check_choice, check_rate
from keras_tfm.layers import ATTENTION_IMPLS
from keras_tfm.layers.feed_forward import ACTIVATIONS
from keras_tfm.layers.transformer_block import NORMS
from keras_tfm.models.base import TransformerModel
from keras_tfm.models.heads import SequencePooling
from keras_tfm.models.layout import bind_sizes, model_sizes
from keras_tfm.models.parts import (
    check_epsilon,
    check_head_sizes,
    check_required,
    check_size,
    initializer,
    make_blocks,
    make_embedding,
    make_norm,
    split_position,
    truncated_normal,
)
from keras_tfm.models.presets import preset_options


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
        activation: "gelu" (exact erf, BERT), "gelu_tanh", "relu", "silu",
            or the gated "swiglu" / "geglu".
        layer_norm_epsilon: ε of every norm (1e-12 in BERT).
        norm: "layer" (LayerNorm, BERT) or "rms" (RMSNorm, float32
            statistics): every norm of the encoder (embedding, blocks, final).
        use_bias: biases of the attention/FFN projections (the pooler keeps
            its bias).
        num_key_value_heads: grouped-query attention (see `GPT`).
        rope_max_wavelength: RoPE base with `position="rope"`.
        key_dim, attention_impl, attention_options: block options.
        embeddings_initializer, kernel_initializer: default truncated
            N(0, 0.02) (BERT).
        dtype: dtype policy of every layer.
        name: model name.

    Attributes:
        embedding: the `TokenAndPositionEmbedding` (token + position).
        token_embedding: its `TokenEmbedding` (`embeddings` (V, d)).
        position_embedding: its position layer, or None.
        segment_embedding: `keras.layers.Embedding` (S, d).
        embedding_norm, embedding_dropout: norm and Dropout of the embedding.
        blocks: list of `TransformerBlock`s (`encoder_blocks` is the same).
        final_norm: norm after the blocks (pre-norm only) or None.
        pooler: the tanh `Dense` on [CLS] (`pooled_output`).
        vocabulary_size, max_length, num_segments, num_layers, num_heads,
        num_key_value_heads, d_model, head_dim, dropout: sizes.
        activation, layer_norm_epsilon, norm: the options the heads reuse.
        config: the constructor arguments (dict).
    """

    preset_family = "bert"  # from_preset: bert_encoder(name) for a built-in name
    checkpoint_task = "encoder"  # from_preset: the bare encoder of any BERT checkpoint

    def __init__(
        self,
        vocabulary_size: int,
        max_length: int,
        num_layers: int,
        num_heads: int,
        d_model: int,
        num_segments: int = 2,
        d_ff: int | None = None,
        dropout: float = 0.0,
        attention_dropout: float | None = None,
        position: str | None = "learned",
        norm_first: bool = False,
        activation: str = "gelu",
        layer_norm_epsilon: float = 1e-12,
        norm: str = "layer",
        use_bias: bool = True,
        key_dim: int | None = None,
        num_key_value_heads: int | None = None,
        rope_max_wavelength: float = 10000.0,
        attention_impl: str = "auto",
        attention_options: dict | None = None,
        embeddings_initializer=None,
        kernel_initializer=None,
        dtype=None,
        name: str = "bert",
        **kwargs,
    ):
        # === Arguments ===
        check_required(
            "bert",
            vocabulary_size=vocabulary_size,
            max_length=max_length,
            num_layers=num_layers,
            num_heads=num_heads,
            d_model=d_model,
        )
        vocabulary_size = check_size("vocabulary_size", vocabulary_size)
        max_length = check_size("max_length", max_length)
        num_segments = check_size("num_segments", 2 if num_segments is None else num_segments)
        num_layers = check_size("num_layers", num_layers)
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
        # Before any variable exists: a get_layout_map map of the current distribution checks these.
        sizes = bind_sizes(model_sizes(d_model, num_heads, d_ff, num_key_value_heads, vocabulary_size))

        # === Layers ===
        block_initializer = initializer(kernel_initializer, truncated_normal(0.02), "blocks")
        embedding = make_embedding(
            vocabulary_size=vocabulary_size,
            d_model=d_model,
            max_length=max_length,
            position=embedding_position,
            embeddings_initializer=initializer(embeddings_initializer, truncated_normal(0.02), "embedding"),
            dtype=dtype,
            name="embedding",
        )
        segment_embedding = keras.layers.Embedding(
            num_segments,
            d_model,
            embeddings_initializer=initializer(
                embeddings_initializer, truncated_normal(0.02), "segment_embedding"
            ),
            dtype=dtype,
            name="segment_embedding",
        )
        embedding_add = keras.layers.Add(dtype=dtype, name="embedding_add")
        embedding_norm = make_norm(norm, layer_norm_epsilon, dtype, "embedding_norm")
        embedding_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="embedding_dropout")
        blocks = make_blocks(
            "encoder_block",
            num_layers,
            causal=False,
            cross_attention=False,
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
        final_norm = make_norm(norm, layer_norm_epsilon, dtype, "final_norm") if norm_first else None
        cls_token = SequencePooling("cls", dtype=dtype, name="cls_token")
        pooler = keras.layers.Dense(
            d_model,
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
        outputs = {"sequence_output": x, "pooled_output": pooled}

        # === Config: the constructor arguments, checked (get_config) ===
        config = dict(
            vocabulary_size=vocabulary_size,
            max_length=max_length,
            num_layers=num_layers,
            num_heads=num_heads,
            d_model=d_model,
            num_segments=num_segments,
            d_ff=d_ff,
            dropout=dropout,
            attention_dropout=attention_dropout,
            position=position,
            norm_first=norm_first,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            norm=norm,
            use_bias=use_bias,
            key_dim=key_dim,
            num_key_value_heads=num_key_value_heads,
            rope_max_wavelength=rope_max_wavelength,
            attention_impl=attention_impl,
            attention_options=attention_options,
            embeddings_initializer=embeddings_initializer,
            kernel_initializer=kernel_initializer,
            dtype=dtype,
        )
        self._init_model(inputs, outputs, name, config, layout_sizes=sizes, **kwargs)

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
        self.vocabulary_size = vocabulary_size
        self.max_length = max_length
        self.num_segments = num_segments
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.num_key_value_heads = num_key_value_heads or num_heads
        self.d_model = d_model
        self.head_dim = key_dim or d_model // num_heads
        self.dropout = dropout
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.norm = norm

    @property
    def encoder_blocks(self) -> list:
        """The `TransformerBlock`s (same list as `blocks`)."""
        return self.blocks

    def embed(self, token_ids, segment_ids, positions=None):
        """LN(E_tok[token] + E_pos[position] + E_seg[segment]) (no dropout)."""
        x = self.embedding_add(
            [self.embedding(token_ids, positions=positions), self.segment_embedding(segment_ids)]
        )
        return self.embedding_norm(x)


def bert_encoder(preset: str | None = None, **options) -> BertEncoder:
    """Builds the BERT encoder (published architecture by default).

    Args:
        preset: None or one of `list_presets("bert")` ("tiny", "bert_base",
            "bert_large"); explicit arguments override the preset's.
        **options: the arguments of `BertEncoder` (sizes required unless the
            preset gives them; a size given as None is not given;
            `num_segments`: preset or 2; `dropout`: preset or 0).

    Returns:
        A `BertEncoder` (functional `keras.Model`): dict inputs {"token_ids",
        "segment_ids", "padding_mask"} → dict outputs {"sequence_output",
        "pooled_output"}.

    Raises:
        ValueError: unknown preset or option value, missing or inconsistent
            sizes. TypeError: unknown keyword.
    """
    return BertEncoder(**preset_options(BertEncoder, "bert", preset, options))
