"""BERT (Devlin et al. 2019): encoder, masked-LM pretraining model, sequence and
token classifiers, and checkpoint weight mapping.

The encoder is the published architecture, weight for weight:

    e   = E_tok[token] + E_pos[position] + E_seg[segment]
    x_0 = Dropout(LN(e))                                  ε = 1e-12
    x_i = LN(x + Dropout(FFN(LN(x + Dropout(MHA(x))))))   post-norm, exact-erf GELU
    sequence_output = x_L
    pooled_output   = tanh(x_L[:, 0] W_p + b_p)           ([CLS] pooler)

Inputs (dict): `token_ids`, `segment_ids`, `padding_mask` (int32 (B, T),
padding_mask 1 = real token). Outputs (dict): `sequence_output` (B, T, d),
`pooled_output` (B, d). Layer names: `embedding` (token + learned position
embedding, a `TokenAndPositionEmbedding`), `segment_embedding`,
`embedding_add`, `embedding_norm`, `embedding_dropout`, `encoder_block_{i}`,
`final_norm` (only with `norm_first=True`), `cls_token`, `pooler`.

Checkpoint mapping (HuggingFace `BertModel` / `BertForPreTraining` names;
`bert.` prefix in the *ForXxx models; Google TF checkpoint names in brackets;
H = d_model, n = num_heads, h = H / n, W are PyTorch `(out, in)` matrices,
TF kernels are already `(in, out)`):

    embeddings.word_embeddings.weight        [bert/embeddings/word_embeddings]
        → embedding/token_embedding/embeddings                (V, H)
    embeddings.position_embeddings.weight    [bert/embeddings/position_embeddings]
        → embedding/position_embedding/embeddings             (P, H)
    embeddings.token_type_embeddings.weight  [bert/embeddings/token_type_embeddings]
        → segment_embedding/embeddings                        (S, H)
    embeddings.LayerNorm.{weight,bias}       [bert/embeddings/LayerNorm/{gamma,beta}]
        → embedding_norm/{gamma,beta}
    encoder.layer.{i}.attention.self.{query,key,value}.weight   [.../layer_{i}/attention/self/{q,k,v}/kernel]
        → encoder_block_{i}/self_attention/{query,key,value}/kernel = Wᵀ.reshape(H, n, h)
    encoder.layer.{i}.attention.self.{query,key,value}.bias
        → encoder_block_{i}/self_attention/{query,key,value}/bias   = b.reshape(n, h)
    encoder.layer.{i}.attention.output.dense.weight      [.../attention/output/dense/kernel]
        → encoder_block_{i}/self_attention/attention_output/kernel = Wᵀ.reshape(n, h, H)
    encoder.layer.{i}.attention.output.dense.bias  → .../attention_output/bias  (H,)
    encoder.layer.{i}.attention.output.LayerNorm.* → encoder_block_{i}/self_attention_norm/{gamma,beta}
    encoder.layer.{i}.intermediate.dense.{weight,bias}    [.../intermediate/dense/*]
        → encoder_block_{i}/feed_forward/inner/{kernel = Wᵀ, bias}
    encoder.layer.{i}.output.dense.{weight,bias}          [.../output/dense/*]
        → encoder_block_{i}/feed_forward/output/{kernel = Wᵀ, bias}
    encoder.layer.{i}.output.LayerNorm.*  → encoder_block_{i}/feed_forward_norm/{gamma,beta}
    pooler.dense.{weight,bias}                            [bert/pooler/dense/*]
        → pooler/{kernel = Wᵀ, bias}
    masked LM head (`bert_masked_lm`):
    cls.predictions.transform.dense.*      → mlm_transform_dense/{kernel = Wᵀ, bias}
    cls.predictions.transform.LayerNorm.*  → mlm_transform_norm/{gamma,beta}
    cls.predictions.bias                   [cls/predictions/output_bias] → mlm_output_bias/bias
    cls.predictions.decoder.weight         tied to word_embeddings (not stored separately)

`bert_weight_mapping` returns this mapping for a built model and
`load_bert_weights` applies it to a dict of NumPy arrays.
"""

import keras
import numpy as np

