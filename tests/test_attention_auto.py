"""attention_impl="auto" (the default), the causal flag and `ToeplitzBias` of the
attention core (issue 16), and the core on the JAX backend (issue 17 §2); every
path is compared with the plain formula, "reference"."""

import functools
import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
from model_harness import tiny_gpt

import keras_tfm.layers as L
from keras_tfm.layers import attention as ac
from keras_tfm.layers.attention import dot_product

B, T, H, D = 2, 37, 3, 8
SMALL = dict(min_key_length=16, query_chunk_size=8, key_chunk_size=8)


def _qkv(seed=0, t=T):
    rng = np.random.default_rng(seed)
    return [tf.constant(rng.normal(size=(B, t, H, D)), tf.float32) for _ in range(3)]


def _padding(t=T):
    pad = np.ones((B, t), bool)
    pad[0, t - 7 :] = False
    pad[1, :4] = False  # under causal, queries 0..3 of sequence 1 see no key
    return pad


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=tol, rtol=tol)


@pytest.fixture
def spy(monkeypatch):
    """Records the paths `dot_product_attention` takes: "standard" (the formula's scores),
    "chunked" and "one_query" (its fast paths)."""
    calls = []

    def wrap(attribute, name):
        fn = getattr(dot_product, attribute)

        @functools.wraps(fn)
        def spied(*args, **kwargs):
            inputs = args[0]._asdict() if isinstance(args[0], ac.AttentionInputs) else None
            calls.append((name, inputs))
            return fn(*args, **kwargs)

        monkeypatch.setattr(dot_product, attribute, spied)

    wrap("attention_scores", "standard")
    wrap("chunked_attention", "chunked")
    wrap("attend_one_query", "one_query")
    return calls


def _grads(impl, q, k, v, mask=None, bias=None, causal=False, **options):
    with tf.GradientTape() as tape:
        tape.watch([q, k, v])
        out, _ = ac.dot_product_attention(
            q, k, v, mask=mask, bias=bias, causal=causal, attention_impl=impl, attention_options=options
        )
        loss = tf.reduce_sum(out * tf.sin(3.0 * out))
    return [out] + tape.gradient(loss, [q, k, v])


# ------------------------------------------------------------------- auto
def test_auto_is_the_default_everywhere():
    assert L.MultiHeadSelfAttention(H).attention_impl == "auto"
    assert L.CrossAttention(H).attention_impl == "auto"
    assert L.TransformerBlock(12, H, 16).attention_impl == "auto"
    model = tiny_gpt(seed=None)
    impls = {layer.attention_impl for layer in model._flatten_layers() if hasattr(layer, "attention_impl")}
    assert impls == {"auto"}


@pytest.mark.parametrize("causal", [False, True])
def test_auto_picks_chunked_for_long_keys_and_equals_reference(spy, causal):
    q, k, v = _qkv()
    mask = tf.constant(_padding()[:, None, :])
    want = _grads("reference", q, k, v, mask, causal=causal)
    spy.clear()
    got = _grads("auto", q, k, v, mask, causal=causal, **SMALL)
    assert [name for name, _ in spy] == ["chunked"]
    for g, w in zip(got, want):
        _close(g, w)
    spy.clear()
    _grads("auto", q[:, :8], k[:, :8], v[:, :8], causal=causal, **SMALL)  # 8 < 16 keys
    assert [name for name, _ in spy] == ["standard"]


def test_auto_takes_the_formula_for_weights_and_dropout_and_one_query_for_a_step(spy):
    q, k, v = _qkv()
    _, w = ac.dot_product_attention(
        q, k, v, return_attention_scores=True, attention_impl="auto", attention_options=SMALL
    )
    assert w.shape == (B, H, T, T)
    drop = keras.layers.Dropout(0.5)
    ac.dot_product_attention(
        q, k, v, dropout=drop, training=True, attention_impl="auto", attention_options=SMALL
    )
    ac.dot_product_attention(
        q[:, :1], k, v, attention_impl="auto", attention_options=SMALL
    )  # a decoding step
    assert [name for name, _ in spy] == ["standard", "standard", "one_query"]
    spy.clear()
    ac.dot_product_attention(
        q, k, v, dropout=drop, training=False, attention_impl="auto", attention_options=SMALL
    )
    assert [name for name, _ in spy] == ["chunked"]
    with pytest.raises(ValueError, match="min_key_length"):
        ac.dot_product_attention(q, k, v, attention_impl="auto", attention_options={"min_key_length": 0})


