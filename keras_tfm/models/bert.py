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
`BertEncoder.from_preset` (or `keras_tfm.models.from_pretrained`).
"""

import keras

from keras_tfm.models.base import TransformerModel
from keras_tfm.models.heads import SequencePooling
from keras_tfm.models.options import ModelOptions, arguments
from keras_tfm.models.parts import initializer, truncated_normal
from keras_tfm.models.presets import preset_options

#: The sizes a BERT encoder needs (given, or from a preset).
BERT_SIZES = ("vocabulary_size", "max_length", "num_layers", "num_heads", "d_model")
#: Its inputs, int32 (batch, T) each.
BERT_INPUTS = ("token_ids", "segment_ids", "padding_mask")


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
        num_key_value_heads, d_model, key_dim, dropout: sizes.
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
        o = ModelOptions("bert", arguments(locals()), required=BERT_SIZES)
        sizes = o.layout_sizes(o.vocabulary_size)

        # === Layers ===
        embedding = o.embedding(
            o.vocabulary_size,
            initializer(embeddings_initializer, truncated_normal(0.02), "embedding"),
            "embedding",
        )
        segment_embedding = keras.layers.Embedding(
            o.num_segments,
            o.d_model,
            embeddings_initializer=initializer(
                embeddings_initializer, truncated_normal(0.02), "segment_embedding"
            ),
            dtype=dtype,
            name="segment_embedding",
        )
        embedding_add = keras.layers.Add(dtype=dtype, name="embedding_add")
        embedding_norm = o.make_norm("embedding_norm")
        embedding_dropout = keras.layers.Dropout(o.dropout, dtype=dtype, name="embedding_dropout")
        block_initializer = initializer(kernel_initializer, truncated_normal(0.02), "blocks")
        blocks = o.blocks("encoder_block", o.num_layers, causal=False, kernel_initializer=block_initializer)
        final_norm = o.make_norm("final_norm") if o.norm_first else None
        cls_token = SequencePooling("cls", dtype=dtype, name="cls_token")
        pooler = keras.layers.Dense(
            o.d_model,
            activation="tanh",
            kernel_initializer=initializer(kernel_initializer, truncated_normal(0.02), "pooler"),
            dtype=dtype,
            name="pooler",
        )

        # === Functional graph ===
        inputs = {n: keras.Input(shape=(None,), dtype="int32", name=n) for n in BERT_INPUTS}
        x = embedding_add([embedding(inputs["token_ids"]), segment_embedding(inputs["segment_ids"])])
        x = embedding_dropout(embedding_norm(x))
        for block in blocks:
            x = block(x, padding_mask=inputs["padding_mask"])
        x = x if final_norm is None else final_norm(x)
        outputs = {"sequence_output": x, "pooled_output": pooler(cls_token(x))}
        self._init_model(inputs, outputs, name, o.config, sizes, **kwargs)

        # === Parts ===
        self._set_parts(
            o.sizes("num_segments", "dropout", "activation", "layer_norm_epsilon", "norm"),
            embedding=embedding,
            token_embedding=embedding.token_embedding,
            position_embedding=embedding.position_embedding,
            segment_embedding=segment_embedding,
            embedding_add=embedding_add,
            embedding_norm=embedding_norm,
            embedding_dropout=embedding_dropout,
            blocks=blocks,
            final_norm=final_norm,
            cls_token=cls_token,
            pooler=pooler,
        )

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
