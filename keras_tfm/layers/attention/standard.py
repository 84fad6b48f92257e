"""The full score matrix with a memory-saving gradient: `attention_impl="standard"`.

Same numbers as the formula (`reference.py`), computed so that the backward
pass keeps one score-sized tensor:

  * the mask and the bias enter as ONE additive term, `B + where(M, 0, fill)`,
    shaped like the mask/bias (usually without the batch or head axis), whose
    gradient needs nothing saved; a `where` on the full score matrix would keep
    a second `(B, H, Tq, Tk)` tensor (or the mask) alive for the backward pass;
  * softmax(S)·V is differentiated by hand (`softmax_value_product`);
  * a query that sees no key is zeroed on the `(B, Tq, H, Dv)` output, not on
    the weights.

With `return_attention_scores` or active weight dropout it returns the weights
and lets automatic differentiation run. A single query (a cached decoding
step) multiplies and sums instead of a batched matmul with one row.
"""

import math
from typing import Any

from keras import ops

from keras_tfm.layers.attention.core import AttentionInputs, register_attention_impl
from keras_tfm.layers.attention.lengths import static_or_dynamic_length
from keras_tfm.layers.attention.masks import MASK_FILL_VALUE, score_mask
from keras_tfm.layers.attention.toeplitz_bias import expand_bias


def masked_scores(
    query: Any, key: Any, mask: Any = None, bias: Any = None, scale: float | None = None, causal: bool = False
) -> tuple[Any, Any]:
    """Float32 scores `Q Kᵀ · scale + B + M`, `(B, H, Tq, Tk)`, and the rows that see a key.

    Returns:
        `(scores, row_visible)`: `row_visible` is a float `(B|1, H|1, Tq, 1)`
        tensor, 1 where the query sees at least one key, or None when every
        query does (no mask, or a causal mask alone).
    """
    if scale is None:
        scale = 1.0 / math.sqrt(float(query.shape[-1]))
    # Scale the (smaller) query rather than the score matrix.
    query = ops.multiply(query, ops.cast(scale, query.dtype))
    if query.shape[1] == 1:
        # One query (a cached decoding step): a broadcast multiply-and-sum, which
        # CPUs run faster than a batched matmul with M = 1.
        scores = ops.transpose(ops.sum(query * key, axis=-1), (0, 2, 1))[:, :, None, :]
    else:
        scores = ops.einsum("bqhd,bkhd->bhqk", query, key)
    scores = ops.cast(scores, "float32")
    key_length = static_or_dynamic_length(key)
    full_mask = score_mask(mask, causal, static_or_dynamic_length(query), key_length)
    adder = None
    if bias is not None:
        adder = expand_bias(bias, key_length)
    row_visible = None
    if full_mask is not None:
        fill = ops.where(full_mask, 0.0, MASK_FILL_VALUE)
        adder = fill if adder is None else adder + fill
        if mask is not None:  # causal self-attention alone always sees the diagonal
            row_visible = ops.cast(ops.any(full_mask, axis=-1, keepdims=True), "float32")
    if adder is not None:
        scores = scores + adder
    return scores, row_visible


def softmax_value_product(scores: Any, value: Any) -> Any:
    """`softmax(scores) · V`, `(B, Tq, H, Dv)`, differentiated by hand.

    Autodiff of the softmax keeps the weights P and, in the backward pass,
    forms dP ⊙ P next to P and dP: three `(B, H, Tq, Tk)` tensors at once.
    Here the row term uses the identity rowsum(dP ⊙ P) = rowsum(dO ⊙ O) for
    O = P·V (an O(T·d) product, as in FlashAttention), so the backward pass
    holds only P and dP, and dS = P ⊙ (dP − rowsum(dO ⊙ O)) overwrites dP.
    The weights P are the only score-sized tensor kept from the forward pass.
    """

    def forward(scores, value):
        weights = ops.softmax(scores, axis=-1)
        probs = ops.cast(weights, value.dtype)
        output = ops.einsum("bhqk,bkhd->bqhd", probs, value)

        def grad(*args, upstream=None):
            d_out = args[0] if upstream is None else upstream
            d_value = ops.einsum("bhqk,bqhd->bkhd", probs, d_out)
            d_probs = ops.cast(ops.einsum("bqhd,bkhd->bhqk", d_out, value), "float32")
            row = ops.sum(ops.cast(d_out, "float32") * ops.cast(output, "float32"), axis=-1)  # (B, Tq, H)
            d_scores = weights * (d_probs - ops.transpose(row, (0, 2, 1))[..., None])
            return d_scores, d_value

        return output, grad

    return ops.custom_gradient(forward)(scores, value)


@register_attention_impl("standard")
def standard_attention(inputs: AttentionInputs) -> tuple[Any, Any]:
    """Materialises the `(B, H, Tq, Tk)` weights (module docstring)."""
    query, key, value, mask, bias, scale, dropout, training, return_scores, causal = inputs
    scores, row_visible = masked_scores(query, key, mask, bias, scale, causal)
    # Masked entries are exact zeros (exp of the −1e9 fill underflows); rows
    # without a visible key are zeroed on the (B, Tq, H, Dv) output instead.
    if not return_scores and not inputs.dropout_active() and query.shape[1] != 1:
        output = softmax_value_product(scores, value)
        weights = None
    else:
        weights = ops.softmax(scores, axis=-1)
        probs = ops.cast(weights, value.dtype)
        if dropout is not None:
            probs = dropout(probs, training=training)
        if probs.shape[2] == 1:
            weights_bkh = ops.transpose(probs[:, :, 0, :], (0, 2, 1))[:, :, :, None]
            output = ops.sum(weights_bkh * value, axis=1, keepdims=True)
        else:
            output = ops.einsum("bhqk,bkhd->bqhd", probs, value)
    if row_visible is not None:
        output = output * ops.cast(ops.transpose(row_visible, (0, 2, 1, 3)), output.dtype)
        if return_scores:
            weights = weights * row_visible
    return output, (weights if return_scores else None)
