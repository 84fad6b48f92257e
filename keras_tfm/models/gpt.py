"""GPT-style decoder-only language model (GPT-2 layout by default).

    x_0   = Dropout(E[tokens] + P[positions])                  "embedding", "embedding_dropout"
    x_i   = TransformerBlock_i(x_{i-1}), causal, pre-norm      "decoder_block_{i}"
    h     = LN(x_L)                       (pre-norm only)      "final_norm"
    logits = h Eᵀ  (tied)   or   h W (+ b)  (untied)           "embedding" reused / "lm_head"

Layer-name contract (relied on by the cached generation loop and the
SavedModel export; see `gpt`): inputs `token_ids` (and `padding_mask` with
`with_padding_mask=True`), layers `embedding` (a `TokenAndPositionEmbedding`;
`position` is None for rope/alibi/relative/none, the scheme then
lives in every block), `embedding_dropout`, `decoder_block_{i}` for
i = 0..num_layers-1, `final_norm` (only when `norm_first`), `lm_head` (an
`OutputHead`, only when untied) and the output `logits` (float32, (B, T, V)).
For a tied model, `model.get_layer("embedding").token_embedding(h,
reverse=True)` computes the logits. All sizes are in the layers' configs:
`embedding.vocabulary_size/d_model/max_length/position`,
`decoder_block_0.get_config()` (num_heads, d_ff, key_dim, position, ...).
"""

import keras

from keras_tfm.layers.embeddings import TokenAndPositionEmbedding
from keras_tfm.layers.initializers import clone_initializers
from keras_tfm.layers.output_head import OutputHead
from keras_tfm.layers.transformer_block import TransformerBlock
from keras_tfm.models._common import (
    block_kwargs,
    check_options,
    initializer,
    normal,
    resolve_sizes,
    split_position,
)


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
        d_ff: FFN inner width; defaults to 4·d_model.
        dropout: embedding, residual and FFN dropout (preset or 0).
        attention_dropout: dropout on attention weights (defaults to `dropout`).
        position: "learned" (GPT-2), "sinusoidal", "rope", "alibi", "relative"
            or None (no position information).
        norm_first: pre-norm (GPT-2) if True, post-norm if False. A final
            LayerNorm `final_norm` is added with pre-norm.
        activation: FFN activation: "gelu_tanh" (GPT-2), "gelu", "relu", "silu".
        layer_norm_epsilon: LayerNorm ε.
        tie_embeddings: logits = h Eᵀ with the input embedding (GPT-2); else an
            `OutputHead` "lm_head".
        use_bias: biases in every attention/FFN projection.
        lm_head_use_bias: bias of the untied head.
        key_dim: per-head size (defaults to d_model / num_heads).
        attention_impl, attention_options: attention core implementation.
        with_padding_mask: add an int `padding_mask` input (1 = real token) so
            left/right padded batches can be scored; the model inputs are then
            a dict {"token_ids", "padding_mask"}.
        embeddings_initializer, kernel_initializer: defaults N(0, 0.02) (GPT-2).
        dtype: dtype policy of every layer (e.g. "mixed_bfloat16"); logits are
            float32 regardless.
        name: model name.

    Returns:
        A functional `keras.Model` mapping int32 `token_ids` (B, T) to float32
        `logits` (B, T, V).

    Raises:
        ValueError: unknown preset/position/activation, missing or inconsistent
            sizes. TypeError: unknown keyword.
    """
    o = resolve_sizes(
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
        required=("vocabulary_size", "max_length", "num_layers", "num_heads", "d_model"),
    )
    check_options(activation, attention_impl, layer_norm_epsilon, o["dropout"], attention_dropout)
    embedding_position, attention_position = split_position(position)
    o.update(
        attention_dropout=attention_dropout,
        norm_first=bool(norm_first),
        activation=activation,
        layer_norm_epsilon=float(layer_norm_epsilon),
        use_bias=bool(use_bias),
        key_dim=key_dim,
        attention_impl=attention_impl,
        attention_options=attention_options,
        kernel_initializer=initializer(kernel_initializer, normal(0.02)),
    )
    blocks = block_kwargs(o, attention_position, dtype)

    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    padding_mask = None
    inputs = token_ids
    if with_padding_mask:
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        inputs = {"token_ids": token_ids, "padding_mask": padding_mask}

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
    x = embedding(token_ids)
    x = keras.layers.Dropout(o["dropout"], dtype=dtype, name="embedding_dropout")(x)
    for i in range(o["num_layers"]):
        block = TransformerBlock(
            causal=True, cross_attention=False, name=f"decoder_block_{i}", **clone_initializers(blocks, i)
        )
        x = block(x, padding_mask=padding_mask) if padding_mask is not None else block(x)
    if o["norm_first"]:
        x = keras.layers.LayerNormalization(epsilon=o["layer_norm_epsilon"], dtype=dtype, name="final_norm")(
            x
        )
    if tie_embeddings:
        logits = embedding(x, reverse=True)
    else:
        logits = OutputHead(
            o["vocabulary_size"],
            use_bias=lm_head_use_bias,
            kernel_initializer=initializer(kernel_initializer, normal(0.02), "lm_head"),
            dtype=dtype,
            name="lm_head",
        )(x)
    logits = keras.layers.Identity(dtype="float32", name="logits")(logits)
    return keras.Model(inputs, logits, name=name)
