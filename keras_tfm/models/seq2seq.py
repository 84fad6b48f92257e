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

Layer-name contract (for cached generation and export): inputs
`encoder_token_ids`, `decoder_token_ids` (int32, (B, T)); layers `embedding`
(shared vocabulary) or `encoder_embedding` + `decoder_embedding`,
`encoder_embedding_dropout`, `decoder_embedding_dropout`,
`encoder_block_{i}`, `decoder_block_{i}` (TransformerBlock with
`cross_attention=True`), `encoder_final_norm` / `decoder_final_norm` (only
when `norm_first`), `lm_head` (only when untied) and the output `logits`
(float32 (B, T_target, V_target)). The embeddings are
`TokenAndPositionEmbedding`s: for a tied model the logits are
`decoder_side_embedding.token_embedding(h, reverse=True)`. Helpers:
`seq2seq_layer_names(model)`, `seq2seq_encoder(model)`,
`seq2seq_greedy_decode(...)` (reference decoding, full recompute).
"""

import keras
import numpy as np
import tensorflow as tf
from keras import ops

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
from keras_tfm.models.presets import get_preset


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
        A functional `keras.Model` with dict inputs {"encoder_token_ids",
        "decoder_token_ids"} and float32 `logits` (B, T_target, V_target).
    """
    shared_vocab_given = vocabulary_size is not None
    o = resolve_sizes(
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
        required=("max_length", "num_heads", "d_model"),
    )
    # --- vocabularies
    v = o["vocabulary_size"]
    src = o["source_vocabulary_size"] or v
    tgt = o["target_vocabulary_size"] or v
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
        share = bool(share_embeddings)
        if share and src != tgt:
            raise ValueError(
                f"share_embeddings=True needs one vocabulary for both sides; received "
                f"source_vocabulary_size={src} and target_vocabulary_size={tgt}."
            )
    # --- depths
    n_enc = o["num_encoder_layers"] or o["num_layers"]
    n_dec = o["num_decoder_layers"] or o["num_layers"]
    if n_enc is None or n_dec is None:
        raise ValueError(
            "Give `num_layers` (or `num_encoder_layers` and `num_decoder_layers`), or a `preset`."
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
        kernel_initializer=initializer(kernel_initializer, "glorot_uniform"),
    )
    blocks = block_kwargs(o, attention_position, dtype)
    d = o["d_model"]

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

    encoder_ids = keras.Input(shape=(None,), dtype="int32", name="encoder_token_ids")
    decoder_ids = keras.Input(shape=(None,), dtype="int32", name="decoder_token_ids")

    # Padding masks travel as Keras implicit masks (mask_zero): the encoder
    # mask reaches self-attention and, as `context_mask`, cross-attention.
    x = encoder_embedding(encoder_ids)
    x = keras.layers.Dropout(o["dropout"], dtype=dtype, name="encoder_embedding_dropout")(x)
    for i in range(n_enc):
        x = TransformerBlock(
            causal=False,
            cross_attention=False,
            name=f"encoder_block_{i}",
            **clone_initializers(blocks, f"encoder_{i}"),
        )(x)
    if o["norm_first"]:
        x = keras.layers.LayerNormalization(
            epsilon=o["layer_norm_epsilon"], dtype=dtype, name="encoder_final_norm"
        )(x)

    y = decoder_embedding(decoder_ids)
    y = keras.layers.Dropout(o["dropout"], dtype=dtype, name="decoder_embedding_dropout")(y)
    for i in range(n_dec):
        y = TransformerBlock(
            causal=True,
            cross_attention=True,
            name=f"decoder_block_{i}",
            **clone_initializers(blocks, f"decoder_{i}"),
        )(y, context=x)
    if o["norm_first"]:
        y = keras.layers.LayerNormalization(
            epsilon=o["layer_norm_epsilon"], dtype=dtype, name="decoder_final_norm"
        )(y)

    if tie_embeddings:
        logits = decoder_embedding(y, reverse=True)
    else:
        logits = OutputHead(
            tgt,
            use_bias=lm_head_use_bias,
            kernel_initializer=initializer(kernel_initializer, "glorot_uniform", "lm_head"),
            dtype=dtype,
            name="lm_head",
        )(y)
    logits = keras.layers.Identity(dtype="float32", name="logits")(logits)
    inputs = {"encoder_token_ids": encoder_ids, "decoder_token_ids": decoder_ids}
    return keras.Model(inputs, logits, name=name)