def test_auto_decides_at_run_time_for_unknown_lengths():
    spec = tf.TensorSpec([B, None, H, D], tf.float32)

    @tf.function(input_signature=[spec, spec, spec])
    def fn(q, k, v):
        return _grads("auto", q, k, v, causal=True, **SMALL)

    for t in (8, T):  # below and above min_key_length, one graph
        q, k, v = _qkv(1, t)
        for g, w in zip(fn(q, k, v), _grads("reference", q, k, v, causal=True)):
            _close(g, w)
    assert fn.experimental_get_tracing_count() == 1


def test_key_length_bound_decides_statically(spy):
    """Under `key_length_bound(n)` with n below the threshold, an unknown length traces "standard"
    alone (no run-time choice, no chunked path); a bound at or above it changes nothing."""
    from keras_tfm.layers.attention.dot_product import key_length_bound

    spec = tf.TensorSpec([B, None, H, D], tf.float32)

    def traced(bound):
        @tf.function(input_signature=[spec, spec, spec])
        def fn(q, k, v):
            with key_length_bound(bound):
                out, _ = ac.dot_product_attention(q, k, v, causal=True, attention_options=SMALL)
            return out

        graph = fn.get_concrete_function().graph.as_graph_def()
        return fn, {node.op for node in graph.node}

    spy.clear()
    fn, ops = traced(15)  # SMALL's min_key_length is 16
    assert "If" not in ops and "StatelessIf" not in ops and {name for name, _ in spy} == {"standard"}
    q, k, v = _qkv(2, 9)
    _close(fn(q, k, v), ac.dot_product_attention(q, k, v, causal=True, attention_impl="reference")[0])
    spy.clear()
    _, ops = traced(16)
    assert {name for name, _ in spy} == {"standard", "chunked"} and ops & {"If", "StatelessIf"}
    with pytest.raises(ValueError, match="max_key_length"):
        with key_length_bound(0):
            pass


@pytest.mark.parametrize("jit_compile", [False, True])
def test_run_time_choice_gradients_with_bias_and_mask_under_xla(jit_compile):
    """A `None` length under `jit_compile=True` (as `model.fit` retraces for a second batch width):
    the run-time choice's gradient (q, k, v and a trainable Toeplitz bias) equals the reference's,
    on both sides of `min_key_length`. A plain `cond` gradient failed to compile under XLA."""
    spec = tf.TensorSpec([B, None, H, D], tf.float32)

    def grads(impl, q, k, v, values, mask, **options):
        t = tf.shape(q)[1]
        with tf.GradientTape() as tape:
            tape.watch([q, k, v, values])
            out, _ = ac.dot_product_attention(
                q,
                k,
                v,
                mask=mask,
                bias=ac.ToeplitzBias(values, t),
                attention_impl=impl,
                attention_options=options or None,
            )
            loss = tf.reduce_sum(out * tf.sin(3.0 * out))
        return [out] + tape.gradient(loss, [q, k, v, values])

    fn = tf.function(
        lambda q, k, v, values, mask: grads("auto", q, k, v, values, mask, **SMALL),
        input_signature=[spec, spec, spec, tf.TensorSpec([H, None]), tf.TensorSpec([B, 1, None], tf.bool)],
        jit_compile=jit_compile,
    )
    for t in (8, T):  # below and above min_key_length, one graph
        q, k, v = _qkv(2, t)
        values = tf.constant(np.random.default_rng(7).normal(size=(H, 2 * t - 1)), tf.float32)
        mask = tf.constant(_padding(t)[:, None, :])
        for g, w in zip(fn(q, k, v, values, mask), grads("reference", q, k, v, values, mask)):
            _close(g, w, tol=2e-5)


