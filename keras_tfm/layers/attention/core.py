"""The one attention core behind every attention layer in keras_tfm.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + B + M) V

`dot_product_attention` takes already-projected, per-head tensors and serves
self-, cross-, causal, cached and biased (ALiBi / relative position) attention.
Masks are boolean, True = may attend. Scores, the mask fill and the softmax are
computed in float32 even under mixed precision; the fill value is a finite
float32 number (never -inf, never a float16 overflow), and a query whose keys are
all masked gets all-zero weights (so a zero output), never NaN.

Written with `keras.ops` only: it runs on the TensorFlow, JAX and PyTorch
backends.

Tensor layouts:
    query: `(batch, query_length, num_heads, key_dim)`
    key:   `(batch, key_length, num_heads, key_dim)`
    value: `(batch, key_length, num_heads, value_dim)`
    mask:  bool, rank 2 `(Tq, Tk)`, rank 3 `(B, Tq, Tk)` or rank 4 `(B, H, Tq, Tk)`
           (any axis may be 1 to broadcast; a key-padding mask is `(B, 1, Tk)`).
    bias:  float, rank 2 `(Tq, Tk)`, rank 3 `(H, Tq, Tk)` or rank 4 `(B, H, Tq, Tk)`;
           or a `ToeplitzBias` (a bias that depends only on the key − query
           offset, as ALiBi and T5 relative positions do), stored in O(T).
    causal: bool; key j is visible to query i only if j ≤ i (self-attention,
           query_length == key_length). Implementations build this mask
           themselves (per block for the chunked one), so the layers never pass
           a T × T causal mask.

Implementations are selected by `impl`: "standard" materialises the full score
matrix; "auto" (the default everywhere) picks "chunked" when attention weights
are not requested and the key length is at least `AUTO_MIN_KEY_LENGTH`, and
"standard" otherwise (on a GPU under JAX with float16/bfloat16 inputs and no
score bias it calls the backend's fused kernel, "fused": cuDNN flash
attention). Other entries of `ATTENTION_IMPLS` are registered with
`register_attention_impl` and share the same contract: "chunked" (exact, O(T)
memory, `chunked_attention.py`), "local" (sliding window, `local_attention.py`)
and "linear" (kernelized, `linear_attention.py`), all registered when
`keras_tfm.layers` is imported.

How "auto" decides: from the static key length when it is known (always on JAX
and PyTorch, and in TensorFlow graphs traced for fixed-length batches, as
`model.fit` and XLA trace them); when the key length is unknown at trace time
(a TensorFlow graph traced with a `None` length) the choice is made at run time
inside the graph with `keras.ops.cond`. A single query (a cached decoding
step) always takes the standard path, whose score matrix is then `(1, Tk)`.

Why ~500 lines in one module: it is the lecture's one formula, its input
contract (`AttentionInputs`) and the dispatch among implementations; the
implementations that are ideas of their own live in chunked_attention.py,
local_attention.py and linear_attention.py.
"""

import math
from typing import Any, NamedTuple

import keras
from keras import ops

from keras_tfm.checks import as_bool_mask, check_positive_int
from keras_tfm.layers.attention import masks as masks_lib

# Finite large negative fill used on float32 scores before the softmax.
MASK_FILL_VALUE = -1e9

# "auto" takes the chunked path from this key length on. Chosen with
# `python bench/attention_memory.py --threshold` (one causal layer, forward +
# backward, d 256, 4 heads, CPU): from T = 2048 on the chunked path is as fast
# as the standard one and needs a quarter of its memory (less than Keras'
# MultiHeadAttention); at T = 1024 it is ~15 % slower, while the standard path's
# peak is still below Keras MHA's (82 %).
AUTO_MIN_KEY_LENGTH = 2048

ATTENTION_IMPLS = {}


