"""Today's decoder pieces at the layer level (issue 14 §1): grouped-query
attention, RMSNorm, gated FFNs, bias-free blocks and a configurable RoPE base."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_tfm import layers as L

D, H, T = 16, 4, 6


def _x(shape=(2, T, D), seed=1):
    return keras.random.normal(shape, seed=seed)


def _suffixes(layer):
    return [w.path.split("/", 1)[1] for w in layer.weights]


# ------------------------------------------------------- grouped-query attention
def test_gqa_with_all_heads_equals_multi_head_attention():
    x = _x()
    mha = L.MultiHeadSelfAttention(H, causal=True, attention_impl="standard")
    gqa = L.MultiHeadSelfAttention(H, num_key_value_heads=H, causal=True, attention_impl="standard")
    mha(x), gqa(x)
    gqa.set_weights(mha.get_weights())
    np.testing.assert_array_equal(gqa(x), mha(x))


@pytest.mark.parametrize("kv_heads", [1, 2])
@pytest.mark.parametrize("causal", [False, True])
def test_gqa_matches_keras_group_query_attention(kv_heads, causal):
    x = _x()
    ref = keras.layers.GroupQueryAttention(head_dim=D // H, num_query_heads=H, num_key_value_heads=kv_heads)
    ref(x, x)
    ours = L.MultiHeadSelfAttention(H, num_key_value_heads=kv_heads, causal=causal, attention_impl="standard")
    ours(x)
    assert _suffixes(ours) == _suffixes(ref)
    assert ours.key_dense.kernel.shape == (D, kv_heads, D // H)
    ours.set_weights(ref.get_weights())
    np.testing.assert_allclose(ours(x), ref(x, x, use_causal_mask=causal), atol=1e-5)


def _repeated_kv_mha(gqa, **kwargs):
    """An ordinary MHA whose K/V projections repeat the GQA layer's heads."""
    groups = gqa.num_heads // gqa.num_key_value_heads
    mha = L.MultiHeadSelfAttention(gqa.num_heads, causal=gqa.causal, position=gqa.position, **kwargs)
    mha(_x())
    weights = []
    for w in gqa.weights:
        value = w.numpy()
        if ("/key/" in w.path or "/value/" in w.path) and value.ndim >= 2:
            value = np.repeat(value, groups, axis=-2)  # kernel (d, G, k) / bias (G, k)
        weights.append(value)
    mha.set_weights(weights)
    return mha


@pytest.mark.parametrize("impl", ["standard", "chunked"])
@pytest.mark.parametrize("position", [None, "rope", "alibi", "relative"])
def test_gqa_equals_mha_with_repeated_key_value_heads(impl, position):
    """Works with every position scheme and implementation: GQA is MHA whose
    key/value heads are repeated within each group."""
    x = _x((2, 40, D))
    gqa = L.MultiHeadSelfAttention(
        H, num_key_value_heads=2, causal=True, position=position, attention_impl=impl
    )
    gqa(x)
    if position == "relative":
        gqa.relative_bias.embeddings.assign(keras.random.normal((32, H), seed=2))
    mha = _repeated_kv_mha(gqa, attention_impl="standard")
    np.testing.assert_allclose(gqa(x), mha(x), atol=1e-5)


