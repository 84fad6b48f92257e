"""BERT checkpoint weight mapping (HuggingFace and Google names → model variables).

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

import numpy as np

from keras_tfm.models.bert import BertEncoder
from keras_tfm.models.bert_tasks import BertMaskedLM, BertTask


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
    if not isinstance(model, (BertEncoder, BertTask)):
        raise TypeError(
            f"`model` must be a BertEncoder or a model built on one (BertMaskedLM, BertClassifier, "
            f"BertTokenClassifier); received {type(model).__name__}."
        )
    embedding = model.embedding
    H = embedding.d_model
    block0 = model.blocks[0]
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
    segment = model.segment_embedding
    add(
        f"{emb}token_type_embeddings" + (".weight" if hf else ""),
        segment.embeddings,
        segment.embeddings.shape,
    )
    norm(f"{emb}LayerNorm", f"{emb}LayerNorm", model.embedding_norm)

    for i, block in enumerate(model.blocks):
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

    if model.pooler is not None:  # not used by `bert_masked_lm` (as in HF BertForMaskedLM)
        dense(f"{prefix}pooler.dense", f"{prefix}pooler/dense", model.pooler, H, H)
    if isinstance(model, BertMaskedLM):
        dense(
            "cls.predictions.transform.dense",
            "cls/predictions/transform/dense",
            model.mlm_transform_dense,
            H,
            H,
        )
        norm(
            "cls.predictions.transform.LayerNorm",
            "cls/predictions/transform/LayerNorm",
            model.mlm_transform_norm,
        )
        bias = model.mlm_output_bias.bias
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