def register_attention_impl(name):
    """Decorator registering an attention implementation under `name`.

    The function is called as `fn(inputs, **options)`: `inputs` is an
    `AttentionInputs` (query, key, value, mask, bias, scale, dropout, training,
    return_weights, causal; the layouts of this module) and `options` are the
    implementation's own keyword arguments (`attention_options`). It returns
    `(output, weights_or_None)`, the `(B, Tq, H, Dv)` output in float32 or the
    compute dtype. Implementations that cannot return weights or apply
    weight-dropout call `inputs.refuse_weights(name)`.
    """

    def wrap(fn):
        ATTENTION_IMPLS[name] = fn
        return fn

    return wrap


class AttentionInputs(NamedTuple):
    """One attention call, as every registered implementation receives it.

    Fields: `query`, `key`, `value` (rank 4, module docstring layouts), `mask`
    (bool or None), `bias` (tensor, `ToeplitzBias` or None), `scale` (None:
    `1/sqrt(key_dim)`), `dropout` (callable or None) and `training` (forwarded
    to it), `return_weights` and `causal` (Python bools).
    """

    query: Any
    key: Any
    value: Any
    mask: Any = None
    bias: Any = None
    scale: Any = None
    dropout: Any = None
    training: Any = None
    return_weights: bool = False
    causal: bool = False

    def score_scale(self):
        """The score scale: `scale`, or `1/sqrt(key_dim)` when it is None."""
        return 1.0 / math.sqrt(float(self.query.shape[-1])) if self.scale is None else self.scale

    def dropout_active(self):
        """Whether weight dropout may run (a tensor-valued `training` may be True at run time)."""
        rate = getattr(self.dropout, "rate", 0.0) if self.dropout is not None else 0.0
        return bool(rate) and (self.training is not None and self.training is not False)

    def refuse_weights(self, impl, dropout=True):
        """Raises for what an implementation without a weight matrix cannot serve:
        `return_weights`, and weight dropout in training (unless `dropout=False`,
        for implementations that apply it themselves)."""
        if self.return_weights:
            raise ValueError(
                f"attention_impl={impl!r} never materialises the attention weights, so "
                "`return_weights=True` (`return_attention_scores=True`) is not supported; "
                "use attention_impl='standard' (or 'auto') to inspect the weights."
            )
        if dropout and self.dropout_active():
            raise ValueError(
                f"attention_impl={impl!r} does not support attention-weight `dropout` "
                f"(rate={self.dropout.rate}) in training; set the layer's `dropout=0.0` (or "
                "`attention_dropout=0.0` on TransformerBlock) or use attention_impl='standard' (or 'auto')."
            )


def implementation_options(impl):
    """Names of the `attention_options` that implementation `impl` accepts.

    Read from the registered function's keyword arguments after `inputs`
    ("auto" also takes those of "chunked"); "causal" is always accepted (the
    layers set it). Returns None when the implementation takes arbitrary
    `**options`.
    """
    import inspect

    names = {"causal"}
    for param in list(inspect.signature(ATTENTION_IMPLS[impl]).parameters.values())[1:]:
        if param.kind is param.VAR_KEYWORD:
            if impl == "auto" and "chunked" in ATTENTION_IMPLS:
                names |= implementation_options("chunked")
                continue
            return None
        names.add(param.name)
    return names


