"""The model classes (keras_tfm.models): every class through the shared harness
(`model_harness.run_model_test`), then what is specific to each class, its builder and presets."""

import keras
import numpy as np
import pytest
from model_harness import (
    LLAMA,
    MODEL_CASES,
    assert_cached_equals_full,
    bert_inputs,
    check_keras_round_trip,
    check_output,
    images,
    run_model_test,
    seq2seq_inputs,
    tiny_bert_classifier,
    tiny_bert_encoder,
    tiny_bert_masked_lm,
    tiny_gpt,
    tiny_llama,
    tiny_seq2seq,
    tiny_vit,
    to_numpy,
    token_ids,
)

from keras_tfm import models as M
from keras_tfm.generation import generate
from keras_tfm.layers import RMSNorm
from keras_tfm.models import gpt_num_params, seq2seq_num_params
from keras_tfm.training import compile_for_lm


# ------------------------------------------------------- every model class
@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_model_class_contract(name, tmp_path):
    """Output shape and dtype, config round trip, fit, `.keras` round trip, mixed_bfloat16 and
    (GPT, Seq2Seq) the cached path: see `model_harness.run_model_test`."""
    run_model_test(MODEL_CASES[name], tmp_path)


# --------------------------------------------------------- presets/options
def test_presets_listed_and_unknown_preset_names_valid_ones():
    assert {"gpt2_medium", "gpt2_small", "tiny", "llama_tiny", "llama2_7b"} <= set(M.list_presets("gpt"))
    assert {"transformer_base", "transformer_big", "tiny"} <= set(M.list_presets("seq2seq"))
    for builder, valid in (
        (M.gpt, "gpt2_small"),
        (M.bert_encoder, "bert_base"),
        (M.seq2seq, "transformer_base"),
    ):
        with pytest.raises(ValueError, match=r"preset.*'nope'.*" + valid):
            builder("nope")
    # A preset of another family is unknown too.
    with pytest.raises(ValueError, match="preset"):
        M.gpt("bert_base")


def test_builders_merge_the_preset_under_explicit_options():
    # A size given as None is not given (the preset's applies) ...
    assert M.gpt("tiny", d_model=None).d_model == 32
    # ... any other explicit value wins, None included.
    llama = M.gpt("llama_tiny")
    assert llama.num_key_value_heads == 2 and llama.head is not None
    plain = M.gpt("llama_tiny", num_key_value_heads=None, tie_embeddings=True)
    assert plain.num_key_value_heads == plain.num_heads == 4 and plain.head is None
    assert plain.config["num_key_value_heads"] is None
    # Training keys of a preset never reach the class.
    assert "label_smoothing" not in M.seq2seq("transformer_base", num_layers=1, d_model=32).config
    with pytest.raises(TypeError, match=r"Unknown option\(s\) \['hidden_size'\].*'d_model'"):
        M.gpt("tiny", hidden_size=32)
    with pytest.raises(TypeError, match=r"Unknown option\(s\) \['depth'\] for ViT.*'num_layers'"):
        M.vit_classifier(8, 4, 3, depth=2)


def test_unknown_options_and_bad_values_raise():
    with pytest.raises(TypeError):
        M.gpt("tiny", not_an_option=1)
    with pytest.raises(TypeError):
        M.bert_encoder("tiny", hidden_size=32)
    with pytest.raises(ValueError, match="position"):
        M.gpt("tiny", position="xpos")
    with pytest.raises(ValueError, match=r"Unknown `position` 'none'.*None\]"):
        M.gpt("tiny", position="none")  # the string "none" is not a position; None is
    with pytest.raises(ValueError, match="activation"):
        M.seq2seq("tiny", activation="tanh")
    with pytest.raises(ValueError, match="attention_impl"):
        M.bert_encoder("tiny", attention_impl="nope")
    with pytest.raises(ValueError, match="dropout"):
        M.gpt("tiny", dropout=1.5)
    with pytest.raises(ValueError, match="pooling.*'median'"):
        M.bert_classifier("tiny", 2, pooling="median")
    with pytest.raises(ValueError, match="num_classes"):
        M.bert_classifier("tiny", 0)
    with pytest.raises(ValueError, match="Missing"):
        M.gpt(vocabulary_size=10, max_length=8, num_layers=1, num_heads=2)  # no d_model


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
def test_bad_layout_values_name_the_argument(options, argument):
    for builder in (M.gpt, M.bert_encoder, M.seq2seq):
        with pytest.raises(ValueError, match=f"`{argument}`"):
            builder("tiny", **options)


