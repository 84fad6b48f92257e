"""Today's decoder options in the builders (issue 14 §1): RMSNorm, gated FFN, grouped-query and
multi-query attention, no biases, the RoPE base; the Llama presets and the lab recipe's flags."""

import keras
import numpy as np
import pytest

from keras_tfm import models as M
from keras_tfm.layers import RMSNorm
from keras_tfm.models import gpt_num_params, seq2seq_num_params
from keras_tfm.training import compile_for_lm

LLAMA = dict(
    position="rope",
    norm="rms",
    activation="swiglu",
    use_bias=False,
    tie_embeddings=False,
    rope_max_wavelength=500000.0,
)
RNG = np.random.default_rng(0)
IDS = RNG.integers(1, 64, size=(2, 9)).astype("int32")


@pytest.fixture(scope="module")
def llama():
    """A tiny Llama-layout GPT: 4 query heads sharing 2 key/value heads."""
    keras.utils.set_random_seed(0)
    return M.gpt("tiny", num_heads=4, num_key_value_heads=2, **LLAMA)


@pytest.fixture(scope="module")
def seq2seq_gqa():
    keras.utils.set_random_seed(1)
    return M.seq2seq(
        "tiny", num_key_value_heads=1, norm="rms", activation="geglu", use_bias=False, norm_first=True
    )


@pytest.fixture(scope="module")
def bert_mlm():
    keras.utils.set_random_seed(2)
    return M.bert_masked_lm("tiny", num_heads=2, num_key_value_heads=1, norm="rms", activation="swiglu")


def _bert_inputs():
    return {
        "token_ids": IDS,
        "segment_ids": np.zeros_like(IDS),
        "padding_mask": np.ones_like(IDS),
    }


def _seq2seq_inputs():
    ids = IDS % 31 + 1  # the seq2seq vocabulary is 32 and id 0 is padding
    return {"encoder_token_ids": ids[:, :7], "decoder_token_ids": ids[:, 2:]}


def test_llama_layout_parts_and_config(llama):
    block = llama.blocks[0]
    assert isinstance(llama.final_norm, RMSNorm) and isinstance(block.self_attention_norm, RMSNorm)
    assert block.feed_forward.gate_dense is not None  # SwiGLU: three matrices
    assert block.self_attention_layer.rotary.max_wavelength == 500000.0
    assert llama.head is not None and not llama.head.use_bias  # untied, no bias
    assert not [w.path for w in llama.weights if "bias" in w.path]
    # Key/value projections and the cache have the 2 key/value heads.
    assert tuple(block.self_attention_layer.key_dense.kernel.shape) == (32, 2, 8)
    assert llama.num_key_value_heads == 2 and llama.head_dim == 8
    keys, values = llama.init_caches(3, 5)[:2]
    assert tuple(keys.shape) == (3, 2, 8, 5)  # keys (batch, kv heads, head_dim, length)
    assert tuple(values.shape) == (3, 2, 5, 8)  # values (batch, kv heads, length, head_dim)
    config = llama.config
    assert {k: config[k] for k in ("norm", "activation", "num_key_value_heads", "rope_max_wavelength")} == {
        "norm": "rms",
        "activation": "swiglu",
        "num_key_value_heads": 2,
        "rope_max_wavelength": 500000.0,
    }
    assert llama.count_params() == gpt_num_params("tiny", num_heads=4, num_key_value_heads=2, **LLAMA)


