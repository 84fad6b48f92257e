"""The lecture's formula, written as it reads: `attention_impl="reference"`.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + B + M) V

Scores, bias, mask fill and softmax in float32; automatic differentiation
gives the gradient. Every other implementation is tested against this one.
"""

import math
from typing import Any

from keras import ops

from keras_tfm.layers.attention.core import AttentionInputs, register_attention_impl
from keras_tfm.layers.attention.lengths import static_or_dynamic_length
from keras_tfm.layers.attention.masks import MASK_FILL_VALUE, score_mask
from keras_tfm.layers.attention.toeplitz_bias import expand_bias


def attention_weights(
    query: Any, key: Any, mask: Any = None, bias: Any = None, scale: float | None = None, causal: bool = False
) -> Any:
    """softmax(Q Kᵀ · scale + B + M) in float32.

    Args:
        query: `(batch, query_length, num_heads, key_dim)`.
        key: `(batch, key_length, num_heads, key_dim)`.
        mask: optional boolean mask, True = may attend (`core` contract).
        bias: optional float score bias B, a tensor or a `ToeplitzBias`.
        scale: score scale; defaults to `1/sqrt(key_dim)`.
        causal: also hide the keys after each query.

    Returns:
        float32 tensor `(batch, num_heads, query_length, key_length)`; masked
        entries are exactly 0 and a query that sees no key has all-zero weights.
    """
    if scale is None:
        scale = 1.0 / math.sqrt(float(query.shape[-1]))
    query = ops.multiply(query, ops.cast(scale, query.dtype))
    scores = ops.cast(ops.einsum("bqhd,bkhd->bhqk", query, key), "float32")  # Q Kᵀ / √d_k
    key_length = static_or_dynamic_length(key)
    if bias is not None:
        scores = scores + expand_bias(bias, key_length)  # + B
    visible = score_mask(mask, causal, static_or_dynamic_length(query), key_length)
    if visible is not None:
        scores = ops.where(visible, scores, MASK_FILL_VALUE)  # + M
    weights = ops.softmax(scores, axis=-1)
    if visible is not None:
        weights = ops.where(visible, weights, 0.0)  # a query that sees no key: all zeros
    return weights


@register_attention_impl("reference")
def reference_attention(inputs: AttentionInputs) -> tuple[Any, Any]:
    """softmax(Q Kᵀ / √d_k + B + M) V, with optional dropout on the weights."""
    weights = attention_weights(
        inputs.query, inputs.key, inputs.mask, inputs.bias, inputs.scale, inputs.causal
    )
    probs = ops.cast(weights, inputs.value.dtype)
    if inputs.dropout is not None:
        probs = inputs.dropout(probs, training=inputs.training)
    output = ops.einsum("bhqk,bkhd->bqhd", probs, inputs.value)
    return output, (weights if inputs.return_attention_scores else None)