def test_inconsistent_sizes_raise():
    with pytest.raises(ValueError, match="divisible"):
        M.gpt("tiny", d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="rope"):
        M.gpt("tiny", d_model=6, num_heads=2, position="rope")  # head size 3 is odd
    with pytest.raises(ValueError, match="share_embeddings"):
        M.seq2seq("tiny", source_vocabulary_size=20, target_vocabulary_size=30, share_embeddings=True)
    with pytest.raises(ValueError, match="Inconsistent vocabularies"):
        M.seq2seq("tiny", vocabulary_size=20, target_vocabulary_size=30)
    with pytest.raises(ValueError, match="max_length"):
        M.gpt("tiny", max_length=0)
    with pytest.raises(ValueError, match="bos_id"):
        generate(M.seq2seq("tiny"), np.ones((1, 3), "int32"), 3, bos_id=0)


def test_too_long_sequences_raise():
    model = tiny_gpt()  # max_length 32
    model(np.ones((1, 32), "int32"))
    with pytest.raises(ValueError, match="max_length"):
        model(np.ones((1, 33), "int32"))
    with pytest.raises(ValueError, match="max_length"):
        tiny_bert_encoder()(bert_inputs(1, 40))
    with pytest.raises(ValueError, match="max_length"):
        tiny_seq2seq()(seq2seq_inputs(1, source_length=17, target_length=4))  # max_length 16


def test_constructor_options_reach_every_block():
    """Each option is a named argument of the class, passed by name down to the blocks and their
    attention layers."""
    model = M.GPT(
        vocabulary_size=11,
        max_length=8,
        num_layers=2,
        num_heads=4,
        d_model=16,
        num_key_value_heads=2,
        position="rope",
        rope_max_wavelength=500.0,
        norm="rms",
        activation="swiglu",
        use_bias=False,
        attention_dropout=0.1,
    )
    for block in model.blocks:
        attention = block.self_attention_layer
        assert attention.num_key_value_heads == 2 and attention.position == "rope"
        assert block.rope_max_wavelength == 500.0 and block.norm == "rms" and block.activation == "swiglu"
        assert not block.use_bias and block.attention_dropout == 0.1 and block.causal
    assert model.embedding.position is None and model.num_key_value_heads == 2


# ---------------------------------------------------------- parameter counts
def test_published_parameter_counts():
    cheap = dict(kernel_initializer="zeros", embeddings_initializer="zeros")
    bert = M.bert_encoder("bert_base", **cheap)
    assert bert.count_params() == 109_482_240
    del bert
    gpt2 = M.gpt("gpt2_small", **cheap)
    assert gpt2.count_params() == gpt_num_params("gpt2_small") == 124_439_808
    del gpt2
    base = M.seq2seq("transformer_base", **cheap)
    assert base.count_params() == seq2seq_num_params("transformer_base") == 63_082_496
    del base
    assert seq2seq_num_params("transformer_big") == 214_245_376
    # Counted analytically (nothing allocated): TinyLlama-1.1B, Llama-2-7B, Meta-Llama-3-8B.
    assert gpt_num_params("tinyllama_1_1b") == 1_100_048_384
    assert gpt_num_params("llama2_7b") == 6_738_415_616
    assert gpt_num_params("llama3_8b") == 8_030_261_248
    assert M.get_preset("gpt", "llama3_8b")["rope_max_wavelength"] == 500000.0


