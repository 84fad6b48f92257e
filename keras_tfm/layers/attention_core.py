"""The one attention core behind every attention layer in keras_tfm.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + B) V

`dot_product_attention` takes already-projected, per-head tensors and serves
self-, cross-, causal, cached and biased (ALiBi / relative position) attention.
Masks are boolean, True = may attend. Scores, the mask fill and the softmax are
computed in float32 even under mixed precision; the fill value is a finite
float32 number (never -inf, never a float16 overflow), and a query whose keys are
all masked gets all-zero weights (so a zero output), never NaN.

Tensor layouts:
    query: `(batch, query_length, num_heads, key_dim)`
    key:   `(batch, key_length, num_heads, key_dim)`
    value: `(batch, key_length, num_heads, value_dim)`
    mask:  bool, rank 2 `(Tq, Tk)`, rank 3 `(B, Tq, Tk)` or rank 4 `(B, H, Tq, Tk)`
           (any axis may be 1 to broadcast).
    bias:  float, rank 2 `(Tq, Tk)`, rank 3 `(H, Tq, Tk)` or rank 4 `(B, H, Tq, Tk)`.

Implementations are selected by `impl`: "standard" materialises the full score
matrix; other entries of `ATTENTION_IMPLS` (e.g. memory-efficient ones) are
registered with `register_attention_impl` and share the same contract:
"chunked" (exact, O(T) memory, `chunked_attention.py`), "local" (sliding
window, `local_attention.py`) and "linear" (kernelized, `linear_attention.py`),
all registered when `keras_tfm.layers` is imported.
"""

import math

from keras import ops

# Finite large negative fill used on float32 scores before the softmax.
MASK_FILL_VALUE = -1e9

ATTENTION_IMPLS = {}


def register_attention_impl(name):
    """Decorator registering an attention implementation under `name`.

    The function must accept `(query, key, value, mask, bias, scale, **kwargs)`
    with the layouts of this module and return the `(B, Tq, H, Dv)` output in
    float32 or the compute dtype. Implementations that cannot return weights or
    apply weight-dropout must raise a `ValueError` when asked to.
    """

    def wrap(fn):
        ATTENTION_IMPLS[name] = fn
        return fn

    return wrap


def _expand_mask(mask):
    """Brings a boolean mask to rank 4 `(B|1, H|1, Tq, Tk)`."""
    mask = ops.cast(mask, "bool")
    rank = len(mask.shape)
    if rank == 2:
        return mask[None, None, :, :]
    if rank == 3:
        return mask[:, None, :, :]
    if rank == 4:
        return mask
    raise ValueError(f"`mask` must have rank 2, 3 or 4; received shape {tuple(mask.shape)}.")


def _expand_bias(bias):
    """Brings an additive score bias to rank 4 `(B|1, H|1, Tq, Tk)` float32."""
    bias = ops.cast(bias, "float32")
    rank = len(bias.shape)
    if rank == 2:
        return bias[None, None, :, :]
    if rank == 3:
        return bias[None, :, :, :]
    if rank == 4:
        return bias
    raise ValueError(f"`bias` must have rank 2, 3 or 4; received shape {tuple(bias.shape)}.")


def attention_weights(query, key, mask=None, bias=None, scale=None):
    """softmax(Q Kᵀ · scale + bias) with masking, in float32.

    Returns:
        float32 tensor `(batch, num_heads, query_length, key_length)`; masked
        entries are exactly 0 and fully masked rows are all 0.
    """
    if scale is None:
        scale = 1.0 / math.sqrt(float(query.shape[-1]))
    # Scale the (smaller) query rather than the score matrix.
    query = ops.multiply(query, ops.cast(scale, query.dtype))
    if query.shape[1] == 1:
        # One query (a cached decoding step): a broadcast multiply-and-sum is
        # about twice as fast as a batched matmul with M = 1 on CPU.
        scores = ops.transpose(ops.sum(query * key, axis=-1), (0, 2, 1))[:, :, None, :]
    else:
        scores = ops.einsum("bqhd,bkhd->bhqk", query, key)
    scores = ops.cast(scores, "float32")
    if bias is not None:
        scores = scores + _expand_bias(bias)
    if mask is not None:
        mask = _expand_mask(mask)
        scores = ops.where(mask, scores, MASK_FILL_VALUE)
    weights = ops.softmax(scores, axis=-1)
    if mask is not None:
        # Exact zeros at masked keys; a row with no visible key becomes all 0.
        weights = ops.where(mask, weights, 0.0)
    return weights


@register_attention_impl("standard")
def standard_attention(
    query,
    key,
    value,
    mask=None,
    bias=None,
    scale=None,
    dropout=None,
    training=None,
    return_weights=False,
):
    weights = attention_weights(query, key, mask=mask, bias=bias, scale=scale)
    probs = ops.cast(weights, value.dtype)
    if dropout is not None:
        probs = dropout(probs, training=training)
    if probs.shape[2] == 1:
        weights_bkh = ops.transpose(probs[:, :, 0, :], (0, 2, 1))[:, :, :, None]
        output = ops.sum(weights_bkh * value, axis=1, keepdims=True)
    else:
        output = ops.einsum("bhqk,bkhd->bqhd", probs, value)
    return output, (weights if return_weights else None)


def dot_product_attention(
    query,
    key,
    value,
    mask=None,
    bias=None,
    scale=None,
    dropout=None,
    training=None,
    return_weights=False,
    impl="standard",
    **impl_kwargs,
):
    """Scaled dot-product attention, softmax(Q Kᵀ/√d_k + bias)·V.

    Args:
        query: `(batch, query_length, num_heads, key_dim)`.
        key: `(batch, key_length, num_heads, key_dim)`.
        value: `(batch, key_length, num_heads, value_dim)`.
        mask: optional boolean mask, True = may attend (see module docstring).
        bias: optional additive float score bias (ALiBi, relative positions).
        scale: score scale; defaults to `1/sqrt(key_dim)`.
        dropout: optional callable `(x, training=...)` applied to the weights
            (a `keras.layers.Dropout` owned by the calling layer).
        training: Python bool or None, forwarded to `dropout`.
        return_weights: if True also return the float32 attention weights.
        impl: name of a registered implementation (see `ATTENTION_IMPLS`).
        **impl_kwargs: options of that implementation (e.g. a chunk size).

    Returns:
        `(output, weights)`: output `(batch, query_length, num_heads,
        value_dim)` in the value dtype, and float32 weights
        `(batch, num_heads, query_length, key_length)` or None.
    """
    if impl not in ATTENTION_IMPLS:
        raise ValueError(f"Unknown attention `impl` {impl!r}; expected one of {sorted(ATTENTION_IMPLS)}.")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if len(t.shape) != 4:
            raise ValueError(
                f"`{name}` must have rank 4 (batch, length, num_heads, dim); received shape {tuple(t.shape)}."
            )
    output, weights = ATTENTION_IMPLS[impl](
        query,
        key,
        value,
        mask=mask,
        bias=bias,
        scale=scale,
        dropout=dropout,
        training=training,
        return_weights=return_weights,
        **impl_kwargs,
    )
    return ops.cast(output, value.dtype), weights
