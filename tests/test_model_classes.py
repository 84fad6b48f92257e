"""The model classes (GPT, BertEncoder + heads, Seq2Seq, ViT): attributes,
methods, `.keras` round trips, builders."""

import keras
import numpy as np
import pytest

from keras_tfm import models
from keras_tfm.layers import TransformerBlock


# --------------------------------------------------------------------- GPT
@pytest.fixture(scope="module")
def gpt_untied():
    keras.utils.set_random_seed(1)
    return models.gpt("tiny", tie_embeddings=False, lm_head_use_bias=True)


def test_gpt_parts_are_the_graph_layers():
    model = models.gpt("tiny")
    assert isinstance(model, models.GPT) and isinstance(model, keras.Model)
    assert model.blocks == [model.get_layer(f"decoder_block_{i}") for i in range(2)]
    assert model.decoder_blocks is model.blocks
    assert all(isinstance(b, TransformerBlock) and b.causal for b in model.blocks)
    assert model.embedding is model.get_layer("embedding")
    assert model.token_embedding is model.embedding.token_embedding
    assert tuple(model.token_embedding.embeddings.shape) == (64, 32)
    assert tuple(model.position_embedding.position_embeddings.shape) == (32, 32)
    assert model.final_norm is model.get_layer("final_norm")
    assert model.head is None and model.tie_embeddings
    assert (model.vocabulary_size, model.max_length, model.num_layers, model.num_heads, model.d_model) == (
        64,
        32,
        2,
        2,
        32,
    )
    assert model.head_dim == 16
    assert model.config["d_ff"] == 64 and model.config["position"] == "learned"


def test_gpt_methods_match_the_graph(gpt_untied):
    model = gpt_untied
    assert model.head is model.get_layer("lm_head")
    ids = np.random.default_rng(0).integers(0, 64, (2, 9)).astype("int32")
    expected = np.asarray(model(ids, training=False))
    # embed -> blocks -> compute_logits is the graph.
    x = model.embed(ids)
    for block in model.blocks:
        x = block(x)
    np.testing.assert_allclose(np.asarray(model.compute_logits(x)), expected, atol=1e-5)
    # call_with_cache: prefix in one pass, then one token at a time.
    caches = model.init_caches(2, 16)
    assert tuple(caches[0].shape) == (2, 2, 16, 16)  # keys: (batch, kv heads, head_dim, length)
    assert tuple(model.init_caches(2, 12)[0].shape) == (2, 2, 16, 12)
    logits, caches = model.call_with_cache(ids[:, :5], caches, 0)
    np.testing.assert_allclose(np.asarray(logits), expected[:, :5], atol=1e-5)
    for t in range(5, 9):
        step, caches = model.call_with_cache(ids[:, t : t + 1], caches, t, last_only=True)
        np.testing.assert_allclose(np.asarray(step)[:, 0], expected[:, t], atol=1e-5)


def test_gpt_embed_positions_per_row():
    """`embed(ids, positions)` with a per-row offset equals the embedding of
    the unpadded row (what left-padded cached decoding needs)."""
    for position in ("learned", "sinusoidal"):
        model = models.gpt("tiny", position=position)
        ids = np.array([[7, 8, 9]], "int32")
        reference = np.asarray(model.embed(ids))
        padded = np.array([[0, 0, 7, 8, 9]], "int32")
        shifted = np.asarray(model.embed(padded, positions=np.array([[-2, -1, 0, 1, 2]], "int32")))
        np.testing.assert_allclose(shifted[:, 2:], reference, atol=1e-6)


def test_gpt_config_round_trip_mixed_precision(tmp_path):
    model = models.gpt("tiny", dtype="mixed_bfloat16", with_padding_mask=True, position="rope")
    assert model.blocks[0].compute_dtype == "bfloat16"
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    assert isinstance(loaded, models.GPT) and loaded.config == model.config
    assert loaded.blocks[0].compute_dtype == "bfloat16"
    x = {"token_ids": np.ones((1, 4), "int32"), "padding_mask": np.ones((1, 4), "int32")}
    np.testing.assert_array_equal(np.asarray(loaded(x)), np.asarray(model(x)))
    assert models.GPT.from_config(model.get_config()).count_params() == model.count_params()