def seq2seq_layer_names(model):
    """Names of the structural layers of a `seq2seq` model.

    Returns:
        dict with "encoder_embedding", "decoder_embedding" (both "embedding"
        when shared), "encoder_blocks", "decoder_blocks" (lists),
        "encoder_final_norm", "decoder_final_norm" (None for post-norm),
        "lm_head" (None when tied), "tied" (bool).
    """
    names = {layer.name for layer in model.layers}
    if "embedding" in names:
        enc_emb = dec_emb = "embedding"
    else:
        enc_emb, dec_emb = "encoder_embedding", "decoder_embedding"
    enc_blocks, dec_blocks = [], []
    while f"encoder_block_{len(enc_blocks)}" in names:
        enc_blocks.append(f"encoder_block_{len(enc_blocks)}")
    while f"decoder_block_{len(dec_blocks)}" in names:
        dec_blocks.append(f"decoder_block_{len(dec_blocks)}")
    return {
        "encoder_embedding": enc_emb,
        "decoder_embedding": dec_emb,
        "encoder_blocks": enc_blocks,
        "decoder_blocks": dec_blocks,
        "encoder_final_norm": "encoder_final_norm" if "encoder_final_norm" in names else None,
        "decoder_final_norm": "decoder_final_norm" if "decoder_final_norm" in names else None,
        "lm_head": "lm_head" if "lm_head" in names else None,
        "tied": "lm_head" not in names,
    }


def seq2seq_encoder(model):
    """The encoder half of a `seq2seq` model as a functional model sharing its
    weights: `encoder_token_ids` (B, S) → encoder output (B, S, d_model)
    (the memory the decoder blocks cross-attend to; it carries the source
    padding mask as a Keras mask)."""
    names = seq2seq_layer_names(model)
    last = names["encoder_final_norm"] or names["encoder_blocks"][-1]
    encoder_input = model.get_layer("encoder_token_ids").output
    return keras.Model(encoder_input, model.get_layer(last).output, name=f"{model.name}_encoder")


def seq2seq_greedy_decode(model, encoder_token_ids, bos_id, max_length, eos_id=None, batch_size=256):
    """Reference greedy decoding by full recomputation (no cache).

    At step t the whole decoder input [BOS, y_1, …, y_t, 0, …] is re-run and
    y_{t+1} = argmax logits[t]. The buffer has the fixed length `max_length`
    (one trace), right-padded with 0, which the causal mask makes invisible to
    earlier positions; the model's `max_length` must be >= `max_length`.

    Args:
        model: a `seq2seq` model.
        encoder_token_ids: int array (B, S).
        bos_id: id fed as the first decoder token (must be non-zero).
        max_length: number of tokens to generate.
        eos_id: optional; after it a row emits only padding (0).
        batch_size: rows per forward pass.

    Returns:
        int32 NumPy array (B, max_length) of generated ids (BOS excluded).
    """
    if not bos_id:
        raise ValueError(f"`bos_id` must be a non-zero id (0 is padding); received {bos_id!r}.")
    encoder_token_ids = np.asarray(encoder_token_ids, dtype="int32")
    if encoder_token_ids.ndim != 2:
        raise ValueError(
            f"`encoder_token_ids` must have shape (batch, length); received {encoder_token_ids.shape}."
        )

    @tf.function(reduce_retracing=True)
    def step(enc, dec, t):
        logits = model({"encoder_token_ids": enc, "decoder_token_ids": dec}, training=False)
        return ops.argmax(ops.take(logits, t, axis=1), axis=-1)

    outputs = []
    for start in range(0, len(encoder_token_ids), batch_size):
        enc = tf.constant(encoder_token_ids[start : start + batch_size])
        # A fixed (B, max_length) buffer: one trace for every step. Position t
        # only sees positions <= t (causal), so the zeros after it are inert.
        dec = np.zeros((enc.shape[0], max_length), dtype="int32")
        dec[:, 0] = bos_id
        generated = np.zeros((enc.shape[0], max_length), dtype="int32")
        done = np.zeros(enc.shape[0], dtype=bool)
        for t in range(max_length):
            predicted = np.asarray(step(enc, tf.constant(dec), tf.constant(t, "int32"))).astype("int32")
            predicted = np.where(done, 0, predicted)
            generated[:, t] = predicted
            if t + 1 < max_length:
                dec[:, t + 1] = predicted
            if eos_id is not None:
                done |= predicted == eos_id
                if done.all():
                    break
        outputs.append(generated)
    return np.concatenate(outputs, axis=0).astype("int32")


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


__all__ = ["seq2seq", "seq2seq_layer_names", "seq2seq_encoder", "seq2seq_greedy_decode", "seq2seq_num_params"]
