"""Projections go through their own sublayers (issue 11 §2).

Whatever Keras puts in a Dense/EinsumDense call path (LoRA, int8 / float8
kernels and their scales) must apply: every layer's output equals calling its
sublayers one by one, and after `model.quantize("int8")` every quantized
sublayer of a GPT is actually called.
"""

import os
import re
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops
from model_harness import images, tiny_bert_classifier, tiny_bert_masked_lm, tiny_gpt, tiny_seq2seq, tiny_vit

from keras_tfm import layers as L
from keras_tfm.layers.attention import dot_product, projections
from keras_tfm.layers.attention.dot_product import dot_product_attention
from keras_tfm.layers.feed_forward import get_activation

MODES = ("plain", "lora", "int8", "float8")
D, T, S = 16, 6, 7


def _x(shape, seed):
    return keras.random.normal(shape, seed=seed)


def _transform(sublayers, mode):
    """Applies LoRA (with non-zero B so it matters) or quantization."""
    for i, layer in enumerate(sublayers):
        if mode == "lora":
            layer.enable_lora(2)
            layer.lora_kernel_b.assign(0.3 * keras.random.normal(layer.lora_kernel_b.shape, seed=i))
        elif mode != "plain":
            layer.quantize(mode)
    if mode in ("int8", "float8"):
        assert all(layer.quantization_mode == mode for layer in sublayers)


def _projections(attn):
    return [attn.query_dense, attn.key_dense, attn.value_dense, attn.output_dense]


def _self_attention_by_hand(attn, x):
    q, k, v = attn.query_dense(x), attn.key_dense(x), attn.value_dense(x)
    if attn.rotary is not None:
        q, k = attn.rotary(q), attn.rotary(k)
    out, _ = dot_product_attention(q, k, v, mask=L.causal_mask(T), attention_impl="reference")
    return attn.output_dense(out)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("position", [None, "rope"])
def test_self_attention_calls_its_projections(mode, position):
    attn = L.MultiHeadSelfAttention(4, causal=True, position=position, attention_impl="standard")
    x = _x((2, T, D), 1)
    attn(x)
    _transform(_projections(attn), mode)
    # The fused fast path is kept exactly for plain float kernels.
    assert all(projections.is_plain_float(layer) for layer in _projections(attn)) == (mode == "plain")
    np.testing.assert_allclose(attn(x), _self_attention_by_hand(attn, x), atol=1e-5)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_fused_path_kept_under_mixed_precision(policy):
    attn = L.MultiHeadSelfAttention(4, causal=True, attention_impl="standard", dtype=policy)
    x = ops.cast(_x((2, T, D), 1), attn.compute_dtype)
    y = attn(x)
    assert all(projections.is_plain_float(layer) for layer in _projections(attn))
    expected = _self_attention_by_hand(attn, x)
    np.testing.assert_allclose(ops.cast(y, "float32"), ops.cast(expected, "float32"), atol=2e-2)