def test_llama_tiny_preset_has_the_lab_gpt_size():
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
        dict(),
        dict(source_vocabulary_size=20, target_vocabulary_size=30, tie_embeddings=False, norm_first=True),
        dict(position="learned", num_encoder_layers=3, num_decoder_layers=1, d_ff=40),
        dict(source_vocabulary_size=32, target_vocabulary_size=32, position="learned"),
        dict(source_vocabulary_size=32, target_vocabulary_size=32, share_embeddings=True),
    ],
)
def test_seq2seq_param_formula_matches_build(options):
    assert M.seq2seq("tiny", **options).count_params() == seq2seq_num_params("tiny", **options)


@pytest.mark.parametrize(
    "options",
    [
        dict(LLAMA, num_heads=4, num_key_value_heads=2),
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


# ------------------------------------------------------------------- GPT
def test_gpt_parts_are_the_named_graph_layers():
    model = tiny_gpt()
    names = [layer.name for layer in model.layers]
    for name in ("token_ids", "embedding", "embedding_dropout", "decoder_block_0", "final_norm", "logits"):
        assert name in names
    assert "lm_head" not in names and "decoder_block_2" not in names
    assert model.input.name == "token_ids" and model.input.dtype == "int32"
    assert model.output_names == ["logits"]
    assert model.blocks == [model.get_layer(f"decoder_block_{i}") for i in range(2)]
    assert model.decoder_blocks is model.blocks
    assert model.embedding is model.get_layer("embedding")
    assert model.token_embedding is model.embedding.token_embedding
    assert model.final_norm is model.get_layer("final_norm")
    assert tuple(model.token_embedding.embeddings.shape) == (64, 32)
    assert tuple(model.position_embedding.position_embeddings.shape) == (32, 32)
    assert (model.vocabulary_size, model.max_length, model.num_layers, model.num_heads, model.d_model) == (
        (64, 32, 2, 2, 32)
    )
    assert model.key_dim == 16 and model.config["d_ff"] == 64 and model.config["position"] == "learned"
    block = model.blocks[0]
    assert block.causal and block.norm_first and block.activation == "gelu_tanh"
    assert block.layer_norm_epsilon == 1e-5
    assert model.embedding.position == "learned" and model.embedding.max_length == 32
    assert len(model.weights) == len({id(w) for w in model.weights})


def test_gpt_tied_head_and_causality():
    model = tiny_gpt()
    assert model.head is None and model.tie_embeddings
    ids = token_ids(length=9, low=0)
    logits = model(ids)
    # Tied: logits == token_embedding(final hidden state, reverse=True).
    hidden = keras.Model(model.input, model.get_layer("final_norm").output)(ids)
    np.testing.assert_allclose(model.token_embedding(hidden, reverse=True), logits, atol=1e-5)
    # Causal: changing the last token leaves earlier logits unchanged.
    changed = ids.copy()
    changed[:, -1] = (changed[:, -1] + 1) % 64
    out = model(changed)
    np.testing.assert_allclose(out[:, :-1], logits[:, :-1], atol=1e-5)
    assert not np.allclose(out[:, -1], logits[:, -1])


def test_gpt_untied_methods_match_the_graph():
    model = tiny_gpt(seed=1, tie_embeddings=False, lm_head_use_bias=True)
    assert model.head is model.get_layer("lm_head") and model.head.use_bias
    ids = token_ids(length=9, low=0)
    expected = to_numpy(model(ids, training=False))
    # embed -> blocks -> compute_logits is the graph.
    x = model.embed(ids)
    for block in model.blocks:
        x = block(x)
    np.testing.assert_allclose(to_numpy(model.compute_logits(x)), expected, atol=1e-5)
    # Keys (batch, kv heads, head_dim, length), values (batch, kv heads, length, head_dim).
    keys, values = model.init_caches(2, 12)[:2]
    assert tuple(keys.shape) == (2, 2, 16, 12) and tuple(values.shape) == (2, 2, 12, 16)
    assert_cached_equals_full(model, ids, prompt_length=5)


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "alibi", "relative", None])
def test_gpt_position_schemes(position):
    model = tiny_gpt(
        position=position,
        tie_embeddings=False,
        norm_first=False,
        activation="relu",
        layer_norm_epsilon=1e-6,
        use_bias=False,
        d_ff=48,
        dropout=0.1,
        attention_dropout=0.0,
    )
    block = model.blocks[1]
    if position in ("learned", "sinusoidal"):
        assert model.embedding.position == position and block.position is None
    else:
        assert model.embedding.position is None and block.position == position
    assert block.d_ff == 48 and not block.use_bias and not block.norm_first
    assert block.layer_norm_epsilon == 1e-6 and block.dropout == 0.1 and block.attention_dropout == 0.0
    names = [layer.name for layer in model.layers]
    assert "lm_head" in names and "final_norm" not in names and model.final_norm is None
    assert model(np.ones((2, 5), "int32")).shape == (2, 5, 64)