class ToeplitzBias:
    """A score bias that depends only on the key − query offset.

        bias[h, i, j] = values[h, j − i + query_length − 1]

    ALiBi (−m_h·|i − j|) and T5 relative positions (E[bucket(j − i), h]) are of
    this form, so a layer can hand the attention core `H·(Tq + Tk − 1)` numbers
    instead of an `(H, Tq, Tk)` tensor; the standard path materialises it, the
    chunked path gathers one `(cq, ck)` block at a time and returns the
    gradient w.r.t. `values` (so learned relative-position tables train).

    Args:
        values: float tensor `(H | 1, query_length + key_length − 1)`.
        query_length: int or scalar int tensor.
        trainable: False when no gradient w.r.t. `values` is needed (ALiBi);
            lets the chunked backward pass skip computing it.
    """

    def __init__(self, values, query_length, trainable=True):
        if len(values.shape) != 2:
            raise ValueError(
                "`ToeplitzBias` values must have rank 2 (heads, query_length + key_length - 1); "
                f"received shape {tuple(values.shape)}."
            )
        self.values = values
        self.query_length = query_length
        self.trainable = bool(trainable)

    @classmethod
    def from_bias_fn(cls, bias_fn, query_length, key_length, trainable=True):
        """Builds it from `bias_fn(query_length, key_length, query_offset)`,
        e.g. `AlibiBias.compute_bias` or `RelativePositionBias.compute_bias`,
        evaluated once on the `(1, Tq + Tk − 1)` row of all offsets."""
        row = bias_fn(1, query_length + key_length - 1, query_length - 1)  # (H, 1, Tq + Tk - 1)
        return cls(row[:, 0, :], query_length, trainable=trainable)

    def dense(self, key_length):
        """The float32 `(H | 1, query_length, key_length)` bias tensor."""
        i = ops.arange(self.query_length, dtype="int32")[:, None]
        j = ops.arange(key_length, dtype="int32")[None, :]
        index = j - i + ops.cast(self.query_length, "int32") - 1
        return ops.take(ops.cast(self.values, "float32"), index, axis=1)


def static_or_dynamic_length(x, axis=1):
    """`x.shape[axis]` if static, else a scalar int tensor."""
    d = x.shape[axis]
    return d if d is not None else ops.shape(x)[axis]


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


def _expand_bias(bias, key_length=None):
    """Brings an additive score bias to rank 4 `(B|1, H|1, Tq, Tk)` float32."""
    if isinstance(bias, ToeplitzBias):
        return bias.dense(key_length)[None]
    bias = ops.cast(bias, "float32")
    rank = len(bias.shape)
    if rank == 2:
        return bias[None, None, :, :]
    if rank == 3:
        return bias[None, :, :, :]
    if rank == 4:
        return bias
    raise ValueError(f"`bias` must have rank 2, 3 or 4; received shape {tuple(bias.shape)}.")


def check_causal(causal, query, key, impl):
    """Validates the `causal` flag (a Python bool; equal static lengths)."""
    if not isinstance(causal, bool):
        raise ValueError(f"`causal` must be a bool; received {causal!r}.")
    tq, tk = query.shape[1], key.shape[1]
    if causal and tq is not None and tk is not None and tq != tk:
        raise ValueError(
            f"attention_impl={impl!r} with causal=True needs query_length == key_length; "
            f"received {tq} and {tk} (pass a causal `mask` instead)."
        )


def _score_mask(query, key, mask, causal):
    """The rank-4 boolean mask (causal ∧ mask), or None."""
    if causal:
        tk = static_or_dynamic_length(key)
        causal_m = masks_lib.causal_mask(static_or_dynamic_length(query), tk)[None, None]
        return causal_m if mask is None else ops.logical_and(_expand_mask(mask), causal_m)
    return None if mask is None else _expand_mask(mask)


