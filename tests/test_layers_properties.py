"""The properties of attention and position encodings taught in the lecture,
each checked numerically on the keras_tfm layers."""

import keras
import numpy as np
import pytest

from keras_tfm import layers as L
from keras_tfm.layers import attention

B, T, D, H = 2, 8, 16, 2
POSITIONS = [None, "rope", "alibi", "relative"]


def rng(seed=0):
    return np.random.default_rng(seed)


def inputs(seed=0, length=T):
    return rng(seed).normal(size=(B, length, D)).astype("float32")


def random_init(layer):
    """Random non-zero weights everywhere (biases and relative tables included)."""
    r = rng(42)
    layer.set_weights([r.normal(scale=0.3, size=w.shape).astype("float32") for w in layer.get_weights()])
    return layer


def self_attention(position=None, causal=False, **kwargs):
    layer = L.MultiHeadSelfAttention(
        H, causal=causal, position=position, relative_num_buckets=8, relative_max_distance=16, **kwargs
    )
    layer.build((B, T, D))
    return random_init(layer)


def block(position=None, causal=False, **kwargs):
    layer = L.TransformerBlock(D, H, 32, causal=causal, position=position, **kwargs)
    layer.build((B, T, D))
    # Keep LayerNorm gammas/betas as built but randomise everything else.
    r = rng(7)
    layer.set_weights(
        [
            w
            if w.ndim == 1 and w.shape[0] == D and np.all(w == 1)
            else w + r.normal(scale=0.1, size=w.shape).astype("float32")
            for w in layer.get_weights()
        ]
    )
    return layer


# ----------------------------------------------------------------------- permutation


@pytest.mark.parametrize("make", [self_attention, block], ids=["mhsa", "block"])
def test_self_attention_without_positions_is_permutation_equivariant(make):
    layer = make(position=None)
    x = inputs()
    perm = rng(3).permutation(T)
    out = np.asarray(layer(x))
    out_perm = np.asarray(layer(x[:, perm]))
    np.testing.assert_allclose(out_perm, out[:, perm], atol=1e-5)
    # …which position information breaks: with RoPE the outputs are not permuted.
    rope = make(position="rope")
    assert not np.allclose(np.asarray(rope(x[:, perm])), np.asarray(rope(x))[:, perm], atol=1e-3)


# ----------------------------------------------------------------------- causality


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("make", [self_attention, block], ids=["mhsa", "block"])
def test_causal_outputs_ignore_future_tokens(make, position):
    layer = make(position=position, causal=True)
    x = inputs()
    out = np.asarray(layer(x))
    for t in (0, 3, T - 2):
        changed = x.copy()
        changed[:, t + 1 :] = rng(t).normal(size=changed[:, t + 1 :].shape) * 5
        new = np.asarray(layer(changed))
        np.testing.assert_allclose(new[:, : t + 1], out[:, : t + 1], atol=1e-5)
        assert not np.allclose(new[:, t + 1 :], out[:, t + 1 :], atol=1e-3)


def test_non_causal_outputs_do_see_future_tokens():
    layer = self_attention(causal=False)
    x = inputs()
    changed = x.copy()
    changed[:, -1] += 3.0
    assert not np.allclose(np.asarray(layer(changed))[:, 0], np.asarray(layer(x))[:, 0], atol=1e-4)


# ----------------------------------------------------------------------- padding


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("make", [self_attention, block], ids=["mhsa", "block"])
def test_appended_padding_never_changes_real_outputs(make, position, causal):
    layer = make(position=position, causal=causal)
    real = inputs(length=5)
    out = np.asarray(layer(real, padding_mask=np.ones((B, 5), bool)))
    junk = rng(9).normal(size=(B, 3, D)).astype("float32") * 10
    padded = np.concatenate([real, junk], axis=1)
    mask = np.concatenate([np.ones((B, 5), bool), np.zeros((B, 3), bool)], axis=1)
    out_padded = np.asarray(layer(padded, padding_mask=mask))
    np.testing.assert_allclose(out_padded[:, :5], out, atol=1e-5)
    # Without the mask the junk does leak in (for non-causal attention).
    if not causal:
        assert not np.allclose(np.asarray(layer(padded))[:, :5], out, atol=1e-3)


