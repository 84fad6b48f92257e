"""Kernelized linear attention: `attention_impl="linear"`.

Katharopoulos et al. (2020), "Transformers are RNNs": with the feature map
φ(x) = elu(x) + 1 (strictly positive),

    non-causal:  O_i = φ(Q_i) (Σ_j φ(K_j)ᵀ V_j) / (φ(Q_i) · Σ_j φ(K_j))
    causal:      O_i = φ(Q_i) (Σ_{j≤i} φ(K_j)ᵀ V_j) / (φ(Q_i) · Σ_{j≤i} φ(K_j))

in O(T) time and memory. The causal prefix sums are computed chunk-wise: inside
a chunk of `chunk_size` positions the (chunk × chunk) lower-triangular product
is formed directly, and the state Σ φ(K)ᵀV of all earlier chunks comes from an
exclusive cumulative sum over per-chunk states (B, T/chunk, H, D, Dv); with
`chunk_size=1` this is the plain per-position cumsum. This is a different
model from softmax attention (no softmax, no score scale), not an
approximation of it.

Masks. Linear attention cannot apply an arbitrary (Tq, Tk) mask or an additive
score bias. What it supports:
  * key padding, applied by zeroing φ(K) at padded keys;
  * causality, requested explicitly with `attention_options={"causal": True}`.
The layers pass a key-padding mask `(B, 1, Tk)` and the `causal` flag. A
full `(Tq, Tk)` mask is reduced to a key-padding mask (a key is valid if any
query may attend it) and then checked to be exactly `padding`
(causal=False) or `tril ∧ padding` (causal=True). Any other mask (e.g. a
causal mask without `causal=True`, a sliding window, per-query masks)
raises: a `ValueError` eagerly, an `InvalidArgumentError` with the same
message inside a `tf.function` (the check is skipped under XLA and
`jax.jit`, which cannot raise from inside a compiled program). An explicit
flag is used instead of guessing causality from the mask because the mask is
a runtime tensor, while the causal/non-causal algorithm must be chosen when
the graph is built. Written with `keras.ops`: runs on the TensorFlow, JAX and
PyTorch backends.

A query with no valid key gets a zero output. `return_attention_scores`, attention
dropout in training, `bias` and `scale` raise a `ValueError`.
"""

from typing import Any

import keras
from keras import ops

from keras_tfm.checks import check_positive_int
from keras_tfm.layers.attention.core import AttentionInputs, register_attention_impl
from keras_tfm.layers.attention.lengths import pad_axis, static_or_dynamic_length
from keras_tfm.layers.attention.masks import expand_mask

_MASK_MESSAGE = (
    "attention_impl='linear' only supports key-padding masks, combined with a causal "
    "mask when attention_options={'causal': True}; the given mask is neither "
    "(if the layer is causal, set attention_options={'causal': True})."
)


def elu_feature_map(x: Any) -> Any:
    """φ(x) = elu(x) + 1 > 0."""
    return ops.elu(x) + 1.0