@pytest.mark.parametrize("position", ["learned", "sinusoidal"])
def test_gpt_embed_positions_per_row(position):
    """`embed(ids, positions)` with a per-row offset equals the embedding of the unpadded row
    (what left-padded cached decoding needs)."""
    model = tiny_gpt(position=position)
    reference = np.asarray(model.embed(np.array([[7, 8, 9]], "int32")))
    padded = np.array([[0, 0, 7, 8, 9]], "int32")
    shifted = np.asarray(model.embed(padded, positions=np.array([[-2, -1, 0, 1, 2]], "int32")))
    np.testing.assert_allclose(shifted[:, 2:], reference, atol=1e-6)


def test_gpt_padding_mask_input_excludes_padded_keys_and_saves(tmp_path):
    model = tiny_gpt(with_padding_mask=True, position="rope", dtype="mixed_bfloat16")
    assert sorted(model.input) == ["padding_mask", "token_ids"]
    ids = token_ids(length=6, seed=1)
    base = to_numpy(model({"token_ids": ids, "padding_mask": np.ones((2, 6), "int32")}))
    # Appending masked junk on the right does not change the real positions.
    ids_pad = np.concatenate([ids, np.full((2, 3), 7, "int32")], 1)
    mask_pad = np.concatenate([np.ones((2, 6), "int32"), np.zeros((2, 3), "int32")], 1)
    padded = to_numpy(model({"token_ids": ids_pad, "padding_mask": mask_pad}))
    np.testing.assert_allclose(padded[:, :6], base, atol=1e-5)
    loaded = check_keras_round_trip(model, {"token_ids": ids_pad, "padding_mask": mask_pad}, tmp_path)
    assert loaded.blocks[0].compute_dtype == "bfloat16"


def test_llama_layout_parts_and_config():
    llama = tiny_llama()
    block = llama.blocks[0]
    assert isinstance(llama.final_norm, RMSNorm) and isinstance(block.self_attention_norm, RMSNorm)
    assert block.feed_forward.gate_dense is not None  # SwiGLU: three matrices
    assert block.self_attention_layer.rotary.max_wavelength == 500000.0
    assert llama.head is not None and not llama.head.use_bias  # untied, no bias
    assert not [w.path for w in llama.weights if "bias" in w.path]
    # Key/value projections and the cache have the 2 key/value heads.
    assert tuple(block.self_attention_layer.key_dense.kernel.shape) == (32, 2, 8)
    assert llama.num_key_value_heads == 2 and llama.key_dim == 8
    keys, values = llama.init_caches(3, 5)[:2]
    assert tuple(keys.shape) == (3, 2, 8, 5) and tuple(values.shape) == (3, 2, 5, 8)
    config = llama.config
    assert {k: config[k] for k in ("norm", "activation", "num_key_value_heads", "rope_max_wavelength")} == {
        "norm": "rms",
        "activation": "swiglu",
        "num_key_value_heads": 2,
        "rope_max_wavelength": 500000.0,
    }