def test_implicit_mask_from_token_embedding_is_consumed_and_propagated():
    vocab = 11
    ids = keras.Input(shape=(None,), dtype="int32")
    x = L.TokenEmbedding(vocab, D, mask_zero=True)(ids)
    x = L.PositionalEncoding()(x)
    x = L.TransformerBlock(D, H, 32)(x)
    y = L.MultiHeadSelfAttention(H)(x)
    model = keras.Model(ids, y)

    real = np.array([[3, 5, 7, 2], [4, 9, 1, 6]], dtype="int32")
    padded = np.concatenate([real, np.zeros((B, 3), "int32")], axis=1)
    out = np.asarray(model(real))
    out_padded = model(padded)
    np.testing.assert_allclose(np.asarray(out_padded)[:, :4], out, atol=1e-5)

    # The mask also reaches the output.
    mask = out_padded._keras_mask
    np.testing.assert_array_equal(np.asarray(mask), padded != 0)

    # Eagerly, layer by layer: every layer propagates the token mask.
    emb = L.TokenEmbedding(vocab, D, mask_zero=True)
    h = emb(padded)
    for layer in (L.PositionalEncoding(), L.TransformerBlock(D, H, 32), L.MultiHeadSelfAttention(H)):
        h = layer(h)
        np.testing.assert_array_equal(np.asarray(h._keras_mask), padded != 0)


def test_implicit_mask_of_token_and_position_embedding_reaches_cross_attention():
    src_ids = np.array([[3, 5, 7, 0, 0], [4, 9, 1, 6, 2]], dtype="int32")
    tgt = inputs(length=4)
    emb = L.TokenAndPositionEmbedding(12, D, max_length=8, position="sinusoidal", mask_zero=True)
    cross = L.CrossAttention(H)
    context = emb(src_ids)
    _, scores = cross(tgt, context, return_attention_scores=True)
    scores = np.asarray(scores)
    assert np.all(scores[0, :, :, 3:] == 0.0)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-6)
    # Dropping the padded columns entirely gives the same output.
    full = np.asarray(cross(tgt, context))
    short = np.asarray(cross(tgt[:1], emb(src_ids[:1, :3])))
    np.testing.assert_allclose(full[:1], short, atol=1e-5)


# ----------------------------------------------------------------------- sinusoids


def reference_pe(positions, d):
    positions = np.asarray(positions, np.float64)
    i = np.arange(d // 2)
    angles = positions[:, None] / 10000.0 ** (2 * i / d)
    pe = np.zeros((len(positions), d))
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles)
    return pe


def test_sinusoidal_encoding_matches_formula():
    positions = np.arange(0, 4096)
    table = np.asarray(L.sinusoidal_table(positions, D))
    assert table.dtype == np.float32
    np.testing.assert_allclose(table, reference_pe(positions, D), atol=1e-5, rtol=0)
    # The layer adds exactly this table, from `start_index` on.
    out = np.asarray(L.PositionalEncoding()(np.zeros((1, 6, D), "float32"), start_index=3000))
    np.testing.assert_allclose(out[0], reference_pe(np.arange(3000, 3006), D), atol=1e-5, rtol=0)


def test_sinusoidal_shift_is_a_fixed_rotation():
    """PE(p + k) = M_k · PE(p), M_k block-diagonal of 2×2 rotations by k·ω_i."""
    d = D
    omega = 1.0 / 10000.0 ** (2 * np.arange(d // 2) / d)
    positions = np.arange(0, 600, 7)
    for k in (1, 5, 50):
        m = np.zeros((d, d))
        for i, w in enumerate(omega):
            c, s = np.cos(k * w), np.sin(k * w)
            # (sin, cos)(p + k) = [[c, s], [-s, c]] · (sin, cos)(p)
            m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, s], [-s, c]]
        pe = np.asarray(L.sinusoidal_table(positions, d), np.float64)
        shifted = np.asarray(L.sinusoidal_table(positions + k, d), np.float64)
        np.testing.assert_allclose(pe @ m.T, shifted, atol=1e-5)


def test_sinusoidal_encoding_under_mixed_float16_at_position_4096():
    zeros = np.zeros((1, 4, D), "float32")
    f32 = np.asarray(L.PositionalEncoding()(zeros, start_index=4094))
    f16_out = L.PositionalEncoding(dtype="mixed_float16")(zeros, start_index=4094)
    assert f16_out.dtype == "float16"
    f16 = np.asarray(f16_out, np.float32)
    assert np.all(np.isfinite(f16))
    np.testing.assert_allclose(f16, f32, atol=1e-3, rtol=0)
    np.testing.assert_allclose(f32[0], reference_pe(np.arange(4094, 4098), D), atol=1e-5)