def _scores_and_rows(query, key, mask=None, bias=None, scale=None, causal=False):
    """Masked float32 scores `(B, H, Tq, Tk)` and the rows that see a key.

    The mask and the bias enter as ONE additive term, `bias + where(mask, 0,
    fill)`, whose shape is that of the mask/bias (usually without the batch or
    head axis) and whose gradient needs nothing saved; a `where` on the full
    score matrix would keep a second `(B, H, Tq, Tk)` tensor (or the mask) alive
    for the backward pass.

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
        # One query (a cached decoding step): a broadcast multiply-and-sum is
        # about twice as fast as a batched matmul with M = 1 on CPU.
        scores = ops.transpose(ops.sum(query * key, axis=-1), (0, 2, 1))[:, :, None, :]
    else:
        scores = ops.einsum("bqhd,bkhd->bhqk", query, key)
    scores = ops.cast(scores, "float32")
    full_mask = _score_mask(query, key, mask, causal)
    adder = None
    if bias is not None:
        adder = _expand_bias(bias, static_or_dynamic_length(key))
    row_visible = None
    if full_mask is not None:
        fill = ops.where(full_mask, 0.0, MASK_FILL_VALUE)
        adder = fill if adder is None else adder + fill
        if mask is not None:  # causal self-attention alone always sees the diagonal
            row_visible = ops.cast(ops.any(full_mask, axis=-1, keepdims=True), "float32")
    if adder is not None:
        scores = scores + adder
    return scores, row_visible


def attention_weights(query, key, mask=None, bias=None, scale=None, causal=False):
    """softmax(Q Kᵀ · scale + bias) with masking, in float32.

    Returns:
        float32 tensor `(batch, num_heads, query_length, key_length)`; masked
        entries are exactly 0 and fully masked rows are all 0.
    """
    scores, row_visible = _scores_and_rows(query, key, mask, bias, scale, causal)
    weights = ops.softmax(scores, axis=-1)
    if row_visible is not None:
        weights = weights * row_visible
    return weights


def _softmax_value_product(scores, value):
    """`softmax(scores) · V`, `(B, Tq, H, Dv)`, differentiated by hand.

    Autodiff of the softmax keeps the weights P and, in the backward pass,
    forms dP ⊙ P next to P and dP: three `(B, H, Tq, Tk)` tensors at once (the
    peak of `keras.layers.MultiHeadAttention`). Here the row term uses the
    identity rowsum(dP ⊙ P) = rowsum(dO ⊙ O) for O = P·V (an O(T·d) product,
    as in FlashAttention), so the backward pass holds only P and dP, and
    dS = P ⊙ (dP − rowsum(dO ⊙ O)) overwrites dP. The weights P are the only
    score-sized tensor kept from the forward pass.
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
def standard_attention(inputs):
    """Materialises the `(B, H, Tq, Tk)` weights (see the module docstring)."""
    query, key, value, mask, bias, scale, dropout, training, return_weights, causal = inputs
    scores, row_visible = _scores_and_rows(query, key, mask, bias, scale, causal)
    # Masked entries are exact zeros (exp of the −1e9 fill underflows); rows
    # without a visible key are zeroed on the (B, Tq, H, Dv) output instead.
    if not return_weights and not inputs.dropout_active() and query.shape[1] != 1:
        output = _softmax_value_product(scores, value)
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
        if return_weights:
            weights = weights * row_visible
    return output, (weights if return_weights else None)


def _fused_kernel_available(query, value, bias):
    """Whether "auto" should call the backend's fused kernel: JAX on a GPU with
    float16/bfloat16 inputs (cuDNN flash attention), no score bias, equal
    key/value head sizes."""
    if keras.backend.backend() != "jax" or bias is not None or value.shape[-1] != query.shape[-1]:
        return False
    if keras.backend.standardize_dtype(query.dtype) not in ("float16", "bfloat16"):
        return False
    import jax  # the backend in use

    return jax.devices()[0].platform == "gpu"


