"""Tests of the model builders (keras_tfm.models)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_tfm.generation import generate
from keras_tfm.layers import TransformerBlock
from keras_tfm.losses import MaskedSparseCategoricalCrossentropy
from keras_tfm.models import (
    bert_classifier,
    bert_encoder,
    bert_masked_lm,
    bert_token_classifier,
    gpt,
    list_presets,
    seq2seq,
    seq2seq_num_params,
)
from keras_tfm.training import compile_for_classification, compile_for_lm


def _bert_inputs(batch, length, vocab=64, seed=0, pad=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab, size=(batch, length)).astype("int32")
    segments = np.zeros((batch, length), "int32")
    segments[:, length // 2 :] = 1
    mask = np.ones((batch, length), "int32")
    if pad:
        ids = np.concatenate([ids, np.zeros((batch, pad), "int32")], axis=1)
        segments = np.concatenate([segments, np.zeros((batch, pad), "int32")], axis=1)
        mask = np.concatenate([mask, np.zeros((batch, pad), "int32")], axis=1)
    return {"token_ids": ids, "segment_ids": segments, "padding_mask": mask}


def _train(model, x, y, steps, sample_weight=None):
    """Loss after each of `steps` optimizer steps on one fixed batch."""
    return [
        float(model.train_on_batch(x, y, sample_weight=sample_weight, return_dict=True)["loss"])
        for _ in range(steps)
    ]


# --------------------------------------------------------------- presets/args
def test_presets_listed_and_unknown_preset_names_valid_ones():
    assert {"gpt2_medium", "gpt2_small", "tiny", "llama_tiny", "llama2_7b"} <= set(list_presets("gpt"))
    assert {"transformer_base", "transformer_big", "tiny"} <= set(list_presets("seq2seq"))
    for builder, valid in ((gpt, "gpt2_small"), (bert_encoder, "bert_base"), (seq2seq, "transformer_base")):
        with pytest.raises(ValueError, match=r"preset.*'nope'.*" + valid):
            builder("nope")
    # A preset of another family is unknown too.
    with pytest.raises(ValueError, match="preset"):
        gpt("bert_base")


def test_unknown_options_and_bad_values_raise():
    with pytest.raises(TypeError):
        gpt("tiny", not_an_option=1)
    with pytest.raises(TypeError):
        bert_encoder("tiny", hidden_size=32)
    with pytest.raises(ValueError, match="position"):
        gpt("tiny", position="xpos")
    with pytest.raises(ValueError, match="activation"):
        seq2seq("tiny", activation="tanh")
    with pytest.raises(ValueError, match="attention_impl"):
        bert_encoder("tiny", attention_impl="nope")
    with pytest.raises(ValueError, match="dropout"):
        gpt("tiny", dropout=1.5)
    with pytest.raises(ValueError, match="pooling.*'median'"):
        bert_classifier("tiny", 2, pooling="median")
    with pytest.raises(ValueError, match="num_classes"):
        bert_classifier("tiny", 0)
    with pytest.raises(ValueError, match="Missing"):
        gpt(vocabulary_size=10, max_length=8, num_layers=1, num_heads=2)  # no d_model


def test_inconsistent_sizes_raise():
    with pytest.raises(ValueError, match="divisible"):
        gpt("tiny", d_model=30, num_heads=4)
    with pytest.raises(ValueError, match="rope"):
        gpt("tiny", d_model=6, num_heads=2, position="rope")  # head size 3 is odd
    with pytest.raises(ValueError, match="share_embeddings"):
        seq2seq("tiny", source_vocabulary_size=20, target_vocabulary_size=30, share_embeddings=True)
    with pytest.raises(ValueError, match="Inconsistent vocabularies"):
        seq2seq("tiny", vocabulary_size=20, target_vocabulary_size=30)
    with pytest.raises(ValueError, match="max_length"):
        gpt("tiny", max_length=0)
    with pytest.raises(ValueError, match="bos_id"):
        generate(seq2seq("tiny"), np.ones((1, 3), "int32"), 3, bos_id=0)


def test_too_long_sequences_raise():
    model = gpt("tiny")  # max_length 32
    model(np.ones((1, 32), "int32"))
    with pytest.raises(ValueError, match="max_length"):
        model(np.ones((1, 33), "int32"))
    encoder = bert_encoder("tiny")
    with pytest.raises(ValueError, match="max_length"):
        encoder(_bert_inputs(1, 40))
    s2s = seq2seq("tiny")  # max_length 16
    with pytest.raises(ValueError, match="max_length"):
        s2s({"encoder_token_ids": np.ones((1, 17), "int32"), "decoder_token_ids": np.ones((1, 4), "int32")})


def test_vocabulary_mismatch_raises():
    class Tokenizer:
        def vocabulary_size(self):
            return 100

    encoder = bert_encoder("tiny")  # vocabulary 64
    with pytest.raises(ValueError, match="Vocabulary mismatch.*64.*100"):
        bert_classifier(encoder, 2, tokenizer=Tokenizer())
    with pytest.raises(ValueError, match="Vocabulary mismatch"):
        bert_masked_lm(encoder, vocabulary_size=65)
    with pytest.raises(ValueError, match="Vocabulary mismatch"):
        bert_token_classifier(encoder, 3, tokenizer=30522)
    bert_classifier(encoder, 2, tokenizer=64)  # matching sizes are fine
    with pytest.raises(ValueError, match="cannot be applied"):
        bert_classifier(encoder, 2, num_layers=3)


# ------------------------------------------------------------------ GPT
def test_gpt_layer_contract_and_tied_head():
    model = gpt("tiny")
    names = [layer.name for layer in model.layers]
    for name in (
        "token_ids",
        "embedding",
        "embedding_dropout",
        "decoder_block_0",
        "decoder_block_1",
        "final_norm",
        "logits",
    ):
        assert name in names
    assert "lm_head" not in names and "decoder_block_2" not in names
    assert model.input.name == "token_ids" and model.input.dtype == "int32"
    assert model.output_names == ["logits"]
    block = model.get_layer("decoder_block_0")
    assert isinstance(block, TransformerBlock) and block.causal and block.norm_first
    assert block.activation == "gelu_tanh" and block.layer_norm_epsilon == 1e-5
    emb = model.get_layer("embedding")
    assert emb.position == "learned" and emb.max_length == 32 and emb.vocabulary_size == 64

    ids = np.random.default_rng(0).integers(0, 64, (2, 9)).astype("int32")
    logits = model(ids)
    assert logits.shape == (2, 9, 64) and logits.dtype == "float32"
    # Tied: logits == token_embedding(final hidden state, reverse=True).
    hidden = keras.Model(model.input, model.get_layer("final_norm").output)(ids)
    np.testing.assert_allclose(emb.token_embedding(hidden, reverse=True), logits, atol=1e-5)
    assert len(model.weights) == len({id(w) for w in model.weights})
    assert emb.token_embedding.embeddings.shape == (64, 32)
    # Causal: changing the last token leaves earlier logits unchanged.
    ids2 = ids.copy()
    ids2[:, -1] = (ids2[:, -1] + 1) % 64
    out2 = model(ids2)
    np.testing.assert_allclose(out2[:, :-1], logits[:, :-1], atol=1e-5)
    assert not np.allclose(out2[:, -1], logits[:, -1])


@pytest.mark.parametrize("position", ["learned", "sinusoidal", "rope", "alibi", "relative", None])
def test_gpt_position_schemes(position):
    model = gpt(
        "tiny",
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
    emb = model.get_layer("embedding")
    block = model.get_layer("decoder_block_1")
    if position in ("learned", "sinusoidal"):
        assert emb.position == position and block.position is None
    else:
        assert emb.position is None and block.position == position
    assert (
        block.d_ff == 48 and not block.use_bias and not block.norm_first and block.layer_norm_epsilon == 1e-6
    )
    assert block.dropout == 0.1 and block.attention_dropout == 0.0
    names = [layer.name for layer in model.layers]
    assert "lm_head" in names and "final_norm" not in names
    assert model(np.ones((2, 5), "int32")).shape == (2, 5, 64)


def test_gpt_padding_mask_input_excludes_padded_keys():
    model = gpt("tiny", with_padding_mask=True, position="rope")
    assert sorted(model.input) == ["padding_mask", "token_ids"]
    ids = np.random.default_rng(1).integers(1, 64, (2, 6)).astype("int32")
    mask = np.ones((2, 6), "int32")
    base = model({"token_ids": ids, "padding_mask": mask})
    # Appending masked junk on the right does not change the real positions.
    ids_pad = np.concatenate([ids, np.full((2, 3), 7, "int32")], 1)
    mask_pad = np.concatenate([mask, np.zeros((2, 3), "int32")], 1)
    padded = model({"token_ids": ids_pad, "padding_mask": mask_pad})
    np.testing.assert_allclose(padded[:, :6], base, atol=1e-5)


@pytest.mark.parametrize("builder", ["gpt", "seq2seq", "bert"])
def test_mixed_precision_gives_float32_outputs(builder):
    if builder == "gpt":
        model = gpt("tiny", dtype="mixed_bfloat16", tie_embeddings=False)
        out = model(np.ones((2, 5), "int32"))
        assert model.get_layer("decoder_block_0").compute_dtype == "bfloat16"
    elif builder == "seq2seq":
        model = seq2seq("tiny", dtype="mixed_bfloat16")
        out = model(
            {"encoder_token_ids": np.ones((2, 5), "int32"), "decoder_token_ids": np.ones((2, 3), "int32")}
        )
    else:
        model = bert_masked_lm("tiny", dtype="mixed_bfloat16")
        out = model(_bert_inputs(2, 5))
    assert out.dtype == "float32" and np.all(np.isfinite(out))
    assert all(w.dtype == "float32" for w in model.weights)


def test_gpt_tiny_trains():
    keras.utils.set_random_seed(1)
    model = compile_for_lm(gpt("tiny"), learning_rate=1e-2, ignore_index=None, run_eagerly=True)
    ids = np.random.default_rng(0).integers(0, 64, (8, 17)).astype("int32")
    losses = _train(model, ids[:, :-1], ids[:, 1:], 6)
    assert losses[-1] < losses[0] - 0.3, losses


# ------------------------------------------------------------------ seq2seq
def test_seq2seq_layer_contract():
    model = seq2seq("tiny")
    names = [layer.name for layer in model.layers]
    assert sorted(model.input) == ["decoder_token_ids", "encoder_token_ids"]
    assert "embedding" in names and "encoder_embedding" not in names
    for name in (
        "encoder_block_0",
        "encoder_block_1",
        "decoder_block_0",
        "decoder_block_1",
        "logits",
        "encoder_embedding_dropout",
        "decoder_embedding_dropout",
    ):
        assert name in names
    assert not {"lm_head", "encoder_final_norm", "decoder_final_norm"} & set(names)
    emb = model.get_layer("embedding")
    assert emb.scale and emb.mask_zero and emb.position == "sinusoidal"
    dec = model.get_layer("decoder_block_0")
    assert dec.causal and dec.cross_attention and not dec.norm_first and dec.activation == "relu"
    enc = model.get_layer("encoder_block_0")
    assert not enc.causal and not enc.cross_attention
    assert model.head is None and model.decoder_embedding.name == "embedding"
    assert model.encoder_embedding is model.decoder_embedding and len(model.decoder_blocks) == 2

    other = seq2seq(
        "tiny",
        source_vocabulary_size=20,
        target_vocabulary_size=30,
        norm_first=True,
        tie_embeddings=False,
        num_encoder_layers=3,
        num_decoder_layers=1,
        position="relative",
    )
    names = [layer.name for layer in other.layers]
    for name in (
        "encoder_embedding",
        "decoder_embedding",
        "encoder_final_norm",
        "decoder_final_norm",
        "lm_head",
        "encoder_block_2",
        "decoder_block_0",
    ):
        assert name in names
    assert "decoder_block_1" not in names and "embedding" not in names
    assert other.get_layer("encoder_block_0").position == "relative"
    out = other(
        {"encoder_token_ids": np.ones((2, 7), "int32"), "decoder_token_ids": np.ones((2, 4), "int32")}
    )
    assert out.shape == (2, 4, 30) and out.dtype == "float32"
    # Equal separate vocabularies are not shared unless asked.
    assert "encoder_embedding" in [
        l.name for l in seq2seq("tiny", source_vocabulary_size=32, target_vocabulary_size=32).layers
    ]
    assert "embedding" in [
        l.name
        for l in seq2seq(
            "tiny", source_vocabulary_size=32, target_vocabulary_size=32, share_embeddings=True
        ).layers
    ]


def test_seq2seq_padding_is_ignored_and_encoder_helper():
    model = seq2seq("tiny")
    rng = np.random.default_rng(0)
    src = rng.integers(1, 32, (2, 7)).astype("int32")
    tgt = rng.integers(1, 32, (2, 5)).astype("int32")
    base = model({"encoder_token_ids": src, "decoder_token_ids": tgt})
    padded = model(
        {
            "encoder_token_ids": np.concatenate([src, np.zeros((2, 4), "int32")], 1),
            "decoder_token_ids": np.concatenate([tgt, np.zeros((2, 2), "int32")], 1),
        }
    )
    np.testing.assert_allclose(padded[:, :5], base, atol=1e-5)
    # A real (non-zero) token in the encoder does change the output.
    changed = model(
        {"encoder_token_ids": np.concatenate([src, np.full((2, 4), 3, "int32")], 1), "decoder_token_ids": tgt}
    )
    assert not np.allclose(changed, base, atol=1e-4)
    assert model.encode(src).shape == (2, 7, 64)
    encoder = keras.Model(model.input["encoder_token_ids"], model.encoder_output)
    np.testing.assert_allclose(encoder(src), model.encode(src), atol=1e-5)
    assert set(w.path for w in encoder.weights) <= set(w.path for w in model.weights)


def test_seq2seq_variant_trains():
    keras.utils.set_random_seed(2)
    model = seq2seq(
        "tiny",
        source_vocabulary_size=24,
        target_vocabulary_size=20,
        norm_first=True,
        tie_embeddings=False,
        position="learned",
        activation="gelu",
        dropout=0.1,
    )
    compile_for_lm(model, learning_rate=3e-3, label_smoothing=0.1, run_eagerly=True)
    rng = np.random.default_rng(0)
    src = rng.integers(1, 24, (16, 8)).astype("int32")
    tgt = rng.integers(2, 20, (16, 6)).astype("int32")
    dec_in = np.concatenate([np.ones((16, 1), "int32"), tgt[:, :-1]], 1)
    losses = _train(model, {"encoder_token_ids": src, "decoder_token_ids": dec_in}, tgt, 5)
    assert losses[-1] < losses[0] - 0.2, losses


def test_seq2seq_learns_reversal():
    """Teacher-forced training, then greedy decoding must reverse >= 95% of
    unseen sequences exactly."""
    keras.utils.set_random_seed(0)
    vocab, length, n, bos = 12, 6, 4000, 1
    rng = np.random.default_rng(0)
    src = rng.integers(2, vocab, size=(n, length)).astype("int32")
    tgt = src[:, ::-1].copy()
    dec_in = np.concatenate([np.full((n, 1), bos, "int32"), tgt[:, :-1]], 1)
    # max_length: BOS + the `length` generated tokens (the cached loop feeds every token back).
    model = seq2seq(
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


# ------------------------------------------------------------------ BERT
def test_bert_layer_contract():
    encoder = bert_encoder("tiny")
    assert sorted(encoder.input) == ["padding_mask", "segment_ids", "token_ids"]
    assert sorted(encoder.output) == ["pooled_output", "sequence_output"]
    block = encoder.get_layer("encoder_block_0")
    assert not block.norm_first and block.activation == "gelu" and block.layer_norm_epsilon == 1e-12
    assert encoder.get_layer("embedding_norm").epsilon == 1e-12
    assert encoder.get_layer("embedding").position == "learned"
    assert encoder.get_layer("segment_embedding").input_dim == 2
    out = encoder(_bert_inputs(2, 10))
    assert out["sequence_output"].shape == (2, 10, 32) and out["pooled_output"].shape == (2, 32)
    assert np.all(np.abs(out["pooled_output"]) <= 1.0)  # tanh pooler


def test_published_parameter_counts():
    cheap = dict(kernel_initializer="zeros", embeddings_initializer="zeros")
    bert = bert_encoder("bert_base", **cheap)
    assert bert.count_params() == 109_482_240
    del bert

    gpt2 = gpt("gpt2_small", **cheap)
    assert gpt2.count_params() == 124_439_808
    del gpt2

    base = seq2seq("transformer_base", **cheap)
    assert base.count_params() == seq2seq_num_params("transformer_base") == 63_082_496
    del base
    assert seq2seq_num_params("transformer_big") == 214_245_376


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
    model = seq2seq("tiny", **options)
    assert model.count_params() == seq2seq_num_params("tiny", **options)


def test_bert_heads_train():
    keras.utils.set_random_seed(3)
    encoder = bert_encoder("tiny")
    inputs = _bert_inputs(8, 12)
    # Masked LM: loss only on the masked positions (sample weights).
    mlm = compile_for_lm(bert_masked_lm(encoder), learning_rate=1e-2, run_eagerly=True)
    labels = inputs["token_ids"]
    weights = np.zeros_like(labels, dtype="float32")
    weights[:, 2:5] = 1.0
    masked = dict(inputs, token_ids=np.where(weights > 0, 3, labels).astype("int32"))
    losses = _train(mlm, masked, labels, 6, sample_weight=weights)
    assert losses[-1] < losses[0] - 0.3, losses
    # Labels at unweighted positions do not enter the loss.
    logits = mlm(masked)
    other = np.where(weights > 0, labels, (labels + 5) % 64)
    assert float(mlm.loss(labels, logits, weights)) == pytest.approx(
        float(mlm.loss(other, logits, weights)), 1e-6
    )
    assert float(mlm.loss(labels, logits)) != pytest.approx(float(mlm.loss(other, logits)), 1e-3)

    clf = compile_for_classification(
        bert_classifier(encoder, 3, pooling="mean"), learning_rate=1e-2, run_eagerly=True
    )
    y = np.arange(8) % 3
    losses = _train(clf, inputs, y, 6)
    assert losses[-1] < losses[0] - 0.2, losses

    tagger = compile_for_lm(
        bert_token_classifier(encoder, 5), learning_rate=1e-2, ignore_index=-100, run_eagerly=True
    )
    tags = (inputs["token_ids"] % 5).astype("int32")
    losses = _train(tagger, inputs, tags, 6)
    assert losses[-1] < losses[0] - 0.2, losses


@pytest.mark.parametrize("pooling", ["cls", "mean", "max"])
def test_classifier_pooling_ignores_padding(pooling):
    # Larger-than-BERT initial weights so that any leak of padding shows.
    model = bert_classifier(
        "tiny", 4, pooling=pooling, kernel_initializer="glorot_uniform", embeddings_initializer="uniform"
    )
    names = [layer.name for layer in model.layers]
    assert "classifier" in names and model.output_names == ["logits"]
    assert (pooling == "cls") == ("pooler" in names)
    base = model(_bert_inputs(3, 9, seed=5))
    padded_inputs = _bert_inputs(3, 9, seed=5, pad=4)
    padded = model(padded_inputs)
    np.testing.assert_allclose(padded, base, atol=1e-6)
    # The same tokens *unmasked* do change the result (so the mask matters).
    unmasked = dict(padded_inputs, padding_mask=np.ones_like(padded_inputs["padding_mask"]))
    assert np.max(np.abs(np.asarray(model(unmasked)) - np.asarray(base))) > 1e-4


# ------------------------------------------------------------ compile & save
def test_compile_helpers():
    model = gpt("tiny")
    compile_for_lm(model, optimizer="vaswani", warmup_steps=10, label_smoothing=0.1)
    assert isinstance(model.loss, MaskedSparseCategoricalCrossentropy) and model.loss.label_smoothing == 0.1
    assert model.optimizer.learning_rate.__class__.__name__ != "float"
    assert model.optimizer.beta_2 == 0.98
    lr0 = float(model.optimizer.learning_rate)
    assert lr0 == pytest.approx(32**-0.5 * 1 * 10**-1.5, rel=1e-5)
    assert model.jit_compile is True  # XLA by default (the fast path), outside tf.distribute
    compile_for_lm(model, jit_compile=False, steps_per_execution=4)
    assert not model.jit_compile and model.steps_per_execution == 4
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        mirrored = compile_for_lm(gpt("tiny"))
    assert mirrored.jit_compile is False
    with pytest.raises(TypeError, match="jit_compile"):
        compile_for_lm(model, jit_compile="yes")
    with pytest.raises(ValueError, match="learning_rate"):
        compile_for_lm(model, optimizer="vaswani", learning_rate=1e-3)
    with pytest.raises(TypeError):
        compile_for_lm(model, optimizer=3)


def _opt_state(model):
    return [keras.ops.convert_to_numpy(v) for v in model.optimizer.variables]


@pytest.mark.parametrize("kind", ["gpt", "seq2seq", "bert_classifier"])
def test_keras_round_trip(tmp_path, kind):
    keras.utils.set_random_seed(4)
    rng = np.random.default_rng(0)
    if kind == "gpt":
        model = compile_for_lm(
            gpt("tiny", position="alibi"), optimizer="vaswani", warmup_steps=5, run_eagerly=True
        )
        x = rng.integers(0, 64, (4, 9)).astype("int32")
        x, y = x[:, :-1], x[:, 1:]
    elif kind == "seq2seq":
        model = compile_for_lm(seq2seq("tiny"), learning_rate=1e-3, label_smoothing=0.1, run_eagerly=True)
        x = {
            "encoder_token_ids": rng.integers(1, 32, (4, 7)).astype("int32"),
            "decoder_token_ids": rng.integers(1, 32, (4, 5)).astype("int32"),
        }
        y = rng.integers(1, 32, (4, 5)).astype("int32")
    else:
        model = compile_for_classification(
            bert_classifier("tiny", 3, pooling="max"), optimizer="adamw", run_eagerly=True
        )
        x, y = _bert_inputs(4, 8), np.array([0, 1, 2, 1])
    _train(model, x, y, 2)
    path = tmp_path / f"{kind}.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded(x), model(x), atol=1e-6)
    assert [l.name for l in loaded.layers] == [l.name for l in model.layers]
    assert len(loaded.weights) == len(model.weights)
    assert int(loaded.optimizer.iterations) == 2
    for a, b in zip(_opt_state(loaded), _opt_state(model)):
        np.testing.assert_allclose(a, b, atol=1e-7)
    # Identical state ⇒ identical next step.
    la = _train(model, x, y, 1)
    lb = _train(loaded, x, y, 1)
    assert la == pytest.approx(lb, rel=1e-5)
    if kind == "gpt":
        # The tie survives loading: the output projection *is* the embedding.
        emb = loaded.get_layer("embedding").token_embedding.embeddings
        before = np.asarray(loaded(x))
        emb.assign(emb * 2.0)
        assert not np.allclose(loaded(x), before)
        assert len(loaded.weights) == len({id(w) for w in loaded.weights})
