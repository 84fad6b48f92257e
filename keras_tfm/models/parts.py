"""Pieces of the model classes: `num_classes`, the norm factory, the default initializers,
the key/value cache helpers of cached decoding, and the parts of a `Seq2Seq`
(`seq2seq_parts`, its graph `seq2seq_graph`). The constructors' argument rules and the
blocks they build are `keras_tfm.models.options`.
"""

import functools

import keras
from keras import ops

from keras_tfm.checks import check_bool, check_choice, check_positive_int, check_token_id
from keras_tfm.generation.constraints import check_generation_config
from keras_tfm.layers.attention.decoding import CACHE_LENGTH_AXES
from keras_tfm.layers.attention.relative_position_bias import RelativePositionBias
from keras_tfm.layers.initializers import clone_initializer
from keras_tfm.layers.output_head import LogitsBias, OutputHead
from keras_tfm.layers.rms_norm import RMSNorm
from keras_tfm.layers.transformer_block import NORMS


# ------------------------------------------------------------------ checks
def check_num_classes(num_classes):
    """`num_classes` as an int >= 2: the softmax over one class is always 1, so its loss is 0
    and nothing trains."""
    num_classes = check_positive_int("num_classes", num_classes)
    if num_classes < 2:
        raise ValueError(
            f"`num_classes` must be >= 2 (a softmax over one class is always 1: the loss is 0 and "
            f"nothing trains); received {num_classes}. For a binary task use num_classes=2 "
            "(labels 0 and 1)."
        )
    return num_classes


# ------------------------------------------------------------ initializers
def initializer(spec, default, salt="layer"):
    """A fresh initializer for one layer (never a shared instance): `spec`
    (or `default` when None) cloned by `clone_initializer`, so a user's seeded
    instance gives each layer `salt` its own reproducible draw."""
    return clone_initializer(default if spec is None else spec, salt)


def normal(stddev):
    """Config of N(0, stddev²)."""
    return {"class_name": "RandomNormal", "config": {"mean": 0.0, "stddev": float(stddev)}}


def truncated_normal(stddev):
    """Config of N(0, stddev²) truncated at two standard deviations."""
    return {"class_name": "TruncatedNormal", "config": {"mean": 0.0, "stddev": float(stddev)}}


# ---------------------------------------------------------------- layers
def make_norm(kind, epsilon, dtype, name):
    """A `LayerNormalization` (`kind="layer"`) or an `RMSNorm` (`"rms"`, float32 statistics)."""
    if check_choice("norm", kind, NORMS) == "rms":
        return RMSNorm(epsilon=epsilon, dtype=dtype, name=name)
    return keras.layers.LayerNormalization(epsilon=epsilon, dtype=dtype, name=name)


# ------------------------------------------------------------------ caches
def zero_caches(blocks, batch_size, length, dtype=None):
    """Zero key/value caches of `blocks`: a flat list `[keys_0, values_0,
    keys_1, values_1, ...]` (two tensors per block, `block_caches` pairs
    them), in the layout of `MultiHeadSelfAttention.init_cache`: keys
    `(batch, num_key_value_heads, key_dim, length)`, values `(batch,
    num_key_value_heads, length, key_dim)`.

    `dtype` (default: the blocks' compute dtype): "bfloat16" halves the bytes
    a decoding step reads (stored as bfloat16 bits when the compute dtype is
    not bfloat16).
    """
    return [
        tensor
        for block in blocks
        for tensor in block.self_attention_layer.init_cache(batch_size, length, dtype=dtype)
    ]


def block_caches(caches):
    """The `(keys, values)` pair of every block from `zero_caches`' flat list."""
    return list(zip(caches[0::2], caches[1::2]))


def shared_score_bias(table, token_ids, caches, cache_index):
    """The score bias B `(H, T, slots)` of a cached decoder call, computed once from a table
    every layer of the stack shares (T5's `position_bias`: "computed in the first layer and
    shared by the others"), or None without a shared table."""
    if table is None:
        return None
    return table(ops.shape(token_ids)[1], ops.shape(caches[0])[CACHE_LENGTH_AXES[0]], cache_index)


def cache_positions(token_ids, cache_index, positions=None):
    """`positions`, or `cache_index + 0..T-1` for every row of `token_ids` (batch, T)."""
    if positions is not None:
        return positions
    length = ops.shape(token_ids)[1]
    positions = ops.cast(cache_index, "int32") + ops.arange(length, dtype="int32")[None, :]
    return ops.broadcast_to(positions, ops.shape(token_ids))


# ------------------------------------------------------------------ seq2seq
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


def _shared_position_biases(o):
    """(encoder, decoder) `RelativePositionBias` tables shared by the blocks of each stack
    (`share_position_bias`, T5), or (None, None)."""
    if not o.share_position_bias:
        return None, None
    if o.position != "relative":
        raise ValueError(
            f"`share_position_bias`=True needs position='relative' (one T5 bias table per stack); "
            f"received position={o.position!r}."
        )
    return tuple(
        RelativePositionBias(
            o.num_heads,
            num_buckets=o.relative_num_buckets,
            max_distance=o.relative_max_distance,
            bidirectional=side == "encoder",
            dtype=o.config.get("dtype"),
            name=f"{side}_position_bias",
        )
        for side in ("encoder", "decoder")
    )


def check_special_ids(o, source_size, target_size):
    """`pad_id` and `generation_config` checked against the vocabularies (in place in `o.config`,
    which `get_config` saves)."""
    if o.pad_id is not None:
        check_token_id("pad_id", o.pad_id, min(source_size, target_size))
    o.config["generation_config"] = o.generation_config = check_generation_config(
        o.generation_config, target_size
    )