from keras_tfm.layers.embeddings import TokenAndPositionEmbedding
from keras_tfm.layers.initializers import clone_initializers
from keras_tfm.layers.transformer_block import TransformerBlock
from keras_tfm.models._common import (
    block_kwargs,
    check_options,
    check_vocabulary,
    initializer,
    resolve_sizes,
    split_position,
    truncated_normal,
)
from keras_tfm.models.heads import POOLINGS, Bias, SequencePooling


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
            "bert_large").
        vocabulary_size, max_length, num_layers, num_heads, d_model: sizes.
        num_segments: number of segment (token type) ids (preset or 2).
        d_ff: FFN width (default 4·d_model). dropout: preset or 0.
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

    Returns:
        Functional `keras.Model`: dict inputs {"token_ids", "segment_ids",
        "padding_mask"} → dict outputs {"sequence_output", "pooled_output"}.
    """
    o = resolve_sizes(
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
        required=("vocabulary_size", "max_length", "num_layers", "num_heads", "d_model"),
    )
    if o["num_segments"] is None:
        o["num_segments"] = 2
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
        kernel_initializer=initializer(kernel_initializer, truncated_normal(0.02)),
    )
    blocks = block_kwargs(o, attention_position, dtype)
    d, eps = o["d_model"], o["layer_norm_epsilon"]

    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
    padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")

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
    x = keras.layers.Add(dtype=dtype, name="embedding_add")(
        [embedding(token_ids), segment_embedding(segment_ids)]
    )
    x = keras.layers.LayerNormalization(epsilon=eps, dtype=dtype, name="embedding_norm")(x)
    x = keras.layers.Dropout(o["dropout"], dtype=dtype, name="embedding_dropout")(x)
    for i in range(o["num_layers"]):
        x = TransformerBlock(
            causal=False, cross_attention=False, name=f"encoder_block_{i}", **clone_initializers(blocks, i)
        )(x, padding_mask=padding_mask)
    if o["norm_first"]:
        x = keras.layers.LayerNormalization(epsilon=eps, dtype=dtype, name="final_norm")(x)
    cls = SequencePooling("cls", dtype=dtype, name="cls_token")(x)
    pooled = keras.layers.Dense(
        d,
        activation="tanh",
        kernel_initializer=initializer(kernel_initializer, truncated_normal(0.02), "pooler"),
        dtype=dtype,
        name="pooler",
    )(cls)
    inputs = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
    return keras.Model(inputs, {"sequence_output": x, "pooled_output": pooled}, name=name)


# ----------------------------------------------------------------------- heads
def _encoder_from(encoder, encoder_kwargs, tokenizer=None, vocabulary_size=None):
    """A BERT encoder model from a model, a preset name or None (+ kwargs)."""
    if isinstance(encoder, keras.Model):
        if encoder_kwargs:
            raise ValueError(
                f"Encoder options {sorted(encoder_kwargs)} cannot be applied to an already built encoder."
            )
    elif encoder is None or isinstance(encoder, str):
        encoder = bert_encoder(encoder, **encoder_kwargs)
    else:
        raise TypeError(
            f"`encoder` must be a BERT encoder keras.Model, a preset name or None; received {encoder!r}."
        )
    for required in ("embedding", "encoder_block_0"):
        try:
            encoder.get_layer(required)
        except ValueError:
            raise ValueError(
                f"`encoder` is not a `bert_encoder` model: it has no layer {required!r}."
            ) from None
    check_vocabulary(
        encoder.get_layer("embedding").vocabulary_size, tokenizer, vocabulary_size, what="BERT encoder"
    )
    return encoder


def _encoder_outputs(encoder):
    outputs = encoder.output
    if not isinstance(outputs, dict) or "sequence_output" not in outputs:
        raise ValueError("`encoder` must output a dict with 'sequence_output' and 'pooled_output'.")
    return outputs


def bert_masked_lm(
    encoder=None, *, tokenizer=None, vocabulary_size=None, name="bert_masked_lm", **encoder_kwargs
):
    """BERT masked-language-model pretraining model.

        h      = LN(GELU(x W_t + b_t))                 "mlm_transform_dense", "mlm_transform_norm"
        logits = h E_tokᵀ + b                          tied to the word embedding, "mlm_output_bias"

    Logits are produced for every position; train with labels = the original
    ids and `sample_weight` = 1 at the masked positions (0 elsewhere) so the
    loss (and weighted metrics) only count masked positions, e.g.
    `compile_for_lm(model)` + `fit(x, labels, sample_weight=mask_weights)`.

    Args:
        encoder: a `bert_encoder` model (its layers are shared), a preset
            name, or None with `encoder_kwargs`.
        tokenizer: optional tokenizer (or int); its vocabulary size must match.
        vocabulary_size: optional expected vocabulary size (checked).
        name: model name.
        **encoder_kwargs: `bert_encoder` options when `encoder` is not a model.

    Returns:
        Functional model with the encoder's inputs and float32 `logits` (B, T, V).
    """
    encoder = _encoder_from(encoder, encoder_kwargs, tokenizer, vocabulary_size)
    seq = _encoder_outputs(encoder)["sequence_output"]
    embedding = encoder.get_layer("embedding")
    block = encoder.get_layer("encoder_block_0")
    dtype = block.dtype_policy
    # BERT's transform uses the encoder's hidden activation (exact GELU).
    activation = {"gelu": "gelu", "gelu_tanh": _gelu_tanh, "relu": "relu", "silu": "silu"}[block.activation]
    h = keras.layers.Dense(
        embedding.d_model,
        activation=activation,
        kernel_initializer=truncated_normal(0.02),
        dtype=dtype,
        name="mlm_transform_dense",
    )(seq)
    h = keras.layers.LayerNormalization(
        epsilon=block.layer_norm_epsilon, dtype=dtype, name="mlm_transform_norm"
    )(h)
    logits = embedding(h, reverse=True)
    logits = Bias(embedding.vocabulary_size, dtype="float32", name="mlm_output_bias")(logits)
    logits = keras.layers.Identity(dtype="float32", name="logits")(logits)
    return keras.Model(encoder.input, logits, name=name)


@keras.saving.register_keras_serializable(package="keras_tfm")
def _gelu_tanh(x):
    return keras.ops.gelu(x, approximate=True)


def _head_dropout(encoder, dropout):
    if dropout is None:
        dropout = encoder.get_layer("encoder_block_0").dropout
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"`dropout` must be a float in [0, 1); received {dropout!r}.")
    return float(dropout)


def bert_classifier(
    encoder=None,
    num_classes=None,
    *,
    pooling="cls",
    dropout=None,
    tokenizer=None,
    vocabulary_size=None,
    name="bert_classifier",
    **encoder_kwargs,
):
    """Sequence classifier on a BERT encoder.

        pooling "cls":  p = pooled_output (tanh pooler on [CLS], as in BERT)
        pooling "mean": p = Σ_t m_t h_t / Σ_t m_t          (padding excluded)
        pooling "max":  p = max_{t: m_t=1} h_t             (padding excluded)
        logits = Dropout(p) W + b                           "classifier_dropout", "classifier"

    Args:
        encoder: a `bert_encoder` model, a preset name or None (+ kwargs).
        num_classes: number of classes (>= 1).
        pooling: "cls", "mean" or "max".
        dropout: classifier dropout (defaults to the encoder's dropout).
        tokenizer / vocabulary_size: optional; must match the encoder's
            vocabulary, else ValueError.
        name: model name.
        **encoder_kwargs: `bert_encoder` options when `encoder` is not a model.

    Returns:
        Functional model: encoder inputs → float32 `logits` (B, num_classes).
    """
    if pooling not in POOLINGS:
        raise ValueError(f"Unknown `pooling` {pooling!r}; expected one of {list(POOLINGS)}.")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"`num_classes` must be a positive int; received {num_classes!r}.")
    encoder = _encoder_from(encoder, encoder_kwargs, tokenizer, vocabulary_size)
    outputs = _encoder_outputs(encoder)
    dtype = encoder.get_layer("encoder_block_0").dtype_policy
    if pooling == "cls":
        pooled = outputs["pooled_output"]
    else:
        pooled = SequencePooling(pooling, dtype=dtype, name=f"{pooling}_pooling")(
            outputs["sequence_output"], padding_mask=encoder.input["padding_mask"]
        )
    pooled = keras.layers.Dropout(_head_dropout(encoder, dropout), dtype=dtype, name="classifier_dropout")(
        pooled
    )
    logits = keras.layers.Dense(
        num_classes, kernel_initializer=truncated_normal(0.02), dtype="float32", name="classifier"
    )(pooled)
    logits = keras.layers.Identity(dtype="float32", name="logits")(logits)
    return keras.Model(encoder.input, logits, name=name)


def bert_token_classifier(
    encoder=None,
    num_classes=None,
    *,
    dropout=None,
    tokenizer=None,
    vocabulary_size=None,
    name="bert_token_classifier",
    **encoder_kwargs,
):
    """Per-token classifier (NER/tagging) on a BERT encoder:
    logits_t = Dropout(h_t) W + b, float32 (B, T, num_classes).

    Padding positions get logits too; exclude them from the loss with
    `sample_weight=padding_mask` or an ignored label (e.g.
    `compile_for_lm(model, ignore_index=-100)`)."""
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"`num_classes` must be a positive int; received {num_classes!r}.")
    encoder = _encoder_from(encoder, encoder_kwargs, tokenizer, vocabulary_size)
    seq = _encoder_outputs(encoder)["sequence_output"]
    dtype = encoder.get_layer("encoder_block_0").dtype_policy
    h = keras.layers.Dropout(_head_dropout(encoder, dropout), dtype=dtype, name="classifier_dropout")(seq)
    logits = keras.layers.Dense(
        num_classes, kernel_initializer=truncated_normal(0.02), dtype="float32", name="classifier"
    )(h)
    logits = keras.layers.Identity(dtype="float32", name="logits")(logits)
    return keras.Model(encoder.input, logits, name=name)


# ----------------------------------------------------------- weight mapping
def _t(w):
    return np.asarray(w).T


def bert_weight_mapping(model, source="huggingface", prefix=None):
    """The checkpoint-name → variable mapping of a BERT model.

    Args:
        model: a `bert_encoder` model, or a head model built on one
            (`bert_masked_lm` adds the MLM head entries).
        source: "huggingface" (PyTorch `BertModel` names) or "google" (the
            original TF checkpoint names).
        prefix: prepended to encoder names; defaults to "" for HuggingFace
            (use "bert." for `BertForPreTraining`/`BertForMaskedLM` state
            dicts) and "bert/" for Google.

    Returns:
        list of `(checkpoint_name, variable, checkpoint_shape, convert)` where
        `convert(array) -> array` maps the checkpoint array to the variable's
        layout. The tied MLM decoder weight has no entry (it *is* the word
        embedding).
    """
    if source not in ("huggingface", "google"):
        raise ValueError(f"Unknown `source` {source!r}; expected 'huggingface' or 'google'.")
    hf = source == "huggingface"
    if prefix is None:
        prefix = "" if hf else "bert/"
    embedding = model.get_layer("embedding")
    H = embedding.d_model
    block0 = model.get_layer("encoder_block_0")
    n = block0.num_heads
    h = block0.key_dim or H // n
    if h * n != H:
        raise ValueError("Checkpoint mapping needs key_dim * num_heads == d_model.")
    entries = []

    def add(name, variable, shape, convert=None):
        entries.append((name, variable, tuple(shape), convert or np.asarray))

    def norm(hf_name, google_name, layer):
        add(f"{hf_name}.weight" if hf else f"{google_name}/gamma", layer.gamma, (H,))
        add(f"{hf_name}.bias" if hf else f"{google_name}/beta", layer.beta, (H,))

    def dense(hf_name, google_name, layer, in_dim, out_dim):
        # PyTorch stores (out, in); TF stores the (in, out) kernel.
        if hf:
            add(f"{hf_name}.weight", layer.kernel, (out_dim, in_dim), _t)
            add(f"{hf_name}.bias", layer.bias, (out_dim,))
        else:
            add(f"{google_name}/kernel", layer.kernel, (in_dim, out_dim))
            add(f"{google_name}/bias", layer.bias, (out_dim,))

    sep = "." if hf else "/"
    emb = f"{prefix}embeddings{sep}"
    add(
        f"{emb}word_embeddings" + (".weight" if hf else ""),
        embedding.token_embedding.embeddings,
        embedding.token_embedding.embeddings.shape,
    )
    if embedding.position_embedding is not None and hasattr(
        embedding.position_embedding, "position_embeddings"
    ):
        table = embedding.position_embedding.position_embeddings
        add(f"{emb}position_embeddings" + (".weight" if hf else ""), table, table.shape)
    segment = model.get_layer("segment_embedding")
    add(
        f"{emb}token_type_embeddings" + (".weight" if hf else ""),
        segment.embeddings,
        segment.embeddings.shape,
    )
    norm(f"{emb}LayerNorm", f"{emb}LayerNorm", model.get_layer("embedding_norm"))

    i = 0
    while True:
        try:
            block = model.get_layer(f"encoder_block_{i}")
        except ValueError:
            break
        base = f"{prefix}encoder.layer.{i}." if hf else f"{prefix}encoder/layer_{i}/"
        attention = block.self_attention_layer
        d_ff = block.d_ff
        for proj in ("query", "key", "value"):
            layer = getattr(attention, f"{proj}_dense")
            name = f"{base}attention.self.{proj}" if hf else f"{base}attention/self/{proj}"
            if hf:
                add(f"{name}.weight", layer.kernel, (H, H), lambda w: _t(w).reshape(H, n, h))
                add(f"{name}.bias", layer.bias, (H,), lambda b: np.asarray(b).reshape(n, h))
            else:
                add(f"{name}/kernel", layer.kernel, (H, H), lambda w: np.asarray(w).reshape(H, n, h))
                add(f"{name}/bias", layer.bias, (H,), lambda b: np.asarray(b).reshape(n, h))
        out = attention.output_dense
        if hf:
            add(f"{base}attention.output.dense.weight", out.kernel, (H, H), lambda w: _t(w).reshape(n, h, H))
            add(f"{base}attention.output.dense.bias", out.bias, (H,))
        else:
            add(
                f"{base}attention/output/dense/kernel",
                out.kernel,
                (H, H),
                lambda w: np.asarray(w).reshape(n, h, H),
            )
            add(f"{base}attention/output/dense/bias", out.bias, (H,))
        norm(
            f"{base}attention.output.LayerNorm",
            f"{base}attention/output/LayerNorm",
            block.self_attention_norm,
        )
        dense(
            f"{base}intermediate.dense", f"{base}intermediate/dense", block.feed_forward.inner_dense, H, d_ff
        )
        dense(f"{base}output.dense", f"{base}output/dense", block.feed_forward.output_dense, d_ff, H)
        norm(f"{base}output.LayerNorm", f"{base}output/LayerNorm", block.feed_forward_norm)
        i += 1

    names = {layer.name for layer in model.layers}
    if "pooler" in names:  # absent from `bert_masked_lm` (as in HF BertForMaskedLM)
        dense(f"{prefix}pooler.dense", f"{prefix}pooler/dense", model.get_layer("pooler"), H, H)
    if "mlm_transform_dense" in names:
        dense(
            "cls.predictions.transform.dense",
            "cls/predictions/transform/dense",
            model.get_layer("mlm_transform_dense"),
            H,
            H,
        )
        norm(
            "cls.predictions.transform.LayerNorm",
            "cls/predictions/transform/LayerNorm",
            model.get_layer("mlm_transform_norm"),
        )
        bias = model.get_layer("mlm_output_bias").bias
        add("cls.predictions.bias" if hf else "cls/predictions/output_bias", bias, bias.shape)
    return entries


def load_bert_weights(model, weights, source="huggingface", prefix=None, strict=True):
    """Assigns checkpoint arrays to a BERT model using `bert_weight_mapping`.

    Args:
        model: `bert_encoder` or a head model built on one.
        weights: mapping checkpoint name → array (e.g. a PyTorch state dict
            converted with `.numpy()`, or `tf.train.load_checkpoint` values).
        source, prefix: see `bert_weight_mapping`.
        strict: raise if a mapped name is missing from `weights`.

    Returns:
        The sorted list of names in `weights` that were not used.

    Raises:
        ValueError: a missing name (strict) or a shape mismatch.
    """
    used = set()
    for name, variable, shape, convert in bert_weight_mapping(model, source, prefix):
        if name not in weights:
            if strict:
                raise ValueError(f"Checkpoint is missing {name!r} (expected shape {shape}).")
            continue
        array = np.asarray(weights[name])
        if tuple(array.shape) != tuple(shape):
            raise ValueError(f"Checkpoint {name!r} has shape {array.shape}; expected {shape}.")
        variable.assign(convert(array).astype(variable.dtype))
        used.add(name)
    return sorted(set(weights) - used)