# -------------------------------------------------------------------- BERT
def test_bert_encoder_and_heads_share_parts(tmp_path):
    encoder = models.bert_encoder("tiny")
    assert isinstance(encoder, models.BertEncoder)
    assert encoder.blocks == [encoder.get_layer(f"encoder_block_{i}") for i in range(2)]
    assert encoder.encoder_blocks is encoder.blocks
    assert encoder.segment_embedding.input_dim == 2 and encoder.pooler.units == 32
    mlm = models.bert_masked_lm(encoder)
    classifier = models.bert_classifier(encoder, 3, pooling="mean")
    tagger = models.bert_token_classifier(encoder, 5)
    for head in (mlm, classifier, tagger):
        assert isinstance(head, models.BertTask)
        assert head.encoder is encoder
        assert head.token_embedding is encoder.token_embedding
        assert head.blocks == encoder.blocks
    assert mlm.pooler is None and classifier.pooler is None
    assert models.bert_classifier(encoder, 2).pooler is encoder.pooler
    assert classifier.head is classifier.classifier and classifier.classifier.units == 3
    assert classifier.pooling_layer.mode == "mean"
    x = {
        "token_ids": np.array([[2, 5, 6, 3, 0]], "int32"),
        "segment_ids": np.zeros((1, 5), "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
    }
    sequence = encoder(x)["sequence_output"]
    np.testing.assert_allclose(np.asarray(mlm.compute_logits(sequence)), np.asarray(mlm(x)), atol=1e-5)
    embedded = encoder.embed(x["token_ids"], x["segment_ids"])
    assert tuple(embedded.shape) == (1, 5, 32)
    for head in (mlm, classifier, tagger):
        head.save(tmp_path / "h.keras")
        loaded = keras.saving.load_model(tmp_path / "h.keras")
        assert type(loaded) is type(head) and isinstance(loaded.encoder, models.BertEncoder)
        np.testing.assert_allclose(np.asarray(loaded(x)), np.asarray(head(x)), atol=1e-6)


def test_bert_heads_take_a_vocabulary_when_building_the_encoder():
    model = models.bert_classifier("tiny", num_classes=2, vocabulary_size=100)
    assert model.vocabulary_size == 100
    with pytest.raises(ValueError, match="Vocabulary mismatch"):
        models.bert_classifier(models.bert_encoder("tiny"), 2, vocabulary_size=100)
    with pytest.raises(TypeError, match="BertEncoder"):
        models.bert_masked_lm(models.gpt("tiny"))


# ----------------------------------------------------------------- seq2seq
def test_seq2seq_methods_match_the_graph():
    keras.utils.set_random_seed(2)
    model = models.seq2seq("tiny", source_vocabulary_size=20, norm_first=True, tie_embeddings=False)
    assert not model.shared_embeddings
    assert model.encoder_embedding is model.get_layer("encoder_embedding")
    assert model.decoder_blocks == [model.get_layer(f"decoder_block_{i}") for i in range(2)]
    assert model.head is model.get_layer("lm_head")
    assert (model.source_vocabulary_size, model.target_vocabulary_size) == (20, 32)
    rng = np.random.default_rng(0)
    src = rng.integers(1, 20, (2, 6)).astype("int32")
    src[1, 4:] = 0
    dec = rng.integers(1, 32, (2, 5)).astype("int32")
    expected = np.asarray(model({"encoder_token_ids": src, "decoder_token_ids": dec}, training=False))
    memory = model.encode(src)
    # `encode` is the graph's encoder half (`encoder_output`).
    encoder = keras.Model(model.input["encoder_token_ids"], model.encoder_output)
    np.testing.assert_allclose(np.asarray(memory)[0], np.asarray(encoder(src))[0], atol=1e-5)
    cross = model.compute_cross_caches(memory)
    caches = model.init_caches(2, 8)
    logits, caches = model.call_with_cache(dec, caches, 0, cross, src != 0)
    np.testing.assert_allclose(np.asarray(logits), expected, atol=1e-5)


def test_vit_parts():
    model = models.vit_classifier(8, 4, 3, num_layers=2, num_heads=2, d_model=16, num_channels=1)
    assert isinstance(model, models.ViT)
    assert model.blocks == [model.get_layer(f"encoder_block_{i}") for i in range(2)]
    assert model.head is model.get_layer("classifier") and model.grid_size == (2, 2)
    assert model.config["image_size"] == (8, 8)


# ---------------------------------------------------------------- builders
def test_builders_merge_the_preset_under_explicit_options():
    # A size given as None is not given (the preset's applies) ...
    assert models.gpt("tiny", d_model=None).d_model == 32
    # ... any other explicit value wins, None included.
    llama = models.gpt("llama_tiny")
    assert llama.num_key_value_heads == 2 and llama.head is not None
    plain = models.gpt("llama_tiny", num_key_value_heads=None, tie_embeddings=True)
    assert plain.num_key_value_heads == plain.num_heads == 4 and plain.head is None
    assert plain.config["num_key_value_heads"] is None
    # Training keys of a preset never reach the class.
    assert "label_smoothing" not in models.seq2seq("transformer_base", num_layers=1, d_model=32).config
    with pytest.raises(TypeError, match=r"Unknown option\(s\) \['hidden_size'\].*'d_model'"):
        models.gpt("tiny", hidden_size=32)
    with pytest.raises(TypeError, match=r"Unknown option\(s\) \['depth'\] for ViT.*'num_layers'"):
        models.vit_classifier(8, 4, 3, depth=2)


def test_constructor_options_reach_every_block():
    """Each option is a named argument of the class, passed by name down to the
    blocks and their attention layers."""
    model = models.GPT(
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


def test_the_string_none_is_not_a_position():
    with pytest.raises(ValueError, match=r"Unknown `position` 'none'.*None\]"):
        models.gpt("tiny", position="none")
    assert models.gpt("tiny", position=None).embedding.position is None