def test_multi_query_cache_equals_full_pass():
    model = tiny_llama(num_key_value_heads=1)
    assert tuple(model.init_caches(2, 9)[1].shape) == (2, 1, 9, 8)  # values: one key/value head
    assert_cached_equals_full(model, token_ids())


def test_gqa_with_all_heads_equals_the_plain_model():
    plain = tiny_gpt(seed=4, num_heads=4, position="rope")
    grouped = tiny_gpt(seed=4, num_heads=4, num_key_value_heads=4, position="rope")
    for a, b in zip(plain.weights, grouped.weights):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    ids = token_ids()
    np.testing.assert_array_equal(np.asarray(plain(ids)), np.asarray(grouped(ids)))
    np.testing.assert_array_equal(
        np.asarray(plain.call_with_cache(ids, plain.init_caches(2, 9), 0)[0]),
        np.asarray(grouped.call_with_cache(ids, grouped.init_caches(2, 9), 0)[0]),
    )


def test_rms_norm_statistics_in_float32_under_mixed_float16():
    model = tiny_gpt(norm="rms", dtype="mixed_float16")
    assert isinstance(model.final_norm, RMSNorm) and model.final_norm.compute_dtype == "float16"
    # 300² overflows float16 (max 65504): float16 statistics would give 0 or NaN.
    x = keras.ops.full((1, 3, 32), 300.0, dtype="float16")
    np.testing.assert_allclose(np.asarray(model.final_norm(x), dtype="float32"), 1.0, rtol=1e-3)
    assert np.asarray(model(token_ids(length=5))).dtype == np.float32


# ---------------------------------------------------------------- seq2seq
def test_seq2seq_shared_layout_layer_names():
    model = tiny_seq2seq()
    names = [layer.name for layer in model.layers]
    assert sorted(model.input) == ["decoder_token_ids", "encoder_token_ids"]
    assert "embedding" in names and "encoder_embedding" not in names
    for name in ("encoder_block_1", "decoder_block_1", "logits", "encoder_embedding_dropout"):
        assert name in names
    assert "decoder_embedding_dropout" in names
    assert not {"lm_head", "encoder_final_norm", "decoder_final_norm"} & set(names)
    emb = model.get_layer("embedding")
    assert emb.scale and emb.mask_zero and emb.position == "sinusoidal"
    dec = model.get_layer("decoder_block_0")
    assert dec.causal and dec.cross_attention and not dec.norm_first and dec.activation == "relu"
    enc = model.get_layer("encoder_block_0")
    assert not enc.causal and not enc.cross_attention
    assert model.head is None and model.decoder_embedding.name == "embedding"
    assert model.encoder_embedding is model.decoder_embedding and len(model.decoder_blocks) == 2


def test_seq2seq_separate_layout_layer_names():
    model = tiny_seq2seq(
        source_vocabulary_size=20,
        target_vocabulary_size=30,
        norm_first=True,
        tie_embeddings=False,
        num_encoder_layers=3,
        num_decoder_layers=1,
        position="relative",
    )
    names = [layer.name for layer in model.layers]
    for name in ("encoder_embedding", "decoder_embedding", "encoder_final_norm", "decoder_final_norm"):
        assert name in names
    assert "lm_head" in names and "encoder_block_2" in names and "decoder_block_0" in names
    assert "decoder_block_1" not in names and "embedding" not in names
    assert model.get_layer("encoder_block_0").position == "relative"
    assert not model.shared_embeddings and model.head is model.get_layer("lm_head")
    assert model.encoder_embedding is model.get_layer("encoder_embedding")
    assert (model.source_vocabulary_size, model.target_vocabulary_size) == (20, 30)
    out = model(seq2seq_inputs(source_length=7, target_length=4, vocabulary_size=20))
    assert out.shape == (2, 4, 30) and out.dtype == "float32"
    # Equal separate vocabularies are not shared unless asked.
    equal = dict(source_vocabulary_size=32, target_vocabulary_size=32)
    assert "encoder_embedding" in [layer.name for layer in tiny_seq2seq(**equal).layers]
    assert "embedding" in [layer.name for layer in tiny_seq2seq(**equal, share_embeddings=True).layers]


