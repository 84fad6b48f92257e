"""Tests of the memory-efficient / sub-quadratic attention-core implementations:
"chunked" (exact, O(T) memory), "local" (sliding window) and "linear". The
exact ones are compared with the plain formula, "reference"."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from layer_test_utils import run_layer_test

import keras_tfm.layers as L
from keras_tfm.layers import attention as ac
from keras_tfm.layers.attention.linear import linear_attention_reference

B, T, H, D, DV = 2, 37, 3, 8, 5
CHUNKS = dict(query_chunk_size=8, key_chunk_size=8)  # ragged last chunk (37 = 4·8 + 5)


def _qkv(seed=0, t=T):
    rng = np.random.default_rng(seed)
    q = tf.constant(rng.normal(size=(B, t, H, D)), tf.float32)
    k = tf.constant(rng.normal(size=(B, t, H, D)), tf.float32)
    v = tf.constant(rng.normal(size=(B, t, H, DV)), tf.float32)
    return q, k, v


def _padding(t=T):
    pad = np.ones((B, t), bool)
    pad[0, t - 7 :] = False  # right padding
    pad[1, :4] = False  # left padding: under causal, queries 0..3 see no key
    return pad


def _mask(kind, t=T):
    causal = np.tril(np.ones((t, t), bool))
    pad = _padding(t)[:, None, :]
    return {
        "none": None,
        "causal": causal,
        "padding": pad,
        "causal_padding": causal[None] & pad,
    }[kind]


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=tol, rtol=tol)


def _grads(impl, q, k, v, mask=None, bias=None, causal=False, **options):
    """Output and gradients w.r.t. (q, k, v[, bias]) of a non-trivial loss."""
    with tf.GradientTape() as tape:
        watched = [q, k, v] + ([bias] if bias is not None else [])
        tape.watch(watched)
        out, _ = ac.dot_product_attention(
            q, k, v, mask=mask, bias=bias, causal=causal, attention_impl=impl, attention_options=options
        )
        loss = tf.reduce_sum(out * tf.sin(3.0 * out))
    return [out] + tape.gradient(loss, watched)


# ----------------------------------------------------------------- chunked
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding", "causal_padding"])
@pytest.mark.parametrize("with_bias", [False, True])
def test_chunked_matches_reference_outputs_and_gradients(mask_kind, with_bias):
    q, k, v = _qkv()
    mask = _mask(mask_kind)
    mask = None if mask is None else tf.constant(mask)
    bias = None
    if with_bias:  # ALiBi-like (H, Tq, Tk) bias plus noise
        rng = np.random.default_rng(1)
        bias = tf.constant(rng.normal(size=(H, T, T)), tf.float32)
    want = _grads("reference", q, k, v, mask, bias)
    got = _grads("chunked", q, k, v, mask, bias, **CHUNKS)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.all(np.isfinite(np.asarray(g)))
        _close(g, w)


@pytest.mark.parametrize(
    "bias_shape",
    [(T, T), (B, H, T, T), (1, H, 1, T), (B, 1, T, 1)],
    ids=["rank2", "rank4", "key_only", "query_only"],
)
def test_chunked_bias_broadcast_gradients(bias_shape):
    q, k, v = _qkv(2)
    bias = tf.constant(np.random.default_rng(3).normal(size=bias_shape), tf.float32)
    mask = tf.constant(_mask("causal_padding"))
    want = _grads("reference", q, k, v, mask, bias)
    got = _grads("chunked", q, k, v, mask, bias, query_chunk_size=16, key_chunk_size=5)
    assert got[-1].shape == bias.shape
    for g, w in zip(got, want):
        _close(g, w)


def test_chunked_fully_masked_rows_are_zero_not_nan():
    q, k, v = _qkv()
    mask = np.ones((B, T, T), bool)
    mask[:, 3, :] = False  # query 3 sees nothing
    mask[1] = False  # whole second sequence masked
    out, dq, dk, dv = _grads("chunked", q, k, v, tf.constant(mask), **CHUNKS)
    out = np.asarray(out)
    assert np.all(out[:, 3] == 0) and np.all(out[1] == 0)
    for g in (dq, dk, dv):
        assert np.all(np.isfinite(np.asarray(g)))
    for g, w in zip([out, dq, dk, dv], _grads("reference", q, k, v, tf.constant(mask))):
        _close(g, w)


def test_chunked_cross_attention_lengths_and_chunk_clipping():
    rng = np.random.default_rng(4)
    q = tf.constant(rng.normal(size=(B, 11, H, D)), tf.float32)
    k = tf.constant(rng.normal(size=(B, 29, H, D)), tf.float32)
    v = tf.constant(rng.normal(size=(B, 29, H, DV)), tf.float32)
    mask = tf.constant(_padding(29)[:, None, :])
    want = _grads("reference", q, k, v, mask)
    for options in ({}, CHUNKS, dict(query_chunk_size=4, key_chunk_size=1000)):
        for g, w in zip(_grads("chunked", q, k, v, mask, **options), want):
            _close(g, w)


def test_chunked_tf_function_and_xla():
    q, k, v = _qkv(5)
    mask = tf.constant(_mask("causal_padding"))
    bias = tf.constant(np.random.default_rng(6).normal(size=(H, T, T)), tf.float32)
    want = _grads("reference", q, k, v, mask, bias)
    for jit in (False, True):
        fn = tf.function(lambda: _grads("chunked", q, k, v, mask, bias, **CHUNKS), jit_compile=jit)
        for g, w in zip(fn(), want):
            _close(g, w)


def test_chunked_dynamic_length_in_tf_function():
    q, k, v = _qkv(7)
    spec = tf.TensorSpec([B, None, H, D], tf.float32)

    @tf.function(input_signature=[spec, spec, tf.TensorSpec([B, None, H, DV], tf.float32)])
    def fn(q, k, v):
        return _grads("chunked", q, k, v, None, None, **CHUNKS)

    for g, w in zip(fn(q, k, v), _grads("reference", q, k, v)):
        _close(g, w)


def test_chunked_mixed_precision_accumulates_in_float32():
    q, k, v = _qkv(8)
    mask = tf.constant(_mask("causal_padding"))
    out16, _ = ac.dot_product_attention(
        tf.cast(q, "float16"),
        tf.cast(k, "float16"),
        tf.cast(v, "float16"),
        mask=mask,
        attention_impl="chunked",
        attention_options=CHUNKS,
    )
    assert out16.dtype == tf.float16
    ref, _ = ac.dot_product_attention(q, k, v, mask=mask, attention_impl="reference")
    _close(tf.cast(out16, tf.float32), ref, tol=1e-2)


def test_chunked_rejects_weights_and_dropout():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="return_attention_scores"):
        ac.dot_product_attention(q, k, v, attention_impl="chunked", return_attention_scores=True)
    drop = keras.layers.Dropout(0.1)
    with pytest.raises(ValueError, match="dropout"):
        ac.dot_product_attention(q, k, v, attention_impl="chunked", dropout=drop, training=True)
    # Inference with a dropout layer is fine (dropout is the identity there).
    ac.dot_product_attention(q, k, v, attention_impl="chunked", dropout=drop, training=False)
    with pytest.raises(ValueError, match="key_chunk_size"):
        ac.dot_product_attention(q, k, v, attention_impl="chunked", attention_options={"key_chunk_size": 0})
    layer = L.MultiHeadSelfAttention(H, attention_impl="chunked")
    with pytest.raises(ValueError, match="return_attention_scores"):
        layer(tf.zeros((B, T, 12)), return_attention_scores=True)


# ------------------------------------------------------------------- local
@pytest.mark.parametrize("mask_kind", ["none", "causal", "padding", "causal_padding"])
@pytest.mark.parametrize("window", [T, 100])
def test_local_window_covering_sequence_equals_reference(mask_kind, window):
    q, k, v = _qkv(9)
    mask = _mask(mask_kind)
    mask = None if mask is None else tf.constant(mask)
    causal = "causal" in mask_kind
    want = _grads("reference", q, k, v, mask)
    got = _grads("local", q, k, v, mask, window=window, causal=causal)
    for g, w in zip(got, want):
        _close(g, w)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window,global_tokens", [(1, 0), (5, 0), (8, 3), (4, 10)])
def test_local_equals_banded_reference_attention(causal, window, global_tokens):
    q, k, v = _qkv(10)
    i = np.arange(T)
    rel = i[:, None] - i[None, :]
    band = (rel <= window) & ((rel >= 0) if causal else (rel >= -window))
    glob = (i[:, None] < global_tokens) | (i[None, :] < global_tokens)
    if causal:
        glob &= rel >= 0
    pad = _padding()[:, None, :]
    bias = tf.constant(np.random.default_rng(11).normal(size=(H, T, T)), tf.float32)
    want = _grads("reference", q, k, v, tf.constant((band | glob)[None] & pad), bias)
    # The local impl gets only the padding mask; the band comes from its options.
    got = _grads(
        "local", q, k, v, tf.constant(pad), bias, window=window, causal=causal, global_tokens=global_tokens
    )
    for g, w in zip(got, want):
        _close(g, w)


def test_local_option_errors():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="window"):
        ac.dot_product_attention(q, k, v, attention_impl="local", attention_options={"window": 0})
    with pytest.raises(ValueError, match="return_attention_scores"):
        ac.dot_product_attention(q, k, v, attention_impl="local", return_attention_scores=True)
    with pytest.raises(ValueError, match="query_length == key_length"):
        ac.dot_product_attention(q[:, :5], k, v, attention_impl="local")


# ------------------------------------------------------------------ linear
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("with_padding", [False, True])
@pytest.mark.parametrize("chunk_size", [1, 8, 64])
def test_linear_equals_quadratic_reference(causal, with_padding, chunk_size):
    q, k, v = _qkv(12)
    pad = _padding() if with_padding else None
    mask = None
    if with_padding:
        mask = _mask("causal_padding" if causal else "padding")
    elif causal:
        mask = _mask("causal")
    mask = None if mask is None else tf.constant(mask)
    got = _grads("linear", q, k, v, mask, causal=causal, chunk_size=chunk_size)
    with tf.GradientTape() as tape:
        tape.watch([q, k, v])
        ref = linear_attention_reference(
            q, k, v, key_valid=None if pad is None else tf.constant(pad), causal=causal
        )
        loss = tf.reduce_sum(ref * tf.sin(3.0 * ref))
    want = [ref] + tape.gradient(loss, [q, k, v])
    for g, w in zip(got, want):
        _close(g, w)
    if with_padding and causal:  # queries 0..3 of sequence 1 see no key
        assert np.all(np.asarray(got[0])[1, :4] == 0)


def test_linear_rejects_unsupported_masks_bias_and_options():
    q, k, v = _qkv()
    causal = tf.constant(_mask("causal"))
    with pytest.raises(ValueError, match="causal': True"):
        ac.dot_product_attention(
            q, k, v, mask=causal, attention_impl="linear"
        )  # causal mask, causal option missing
    window = tf.constant(np.abs(np.arange(T)[:, None] - np.arange(T)[None, :]) <= 3)
    with pytest.raises(ValueError, match="key-padding"):
        ac.dot_product_attention(q, k, v, mask=window, attention_impl="linear", causal=True)
    with pytest.raises(ValueError, match="bias"):
        ac.dot_product_attention(q, k, v, bias=tf.zeros((H, T, T)), attention_impl="linear")
    with pytest.raises(ValueError, match="return_attention_scores"):
        ac.dot_product_attention(q, k, v, attention_impl="linear", return_attention_scores=True)
    with pytest.raises(ValueError, match="query_length == key_length"):
        ac.dot_product_attention(q[:, :4], k, v, attention_impl="linear", causal=True)
    with pytest.raises(ValueError, match="position"):
        L.MultiHeadSelfAttention(H, position="alibi", attention_impl="linear")(tf.zeros((B, T, 12)))


def test_linear_mask_check_in_tf_function():
    q, k, v = _qkv()
    fn = tf.function(lambda m: ac.dot_product_attention(q, k, v, mask=m, attention_impl="linear")[0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="only supports key-padding masks"):
        fn(tf.constant(_mask("causal")))


# ----------------------------------------------------- layers and saving
IMPLS = {
    "chunked": dict(query_chunk_size=8, key_chunk_size=8, causal=True),
    "local": dict(window=6, causal=True, global_tokens=2),
    "linear": dict(causal=True, chunk_size=8),
}


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_transformer_block_with_efficient_impl(impl):
    rng = np.random.default_rng(13)
    x = rng.normal(size=(B, T, 12)).astype("float32")
    pad = _padding()
    run_layer_test(
        L.TransformerBlock,
        dict(
            d_model=12,
            num_heads=H,
            d_ff=16,
            dropout=0.0,
            causal=True,
            attention_impl=impl,
            attention_options=IMPLS[impl],
        ),
        x,
        expected_output_shape=(B, T, 12),
        expected_num_trainable_weights=16,
        call_kwargs={"padding_mask": pad},
    )


def test_chunked_layer_equals_reference_layer_and_trains():
    x = tf.constant(np.random.default_rng(14).normal(size=(B, T, 12)), tf.float32)
    pad = tf.constant(_padding())
    std = L.TransformerBlock(12, H, 16, causal=True, position="alibi", attention_impl="reference")
    chk = L.TransformerBlock(
        12, H, 16, causal=True, position="alibi", attention_impl="chunked", attention_options=CHUNKS
    )
    std(x, padding_mask=pad)
    chk(x, padding_mask=pad)
    chk.set_weights(std.get_weights())
    grads = []
    for layer in (std, chk):
        with tf.GradientTape() as tape:
            y = layer(x, padding_mask=pad, training=True)
            loss = tf.reduce_sum(tf.where(pad[..., None], y, 0.0) ** 2)
        grads.append([y] + tape.gradient(loss, layer.trainable_weights))
    for g, w in zip(*grads[::-1]):
        _close(g, w, tol=1e-4)


@pytest.mark.parametrize(
    "chunks",
    [
        CHUNKS,
        dict(query_chunk_size=5, key_chunk_size=12),
        dict(query_chunk_size=16, key_chunk_size=3),
        dict(query_chunk_size=4, key_chunk_size=8),  # key blocks 2 query blocks wide, cut at the diagonal
        dict(query_chunk_size=4, key_chunk_size=12),  # 3 wide; the last key block meets one query block
    ],
)
@pytest.mark.parametrize("layer_mask", [False, True])
def test_chunked_causal_option_skips_blocks_exactly(chunks, layer_mask):
    """`causal=True` (block skipping) with the padding mask alone or with the
    full causal ∧ padding mask the layers pass; ragged chunks of both sizes,
    and key blocks a multiple of the query blocks (edge blocks cut to width)."""
    q, k, v = _qkv(15)
    bias = tf.constant(np.random.default_rng(16).normal(size=(H, T, T)), tf.float32)
    full = tf.constant(_mask("causal_padding"))
    want = _grads("reference", q, k, v, full, bias)
    mask = full if layer_mask else tf.constant(_mask("padding"))
    got = _grads("chunked", q, k, v, mask, bias, causal=True, **chunks)
    for g, w in zip(got, want):
        _close(g, w)
    if layer_mask and chunks is CHUNKS:  # one XLA run (compiling is the slow part)
        fn = tf.function(
            lambda: _grads("chunked", q, k, v, mask, bias, causal=True, **chunks), jit_compile=True
        )
        for g, w in zip(fn(), want):
            _close(g, w)


class _ScoreBlockSpy:
    """`keras.ops` as the chunked core sees it, recording the shape of every score block."""

    def __init__(self):
        self.blocks = []

    def einsum(self, spec, *operands):
        out = keras.ops.einsum(spec, *operands)
        if spec == "bhqd,bhkd->bhqk":  # S = Q·Kᵀ (forward and backward) and dP = dO·Vᵀ
            self.blocks.append(tuple(out.shape[2:]))
        return out

    def __getattr__(self, name):
        return getattr(keras.ops, name)


@pytest.mark.parametrize("t", [32, 30])  # T a multiple of the key block, or not
def test_causal_chunked_computes_only_the_lower_triangle_blocks(monkeypatch, t):
    """With key blocks two query blocks wide (the causal default shape), query
    block i computes its i // 2 whole key blocks and then only the keys up to
    its own diagonal square: the forward (S) and the backward (S and dP)
    together compute 3 × Σ_i (i + 1)·cq² scores, nothing above the diagonal
    square; the un-cut edge blocks would cost a full key block each."""
    from keras_tfm.layers.attention import chunked

    spy = _ScoreBlockSpy()
    monkeypatch.setattr(chunked, "ops", spy)
    q, k, v = _qkv(17, t=t)
    got = _grads("chunked", q, k, v, causal=True, query_chunk_size=4, key_chunk_size=8)
    monkeypatch.undo()
    for g, w in zip(got, _grads("reference", q, k, v, causal=True)):
        _close(g, w)
    query_blocks = -(-t // 4)
    assert set(spy.blocks) == {(4, 4), (4, 8)}
    assert sum(a * b for a, b in spy.blocks) == 3 * sum((i + 1) * 16 for i in range(query_blocks))


def test_layer_passes_its_causality_to_the_implementation():
    """A causal layer tells chunked/local/linear it is causal; no option needed,
    and a contradicting option is rejected by name."""
    import keras
    import numpy as np

    from keras_tfm.layers import MultiHeadSelfAttention

    x = np.random.default_rng(0).normal(size=(2, 19, 16)).astype("float32")
    ref = MultiHeadSelfAttention(2, causal=True, attention_impl="reference")
    expected = ref(x)
    for impl, options in (
        ("chunked", {"query_chunk_size": 4, "key_chunk_size": 8}),
        ("local", {"window": 32}),
    ):
        layer = MultiHeadSelfAttention(2, causal=True, attention_impl=impl, attention_options=options)
        layer.build(x.shape)
        layer.set_weights(ref.get_weights())
        np.testing.assert_allclose(layer(x), expected, atol=1e-5)
    bad = MultiHeadSelfAttention(2, causal=False, attention_impl="linear", attention_options={"causal": True})
    with pytest.raises(ValueError, match="causal"):
        bad(keras.ops.convert_to_tensor(x))


@pytest.mark.parametrize("causal", [False, True])
def test_chunked_layer_exports_to_a_saved_model(tmp_path, causal):
    # The custom gradient's backward must not capture the forward loop's TensorLists (variant tensors):
    # a SavedModel cannot hold such a capture, so every export of a chunked model failed.
    layer = L.MultiHeadSelfAttention(
        2, causal=causal, attention_impl="chunked", attention_options={"query_chunk_size": 4}
    )
    x = tf.random.stateless_normal((1, 10, 8), (1, 2))
    expected = layer(x)
    archive = keras.export.ExportArchive()
    archive.track(layer)
    archive.add_endpoint(
        "serve", lambda t: layer(t), input_signature=[tf.TensorSpec((None, None, 8), tf.float32)]
    )
    archive.write_out(str(tmp_path / "m"))
    loaded = tf.saved_model.load(str(tmp_path / "m"))
    served = loaded.serve(x)
    np.testing.assert_allclose(served.numpy(), expected.numpy(), atol=1e-5)
