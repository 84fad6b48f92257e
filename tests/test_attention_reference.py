"""The plain formula, attention_impl="reference", and every exact implementation against it.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + B + M) V

"reference" is checked against a NumPy transcription of the formula; "standard",
"chunked", "fused", "auto" and "local" (with a window covering the sequence)
must give its outputs and gradients.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_tfm.layers import attention

B, T, H, D = 2, 13, 3, 4


def _qkv(seed=0, dtype="float32"):
    rng = np.random.default_rng(seed)
    return [tf.constant(rng.normal(size=(B, T, H, D)), dtype) for _ in range(3)]


def _padding():
    pad = np.ones((B, T), bool)
    pad[0, T - 3 :] = False
    pad[1, :2] = False  # under causal, queries 0 and 1 of sequence 1 see no key
    return pad


def _numpy_attention(q, k, v, mask=None, bias=None, causal=False):
    """softmax(Q Kᵀ/√d + B + M) V in float64 NumPy; rows that see no key are 0."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + np.asarray(bias, np.float64)
    visible = np.ones(scores.shape, bool)
    if mask is not None:
        visible &= np.broadcast_to(np.asarray(mask)[:, None], scores.shape)
    if causal:
        visible &= np.tril(np.ones((T, T), bool))
    scores = np.where(visible, scores, -np.inf)
    top = np.max(np.where(visible, scores, -1e300), axis=-1, keepdims=True)
    weights = np.where(visible, np.exp(scores - top), 0.0)
    total = weights.sum(-1, keepdims=True)
    weights = np.divide(weights, total, out=np.zeros_like(weights), where=total > 0)
    return np.einsum("bhqk,bkhd->bqhd", weights, v), weights


@pytest.mark.parametrize("causal", [False, True])
def test_reference_is_the_formula(causal):
    q, k, v = _qkv()
    mask = _padding()[:, None, :]
    bias = np.random.default_rng(1).normal(size=(H, T, T)).astype("float32")
    out, weights = attention.dot_product_attention(
        q, k, v, mask=mask, bias=bias, causal=causal, attention_impl="reference", return_attention_scores=True
    )
    want_out, want_weights = _numpy_attention(q, k, v, mask, bias, causal)
    np.testing.assert_allclose(out, want_out, atol=1e-5)
    np.testing.assert_allclose(weights, want_weights, atol=1e-6)
    assert weights.dtype == tf.float32
    # Masked entries are exact zeros; a query that sees no key has zero weights and output.
    assert np.all(np.asarray(weights)[np.broadcast_to(~mask[:, None], weights.shape)] == 0.0)
    if causal:
        assert np.all(np.asarray(out)[1, :2] == 0.0) and np.all(np.asarray(weights)[1, :, :2] == 0.0)


def test_reference_takes_a_toeplitz_bias_and_float32_softmax_under_mixed_precision():
    q, k, v = _qkv(2)
    values = tf.constant(np.random.default_rng(3).normal(size=(H, 2 * T - 1)), tf.float32)
    toeplitz = attention.ToeplitzBias(values, T)
    dense, _ = attention.dot_product_attention(q, k, v, bias=toeplitz.dense(T), attention_impl="reference")
    got, _ = attention.dot_product_attention(q, k, v, bias=toeplitz, attention_impl="reference")
    np.testing.assert_allclose(got, dense, atol=1e-6)
    q16, k16, v16 = (tf.cast(x, "float16") for x in (q, k, v))
    out16, w16 = attention.dot_product_attention(
        q16, k16, v16, mask=_padding()[:, None, :], attention_impl="reference", return_attention_scores=True
    )
    assert out16.dtype == tf.float16 and w16.dtype == tf.float32
    assert np.all(np.isfinite(np.asarray(w16)))


def test_reference_applies_weight_dropout():
    q, k, v = _qkv(4)
    drop = keras.layers.Dropout(0.5, seed=1)
    out, _ = attention.dot_product_attention(q, k, v, dropout=drop, training=True, attention_impl="reference")
    plain, _ = attention.dot_product_attention(
        q, k, v, dropout=drop, training=False, attention_impl="reference"
    )
    assert not np.allclose(out, plain)
    np.testing.assert_allclose(plain, attention.dot_product_attention(q, k, v, attention_impl="reference")[0])


IMPLEMENTATIONS = {
    "standard": {},
    "chunked": {"query_chunk_size": 4, "key_chunk_size": 8},
    "fused": {},
    "auto": {},  # T < AUTO_MIN_KEY_LENGTH: the standard path
    "auto_chunked": {"min_key_length": 8, "query_chunk_size": 4, "key_chunk_size": 4},
    "local": {"window": T},  # a window covering the sequence is full attention
}


def _outputs_and_gradients(impl, options, q, k, v, mask, bias, causal):
    with tf.GradientTape() as tape:
        tape.watch([q, k, v, bias])
        out, _ = attention.dot_product_attention(
            q, k, v, mask=mask, bias=bias, causal=causal, attention_impl=impl, attention_options=options
        )
        loss = tf.reduce_sum(out * tf.sin(3.0 * out))
    return [out] + tape.gradient(loss, [q, k, v, bias])


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", sorted(IMPLEMENTATIONS))
def test_implementation_equals_reference(name, causal):
    q, k, v = _qkv(5)
    mask = tf.constant(_padding()[:, None, :])
    bias = tf.constant(np.random.default_rng(6).normal(size=(H, T, T)), tf.float32)
    want = _outputs_and_gradients("reference", None, q, k, v, mask, bias, causal)
    impl = "auto" if name.startswith("auto") else name
    got = _outputs_and_gradients(impl, IMPLEMENTATIONS[name], q, k, v, mask, bias, causal)
    for g, w, what in zip(got, want, ("output", "dq", "dk", "dv", "dbias")):
        assert np.all(np.isfinite(np.asarray(g))), what
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-5, err_msg=what)