@pytest.mark.parametrize("mode", MODES)
def test_cross_attention_calls_its_projections(mode):
    attn = L.CrossAttention(4, attention_impl="standard")
    y, ctx = _x((2, T, D), 1), _x((2, S, D), 2)
    attn(y, ctx)
    _transform(_projections(attn), mode)
    q, k, v = attn.query_dense(y), attn.key_dense(ctx), attn.value_dense(ctx)
    expected = attn.output_dense(dot_product_attention(q, k, v, attention_impl="reference")[0])
    np.testing.assert_allclose(attn(y, ctx), expected, atol=1e-5)
    # The cached path (keys/values projected once) too.
    cache = attn.compute_cache(ctx)
    np.testing.assert_allclose(cache[:, 0], k, atol=1e-5)
    np.testing.assert_allclose(attn(y, cache=cache), expected, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_feed_forward_and_output_head_call_their_dense_layers(mode):
    ffn = L.FeedForward(32, activation="gelu")
    head = L.OutputHead(11)
    x = _x((2, T, D), 3)
    ffn(x), head(x)
    _transform([ffn.inner_dense, ffn.output_dense, head.dense], mode)
    act = get_activation("gelu")
    np.testing.assert_allclose(ffn(x), ffn.output_dense(act(ffn.inner_dense(x))), atol=1e-5)
    np.testing.assert_allclose(head(x), ops.cast(head.dense(x), "float32"), atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("norm_first", [True, False])
def test_transformer_block_calls_its_sublayers(mode, norm_first):
    block = L.TransformerBlock(D, 4, 32, causal=True, norm_first=norm_first, attention_impl="standard")
    x = _x((2, T, D), 4)
    block(x)
    attn, ffn = block.self_attention_layer, block.feed_forward
    _transform(_projections(attn) + [ffn.inner_dense, ffn.output_dense], mode)

    def residual(h, norm, sublayer):
        if norm_first:
            return h + sublayer(norm(h))
        return norm(h + sublayer(h))

    h = residual(x, block.self_attention_norm, lambda z: _self_attention_by_hand(attn, z))
    h = residual(h, block.feed_forward_norm, ffn)
    np.testing.assert_allclose(block(x), h, atol=1e-5)


def test_layer_quantize_delegates_to_projections():
    """`layer.quantize(mode)` on a standalone composite layer quantizes its
    Dense/EinsumDense sublayers (as `Model.quantize` does for a model)."""
    block = L.TransformerBlock(D, 4, 32, causal=True, cross_attention=True)
    block(_x((2, T, D), 1), _x((2, S, D), 2))
    block.quantize("int8")
    attn, cross, ffn = block.self_attention_layer, block.cross_attention_layer, block.feed_forward
    for layer in _projections(attn) + _projections(cross) + [ffn.inner_dense, ffn.output_dense]:
        assert layer.quantization_mode == "int8", layer.path
    head = L.OutputHead(11)
    head(_x((2, T, D), 1))
    head.quantize("float8")
    assert head.dense.quantization_mode == "float8"


# --------------------------------------------------------------- whole model
@pytest.fixture(scope="module")
def quantized_gpt():
    model = tiny_gpt(tie_embeddings=False)
    ids = np.random.default_rng(0).integers(0, 64, size=(16, 32)).astype("int32")
    reference = keras.ops.convert_to_numpy(model(ids))
    with warnings.catch_warnings():
        # Keras warns for every layer without weights to quantize (Dropout, LayerNorm, ...).
        warnings.filterwarnings("ignore", message=".*does not have a `quantize` method")
        model.quantize("int8")
    return model, ids, reference


def _quantized_leaves(model):
    return [layer for layer in model._flatten_layers() if layer.quantization_mode is not None]


def _count_quantized_calls(model, ids):
    counts = {}
    leaves = _quantized_leaves(model)
    for layer in leaves:
        original = layer.quantized_call

        def counting(*args, _layer=layer, _original=original, **kwargs):
            counts[_layer.path] = counts.get(_layer.path, 0) + 1
            return _original(*args, **kwargs)

        layer.quantized_call = counting
    try:
        model(ids)
    finally:
        for layer in leaves:
            del layer.quantized_call
    return {layer.path: counts.get(layer.path, 0) for layer in leaves}


def test_int8_gpt_agrees_with_float(quantized_gpt):
    model, ids, reference = quantized_gpt
    # 2 blocks × (4 attention projections + 2 FFN) + the untied LM head.
    assert len(_quantized_leaves(model)) == 13
    logits = keras.ops.convert_to_numpy(model(ids))
    agreement = float(np.mean(logits.argmax(-1) == reference.argmax(-1)))
    # Measured 0.98 on these 512 positions; reading the raw int8 kernels
    # without their scales (the old fused path) gave 0.05.
    assert agreement >= 0.9, agreement
    np.testing.assert_allclose(logits, reference, atol=0.05 * np.abs(reference).max())


def test_no_layer_bypasses_a_quantized_sublayer(quantized_gpt, monkeypatch):
    model, ids, _ = quantized_gpt
    counts = _count_quantized_calls(model, ids)
    assert all(n >= 1 for n in counts.values()), {k: n for k, n in counts.items() if n == 0}
    # The check can fail: force the fused path (reading the kernels directly)
    # and the attention projections are no longer called.
    monkeypatch.setattr(projections, "is_plain_float", lambda layer: True)
    bypassed = [path for path, n in _count_quantized_calls(model, ids).items() if n == 0]
    assert len(bypassed) == 8 and all("self_attention" in path for path in bypassed), bypassed


@pytest.mark.parametrize("name", ["seq2seq", "vit", "bert_classifier", "bert_masked_lm"])
def test_quantize_whole_builder_models(name):
    """`model.quantize("int8")` on other builders: every projection (cross-attention
    included) is quantized and called, and the outputs stay close."""
    rng = np.random.default_rng(0)
    if name == "seq2seq":
        model = tiny_seq2seq()
        x = {
            "encoder_token_ids": rng.integers(1, 32, size=(4, 12)).astype("int32"),
            "decoder_token_ids": rng.integers(1, 32, size=(4, 12)).astype("int32"),
        }
        expected = 2 * 6 + 2 * 10  # encoder blocks: attention + FFN; decoder blocks: + cross-attention
    elif name.startswith("bert"):
        model = tiny_bert_classifier() if name == "bert_classifier" else tiny_bert_masked_lm()
        x = {
            "token_ids": rng.integers(1, 64, size=(4, 12)).astype("int32"),
            "segment_ids": np.zeros((4, 12), "int32"),
            "padding_mask": np.ones((4, 12), "int32"),
        }
        # segment Embedding + blocks + pooler and classifier, or the MLM transform
        # (the tied MLM output reads the token table: `TokenEmbedding` stays float).
        expected = 1 + 2 * 6 + (2 if name == "bert_classifier" else 1)
    else:
        model = tiny_vit()
        x = images(4)
        expected = 2 * 6 + 1  # blocks + classifier (the patch Conv2D has no int8 form)
    reference = keras.ops.convert_to_numpy(model(x))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*does not have a `quantize` method")
        model.quantize("int8")
    counts = _count_quantized_calls(model, x)
    assert len(counts) == expected and all(n >= 1 for n in counts.values()), counts
    out = keras.ops.convert_to_numpy(model(x))
    np.testing.assert_allclose(out, reference, atol=0.05 * np.abs(reference).max())


def _stored_bytes(model_or_dir):
    """Bytes per dtype of a model's variables, or of a SavedModel's checkpoint."""
    totals = {}
    if isinstance(model_or_dir, keras.Model):
        items = [(v.dtype, v.shape) for v in model_or_dir.weights]
    else:
        reader = tf.train.load_checkpoint(os.path.join(model_or_dir, "variables", "variables"))
        shapes = reader.get_variable_to_shape_map()
        items = [(d.name, shapes[n]) for n, d in reader.get_variable_to_dtype_map().items() if d != tf.string]
    for dtype, shape in items:
        totals[dtype] = totals.get(dtype, 0) + int(np.prod(shape)) * np.dtype(dtype).itemsize
    return totals


def test_int8_export_stores_int8_kernels(quantized_gpt, tmp_path):
    """The SavedModel of a quantized model holds the int8 kernels and their
    scales, not a float copy, and serves the quantized model's outputs."""
    model, ids, _ = quantized_gpt
    path = str(tmp_path / "int8")
    model.export(path, format="tf_saved_model", verbose=False)
    in_memory, stored = _stored_bytes(model), _stored_bytes(path)
    kernels = sum(int(np.prod(layer.kernel.shape)) for layer in _quantized_leaves(model))
    assert in_memory["int8"] == kernels
    # Same factor for every dtype (Keras's export tracks each variable once or
    # twice): a float copy of the kernels would raise the float32 factor.
    factor = stored["int8"] / in_memory["int8"]
    assert factor in (1, 2) and stored["float32"] == factor * in_memory["float32"], (stored, in_memory)
    served = keras.layers.TFSMLayer(path, call_endpoint="serve")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(served(ids)), model(ids), atol=1e-5)


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_query_decoding_step_reads_the_cache_once(kv_heads, monkeypatch):
    """A cached step of grouped-query attention folds each key/value head's query
    heads into query rows (no repeated cache): same output as repeating K and V."""
    attn = L.MultiHeadSelfAttention(4, num_key_value_heads=kv_heads, causal=True, position="rope")
    x = _x((3, T, D), 5)
    attn(x)
    cache = attn.init_cache(3, 16)
    _, cache = attn(x[:, :-1], cache=cache, cache_index=0, padding_mask=ops.ones((3, 16), "bool"))
    padding = np.ones((3, 16), bool)
    padding[0, :2] = False  # a left-padded row
    step, _ = attn(x[:, -1:], cache=cache, cache_index=T - 1, padding_mask=padding)
    monkeypatch.setattr(dot_product, "attend_one_query", None)
    with pytest.raises(TypeError):  # the step really takes the grouped path
        attn(x[:, -1:], cache=cache, cache_index=T - 1, padding_mask=padding)
    monkeypatch.undo()
    attn.attention_impl = "chunked"  # exact too; any other core repeats K and V
    expected, _ = attn(x[:, -1:], cache=cache, cache_index=T - 1, padding_mask=padding)
    np.testing.assert_allclose(step, expected, atol=1e-5)


def _cache_sized_ops_in_loop(hlo, elements):
    """Instructions of an optimized HLO module, outside the entry computation,
    whose result has `elements` numbers and is not a parameter, a tuple
    element, a bitcast or the scatter that writes the slot."""
    found, computation = [], None
    for line in hlo.splitlines():
        if line and not line[0].isspace():  # a computation's header (or its closing brace)
            computation = line.split()[0]
            continue
        match = re.match(r"\s*(?:ROOT )?%(\S+) = \w+\[([\d,]*)\]\S* (\w[\w-]*)\(", line)
        if computation == "ENTRY" or not match or not match.group(2):
            continue
        name, dims, op = match.groups()
        if np.prod([int(d) for d in dims.split(",")]) != elements:
            continue
        if op in ("parameter", "get-tuple-element", "tuple", "bitcast", "scatter") or "scatter" in name:
            continue
        found.append(line.strip()[:160])
    return found


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_decoding_step_reads_the_cache_in_place(kv_heads):
    """The optimized XLA loop of cached decoding steps produces no cache-sized
    tensor besides the in-place slot write: no transposed or converted copy of
    the keys or values per step (with keys stored `(…, length, head_dim)`, XLA on
    CPU copied the whole key cache into the q·Kᵀ layout at every step)."""
    batch, heads, head_dim, length = 3, 4, 8, 40
    attn = L.MultiHeadSelfAttention(heads, num_key_value_heads=kv_heads, causal=True, position="rope")
    x = _x((batch, 1, heads * head_dim), 6)
    attn(x)
    keys, values = attn.init_cache(batch, length)
    assert tuple(keys.shape) == (batch, kv_heads, head_dim, length)
    assert tuple(values.shape) == (batch, kv_heads, length, head_dim)

    @tf.function(jit_compile=True)
    def steps(x, keys, values):
        def body(i, keys, values, acc):
            y, (keys, values) = attn(x + acc, cache=(keys, values), cache_index=i)
            return i + 1, keys, values, acc + y

        return tf.while_loop(lambda i, *_: i < length, body, (0, keys, values, tf.zeros_like(x)))

    hlo = steps.experimental_get_compiler_ir(x, keys, values)(stage="optimized_hlo")
    assert "scatter" in hlo
    assert _cache_sized_ops_in_loop(hlo, batch * kv_heads * head_dim * length) == []


def test_bfloat16_cache_decoding():
    """`model.cache_dtype = "bfloat16"`: half-size caches (stored as bfloat16
    bits), logits within bfloat16 rounding of the float32 cache."""
    from keras_tfm.generation import Generator

    model = tiny_gpt(kernel_initializer="glorot_uniform", embeddings_initializer="glorot_uniform")
    prompts = np.random.default_rng(1).integers(1, 64, size=(2, 8)).astype("int32")
    tokens, ref = Generator(model).generate(prompts, 8, output_scores=True)
    model.cache_dtype = "bfloat16"
    assert all(c.dtype == "uint16" for c in model.init_caches(2, 16))  # bfloat16 bits
    bf16_tokens, scores = Generator(model).generate(prompts, 8, output_scores=True)
    np.testing.assert_array_equal(bf16_tokens, tokens)
    # Measured max |diff| 0.005 for logits up to 2.8 (0.2 %); exactly 0 would mean float32 kept.
    diff = np.abs(scores - ref).max()
    assert 0 < diff < 0.01 * np.abs(ref).max(), diff
