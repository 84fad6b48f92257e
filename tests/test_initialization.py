"""Every weight starts from its own draw (issue 11 §1).

Keras initializers are stateless: one instance shared by several sublayers
starts them all equal. These tests build every builder and every layer with
more than one kernel and check that no two randomly initialised weights start
equal (within a layer, across blocks, and across differently shaped weights,
whose first values would coincide if they shared a seed), that
`keras.utils.set_random_seed` makes a model reproducible, and that a seeded
initializer given by the user does too.
"""

import itertools

import keras
import numpy as np
import pytest
from model_harness import tiny_bert_encoder, tiny_gpt, tiny_seq2seq, tiny_vit

from keras_tfm import layers as L
from keras_tfm import models as M
from keras_tfm.layers.initializers import clone_initializer, clone_initializers, derive_seed

PREFIX = 16


def _random_weights(layer):
    """(path, value) of the weights drawn at random: kernels and tables."""
    out = []
    for v in layer.weights:
        value = keras.ops.convert_to_numpy(v)
        if value.size < 2 or np.all(value == value.flat[0]):
            continue  # constant initialisers (zeros biases, LayerNorm, [CLS])
        out.append((v.path, value))
    assert out, "no randomly initialised weights found"
    return out


def _assert_independent(layer):
    weights = _random_weights(layer)
    for (pa, a), (pb, b) in itertools.combinations(weights, 2):
        if a.shape == b.shape:
            assert not np.array_equal(a, b), f"{pa} and {pb} start equal"
        n = min(a.size, b.size, PREFIX)
        assert not np.array_equal(a.ravel()[:n], b.ravel()[:n]), f"{pa} and {pb} share a seed"


def _same_weights(m1, m2):
    w1, w2 = m1.get_weights(), m2.get_weights()
    return len(w1) == len(w2) and all(np.array_equal(a, b) for a, b in zip(w1, w2))


def _seeded(seed=7):
    return keras.initializers.RandomNormal(stddev=0.02, seed=seed)


BUILDERS = {
    "gpt": lambda **kw: tiny_gpt(seed=None, **kw),
    "gpt_untied": lambda **kw: tiny_gpt(seed=None, tie_embeddings=False, **kw),
    "bert_encoder": lambda **kw: tiny_bert_encoder(seed=None, **kw),
    "seq2seq": lambda **kw: tiny_seq2seq(seed=None, **kw),
    "seq2seq_unshared": lambda **kw: tiny_seq2seq(
        seed=None, source_vocabulary_size=32, target_vocabulary_size=32, share_embeddings=False, **kw
    ),
    "vit": lambda **kw: tiny_vit(seed=None, position="learned", **kw),
}


def _seeded_kwargs(seed=7):
    return dict(kernel_initializer=_seeded(seed), embeddings_initializer=_seeded(seed))


# ------------------------------------------------------------------ builders
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builder_weights_are_independent_and_reproducible(name):
    build = BUILDERS[name]
    keras.utils.set_random_seed(3)
    m1 = build()
    _assert_independent(m1)
    keras.utils.set_random_seed(3)
    assert _same_weights(m1, build()), "set_random_seed(3) twice gave different models"


def test_bert_heads_are_independent():
    keras.utils.set_random_seed(3)
    encoder = tiny_bert_encoder(seed=None)
    for model in (
        M.bert_masked_lm(encoder),
        M.bert_classifier(encoder, num_classes=3),
        M.bert_token_classifier(encoder, num_classes=3),
    ):
        _assert_independent(model)


@pytest.mark.parametrize("name", ["gpt_untied", "bert_encoder", "seq2seq_unshared"])
def test_builder_with_seeded_initializer_is_reproducible(name):
    build = BUILDERS[name]
    m1, m2 = build(**_seeded_kwargs()), build(**_seeded_kwargs())
    assert _same_weights(m1, m2), "the same seeded initializer gave different models"
    _assert_independent(m1)
    # Another seed, another model.
    m3 = build(**_seeded_kwargs(8))
    assert not any(np.array_equal(a, b) for a, b in zip(m1.get_weights(), m3.get_weights()) if a.std() > 0)


