"""Scaled dot-product attention, the function behind every attention layer.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + B + M) V

`dot_product_attention` writes the formula out (`attention_scores` → softmax →
· V, scores and softmax in float32) and hands three cases to named fast paths
beside it, each computing the same numbers:

    attend_one_query    one query (a cached decoding step): two matmuls that read
                        every key and value once, grouped-query heads unrepeated,
                        the cache where it lies (`decoding.py`)
    chunked_attention   long keys (at least `AUTO_MIN_KEY_LENGTH`, or unknown at
                        trace time and found long at run time): exact, O(T) memory
                        (`chunked.py`)
    fused_attention     a JAX GPU with float16/bfloat16 inputs: cuDNN flash
                        attention (`fused.py`)

`attention_impl="auto"` (the default) takes them where they apply;
`"standard"` is the formula alone; any other name (`core.ATTENTION_IMPLS`:
"reference", "chunked", "fused", "local", "linear", your own) runs that
implementation. The contract of the arguments is `core.py`'s.
"""

import contextlib
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import keras
from keras import ops

from keras_tfm.checks import check_positive_int
from keras_tfm.layers.attention.chunked import chunked_attention
from keras_tfm.layers.attention.core import (
    ATTENTION_IMPLS,
    AttentionInputs,
    check_inputs,
    register_attention_impl,
)
from keras_tfm.layers.attention.decoding import attend_one_query, sequence_layout
from keras_tfm.layers.attention.fused import fused_attention, fused_kernel_available
from keras_tfm.layers.attention.lengths import static_or_dynamic_length
from keras_tfm.layers.attention.masks import MASK_FILL_VALUE, score_mask
from keras_tfm.layers.attention.toeplitz_bias import ToeplitzBias, expand_bias

#: "auto" takes the chunked path from this key length on. Chosen with
#: `python bench/attention_memory.py --threshold` (time and peak memory of one
#: causal layer, forward + backward, standard against chunked).
AUTO_MIN_KEY_LENGTH = 2048

_BOUND = threading.local()


@contextlib.contextmanager
def key_length_bound(max_key_length: int | None) -> Iterator[None]:
    """Within this scope, a graph traced with an unknown key length has keys of at
    most `max_key_length` (None: no bound), so "auto" decides statically when that
    bound is below its threshold instead of tracing both paths and a run-time
    choice. For callers that refuse longer inputs themselves (a serving signature
    that checks the model's maximum length).
    """
    previous = getattr(_BOUND, "value", None)
    _BOUND.value = None if max_key_length is None else check_positive_int("max_key_length", max_key_length)
    try:
        yield
    finally:
        _BOUND.value = previous


# --------------------------------------------------------------------------- the formula
def attention_scores(
    query: Any, key: Any, mask: Any = None, bias: Any = None, scale: float | None = None, causal: bool = False
) -> tuple[Any, Any]:
    """Float32 scores `S = Q Kᵀ · scale + B + M`, `(B, H, Tq, Tk)`, and the rows that see a key.

    The mask and the bias enter as ONE additive term shaped like them (usually
    without the batch or head axis), whose gradient needs nothing saved.

    Returns:
        `(scores, row_visible)`: `row_visible` is a float `(B|1, H|1, Tq, 1)`
        tensor, 1 where the query sees at least one key, or None when every
        query does (no mask, or a causal mask alone).
    """
    scale = 1.0 / math.sqrt(float(query.shape[-1])) if scale is None else scale
    query = ops.multiply(query, ops.cast(scale, query.dtype))  # the (smaller) query, not the scores
    scores = ops.cast(ops.einsum("bqhd,bkhd->bhqk", query, key), "float32")
    key_length = static_or_dynamic_length(key)
    visible = score_mask(mask, causal, static_or_dynamic_length(query), key_length)
    adder = None if bias is None else expand_bias(bias, key_length)
    row_visible = None
    if visible is not None:
        fill = ops.where(visible, 0.0, MASK_FILL_VALUE)
        adder = fill if adder is None else adder + fill
        if mask is not None:  # causal self-attention alone always sees the diagonal
            row_visible = ops.cast(ops.any(visible, axis=-1, keepdims=True), "float32")
    return (scores if adder is None else scores + adder), row_visible