def test_seq2seq_padding_is_ignored_and_encode_is_the_graph_encoder():
    model = tiny_seq2seq(seed=2, source_vocabulary_size=20, norm_first=True, tie_embeddings=False)
    inputs = seq2seq_inputs(source_length=7, vocabulary_size=20)
    src, tgt = inputs["encoder_token_ids"], inputs["decoder_token_ids"]
    base = to_numpy(model(inputs))
    padded = model(
        {
            "encoder_token_ids": np.concatenate([src, np.zeros((2, 4), "int32")], 1),
            "decoder_token_ids": np.concatenate([tgt, np.zeros((2, 2), "int32")], 1),
        }
    )
    np.testing.assert_allclose(to_numpy(padded)[:, :5], base, atol=1e-5)
    # A real (non-zero) token in the encoder does change the output.
    changed = model(
        {"encoder_token_ids": np.concatenate([src, np.full((2, 4), 3, "int32")], 1), "decoder_token_ids": tgt}
    )
    assert not np.allclose(to_numpy(changed), base, atol=1e-4)
    # `encode` is the graph's encoder half (`encoder_output`).
    encoder = keras.Model(model.input["encoder_token_ids"], model.encoder_output)
    assert model.encode(src).shape == (2, 7, 64)
    np.testing.assert_allclose(to_numpy(encoder(src)), to_numpy(model.encode(src)), atol=1e-5)
    assert {w.path for w in encoder.weights} <= {w.path for w in model.weights}
    # The cached path with a padded source row.
    src[1, 4:] = 0
    assert_cached_equals_full(model, {"encoder_token_ids": src, "decoder_token_ids": tgt}, prompt_length=2)


def test_seq2seq_multi_query_cache_shapes():
    case = MODEL_CASES["seq2seq_llama"]
    model, source = case.build(), case.inputs["encoder_token_ids"]
    cross = model.compute_cross_caches(model.encode(source))
    assert tuple(model.init_caches(2, 7)[0].shape) == (2, 1, 16, 7)  # keys, stored transposed
    assert tuple(cross[0].shape) == (2, 2, 7, 1, 16)  # (batch, keys/values, S, kv heads, head_dim)


def test_seq2seq_learns_reversal():
    """Teacher-forced training, then greedy decoding must reverse >= 95% of unseen sequences
    exactly."""
    keras.utils.set_random_seed(0)
    vocab, length, n, bos = 12, 6, 4000, 1
    rng = np.random.default_rng(0)
    src = rng.integers(2, vocab, size=(n, length)).astype("int32")
    tgt = src[:, ::-1].copy()
    dec_in = np.concatenate([np.full((n, 1), bos, "int32"), tgt[:, :-1]], 1)
    # max_length: BOS + the `length` generated tokens (the cached loop feeds every token back).
    model = M.seq2seq(
        vocabulary_size=vocab, max_length=length + 1, num_layers=1, num_heads=4, d_model=64, d_ff=128
    )
    compile_for_lm(model, learning_rate=2e-3, jit_compile=False)
    # One layer, 5 epochs: 0.990-1.000 for seeds 0-9 (two layers, 7 epochs: 0.37-1.00 for seeds 0-5,
    # slower to train and less reliable).
    model.fit(
        {"encoder_token_ids": src, "decoder_token_ids": dec_in}, tgt, batch_size=64, epochs=5, verbose=0
    )
    test_src = np.random.default_rng(1).integers(2, vocab, size=(300, length)).astype("int32")
    # One batch of 300: one compiled decoding loop (the default batch_size 256 compiles two).
    predicted = generate(model, test_src, length, bos_id=bos)
    exact = float(np.mean(np.all(predicted == test_src[:, ::-1], axis=1)))
    assert exact >= 0.95, exact


