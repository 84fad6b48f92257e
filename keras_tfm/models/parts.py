"""Pieces shared by the text model classes (`GPT`, `BertEncoder`, `Seq2Seq`).

Argument checks (each error names the argument, the value received and what
was expected), the layer factories the constructors call with named
arguments (`make_embedding`, `make_blocks`, `make_norm`),
the default initializers, and the key/value cache helpers of cached decoding.
"""

import keras
from keras import ops

from keras_tfm.checks import check_choice, check_positive_float, check_positive_int
from keras_tfm.layers.embeddings import TokenAndPositionEmbedding
from keras_tfm.layers.initializers import clone_initializer
from keras_tfm.layers.rms_norm import RMSNorm
from keras_tfm.layers.transformer_block import NORMS, TransformerBlock
from keras_tfm.models.presets import PRESETS

#: Every position scheme a text model accepts. Absolute ones act on the
#: embedding; the others act inside self-attention (in every block).
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "relative", None)
EMBEDDING_POSITIONS = ("learned", "sinusoidal")


# ------------------------------------------------------------------ checks
def check_required(family, **sizes):
    """Raises a ValueError listing the `sizes` that are None (not given)."""
    missing = [name for name, value in sizes.items() if value is None]
    if missing:
        raise ValueError(
            f"Missing {missing}: give them explicitly or pass a `preset` (one of {sorted(PRESETS[family])})."
        )


def check_size(name, value, allow_none=False):
    """A positive int size (None passes with `allow_none`); a ValueError naming it otherwise."""
    try:
        return check_positive_int(name, value, allow_none=allow_none)
    except TypeError as error:
        raise ValueError(str(error)) from None


def check_epsilon(value):
    """`layer_norm_epsilon` as a finite positive float (a ValueError naming it otherwise: NaN
    would make every output NaN, inf every normalised vector the norm's β)."""
    try:
        return check_positive_float("layer_norm_epsilon", value)
    except TypeError as error:
        raise ValueError(str(error)) from None


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


def split_position(position):
    """`position` → (embedding position, attention position): "learned" and
    "sinusoidal" act on the embedding, "rope", "alibi" and "relative" inside
    self-attention, None nowhere."""
    check_choice("position", position, POSITIONS)
    if position in EMBEDDING_POSITIONS:
        return position, None
    return None, position


def check_head_sizes(d_model, num_heads, key_dim=None, attention_position=None):
    """Raises a ValueError when the attention sizes are inconsistent: `d_model`
    not divisible by `num_heads` (without `key_dim`), or an odd head size with
    RoPE (which rotates pairs of features)."""
    if key_dim is None and d_model % num_heads:
        raise ValueError(f"`d_model`={d_model} must be divisible by `num_heads`={num_heads}.")
    head_dim = key_dim or d_model // num_heads
    if attention_position == "rope" and head_dim % 2:
        raise ValueError(f"position='rope' needs an even head size; d_model / num_heads = {head_dim}.")


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


def make_embedding(
    *,
    vocabulary_size,
    d_model,
    max_length,
    position,
    embeddings_initializer,
    dtype,
    name,
    scale=False,
    mask_zero=False,
):
    """The `TokenAndPositionEmbedding` of a text model: E[token] (· √d_model
    with `scale`) + P[position] for `position` "learned" or "sinusoidal"
    (None: the token embedding alone)."""
    return TokenAndPositionEmbedding(
        vocabulary_size,
        d_model,
        max_length=max_length,
        position=position,
        scale=scale,
        mask_zero=mask_zero,
        embeddings_initializer=embeddings_initializer,
        dtype=dtype,
        name=name,
    )


def make_blocks(
    name,
    count,
    *,
    causal,
    cross_attention,
    d_model,
    num_heads,
    d_ff,
    dropout,
    attention_dropout,
    norm_first,
    activation,
    layer_norm_epsilon,
    norm,
    use_bias,
    key_dim,
    num_key_value_heads,
    position,
    rope_max_wavelength,
    attention_impl,
    attention_options,
    kernel_initializer,
    dtype,
    salt_prefix="",
):
    """`count` `TransformerBlock`s named `{name}_{i}`, all with the given options.

    `position` is the attention-side scheme (None, "rope", "alibi",
    "relative"). Each block gets its own clone of `kernel_initializer`
    (salt `{salt_prefix}{i}`), so no two blocks start equal.
    """
    return [
        TransformerBlock(
            d_model=d_model,
            num_heads=num_heads,
            d_ff=d_ff,
            dropout=dropout,
            attention_dropout=attention_dropout,
            norm_first=norm_first,
            causal=causal,
            cross_attention=cross_attention,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            position=position,
            use_bias=use_bias,
            key_dim=key_dim,
            attention_impl=attention_impl,
            attention_options=attention_options,
            kernel_initializer=clone_initializer(kernel_initializer, f"{salt_prefix}{i}"),
            norm=norm,
            num_key_value_heads=num_key_value_heads,
            rope_max_wavelength=rope_max_wavelength,
            dtype=dtype,
            name=f"{name}_{i}",
        )
        for i in range(count)
    ]


# ------------------------------------------------------------------ caches
def zero_caches(blocks, batch_size, length, dtype=None):
    """Zero key/value caches of `blocks`: a flat list `[keys_0, values_0,
    keys_1, values_1, ...]` (two tensors per block, `block_caches` pairs
    them), in the layout of `MultiHeadSelfAttention.init_cache`: keys
    `(batch, num_key_value_heads, head_dim, length)`, values `(batch,
    num_key_value_heads, length, head_dim)`.

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


def cache_positions(token_ids, cache_index, positions=None):
    """`positions`, or `cache_index + 0..T-1` for every row of `token_ids` (batch, T)."""
    if positions is not None:
        return positions
    length = ops.shape(token_ids)[1]
    positions = ops.cast(cache_index, "int32") + ops.arange(length, dtype="int32")[None, :]
    return ops.broadcast_to(positions, ops.shape(token_ids))