@pytest.mark.parametrize("position", [None, "alibi", "relative", "rope"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("tested", ["auto", "standard"])
def test_layer_equals_reference_layer_outputs_and_gradients(tested, position, causal):
    """The default layer ("auto", here chunked for T = 37) and the standard one
    equal the plain formula: outputs and the gradients of every weight."""
    x = tf.constant(np.random.default_rng(2).normal(size=(B, T, 12)), tf.float32)
    pad = tf.constant(_padding())
    layers = []
    for impl, options in (("reference", None), (tested, SMALL if tested == "auto" else None)):
        layer = L.MultiHeadSelfAttention(
            H,
            causal=causal,
            position=position,
            attention_impl=impl,
            attention_options=options,
            relative_num_buckets=8,
            relative_max_distance=16,
            bias_initializer="random_normal",
        )
        layer.build(x.shape)
        layers.append(layer)
    if position == "relative":  # a non-zero table, so its gradient is informative
        layers[0].relative_bias.embeddings.assign(np.random.default_rng(3).normal(size=(8, H)))
    layers[1].set_weights(layers[0].get_weights())
    results = []
    for layer in layers:
        with tf.GradientTape() as tape:
            y = layer(x, padding_mask=pad)
            loss = tf.reduce_sum(tf.where(pad[..., None], y, 0.0) ** 2)
        grads = tape.gradient(loss, layer.trainable_weights)
        results.append([y] + [tf.convert_to_tensor(g) for g in grads])  # gathers give IndexedSlices
    for g, w in zip(results[1], results[0]):
        _close(g, w, tol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
def test_standard_hand_written_gradient_equals_reference(causal):
    """The standard path differentiates softmax(S)·V by hand (rowsum(dO ⊙ O)); asking for the
    weights takes its autodiff path. Both give the formula's output and gradients."""
    q, k, v = _qkv(4)
    bias = tf.constant(np.random.default_rng(5).normal(size=(H, T, T)), tf.float32)
    mask = tf.constant(_padding()[:, None, :])  # sequence 1's first queries see no key under causal
    results = []
    for impl, return_scores in (("reference", False), ("standard", False), ("standard", True)):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v, bias])
            out, _ = ac.dot_product_attention(
                q,
                k,
                v,
                mask=mask,
                bias=bias,
                causal=causal,
                attention_impl=impl,
                return_attention_scores=return_scores,
            )
            loss = tf.reduce_sum(out * tf.sin(3.0 * out))
        results.append([out] + tape.gradient(loss, [q, k, v, bias]))
    for standard in results[1:]:
        for got, want in zip(standard, results[0]):
            assert np.all(np.isfinite(got))
            _close(got, want)


def test_layers_pass_no_t_by_t_tensor_to_the_chunked_core(spy):
    x = tf.zeros((B, T, 12))
    for position in ("alibi", "relative"):
        layer = L.MultiHeadSelfAttention(H, causal=True, position=position, attention_options=SMALL)
        spy.clear()
        layer(x, padding_mask=tf.constant(_padding()))
        ((name, kwargs),) = spy
        assert name == "chunked" and kwargs["causal"] is True
        assert tuple(kwargs["mask"].shape) == (B, 1, T)  # key padding only
        assert isinstance(kwargs["bias"], ac.ToeplitzBias)
        assert tuple(kwargs["bias"].values.shape) == (H, 2 * T - 1)


def test_causal_attention_options_must_agree_with_the_layer():
    layer = L.MultiHeadSelfAttention(H, causal=False, attention_options={"causal": True})
    with pytest.raises(ValueError, match="contradicts the layer"):
        layer(tf.zeros((B, T, 12)))
    with pytest.raises(ValueError, match="query_length == key_length"):
        ac.dot_product_attention(*_qkv()[:1], *[t[:, :5] for t in _qkv()[1:]], causal=True)


# -------------------------------------------------------- Toeplitz bias
@pytest.mark.parametrize("kind", ["alibi", "relative"])
def test_toeplitz_bias_is_the_dense_position_bias(kind):
    if kind == "alibi":
        layer = L.AlibiBias(H)
    else:
        layer = L.RelativePositionBias(H, num_buckets=8, max_distance=16, bidirectional=False)
        layer.build()
        layer.embeddings.assign(np.random.default_rng(4).normal(size=(8, H)))
    toeplitz = ac.ToeplitzBias.from_bias_fn(layer.compute_bias, T, T)
    _close(toeplitz.dense(T), layer.compute_bias(T, T), tol=0)


@pytest.mark.parametrize(
    "chunks",
    [
        dict(query_chunk_size=8, key_chunk_size=8),
        dict(query_chunk_size=16, key_chunk_size=3),
        dict(query_chunk_size=4, key_chunk_size=8),
    ],
)
@pytest.mark.parametrize("causal", [False, True])
def test_chunked_toeplitz_bias_gradient(chunks, causal):
    q, k, v = _qkv(5)
    values = tf.constant(np.random.default_rng(6).normal(size=(H, 2 * T - 1)), tf.float32)
    mask = tf.constant(_padding()[:, None, :])
    results = []
    for impl in ("reference", "chunked"):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v, values])
            out, _ = ac.dot_product_attention(
                q,
                k,
                v,
                mask=mask,
                bias=ac.ToeplitzBias(values, T),
                causal=causal,
                attention_impl=impl,
                attention_options=None if impl == "reference" else chunks,
            )
            loss = tf.reduce_sum(out * tf.sin(3.0 * out))
        results.append([out] + tape.gradient(loss, [q, k, v, values]))
    for g, w in zip(results[1], results[0]):
        _close(g, w)