# ----------------------------------------------------------------------- attention weights


def test_attention_rows_sum_to_one_and_masked_entries_are_exactly_zero():
    r = rng(5)
    q = r.normal(size=(B, T, H, 4)).astype("float32")
    k = r.normal(size=(B, T, H, 4)).astype("float32")
    mask = r.random((B, T, T)) < 0.6
    mask[:, :, 0] = True  # no empty rows here
    w = np.asarray(attention.attention_weights(q, k, mask=mask))
    assert w.shape == (B, H, T, T)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-6)
    assert np.all(w[np.broadcast_to(~mask[:, None], w.shape)] == 0.0)
    assert np.all(w[np.broadcast_to(mask[:, None], w.shape)] > 0.0)
    # Through the layer, with a causal mask: the upper triangle is exactly zero.
    _, scores = self_attention(causal=True)(inputs(), return_attention_scores=True)
    scores = np.asarray(scores)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-6)
    assert np.all(scores[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] == 0.0)


@pytest.mark.parametrize("dtype", ["float32", "mixed_float16", "mixed_bfloat16"])
def test_fully_masked_query_gives_zeros_not_nan(dtype):
    r = rng(6)
    q = r.normal(size=(1, 3, H, 4)).astype("float32")
    v = r.normal(size=(1, 3, H, 4)).astype("float32")
    mask = np.array([[[True, False, True], [False, False, False], [True, True, True]]])
    compute = "float32" if dtype == "float32" else dtype.split("_")[1]
    out, w = attention.dot_product_attention(
        keras.ops.cast(q, compute),
        keras.ops.cast(q, compute),
        keras.ops.cast(v, compute),
        mask=mask,
        return_attention_scores=True,
    )
    out, w = np.asarray(keras.ops.cast(out, "float32")), np.asarray(w)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(w))
    assert np.all(out[:, 1] == 0.0) and np.all(w[:, :, 1] == 0.0)
    assert np.all(np.abs(out[:, [0, 2]]) > 0)

    # A whole padded sequence through the layer: zero attention output (no biases).
    layer = L.MultiHeadSelfAttention(H, use_bias=False, dtype=dtype)
    x = inputs(length=4)
    padding = np.array([[True, True, False, False], [False] * 4])
    y, scores = layer(x, padding_mask=padding, return_attention_scores=True)
    y = np.asarray(keras.ops.cast(y, "float32"))
    assert np.all(np.isfinite(y)) and np.all(np.isfinite(np.asarray(scores)))
    assert np.all(y[1] == 0.0)
    assert np.all(np.abs(y[0]).sum(-1) > 0)


# ----------------------------------------------------------------------- RoPE


def test_rope_scores_depend_only_on_the_offset():
    r = rng(8)
    head = 8
    q = r.normal(size=(1, 1, 1, head)).astype("float32")
    k = r.normal(size=(1, 1, 1, head)).astype("float32")
    rope = L.RotaryEmbedding()
    for offset in (0, 1, 3, 10):
        dots = []
        for p in (0, 2, 7, 31, 100):
            qr = np.asarray(rope(q, start_index=p))
            kr = np.asarray(rope(k, start_index=p + offset))
            dots.append(float(np.sum(qr * kr)))
        np.testing.assert_allclose(dots, dots[0], atol=1e-4)
    # Rotations preserve norms, and a non-zero offset does change the score.
    np.testing.assert_allclose(
        np.linalg.norm(np.asarray(rope(q, start_index=13))), np.linalg.norm(q), rtol=1e-5
    )
    far = float(np.sum(np.asarray(rope(q)) * np.asarray(rope(k, start_index=3))))
    assert abs(far - float(np.sum(q * k))) > 1e-3


