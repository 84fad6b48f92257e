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
`keras_tfm.models.bert_tasks`, the checkpoint mapping in
`keras_tfm.models.bert_weights`.
"""

import keras

from keras_tfm.layers.initializers import clone_initializers
from keras_tfm.layers.transformer_block import TransformerBlock
from keras_tfm.models.base import TransformerModel
from keras_tfm.models.heads import SequencePooling
from keras_tfm.models.parts import (
    builder_signature,
    initializer,
    make_embedding,
    make_final_norm,
    make_norm,
    preset_options,
    resolve_architecture,
    set_size_attributes,
    truncated_normal,
)
from keras_tfm.models.presets import BERT_SIZES, SIZES

BERT_REQUIRED = SIZES[:5]


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
        norm="layer",
        use_bias=True,
        key_dim=None,
        num_key_value_heads=None,
        rope_max_wavelength=10000.0,
        attention_impl="auto",
        attention_options=None,
        embeddings_initializer=None,
        kernel_initializer=None,
        dtype=None,
        name="bert",
        **kwargs,
    ):
        num_segments = 2 if num_segments is None else num_segments
        o, embedding_position, blocks_kwargs = resolve_architecture(
            "bert", locals(), BERT_REQUIRED, truncated_normal(0.02)
        )
        d, eps, dtype = o["d_model"], o["layer_norm_epsilon"], o["dtype"]

        # === Layers ===
        embedding = make_embedding(
            o, o["vocabulary_size"], embedding_position, truncated_normal(0.02), "embedding"
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
        embedding_norm = make_norm(o["norm"], eps, dtype, "embedding_norm")
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
        final_norm = make_final_norm(o, "final_norm")
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
        self._init_model(inputs, {"sequence_output": x, "pooled_output": pooled}, name, o, **kwargs)

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
        set_size_attributes(
            self, o, ("vocabulary_size", "max_length", "num_segments", "num_layers", "dropout", "activation")
        )
        self.layer_norm_epsilon = eps
        self.norm = o["norm"]

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


def bert_encoder(preset=None, **options):
    """Builds the BERT encoder (published architecture by default).

    Args:
        preset: None or one of `list_presets("bert")` ("tiny", "bert_base",
            "bert_large"); explicit arguments override the preset's.
        **options: the arguments of `BertEncoder` (sizes required unless the
            preset gives them; `num_segments`: preset or 2; `dropout`:
            preset or 0).

    Returns:
        A `BertEncoder` (functional `keras.Model`): dict inputs {"token_ids",
        "segment_ids", "padding_mask"} → dict outputs {"sequence_output",
        "pooled_output"}.
    """
    return BertEncoder(**preset_options(BertEncoder, "bert", preset, options, BERT_SIZES))


bert_encoder.__signature__ = builder_signature(BertEncoder, BERT_SIZES)