@pytest.mark.parametrize("causal", [False, True])
def test_chunked_without_ragged_blocks(causal):
    """T a multiple of both chunk sizes: no block needs the padding mask."""
    q, k, v = _qkv(7, t=32)
    want = _grads("reference", q, k, v, causal=causal)
    got = _grads("chunked", q, k, v, causal=causal, query_chunk_size=8, key_chunk_size=16)
    for g, w in zip(got, want):
        _close(g, w)


@pytest.mark.parametrize("t", [48, 56, 37])  # 6 or 7 blocks of 8, or a ragged last one
@pytest.mark.parametrize("dynamic", [False, True])
def test_causal_square_blocks_equal_reference(t, dynamic):
    """Causal chunked attention with square blocks (the causal default: plain
    blocks, one masked diagonal block per row): with a position bias and
    padding, outputs and every gradient equal the formula, also for a
    length known only at run time."""
    q, k, v = _qkv(8, t=t)
    values = tf.constant(np.random.default_rng(9).normal(size=(H, 2 * t - 1)), tf.float32)
    mask = tf.constant(_padding(t)[:, None, :])

    def run(impl, q, k, v, values):
        with tf.GradientTape() as tape:
            tape.watch([q, k, v, values])
            bias = ac.ToeplitzBias(values, tf.shape(q)[1])
            options = dict(query_chunk_size=8, key_chunk_size=8) if impl == "chunked" else {}
            out, _ = ac.dot_product_attention(
                q,
                k,
                v,
                mask=mask,
                bias=bias if impl == "chunked" else bias.dense(tf.shape(q)[1]),
                causal=True,
                attention_impl=impl,
                attention_options=options,
            )
            loss = tf.reduce_sum(out * tf.sin(3.0 * out))
        return [out] + tape.gradient(loss, [q, k, v, values])

    want = run("reference", q, k, v, values)
    if dynamic:
        spec = tf.TensorSpec((B, None, H, D), tf.float32)
        chunked = tf.function(
            lambda *args: run("chunked", *args), input_signature=[spec] * 3 + [tf.TensorSpec((H, None))]
        )
        got = chunked(q, k, v, values)
    else:
        got = run("chunked", q, k, v, values)
    for g, w in zip(got, want):
        _close(g, w)


def test_local_reads_a_toeplitz_bias_on_the_band():
    q, k, v = _qkv(8)
    values = tf.constant(np.random.default_rng(9).normal(size=(H, 2 * T - 1)), tf.float32)
    toeplitz = ac.ToeplitzBias(values, T)
    for causal, g in ((False, 0), (True, 3)):
        options = dict(window=5, global_tokens=g)
        want, _ = ac.dot_product_attention(
            q, k, v, bias=toeplitz.dense(T), causal=causal, attention_impl="local", attention_options=options
        )
        got, _ = ac.dot_product_attention(
            q, k, v, bias=toeplitz, causal=causal, attention_impl="local", attention_options=options
        )
        _close(got, want)