def test_rope_rotates_half_pairs_by_position_angle():
    head = 8
    x = rng(2).normal(size=(1, 3, 1, head)).astype("float32")
    out = np.asarray(L.RotaryEmbedding()(x, start_index=5))
    theta = 10000.0 ** (-np.arange(0, head, 2) / head)
    for t in range(3):
        ang = (5 + t) * theta
        x1, x2 = x[0, t, 0, : head // 2], x[0, t, 0, head // 2 :]
        want = np.concatenate([x1 * np.cos(ang) - x2 * np.sin(ang), x2 * np.cos(ang) + x1 * np.sin(ang)])
        np.testing.assert_allclose(out[0, t, 0], want, atol=1e-5)


# ----------------------------------------------------------------------- KV cache


@pytest.mark.parametrize("position", POSITIONS)
def test_kv_cache_matches_full_causal_computation(position):
    layer = self_attention(position=position, causal=True)
    x = inputs()
    full = np.asarray(layer(x))
    max_len, prompt = T + 2, 4
    cache = layer.init_cache(B, max_len)
    out, cache = layer(x[:, :prompt], cache=cache, cache_index=0)
    np.testing.assert_allclose(out, full[:, :prompt], atol=1e-5)
    for t in range(prompt, T):
        out, cache = layer(x[:, t : t + 1], cache=cache, cache_index=t)
        np.testing.assert_allclose(out, full[:, t : t + 1], atol=1e-5, err_msg=f"step {t}")
    # The cache holds exactly the projected keys/values of every position so far.
    keys, values = (np.asarray(c) for c in cache)  # (B, H, d, L), (B, H, L, d)
    np.testing.assert_allclose(keys[..., T:], 0.0)
    np.testing.assert_allclose(values[:, :, T:], 0.0)
    assert np.abs(values[:, :, :T]).sum(-1).min() > 0


@pytest.mark.parametrize("position", [None, "alibi"])
def test_kv_cache_of_transformer_block_matches_full_computation(position):
    layer = block(position=position, causal=True, norm_first=True)
    x = inputs()
    full = np.asarray(layer(x))
    cache = layer.self_attention_layer.init_cache(B, T)
    out, cache = layer(x[:, :3], cache=cache, cache_index=0)
    np.testing.assert_allclose(out, full[:, :3], atol=1e-5)
    for t in range(3, T):
        out, cache = layer(x[:, t : t + 1], cache=cache, cache_index=t)
        np.testing.assert_allclose(out, full[:, t : t + 1], atol=1e-5)


def test_kv_cache_under_xla_with_tensor_index():
    import tensorflow as tf

    layer = self_attention(position="rope", causal=True)
    x = inputs()
    full = np.asarray(layer(x))
    step = tf.function(lambda tok, c, i: layer(tok, cache=c, cache_index=i), jit_compile=True)
    cache = layer.init_cache(B, T)
    for t in range(T):
        out, cache = step(x[:, t : t + 1], cache, tf.constant(t))
        np.testing.assert_allclose(out, full[:, t : t + 1], atol=1e-5)


# ----------------------------------------------------------------------- ALiBi / T5 buckets


def test_alibi_slopes():
    np.testing.assert_allclose(L.alibi_slopes(8), [2.0**-i for i in range(1, 9)])
    np.testing.assert_allclose(L.alibi_slopes(4), [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8])
    # Non-powers of two: the slopes of the closest power, then every other one of twice that.
    np.testing.assert_allclose(L.alibi_slopes(6), [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3])
    bias = np.asarray(L.AlibiBias(8).compute_bias(4, 4))
    np.testing.assert_allclose(bias[:, 3, 0], -3 * np.array([2.0**-i for i in range(1, 9)]))


@pytest.mark.parametrize("bidirectional", [True, False])
def test_relative_position_bucket_properties(bidirectional):
    nb, maxd = 16, 64
    rel = np.arange(-200, 201)
    buckets = np.asarray(L.relative_position_bucket(rel, bidirectional, nb, maxd))
    assert buckets.min() >= 0 and buckets.max() < nb
    assert buckets[rel == 0][0] == 0
    past = rel <= 0  # keys at or before the query
    half = nb // 2 if bidirectional else nb
    exact = half // 2
    # Small distances have their own bucket; larger ones grow monotonically and saturate.
    for dist in range(exact):
        assert buckets[rel == -dist][0] == dist
    past_buckets = buckets[past][::-1]  # by growing distance
    assert np.all(np.diff(past_buckets) >= 0)
    assert past_buckets[-1] == half - 1 and buckets[rel == -maxd][0] == half - 1
    assert len(np.unique(past_buckets)) == half
    future = buckets[rel > 0]
    if bidirectional:
        # Keys after the query use the other half, mirroring the past.
        np.testing.assert_array_equal(future, buckets[past][::-1][1:] + half)
    else:
        assert np.all(future == 0)


# ----------------------------------------------------------------------- block / FFN semantics


def _layer_norm(x, eps=1e-5):
    x = np.asarray(x, np.float64)
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_block_is_the_residual_composition_of_its_sublayers(norm_first):
    layer = L.TransformerBlock(D, H, 32, norm_first=norm_first, causal=True)
    layer.build((B, T, D))
    # Random projections; LayerNorms keep gamma = 1, beta = 0 so they are plain _layer_norm.
    r = rng(11)
    weights = []
    for w, v in zip(layer.get_weights(), layer.weights):
        is_norm = "norm" in v.path
        weights.append(w if is_norm else r.normal(scale=0.3, size=w.shape).astype("float32"))
    layer.set_weights(weights)
    x = inputs()
    sa = lambda h: np.asarray(layer.self_attention_layer(np.asarray(h, "float32")), np.float64)
    ff = lambda h: np.asarray(layer.feed_forward(np.asarray(h, "float32")), np.float64)
    if norm_first:
        h = x + sa(_layer_norm(x))
        want = h + ff(_layer_norm(h))
    else:
        h = _layer_norm(x + sa(x))
        want = _layer_norm(h + ff(h))
    np.testing.assert_allclose(np.asarray(layer(x)), want, atol=1e-4)


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "silu"])
def test_feed_forward_formula(activation):
    from math import erf

    acts = {
        "relu": lambda z: np.maximum(z, 0),
        "gelu": lambda z: 0.5 * z * (1 + np.vectorize(erf)(z / np.sqrt(2))),
        "gelu_tanh": lambda z: 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3))),
        "silu": lambda z: z / (1 + np.exp(-z)),
    }
    layer = L.FeedForward(32, activation=activation, bias_initializer="random_normal")
    x = inputs()
    out = np.asarray(layer(x))
    w1, b1, w2, b2 = [np.asarray(w, np.float64) for w in layer.get_weights()]
    np.testing.assert_allclose(out, acts[activation](x @ w1 + b1) @ w2 + b2, atol=1e-5)