@register_attention_impl("fused")
def fused_attention(inputs, flash_attention=None):
    """The backend's own kernel, `keras.ops.dot_product_attention`: cuDNN flash
    attention on a GPU under JAX (float16/bfloat16), PyTorch's
    `scaled_dot_product_attention`, XLA elsewhere. "auto" uses it on a JAX GPU.

    Same contract as "standard" (a query with no visible key gets a zero
    output), without weights or weight dropout; `flash_attention` is passed on
    (None: the backend decides).
    """
    inputs.refuse_weights("fused")
    query, key, value = inputs[:3]
    mask, bias, causal = inputs.mask, inputs.bias, inputs.causal
    mask4 = None if mask is None else _expand_mask(mask)
    bias4 = None if bias is None else _expand_bias(bias, static_or_dynamic_length(key))
    output = ops.dot_product_attention(
        query,
        key,
        value,
        bias=None if bias4 is None else ops.cast(bias4, query.dtype),
        mask=mask4,
        scale=inputs.scale,
        is_causal=causal,
        flash_attention=flash_attention,
    )
    if mask4 is not None:
        visible = mask4
        if causal:
            visible = ops.logical_and(visible, _score_mask(query, key, None, True))
        row_visible = ops.any(visible, axis=-1, keepdims=True)  # (B|1, H|1, Tq, 1)
        output = output * ops.cast(ops.transpose(row_visible, (0, 2, 1, 3)), output.dtype)
    return output, None


@register_attention_impl("auto")
def auto_attention(inputs, min_key_length=None, **chunked_options):
    """ "chunked" for long keys, "standard" otherwise (see the module docstring).

    Options: `min_key_length` (default `AUTO_MIN_KEY_LENGTH`) and the options of
    "chunked" (`query_chunk_size`, `key_chunk_size`).
    """
    threshold = AUTO_MIN_KEY_LENGTH if min_key_length is None else min_key_length
    check_positive_int("min_key_length", threshold)
    standard = ATTENTION_IMPLS["standard"]
    if inputs.return_weights or inputs.dropout_active() or inputs.query.shape[1] == 1:
        return standard(inputs)
    inputs = inputs._replace(return_weights=False)
    if _fused_kernel_available(inputs.query, inputs.value, inputs.bias):
        return fused_attention(inputs)
    chunked = ATTENTION_IMPLS["chunked"]
    tk = inputs.key.shape[1]
    if not isinstance(tk, int) and keras.backend.backend() != "tensorflow":
        # A symbolic length exists only while Keras infers shapes on JAX/PyTorch (real calls have
        # static shapes there); both paths give the same output shape.
        return standard(inputs)
    if tk is not None:
        return chunked(inputs, **chunked_options) if tk >= threshold else standard(inputs)
    dtype = inputs.value.dtype
    output = ops.cond(
        ops.shape(inputs.key)[1] >= threshold,
        lambda: ops.cast(chunked(inputs, **chunked_options)[0], dtype),
        lambda: ops.cast(standard(inputs)[0], dtype),
    )
    return output, None


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
    causal=False,
    impl="auto",
    **impl_kwargs,
):
    """Scaled dot-product attention, softmax(Q Kᵀ/√d_k + bias)·V.

    Args:
        query: `(batch, query_length, num_heads, key_dim)`.
        key: `(batch, key_length, num_heads, key_dim)`.
        value: `(batch, key_length, num_heads, value_dim)`.
        mask: optional boolean mask, True = may attend (see module docstring).
        bias: optional additive float score bias (ALiBi, relative positions):
            a tensor or a `ToeplitzBias`.
        scale: score scale; defaults to `1/sqrt(key_dim)`.
        dropout: optional callable `(x, training=...)` applied to the weights
            (a `keras.layers.Dropout` owned by the calling layer).
        training: Python bool or None, forwarded to `dropout`.
        return_weights: if True also return the float32 attention weights.
        causal: apply the causal mask (key j ≤ query i; equal lengths) inside
            the implementation, combined with `mask`.
        impl: name of a registered implementation (see `ATTENTION_IMPLS`);
            "auto" picks "chunked" or "standard" (module docstring).
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
    check_causal(causal, query, key, impl)
    mask = as_bool_mask("mask", mask)  # bool or 0/1 ints; float/additive masks are refused
    inputs = AttentionInputs(query, key, value, mask, bias, scale, dropout, training, return_weights, causal)
    output, weights = ATTENTION_IMPLS[impl](inputs, **impl_kwargs)
    return ops.cast(output, value.dtype), weights