def test_gqa_cache_is_sized_by_key_value_heads_and_matches_full_forward():
    x = _x((2, T, D))
    attn = L.MultiHeadSelfAttention(H, num_key_value_heads=1, causal=True, position="rope")
    full = attn(x)
    cache = attn.init_cache(2, T)
    assert tuple(cache[0].shape) == (2, 1, D // H, T) and tuple(cache[1].shape) == (2, 1, T, D // H)
    outputs = []
    for t in range(T):
        out, cache = attn(x[:, t : t + 1], cache=cache, cache_index=t)
        outputs.append(out)
    np.testing.assert_allclose(ops.concatenate(outputs, axis=1), full, atol=1e-5)


def test_gqa_cross_attention_and_block():
    y, ctx = _x(), _x((2, 9, D), 2)
    cross = L.CrossAttention(H, num_key_value_heads=2)
    assert cross(y, ctx).shape == (2, T, D) and cross.value_dense.kernel.shape == (D, 2, D // H)
    block = L.TransformerBlock(D, H, 32, causal=True, cross_attention=True, num_key_value_heads=1)
    assert block(y, ctx).shape == (2, T, D)
    assert block.self_attention_layer.key_dense.kernel.shape == (D, 1, D // H)
    assert block.cross_attention_layer.key_dense.kernel.shape == (D, 1, D // H)
    restored = L.TransformerBlock.from_config(block.get_config())
    assert restored.num_key_value_heads == 1


@pytest.mark.parametrize("kv_heads", [3, 0, 8])
def test_gqa_rejects_heads_that_do_not_divide(kv_heads):
    with pytest.raises(ValueError, match="num_key_value_heads"):
        L.MultiHeadSelfAttention(H, num_key_value_heads=kv_heads)
    with pytest.raises(ValueError, match="num_key_value_heads"):
        L.TransformerBlock(D, H, 32, num_key_value_heads=kv_heads)


# ------------------------------------------------------------------- RMSNorm
def test_rms_norm_matches_keras_and_numpy():
    x = _x((2, T, D))
    norm = L.RMSNorm(epsilon=1e-6)
    norm(x)
    norm.scale.assign(np.linspace(0.5, 1.5, D).astype("float32"))
    ref = keras.layers.RMSNormalization(epsilon=1e-6)
    ref(x)
    ref.set_weights(norm.get_weights())
    xn = keras.ops.convert_to_numpy(x)
    expected = xn / np.sqrt((xn**2).mean(-1, keepdims=True) + 1e-6) * norm.scale.numpy()
    np.testing.assert_allclose(norm(x), expected, atol=1e-5)
    np.testing.assert_allclose(norm(x), ref(x), atol=1e-5)


def test_rms_norm_computes_in_float32_under_float16():
    # mean(x²) = 90000 overflows float16 (max 65504): a float16 computation gives 0.
    x = np.full((1, 2, D), 300.0, "float16")
    norm = L.RMSNorm(dtype="mixed_float16")
    y = norm(x)
    assert y.dtype == "float16"
    np.testing.assert_allclose(keras.ops.convert_to_numpy(y).astype("float32"), 1.0, atol=1e-3)


def test_block_norm_option():
    x = _x()
    block = L.TransformerBlock(D, H, 32, norm="rms", norm_first=True, causal=True)
    block(x)
    assert isinstance(block.self_attention_norm, L.RMSNorm)
    assert isinstance(block.feed_forward_norm, L.RMSNorm)
    h = x + block.self_attention_layer(block.self_attention_norm(x))
    h = h + block.feed_forward(block.feed_forward_norm(h))
    np.testing.assert_allclose(block(x), h, atol=1e-5)
    assert L.TransformerBlock.from_config(block.get_config()).norm == "rms"
    with pytest.raises(ValueError, match="norm"):
        L.TransformerBlock(D, H, 32, norm="batch")


# ---------------------------------------------------------------- gated FFN
@pytest.mark.parametrize("activation, gate", [("swiglu", "silu"), ("geglu", "gelu")])
def test_gated_feed_forward(activation, gate):
    x = _x()
    ffn = L.FeedForward(24, activation=activation)
    y = ffn(x)
    kernels = [w for w in ffn.weights if w.path.endswith("kernel")]
    assert sorted(tuple(w.shape) for w in kernels) == sorted([(D, 24), (D, 24), (24, D)])  # three matrices
    act = {"silu": ops.silu, "gelu": lambda z: ops.gelu(z, approximate=False)}[gate]
    expected = ffn.output_dense(act(ffn.gate_dense(x)) * ffn.inner_dense(x))
    np.testing.assert_allclose(y, expected, atol=1e-5)
    assert not np.array_equal(ffn.gate_dense.kernel.numpy(), ffn.inner_dense.kernel.numpy())
    plain = L.FeedForward(24, activation="silu")
    plain(x)
    assert plain.gate_dense is None and len(plain.weights) == 4


# ------------------------------------------------------------------ no bias
def test_block_without_any_bias():
    block = L.TransformerBlock(
        D,
        H,
        32,
        use_bias=False,
        norm="rms",
        activation="swiglu",
        num_key_value_heads=1,
        position="rope",
        norm_first=True,
        causal=True,
    )
    assert block(_x()).shape == (2, T, D)
    assert not [w.path for w in block.weights if "bias" in w.path or "beta" in w.path]
    cross = L.CrossAttention(H, use_bias=False)
    cross(_x(), _x())
    layers = [cross]
    for layer in (
        L.MultiHeadSelfAttention(H, use_bias=False),
        L.FeedForward(24, activation="geglu", use_bias=False),
        L.OutputHead(11, use_bias=False),
    ):
        layer(_x())
        layers.append(layer)
    for layer in layers:
        assert layer.weights and not [w.path for w in layer.weights if "bias" in w.path]


# ------------------------------------------------------------------ RoPE base
def test_rope_base_is_configurable():
    x = _x()
    block = L.TransformerBlock(D, H, 32, position="rope", rope_max_wavelength=500.0, causal=True)
    block(x)
    attn = block.self_attention_layer
    assert attn.rotary.max_wavelength == 500.0
    q, k, v = attn.query_dense(x), attn.key_dense(x), attn.value_dense(x)
    rope = L.RotaryEmbedding(500.0)
    out, _ = L.dot_product_attention(rope(q), rope(k), v, mask=L.causal_mask(T), attention_impl="reference")
    np.testing.assert_allclose(attn(x), attn.output_dense(out), atol=1e-5)
    # The base matters.
    default = L.MultiHeadSelfAttention(H, position="rope", causal=True)
    default(x)
    default.set_weights(attn.get_weights())
    assert not np.allclose(default(x), attn(x), atol=1e-4)
    assert L.TransformerBlock.from_config(block.get_config()).rope_max_wavelength == 500.0