def softmax_value_product(scores: Any, value: Any) -> Any:
    """`softmax(scores) · V`, `(B, Tq, H, Dv)`, differentiated by hand.

    Autodiff of the softmax keeps the weights P and, in the backward pass,
    forms dP ⊙ P next to P and dP: three `(B, H, Tq, Tk)` tensors at once.
    Here the row term uses the identity rowsum(dP ⊙ P) = rowsum(dO ⊙ O) for
    O = P·V (an O(T·d) product, as in FlashAttention), so the backward pass
    holds only P and dP, and dS = P ⊙ (dP − rowsum(dO ⊙ O)) overwrites dP.
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


def dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    mask: Any = None,
    bias: Any = None,
    scale: float | None = None,
    dropout: Callable | None = None,
    training: bool | None = None,
    return_attention_scores: bool = False,
    causal: bool = False,
    attention_impl: str = "auto",
    attention_options: dict | None = None,
    cache_layout: bool = False,
) -> tuple[Any, Any]:
    """Scaled dot-product attention, softmax(Q Kᵀ/√d_k + B + M)·V.

    Args:
        query: `(batch, query_length, num_heads, key_dim)`.
        key: `(batch, key_length, num_key_value_heads, key_dim)`; `num_key_value_heads` divides
            `num_heads` (grouped-query attention: query head h uses key/value
            head h // (num_heads / num_key_value_heads)).
        value: `(batch, key_length, num_key_value_heads, value_dim)`.
        mask: optional boolean mask, True = may attend (`core` contract).
        bias: optional additive float score bias B (ALiBi, relative positions):
            a tensor or a `ToeplitzBias`.
        scale: score scale; defaults to `1/sqrt(key_dim)`.
        dropout: optional callable `(x, training=...)` applied to the weights.
        training: Python bool or None, forwarded to `dropout`.
        return_attention_scores: also return the float32 attention weights.
        causal: apply the causal mask (key j ≤ query i; equal lengths).
        attention_impl: "auto", "standard", or a name of `ATTENTION_IMPLS`.
        attention_options: dict of that implementation's options.
        cache_layout: keys are `(batch, num_key_value_heads, key_dim, key_length)` and
            values `(batch, num_key_value_heads, key_length, value_dim)`, as a decoding
            cache stores them (`decoding.init_cache`).

    Returns:
        `(output, weights)`: output `(batch, query_length, num_heads,
        value_dim)` in the value dtype, and float32 weights
        `(batch, num_heads, query_length, key_length)` or None.
    """
    inputs, options = check_inputs(
        query, key, value, mask, bias, scale, dropout, training, return_attention_scores, causal,
        attention_impl, attention_options, cache_layout,
    )  # fmt: skip
    if attention_impl in ("auto", "standard") and _one_query(inputs):
        return attend_one_query(*inputs[:5], dropout, training, cache_layout, scale=scale), None
    if cache_layout:
        inputs = inputs._replace(**dict(zip(("key", "value"), sequence_layout(key, value))))
    groups = query.shape[2] // inputs.key.shape[2]
    if groups > 1:  # grouped-query attention: each key/value head serves `groups` query heads
        inputs = inputs._replace(
            key=ops.repeat(inputs.key, groups, axis=2), value=ops.repeat(inputs.value, groups, axis=2)
        )
    if attention_impl not in ("auto", "standard"):
        output, weights = ATTENTION_IMPLS[attention_impl](inputs, **options)
        return ops.cast(output, value.dtype), weights
    if attention_impl == "auto" and not return_attention_scores and not inputs.dropout_active():
        fast = _long_or_fused(inputs, **options)
        if fast is not None:
            return ops.cast(fast, value.dtype), None
    # The formula: S = Q Kᵀ / √d_k + B + M;  P = softmax(S);  output = P V (float32 scores and softmax).
    scores, row_visible = attention_scores(inputs.query, inputs.key, mask, bias, scale, causal)
    weights = None
    if return_attention_scores or inputs.dropout_active():
        weights = ops.softmax(scores, axis=-1)
        probs = ops.cast(weights, value.dtype)
        if dropout is not None:
            probs = dropout(probs, training=training)
        output = ops.einsum("bhqk,bkhd->bqhd", probs, inputs.value)
    else:  # the same product, with a gradient that keeps one score-sized tensor
        output = softmax_value_product(scores, inputs.value)
    if row_visible is not None:  # a query that sees no key: zeros (its weights are uniform junk)
        output = output * ops.cast(ops.transpose(row_visible, (0, 2, 1, 3)), output.dtype)
        weights = None if weights is None else weights * row_visible
    return ops.cast(output, value.dtype), (weights if return_attention_scores else None)


# --------------------------------------------------------------------------- the fast paths' choice
def _one_query(inputs: AttentionInputs) -> bool:
    """Whether `attend_one_query` serves the call: one query, no weights asked for, a mask
    without a per-head axis and a bias without a batch axis."""
    mask, bias = inputs.mask, inputs.bias
    return (
        inputs.query.shape[1] == 1
        and not inputs.return_attention_scores
        and (mask is None or len(mask.shape) < 4 or mask.shape[1] == 1)
        and (bias is None or isinstance(bias, ToeplitzBias) or len(bias.shape) < 4)
    )


def _long_or_fused(inputs: AttentionInputs, min_key_length: int | None = None, **chunked_options: Any) -> Any:
    """The output of "auto"'s fast path for long keys or a JAX GPU, or None (the formula).

    The key length is read statically when it is known (always on JAX and
    PyTorch, and in TensorFlow graphs traced for fixed-length batches); when it
    is unknown at trace time the choice is made at run time inside the graph (a
    `cond`), unless a `key_length_bound` scope says the keys stay shorter.
    """
    threshold = (
        AUTO_MIN_KEY_LENGTH
        if min_key_length is None
        else check_positive_int("min_key_length", min_key_length)
    )
    if fused_kernel_available(inputs.query, inputs.value, inputs.bias):
        return fused_attention(inputs)[0]
    tk = inputs.key.shape[1]
    if not isinstance(tk, int) and keras.backend.backend() != "tensorflow":
        return None  # a symbolic length exists only while Keras infers shapes on JAX/PyTorch
    if tk is not None:
        return chunked_attention(inputs, **chunked_options)[0] if tk >= threshold else None
    bound = getattr(_BOUND, "value", None)
    if bound is not None and bound < threshold:  # `key_length_bound`: never long enough
        return None
    dtype = inputs.value.dtype
    long = ops.shape(inputs.key)[1] >= threshold
    if_long = lambda x: ops.cast(chunked_attention(x, **chunked_options)[0], dtype)
    if_short = lambda x: ops.cast(standard_attention(x)[0], dtype)
    if inputs.training is False:  # inference (predict, generation, SavedModel signatures): a plain cond
        return ops.cond(long, lambda: if_long(inputs), lambda: if_short(inputs))
    return choose_at_run_time(inputs, long, if_long, if_short)


def choose_at_run_time(inputs: AttentionInputs, long: Any, if_long: Any, if_short: Any) -> Any:
    """`if_long(inputs)` where the scalar bool `long` holds, else `if_short(inputs)` (TensorFlow graphs).

    The gradient is a second run-time choice between the two branches' own
    gradients, each recomputed from the inputs. A plain `cond`'s gradient
    passes the forward branches' intermediates across the branches, and XLA
    (`jit_compile=True`, as `model.fit` compiles by default) cannot compile
    the untaken branch's: their shapes are unknown when a `None` length is
    traced. The cost is one recomputed forward of the branch taken. Inference
    calls (`training=False`) take a plain `cond`: a SavedModel then holds no
    custom gradient, which TensorFlow warns about at every load.
    """
    import tensorflow as tf  # only reached with a TensorFlow graph (a `None` length)

    toeplitz = isinstance(inputs.bias, ToeplitzBias)
    differentiable = [inputs.query, inputs.key, inputs.value]
    if toeplitz:
        differentiable.append(inputs.bias.values)
    elif inputs.bias is not None:
        differentiable.append(inputs.bias)

    def rebuild(*tensors):
        q, k, v, *rest = tensors
        bias = inputs.bias
        if toeplitz:
            bias = ToeplitzBias(rest[0], inputs.bias.query_length, inputs.bias.trainable)
        elif bias is not None:
            bias = rest[0]
        return inputs._replace(query=q, key=k, value=v, bias=bias)

    @tf.custom_gradient
    def choose(*tensors):
        output = tf.cond(long, lambda: if_long(rebuild(*tensors)), lambda: if_short(rebuild(*tensors)))

        def gradient(upstream):
            def branch(fn):
                def run():
                    with tf.GradientTape() as tape:
                        tape.watch(tensors)
                        out = fn(rebuild(*tensors))
                    grads = tape.gradient(out, tensors, output_gradients=upstream)
                    return [tf.zeros_like(t) if g is None else g for t, g in zip(tensors, grads)]

                return run

            return tf.cond(long, branch(if_long), branch(if_short))

        return output, gradient

    return choose(*differentiable)


# --------------------------------------------------------------------------- by name
@register_attention_impl("standard")
def standard_attention(inputs: AttentionInputs) -> tuple[Any, Any]:
    """The formula alone (`dot_product_attention(..., attention_impl="standard")`)."""
    return dot_product_attention(*inputs, attention_impl="standard")


@register_attention_impl("auto")
def auto_attention(inputs: AttentionInputs, min_key_length: int | None = None, **chunked_options: Any) -> Any:
    """The formula with its fast paths (`dot_product_attention`'s default). Options:
    `min_key_length` (default `AUTO_MIN_KEY_LENGTH`) and those of "chunked"."""
    options = dict(chunked_options, **({} if min_key_length is None else {"min_key_length": min_key_length}))
    return dot_product_attention(*inputs, attention_impl="auto", attention_options=options)