# ------------------------------------------------------------------- BERT
def test_bert_encoder_parts_and_layout():
    encoder = tiny_bert_encoder()
    assert sorted(encoder.input) == ["padding_mask", "segment_ids", "token_ids"]
    assert encoder.blocks == [encoder.get_layer(f"encoder_block_{i}") for i in range(2)]
    assert encoder.encoder_blocks is encoder.blocks
    block = encoder.blocks[0]
    assert not block.norm_first and block.activation == "gelu" and block.layer_norm_epsilon == 1e-12
    assert encoder.get_layer("embedding_norm").epsilon == 1e-12
    assert encoder.get_layer("embedding").position == "learned"
    assert encoder.segment_embedding is encoder.get_layer("segment_embedding")
    assert encoder.segment_embedding.input_dim == 2 and encoder.pooler.units == 32
    x = bert_inputs()
    assert tuple(encoder.embed(x["token_ids"], x["segment_ids"]).shape) == (2, 10, 32)
    out = to_numpy(encoder(x))
    kernel, bias = encoder.pooler.get_weights()  # pooled = tanh(h_[CLS] W_p + b_p)
    np.testing.assert_allclose(
        out["pooled_output"], np.tanh(out["sequence_output"][:, 0] @ kernel + bias), atol=1e-6
    )


def test_bert_heads_share_the_encoder_parts():
    encoder = tiny_bert_encoder()
    mlm = M.bert_masked_lm(encoder)
    classifier = M.bert_classifier(encoder, 3, pooling="mean")
    tagger = M.bert_token_classifier(encoder, 5)
    for head in (mlm, classifier, tagger):
        assert head.encoder is encoder and head.blocks == encoder.blocks
        assert head.token_embedding is encoder.token_embedding
    assert mlm.pooler is None and classifier.pooler is None
    assert M.bert_classifier(encoder, 2).pooler is encoder.pooler
    assert classifier.head is classifier.classifier and classifier.classifier.units == 3
    assert classifier.pooling_layer.mode == "mean"
    x = bert_inputs(1, 4, pad=1)
    sequence = encoder(x)["sequence_output"]
    np.testing.assert_allclose(to_numpy(mlm.compute_logits(sequence)), to_numpy(mlm(x)), atol=1e-5)
    # From its config a head rebuilds its own encoder.
    clone = type(tagger).from_config(tagger.get_config())
    assert type(clone.encoder) is M.BertEncoder and clone.encoder is not encoder
    assert clone.token_embedding is clone.encoder.token_embedding


def test_vocabulary_given_to_a_bert_head():
    class Tokenizer:
        def vocabulary_size(self):
            return 100

    assert M.bert_classifier("tiny", num_classes=2, vocabulary_size=100).vocabulary_size == 100
    encoder = tiny_bert_encoder()  # vocabulary 64
    with pytest.raises(ValueError, match="Vocabulary mismatch.*64.*100"):
        M.bert_classifier(encoder, 2, tokenizer=Tokenizer())
    with pytest.raises(ValueError, match="Vocabulary mismatch"):
        M.bert_classifier(encoder, 2, vocabulary_size=100)
    with pytest.raises(ValueError, match="Vocabulary mismatch"):
        M.bert_masked_lm(encoder, vocabulary_size=65)
    with pytest.raises(ValueError, match="Vocabulary mismatch"):
        M.bert_token_classifier(encoder, 3, tokenizer=30522)
    assert M.bert_classifier(encoder, 2, tokenizer=64).vocabulary_size == 64  # matching sizes are fine
    with pytest.raises(ValueError, match="cannot be applied"):
        M.bert_classifier(encoder, 2, num_layers=3)
    with pytest.raises(TypeError, match="BertEncoder"):
        M.bert_masked_lm(tiny_gpt())


