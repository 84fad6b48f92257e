"""Parity of keras_tfm attention with `keras.layers.MultiHeadAttention` given the
same weights (the projections share Keras' kernel and bias layouts)."""

import keras
import numpy as np
import pytest

from keras_tfm import layers as L

B, T, S, D, H = 2, 7, 5, 16, 4
K = D // H
rng = np.random.default_rng(1)
X = rng.normal(size=(B, T, D)).astype("float32")
SOURCE = rng.normal(size=(B, S, D)).astype("float32")
# Second row padded at the end (the first key is always real, so no query row is
# fully masked, where Keras' −1e9 adder and our zero rows legitimately differ).
PADDING = np.array([[True] * T, [True] * 4 + [False] * (T - 4)])
SOURCE_PADDING = np.array([[True] * S, [True] * 2 + [False] * (S - 2)])


def random_weights():
    shapes = [(D, H, K), (H, K), (D, H, K), (H, K), (D, H, K), (H, K), (H, K, D), (D,)]
    return [rng.normal(scale=0.3, size=s).astype("float32") for s in shapes]


def make_pair(ours_cls, query_shape, source_shape, **kwargs):
    ours = ours_cls(num_heads=H, **kwargs)
    keras_mha = keras.layers.MultiHeadAttention(num_heads=H, key_dim=K)
    keras_mha.build(query_shape, source_shape)
    weights = random_weights()
    keras_mha.set_weights(weights)
    return ours, keras_mha, weights


def check_weight_layout(ours, keras_mha):
    assert [tuple(w.shape) for w in ours.weights] == [tuple(w.shape) for w in keras_mha.weights]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_self_attention_matches_keras(causal, padded):
    ours, keras_mha, weights = make_pair(L.MultiHeadSelfAttention, X.shape, X.shape, causal=causal)
    ours.build(X.shape)
    check_weight_layout(ours, keras_mha)
    ours.set_weights(weights)
    attention_mask = np.repeat(PADDING[:, None, :], T, axis=1) if padded else None
    want, want_scores = keras_mha(
        X, X, attention_mask=attention_mask, use_causal_mask=causal, return_attention_scores=True
    )
    got, got_scores = ours(X, padding_mask=PADDING if padded else None, return_attention_scores=True)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(got_scores, want_scores, atol=1e-5)
    # The explicit attention-mask argument gives the same result.
    got2 = ours(X, attention_mask=attention_mask) if padded and not causal else got
    np.testing.assert_allclose(got2, want, atol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_matches_keras_implicit_masks(causal):
    """Keras' query/value masks (here as `_keras_mask`s) versus our padding mask;
    Keras also masks padded *queries*, so only real positions are compared."""
    ours, keras_mha, weights = make_pair(L.MultiHeadSelfAttention, X.shape, X.shape, causal=causal)
    ours.build(X.shape)
    ours.set_weights(weights)
    want = keras_mha(X, X, query_mask=PADDING, value_mask=PADDING, use_causal_mask=causal)
    got = ours(X, padding_mask=PADDING)
    real = PADDING
    np.testing.assert_allclose(np.asarray(got)[real], np.asarray(want)[real], atol=1e-5)


@pytest.mark.parametrize("source_padded", [False, True])
def test_cross_attention_matches_keras(source_padded):
    ours, keras_mha, weights = make_pair(L.CrossAttention, X.shape, SOURCE.shape)
    ours.build(X.shape, SOURCE.shape)
    check_weight_layout(ours, keras_mha)
    ours.set_weights(weights)
    attention_mask = np.repeat(SOURCE_PADDING[:, None, :], T, axis=1) if source_padded else None
    want, want_scores = keras_mha(X, SOURCE, attention_mask=attention_mask, return_attention_scores=True)
    got, got_scores = ours(
        X, SOURCE, context_mask=SOURCE_PADDING if source_padded else None, return_attention_scores=True
    )
    assert got.shape == (B, T, D) and got_scores.shape == (B, H, T, S)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(got_scores, want_scores, atol=1e-5)
    if source_padded:
        # Keras' value_mask is the same thing as our context mask.
        want_vm = keras_mha(X, SOURCE, value_mask=SOURCE_PADDING)
        np.testing.assert_allclose(got, want_vm, atol=1e-5)
        # The cached source keys/values give the same output.
        cached = ours(X, context_mask=SOURCE_PADDING, cache=ours.compute_cache(SOURCE))
        np.testing.assert_allclose(cached, want, atol=1e-5)