@pytest.mark.parametrize("causal", [False, True])
def test_fused_backend_kernel_equals_reference(causal):
    """ "fused" = keras.ops.dot_product_attention (cuDNN flash attention on a JAX
    GPU); same contract, rows without a visible key are zero."""
    q, k, v = _qkv(11)
    mask = tf.constant(_padding()[:, None, :])
    for bias in (None, tf.constant(np.random.default_rng(12).normal(size=(H, T, T)), tf.float32)):
        want = _grads("reference", q, k, v, mask, bias, causal=causal)
        got = _grads("fused", q, k, v, mask, bias, causal=causal)
        for g, w in zip(got, want):
            _close(g, w)
    with pytest.raises(ValueError, match="fused"):
        ac.dot_product_attention(q, k, v, attention_impl="fused", return_attention_scores=True)


# ---------------------------------------------------------------- JAX
_JAX_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import jax
    import numpy as np
    from keras import ops
    from keras_tfm.layers import attention as ac
    data = np.load(sys.argv[1])
    q, k, v, values, pad = (data[n] for n in ("q", "k", "v", "values", "pad"))
    cases = json.loads(sys.argv[2])
    out = {}
    for name, (impl, options, causal, with_bias) in cases.items():
        def run(q, k, v, values, pad):  # one jax.jit per case: compiled once, not op by op
            bias = ac.ToeplitzBias(values, q.shape[1]) if with_bias else None
            y, _ = ac.dot_product_attention(
                q, k, v, mask=pad[:, None, :], bias=bias, causal=causal, attention_impl=impl,
                attention_options=options,
            )
            return y
        out[name] = np.asarray(jax.jit(run)(q, k, v, values, pad))
        if impl == "chunked":  # its hand-written backward too: d/d(q, k, v, bias values)
            def loss(q, k, v, values, pad):
                y = run(q, k, v, values, pad)
                return (y * jax.numpy.sin(3.0 * y)).sum()
            grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)))(q, k, v, values, pad)
            for g_name, g in zip(("dq", "dk", "dv", "dvalues"), grads):
                out[f"{name}_{g_name}"] = np.asarray(g)
    np.savez(sys.argv[3], **out)
    """
)

JAX_CASES = {
    "reference": ["reference", {}, True, True],
    "standard": ["standard", {}, True, True],
    "chunked": ["chunked", {"query_chunk_size": 8, "key_chunk_size": 8}, True, True],
    "chunked_noncausal": ["chunked", {"query_chunk_size": 16, "key_chunk_size": 5}, False, True],
    "chunked_wide_keys": ["chunked", {"query_chunk_size": 4, "key_chunk_size": 12}, True, True],
    "local": ["local", {"window": 5, "global_tokens": 2}, True, True],
    "linear": ["linear", {"chunk_size": 8}, True, False],
    "fused": ["fused", {}, True, False],
}


def test_attention_core_on_jax_equals_tensorflow(tmp_path):
    pytest.importorskip("jax", reason="jax is in the test extra; the JAX backend run needs it")
    rng = np.random.default_rng(10)
    arrays = {n: rng.normal(size=(B, T, H, D)).astype("float32") for n in ("q", "k", "v")}
    arrays["values"] = rng.normal(size=(H, 2 * T - 1)).astype("float32")
    arrays["pad"] = _padding()
    np.savez(tmp_path / "in.npz", **arrays)
    script = tmp_path / "run.py"
    script.write_text(_JAX_SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", PYTHONPATH=path)
    proc = subprocess.run(
        [
            sys.executable,
            str(script),
            str(tmp_path / "in.npz"),
            json.dumps(JAX_CASES),
            str(tmp_path / "out.npz"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.load(tmp_path / "out.npz")
    q, k, v = (tf.constant(arrays[n]) for n in ("q", "k", "v"))
    values = tf.constant(arrays["values"])
    for name, (impl, options, causal, with_bias) in JAX_CASES.items():
        with tf.GradientTape() as tape:
            tape.watch([q, k, v, values])
            bias = ac.ToeplitzBias(values, T) if with_bias else None
            want, _ = ac.dot_product_attention(
                q,
                k,
                v,
                mask=arrays["pad"][:, None, :],
                bias=bias,
                causal=causal,
                attention_impl=impl,
                attention_options=options,
            )
            loss = tf.reduce_sum(want * tf.sin(3.0 * want))
        _close(got[name], want)
        if impl == "chunked":
            for g_name, g in zip(
                ("dq", "dk", "dv", "dvalues"),
                tape.gradient(loss, [q, k, v, values], unconnected_gradients="zero"),
            ):
                _close(got[f"{name}_{g_name}"], g, tol=2e-5)