def _checked(ok, tensor):
    """`tensor` after checking the scalar bool `ok` (ValueError eagerly; a graph
    assertion in a TensorFlow graph; no check inside a compiled JAX program)."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf  # the backend in use

        if not tf.executing_eagerly():
            with tf.control_dependencies([tf.debugging.Assert(ok, [tf.constant(_MASK_MESSAGE)])]):
                return tf.identity(tensor)
    try:
        value = bool(ops.convert_to_numpy(ok))
    except Exception:  # a tracer (jax.jit): not checkable, as under XLA
        return tensor
    if not value:
        raise ValueError(_MASK_MESSAGE)
    return tensor


def _key_padding(mask, causal, tq, tk):
    """Reduces a layer mask to key validity `(B|1, H|1, Tk)` and checks its form."""
    mask4 = expand_mask(mask)
    if mask4.shape[3] == 1:
        raise ValueError(
            "attention_impl='linear' needs a mask that varies over keys (a key-padding "
            f"mask); received a mask of shape {tuple(mask.shape)}."
        )
    key_valid = ops.any(mask4, axis=2)
    if mask4.shape[2] == 1:  # a key-padding mask (the layers' form)
        return key_valid
    expected = key_valid[:, :, None, :]
    if causal:
        tril = ops.arange(tq, dtype="int32")[:, None] >= ops.arange(tk, dtype="int32")[None, :]
        expected = ops.logical_and(expected, tril)
    return _checked(ops.all(ops.equal(mask4, expected)), key_valid)


def linear_attention_reference(
    query: Any, key: Any, value: Any, key_valid: Any = None, causal: bool = False
) -> Any:
    """Quadratic reference of linear attention (for tests): materialises
    A = φ(Q)φ(K)ᵀ, zeroes padded (and, if causal, future) keys, normalises rows."""
    fq = elu_feature_map(ops.cast(query, "float32"))
    fk = elu_feature_map(ops.cast(key, "float32"))
    a = ops.einsum("bqhd,bkhd->bhqk", fq, fk)
    tq, tk = a.shape[2], a.shape[3]
    if key_valid is not None:
        a = a * ops.cast(ops.reshape(key_valid, (-1, 1, 1, tk)), "float32")
    if causal:
        a = a * ops.cast(ops.arange(tq)[:, None] >= ops.arange(tk)[None, :], "float32")
    den = ops.sum(a, axis=-1, keepdims=True)
    w = ops.divide_no_nan(a, den)
    return ops.einsum("bhqk,bkhd->bqhd", w, ops.cast(value, "float32"))


@register_attention_impl("linear")
def linear_attention(inputs: AttentionInputs, chunk_size: int = 64) -> tuple[Any, None]:
    """O(T) kernelized attention; see module docs."""
    inputs.refuse_weights("linear")
    query, key, value = inputs[:3]
    mask, causal = inputs.mask, inputs.causal
    if inputs.bias is not None:
        raise ValueError(
            "attention_impl='linear' cannot add a score `bias` (ALiBi / relative "
            "positions): there is no score matrix. Use position=None or 'rope'."
        )
    if inputs.scale is not None:
        raise ValueError("attention_impl='linear' has no score `scale`; leave `scale=None`.")
    check_positive_int("chunk_size", chunk_size)
    tq = static_or_dynamic_length(query)
    tk = static_or_dynamic_length(key)

    fq = elu_feature_map(ops.cast(query, "float32"))  # (B, Tq, H, D)
    fk = elu_feature_map(ops.cast(key, "float32"))  # (B, Tk, H, D)
    v = ops.cast(value, "float32")
    if mask is not None:
        key_valid = _key_padding(mask, causal, tq, tk)  # (B|1, H|1, Tk)
        fk = fk * ops.cast(ops.transpose(key_valid, (0, 2, 1)), "float32")[..., None]

    if not causal:
        kv = ops.einsum("bkhd,bkhe->bhde", fk, v)
        z = ops.sum(fk, axis=1)  # (B, H, D)
        num = ops.einsum("bqhd,bhde->bqhe", fq, kv)
        den = ops.einsum("bqhd,bhd->bqh", fq, z)
    else:
        c = min(chunk_size, tq) if isinstance(tq, int) else chunk_size
        n = -(-tq // c)
        pad = n * c - tq
        batch = static_or_dynamic_length(fq, 0)
        h, d, e = fq.shape[2], fq.shape[3], v.shape[3]

        def blocks(x, last):
            return ops.reshape(pad_axis(x, 1, pad), (batch, n, c, h, last))

        qb, kb, vb = blocks(fq, d), blocks(fk, d), blocks(v, e)
        # State of all previous chunks: exclusive prefix sums of per-chunk sums.
        chunk_kv = ops.einsum("bnchd,bnche->bnhde", kb, vb)
        kv = ops.cumsum(chunk_kv, axis=1) - chunk_kv
        chunk_z = ops.sum(kb, axis=2)  # (B, n, H, D)
        z = ops.cumsum(chunk_z, axis=1) - chunk_z
        num = ops.einsum("bnchd,bnhde->bnche", qb, kv)
        den = ops.einsum("bnchd,bnhd->bnch", qb, z)
        # Within a chunk: the masked quadratic form on (c × c) blocks.
        tril = ops.cast(ops.arange(c)[:, None] >= ops.arange(c)[None, :], "float32")
        a = ops.einsum("bnqhd,bnkhd->bnhqk", qb, kb) * tril
        num = num + ops.einsum("bnhqk,bnkhe->bnqhe", a, vb)
        den = den + ops.transpose(ops.sum(a, axis=-1), (0, 1, 3, 2))
        num = ops.reshape(num, (batch, n * c, h, e))[:, :tq]
        den = ops.reshape(den, (batch, n * c, h))[:, :tq]

    has_keys = den > 0.0
    output = num / ops.where(has_keys, den, 1.0)[..., None]
    output = ops.where(has_keys[..., None], output, 0.0)
    return output, None