def test_dropout_only_in_training():
    x = inputs()
    for layer in (
        L.MultiHeadSelfAttention(H, dropout=0.5),
        L.FeedForward(32, dropout=0.5),
        L.TransformerBlock(D, H, 32, dropout=0.5),
    ):
        eval_a, eval_b = np.asarray(layer(x)), np.asarray(layer(x, training=False))
        np.testing.assert_array_equal(eval_a, eval_b)
        assert not np.allclose(np.asarray(layer(x, training=True)), eval_a, atol=1e-4)


def test_causal_relative_bias_only_uses_past_buckets():
    causal = self_attention(position="relative", causal=True)
    bidirectional = self_attention(position="relative", causal=False)
    assert causal.relative_bias.bidirectional is False
    assert bidirectional.relative_bias.bidirectional is True
    # A causal model spends all 8 buckets on the past: distances 0..3 are exact
    # (a bidirectional one has 4 per direction, so only 0..1).
    bias = np.asarray(causal.relative_bias.compute_bias(8, 8))
    table = causal.relative_bias.get_weights()[0]
    for dist in range(4):
        np.testing.assert_allclose(bias[:, dist, 0], table[dist], rtol=1e-6)


def test_implicit_source_mask_reaches_the_decoder_block_cross_attention():
    """Encoder–decoder in the functional API: padded source ids (implicit mask of
    the encoder output) never change the decoder's outputs."""
    src = keras.Input((None,), dtype="int32")
    tgt = keras.Input((None,), dtype="int32")
    enc = L.TransformerBlock(D, H, 32)(L.TokenEmbedding(11, D, mask_zero=True)(src))
    dec = L.TransformerBlock(D, H, 32, causal=True, cross_attention=True)(
        L.TokenEmbedding(11, D, mask_zero=True)(tgt), enc
    )
    model = keras.Model([src, tgt], dec)
    source = np.array([[3, 4, 5], [6, 7, 8]], "int32")
    target = np.array([[1, 2], [9, 10]], "int32")
    out = np.asarray(model([source, target]))
    padded = np.asarray(model([np.pad(source, ((0, 0), (0, 2))), target]))
    np.testing.assert_allclose(padded, out, atol=1e-5)
    # The source content does matter (the mask is not hiding everything).
    changed = source.copy()
    changed[:, 0] = 1
    assert not np.allclose(np.asarray(model([changed, target])), out, atol=1e-4)