def test_masked_lm_transform_uses_the_gate_activation():
    swiglu = MODEL_CASES["bert_masked_lm_llama"].build()
    assert swiglu.mlm_transform_dense.activation is keras.activations.silu
    assert isinstance(swiglu.mlm_transform_norm, RMSNorm)
    geglu = tiny_bert_masked_lm(activation="geglu")
    assert geglu.mlm_transform_dense.activation is keras.activations.gelu


def test_masked_lm_loss_only_counts_weighted_positions():
    mlm = compile_for_lm(tiny_bert_masked_lm(seed=3), learning_rate=1e-2, run_eagerly=True)
    inputs = bert_inputs(8, 12)
    labels = inputs["token_ids"]
    weights = np.zeros_like(labels, dtype="float32")
    weights[:, 2:5] = 1.0
    masked = dict(inputs, token_ids=np.where(weights > 0, 3, labels).astype("int32"))
    logits = mlm(masked)
    other = np.where(weights > 0, labels, (labels + 5) % 64)
    assert float(mlm.loss(labels, logits, weights)) == pytest.approx(
        float(mlm.loss(other, logits, weights)), 1e-6
    )
    assert float(mlm.loss(labels, logits)) != pytest.approx(float(mlm.loss(other, logits)), 1e-3)


@pytest.mark.parametrize("pooling", ["cls", "mean", "max"])
def test_classifier_pooling_ignores_padding(pooling):
    # Larger-than-BERT initial weights so that any leak of padding shows.
    model = tiny_bert_classifier(
        num_classes=4, pooling=pooling, kernel_initializer="glorot_uniform", embeddings_initializer="uniform"
    )
    names = [layer.name for layer in model.layers]
    assert "classifier" in names and model.output_names == ["logits"]
    assert (pooling == "cls") == ("pooler" in names)
    base = to_numpy(model(bert_inputs(3, 9, seed=5)))
    padded_inputs = bert_inputs(3, 9, seed=5, pad=4)
    np.testing.assert_allclose(to_numpy(model(padded_inputs)), base, atol=1e-6)
    # The same tokens *unmasked* do change the result (so the mask matters).
    unmasked = dict(padded_inputs, padding_mask=np.ones_like(padded_inputs["padding_mask"]))
    assert np.max(np.abs(to_numpy(model(unmasked)) - base)) > 1e-4


# -------------------------------------------------------------------- ViT
def test_vit_parts_are_the_named_graph_layers():
    model = tiny_vit()
    names = [layer.name for layer in model.layers]
    for name in ("patch_embedding", "class_token", "position_encoding", "final_norm", "cls_pooling"):
        assert name in names
    assert model.blocks == [model.get_layer(f"encoder_block_{i}") for i in range(2)]
    assert model.encoder_blocks is model.blocks and all(block.norm_first for block in model.blocks)
    assert model.head is model.get_layer("classifier") and model.grid_size == (2, 2)
    assert model.config["image_size"] == (8, 8)


def test_vit_learned_positions_mean_pooling_non_square(tmp_path):
    case = MODEL_CASES["vit"]
    model = tiny_vit(position="learned", pooling="mean", image_size=(8, 4))
    x = images(2, 8, 4)
    assert model.grid_size == (2, 1) and model.get_layer("position_encoding").count_params() == 3 * 16
    check_output(case, model, x)
    check_keras_round_trip(model, x, tmp_path)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"image_size": 10}, "multiple of `patch_size`"),
        ({"d_model": 15, "num_heads": 3}, "even"),
        ({"num_heads": 3}, "divisible"),
        ({"position": "rope"}, "position"),
        ({"pooling": "max"}, "pooling"),
        ({"num_classes": 0}, "num_classes"),
    ],
)
def test_vit_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tiny_vit(**kwargs)