@pytest.mark.parametrize("kind", ["gpt", "seq2seq", "bert"])
def test_new_options_train_one_step_and_round_trip(kind, llama, seq2seq_gqa, bert_mlm, tmp_path):
    model, inputs = {
        "gpt": (llama, IDS),
        "seq2seq": (seq2seq_gqa, _seq2seq_inputs()),
        "bert": (bert_mlm, _bert_inputs()),
    }[kind]
    labels = inputs["decoder_token_ids"] if kind == "seq2seq" else IDS
    # Trained in place (the module fixture): the cache tests below hold for any weights.
    compile_for_lm(model, learning_rate=1e-2, jit_compile=False)
    before = [np.asarray(w).copy() for w in model.trainable_weights]
    loss = model.fit(inputs, labels, epochs=1, batch_size=2, verbose=0).history["loss"][0]
    assert np.isfinite(loss)
    assert all(not np.array_equal(b, np.asarray(w)) for b, w in zip(before, model.trainable_weights))
    path = str(tmp_path / f"{kind}.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is type(model) and loaded.get_config() == model.get_config()
    np.testing.assert_array_equal(np.asarray(loaded(inputs)), np.asarray(model(inputs)))


def _cached_logits(step, length, prompt=4):
    """Logits of `IDS[:, :length]` from a prompt pass then one token at a time."""
    logits, caches = step(IDS[:, :prompt], None, 0)
    parts = [np.asarray(logits)]
    for t in range(prompt, length):
        logits, caches = step(IDS[:, t : t + 1], caches, t)
        parts.append(np.asarray(logits))
    return np.concatenate(parts, axis=1)


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_gpt_cache_equals_recompute_with_gqa_and_mqa(kv_heads, llama):
    model = llama if kv_heads == 2 else M.gpt("tiny", num_heads=4, num_key_value_heads=1, **LLAMA)
    assert tuple(model.init_caches(2, 9)[1].shape) == (2, kv_heads, 9, 8)  # values

    def step(ids, caches, index):
        caches = model.init_caches(2, 9) if caches is None else caches
        return model.call_with_cache(ids, caches, index)

    np.testing.assert_allclose(_cached_logits(step, 9), np.asarray(model(IDS)), atol=1e-5)


def test_seq2seq_cache_equals_recompute_with_mqa(seq2seq_gqa):
    model, inputs = seq2seq_gqa, _seq2seq_inputs()
    source, target = inputs["encoder_token_ids"], inputs["decoder_token_ids"]
    memory = model.encode(source)
    cross = model.compute_cross_caches(memory)
    assert tuple(model.init_caches(2, 7)[0].shape) == (2, 1, 16, 7)  # keys, stored transposed
    assert tuple(cross[0].shape) == (2, 2, 7, 1, 16)
    context_mask = source != 0
    caches = model.init_caches(2, target.shape[1])
    parts = []
    for t in range(target.shape[1]):
        logits, caches = model.call_with_cache(target[:, t : t + 1], caches, t, cross, context_mask)
        parts.append(np.asarray(logits))
    np.testing.assert_allclose(np.concatenate(parts, axis=1), np.asarray(model(inputs)), atol=1e-5)


def test_mqa_greedy_generation_equals_full_recompute():
    from keras_tfm.generation import generate

    keras.utils.set_random_seed(3)
    model = M.gpt("tiny", num_heads=4, num_key_value_heads=1, **LLAMA)
    prompt = IDS[:1, :3]
    ids = list(prompt[0])
    for _ in range(5):
        ids.append(int(np.argmax(np.asarray(model(np.array([ids], "int32")))[0, -1])))
    np.testing.assert_array_equal(generate(model, prompt, 5, sampler="greedy")[0], ids[3:])


def test_gqa_with_all_heads_equals_the_plain_model():
    keras.utils.set_random_seed(4)
    plain = M.gpt("tiny", num_heads=4, position="rope")
    keras.utils.set_random_seed(4)
    grouped = M.gpt("tiny", num_heads=4, num_key_value_heads=4, position="rope")
    for a, b in zip(plain.weights, grouped.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    np.testing.assert_array_equal(np.asarray(plain(IDS)), np.asarray(grouped(IDS)))
    caches = grouped.init_caches(2, 9)
    np.testing.assert_array_equal(
        np.asarray(plain.call_with_cache(IDS, plain.init_caches(2, 9), 0)[0]),
        np.asarray(grouped.call_with_cache(IDS, caches, 0)[0]),
    )


def test_rms_norm_statistics_in_float32_under_mixed_precision():
    model = M.gpt("tiny", norm="rms", dtype="mixed_float16")
    assert isinstance(model.final_norm, RMSNorm) and model.final_norm.compute_dtype == "float16"
    # 300² overflows float16 (max 65504): float16 statistics would give 0 or NaN.
    x = keras.ops.full((1, 3, 32), 300.0, dtype="float16")
    y = np.asarray(model.final_norm(x), dtype="float32")
    np.testing.assert_allclose(y, 1.0, rtol=1e-3)
    assert np.asarray(model(IDS[:, :5])).dtype == np.float32


def test_masked_lm_transform_uses_the_gate_activation(bert_mlm):
    assert bert_mlm.mlm_transform_dense.activation is keras.activations.silu
    assert isinstance(bert_mlm.mlm_transform_norm, RMSNorm)
    geglu = M.bert_masked_lm("tiny", activation="geglu")
    assert geglu.mlm_transform_dense.activation is keras.activations.gelu


@pytest.mark.parametrize(
    "options, argument",
    [
        (dict(norm="batch"), "norm"),
        (dict(num_heads=4, num_key_value_heads=3), "num_key_value_heads"),
        (dict(num_key_value_heads=0), "num_key_value_heads"),
        (dict(activation="swiglu2"), "activation"),
        (dict(position="rope", rope_max_wavelength=0.0), "rope_max_wavelength"),
    ],
)
def test_bad_values_name_the_argument(options, argument):
    for builder in (M.gpt, M.bert_encoder, M.seq2seq):
        with pytest.raises(ValueError, match=f"`{argument}`"):
            builder("tiny", **options)


def test_llama_presets_match_the_published_parameter_counts():
    # Counted analytically (nothing allocated): TinyLlama-1.1B, Llama-2-7B, Meta-Llama-3-8B.
    assert gpt_num_params("tinyllama_1_1b") == 1_100_048_384
    assert gpt_num_params("llama2_7b") == 6_738_415_616
    assert gpt_num_params("llama3_8b") == 8_030_261_248
    assert gpt_num_params("gpt2_small") == 124_439_808
    assert M.get_preset("gpt", "llama3_8b")["rope_max_wavelength"] == 500000.0
    # llama_tiny is the lab GPT's size (4 layers, d 128, context 64, 65 characters).
    lab = dict(vocabulary_size=65, max_length=64, num_layers=4, num_heads=4, d_model=128)
    lab_gpt = M.gpt(**lab, use_bias=False, activation="gelu")
    tiny = M.gpt("llama_tiny")
    assert tiny.count_params() == gpt_num_params("llama_tiny") == 804_224
    assert lab_gpt.count_params() == gpt_num_params(**lab, use_bias=False) == 805_248
    assert isinstance(tiny.final_norm, RMSNorm) and tiny.head is not None and tiny.num_key_value_heads == 2


@pytest.mark.parametrize(
    "options",
    [
        dict(
            activation="geglu",
            num_heads=4,
            num_key_value_heads=1,
            tie_embeddings=False,
            lm_head_use_bias=True,
        ),
        dict(
            norm="rms", norm_first=False, position="sinusoidal", key_dim=8, num_heads=4, num_key_value_heads=2
        ),
    ],
)
def test_param_formulas_match_the_built_models(options):
    assert M.gpt("tiny", **options).count_params() == gpt_num_params("tiny", **options)
    assert M.seq2seq("tiny", **options).count_params() == seq2seq_num_params("tiny", **options)


def test_lab_recipe_llama_preset_and_layout_options(tmp_path):
    from keras_tfm import recipes

    path = tmp_path / "input.txt"
    path.write_text("First Citizen:\nBefore we proceed any further, hear me speak.\n\n" * 20)
    tiny = dict(data=str(path), jit_compile=False, num_layers=1, num_heads=2, d_model=16, max_length=8)
    tiny.update(batch_size=4, sample_tokens=0, steps=2, eval_interval=2, eval_iters=1, verbose=0)
    model = recipes.train_gpt(**tiny, preset="llama_tiny", num_key_value_heads=1)["model"]
    assert model.config["norm"] == "rms" and model.config["activation"] == "swiglu" and model.head is not None
    assert model.num_key_value_heads == 1 and model.config["position"] == "rope"
    # Without a preset: nanoGPT's layout with one option changed.
    assert recipes.GPTOptions(**tiny, norm="rms").layout() == dict(
        position="learned", activation="gelu", norm="rms", use_bias=False
    )
    assert recipes.GPTOptions(**tiny, preset="llama_tiny", norm="layer").layout() == dict(norm="layer")
    with pytest.raises(ValueError, match=r"`num_key_value_heads` must divide `num_heads` \(2\); received 3"):
        recipes.GPTOptions(**tiny, num_key_value_heads=3)