def seq2seq_parts(o, source_size, target_size, shared, embeddings_initializer, kernel_initializer) -> dict:
    """The layers of a `Seq2Seq` of options `o` (`ModelOptions`), by attribute name."""
    encoder_layers = o.num_encoder_layers or o.num_layers
    decoder_layers = o.num_decoder_layers or o.num_layers
    if encoder_layers is None or decoder_layers is None:
        raise ValueError(
            "Give `num_layers` (or `num_encoder_layers` and `num_decoder_layers`), or a `preset`."
        )
    check_special_ids(o, source_size, target_size)
    dtype = o.config.get("dtype")

    def embedding_for(vocabulary, layer, token_embedding=None):
        init = initializer(embeddings_initializer, normal(o.d_model**-0.5), layer)
        mask_zero = o.pad_id is None
        return o.embedding(vocabulary, init, layer, o.scale_embeddings, mask_zero, token_embedding)

    separate = shared and o.separate_positions  # one token table, a position table per side (BART)
    encoder_embedding = embedding_for(
        source_size, "embedding" if shared and not separate else "encoder_embedding"
    )
    decoder_embedding = encoder_embedding if shared else embedding_for(target_size, "decoder_embedding")
    if separate:
        encoder_embedding.build((None, None))
        decoder_embedding = embedding_for(target_size, "decoder_embedding", encoder_embedding.token_embedding)
    stack = functools.partial(
        o.blocks, kernel_initializer=initializer(kernel_initializer, "glorot_uniform", "blocks")
    )
    head = None
    if not o.tie_embeddings:
        head = OutputHead(
            target_size,
            use_bias=o.lm_head_use_bias,
            kernel_initializer=initializer(kernel_initializer, "glorot_uniform", "lm_head"),
            dtype=dtype,
            name="lm_head",
        )
    encoder_bias, decoder_bias = _shared_position_biases(o)
    norm = o.make_norm if o.embedding_norm else lambda name: None
    return dict(
        encoder_embedding=encoder_embedding,
        decoder_embedding=decoder_embedding,
        encoder_embedding_norm=norm("encoder_embedding_norm"),
        decoder_embedding_norm=norm("decoder_embedding_norm"),
        encoder_embedding_dropout=keras.layers.Dropout(
            o.dropout, dtype=dtype, name="encoder_embedding_dropout"
        ),
        decoder_embedding_dropout=keras.layers.Dropout(
            o.dropout, dtype=dtype, name="decoder_embedding_dropout"
        ),
        encoder_position_bias=encoder_bias,
        decoder_position_bias=decoder_bias,
        encoder_blocks=stack(
            "encoder_block", encoder_layers, causal=False, salt_prefix="encoder_", position_bias=encoder_bias
        ),
        decoder_blocks=stack(
            "decoder_block",
            decoder_layers,
            causal=True,
            cross_attention=True,
            salt_prefix="decoder_",
            position_bias=decoder_bias,
        ),
        encoder_final_norm=o.make_norm("encoder_final_norm") if o.norm_first else None,
        decoder_final_norm=o.make_norm("decoder_final_norm") if o.norm_first else None,
        head=head,
        logits_bias=LogitsBias(target_size, dtype=dtype, name="logits_bias") if o.logits_bias else None,
    )


def embed_tokens(embedding, norm, token_ids, positions=None):
    """Token + position embedding of one side, then its embedding norm (BART) when it has one."""
    x = embedding(token_ids) if positions is None else embedding(token_ids, positions=positions)
    return x if norm is None else norm(x)


def output_logits(parts, hidden_states, logits_scale=1.0):
    """Float32 logits of a seq2seq decoder's (final-normed) states: `(h · logits_scale) Eᵀ` tied
    (T5 v1.0: d_model^-0.5) or the untied head, plus the logits bias (BART, Marian) if any.
    `parts` has the attributes of `seq2seq_parts` (the parts, or the model)."""
    h = hidden_states if logits_scale == 1.0 else hidden_states * logits_scale
    logits = parts.decoder_embedding(h, reverse=True) if parts.head is None else parts.head(h)
    return logits if parts.logits_bias is None else parts.logits_bias(logits)


def seq2seq_graph(p, inputs, pad_id, logits_scale):
    """The functional graph of a `Seq2Seq` over its parts `p`: `(encoder output, logits)`.

    keras_tfm's models (`pad_id` None): padding masks travel as Keras implicit masks (mask_zero),
    the encoder mask reaches self-attention and, as `context_mask`, cross-attention. A
    checkpoint's (`pad_id` given): the source mask is `ids != pad_id`, passed explicitly; the
    decoder's keys are masked causally only, as HuggingFace's models do.
    """
    source = inputs["encoder_token_ids"]
    source_mask = None if pad_id is None else ops.not_equal(source, pad_id)
    x = p.encoder_embedding_dropout(embed_tokens(p.encoder_embedding, p.encoder_embedding_norm, source))
    for block in p.encoder_blocks:
        x = block(x) if source_mask is None else block(x, padding_mask=source_mask)
    x = x if p.encoder_final_norm is None else p.encoder_final_norm(x)
    target = inputs["decoder_token_ids"]
    y = p.decoder_embedding_dropout(embed_tokens(p.decoder_embedding, p.decoder_embedding_norm, target))
    for block in p.decoder_blocks:
        y = block(y, context=x) if source_mask is None else block(y, context=x, context_mask=source_mask)
    y = y if p.decoder_final_norm is None else p.decoder_final_norm(y)
    logits = output_logits(p, y, logits_scale)
    return x, keras.layers.Identity(dtype="float32", name="logits")(logits)