# -------------------------------------------------------------------- layers
def _build(layer, *shapes):
    layer.build(*shapes)
    return layer


LAYERS = {
    "self_attention": lambda init: _build(L.MultiHeadSelfAttention(4, kernel_initializer=init), (2, 5, 16)),
    "self_attention_relative": lambda init: _build(
        L.MultiHeadSelfAttention(4, position="relative", kernel_initializer=init), (2, 5, 16)
    ),
    "output_head": lambda init: _build(L.OutputHead(16, kernel_initializer=init), (2, 5, 16)),
    "cross_attention": lambda init: _build(
        L.CrossAttention(4, kernel_initializer=init), (2, 5, 16), (2, 7, 16)
    ),
    "feed_forward": lambda init: _build(L.FeedForward(16, kernel_initializer=init), (2, 5, 16)),
    "transformer_block": lambda init: _build(
        L.TransformerBlock(16, 4, 16, cross_attention=True, kernel_initializer=init), (2, 5, 16)
    ),
    "token_and_position_embedding": lambda init: _build(
        L.TokenAndPositionEmbedding(16, 16, max_length=16, embeddings_initializer=init), (2, 5)
    ),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize(
    "init",
    ["glorot_uniform", "instance", "seeded"],
)
def test_layer_kernels_are_independent(name, init):
    make = {
        "glorot_uniform": lambda: "glorot_uniform",
        "instance": lambda: keras.initializers.RandomNormal(stddev=0.1),
        "seeded": lambda: keras.initializers.RandomNormal(stddev=0.1, seed=11),
    }[init]
    keras.utils.set_random_seed(9)
    layer = LAYERS[name](make())
    if name == "self_attention_relative":
        # The relative-bias table is zeros by default; random here so it is checked too.
        layer.relative_bias.embeddings.assign(keras.random.normal((32, 4), seed=1))
    _assert_independent(layer)
    # Reproducible: by the seed of the initializer, or by set_random_seed.
    keras.utils.set_random_seed(9 if init != "seeded" else 10)
    again = LAYERS[name](make())
    for a, b in zip(layer.weights, again.weights):
        if "relative" not in a.path:
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_shared_instance_across_layers_still_gives_independent_layers():
    """One unseeded instance handed to two layers (as users often do)."""
    init = keras.initializers.GlorotUniform()
    a = _build(L.FeedForward(16, kernel_initializer=init), (2, 5, 16))
    b = _build(L.FeedForward(16, kernel_initializer=init), (2, 5, 16))
    assert not np.array_equal(a.inner_dense.kernel.numpy(), b.inner_dense.kernel.numpy())


# ------------------------------------------------------------------- helpers
def test_clone_initializer_rules():
    seeded = keras.initializers.GlorotUniform(seed=3)
    a, b = clone_initializer(seeded, "query"), clone_initializer(seeded, "key")
    assert a is not seeded and a.get_config()["seed"] == derive_seed(3, "query")
    assert a.get_config()["seed"] != b.get_config()["seed"]
    assert clone_initializer(seeded, "query").get_config() == a.get_config()  # deterministic
    # Unseeded: a fresh instance with its own seed.
    unseeded = keras.initializers.GlorotUniform()
    c, d = clone_initializer(unseeded, "x"), clone_initializer(unseeded, "x")
    assert not np.array_equal(c((4, 4)).numpy(), d((4, 4)).numpy())
    # Stateful SeedGenerator seeds and plain functions are returned unchanged.
    stateful = keras.initializers.RandomNormal(seed=keras.random.SeedGenerator(1))
    assert clone_initializer(stateful, "x") is stateful

    def fn(shape, dtype=None):
        return keras.ops.ones(shape, dtype)

    assert clone_initializer(fn, "x") is fn
    # Strings and configs are accepted; non-initializer kwargs pass through.
    assert isinstance(clone_initializer("zeros", "x"), keras.initializers.Zeros)
    kw = clone_initializers({"kernel_initializer": seeded, "bias_initializer": None, "units": 3}, 0)
    assert kw["units"] == 3 and kw["bias_initializer"] is None
    assert kw["kernel_initializer"].get_config()["seed"] == derive_seed(3, 0)
    assert 1 <= derive_seed(2**40, "a") < 2**31
