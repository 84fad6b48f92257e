"""The one shared model-test harness (in the spirit of KerasHub's `run_backbone_test`).

Tiny factories (a seed, then the builder's "tiny" preset with options on top) and an example
batch for every model class:

    tiny_gpt              GPT, GPT-2 layout          token_ids(...)         (B, T) int32
    tiny_llama            GPT, Llama layout (pre-RMSNorm, SwiGLU, RoPE θ=500000, 4 query heads
                          sharing 2 key/value heads, no biases, untied head)
    tiny_bert_encoder     BertEncoder                bert_inputs(...)       dict of (B, T) int32
    tiny_bert_masked_lm   BertMaskedLM
    tiny_bert_classifier  BertClassifier
    tiny_bert_token_classifier  BertTokenClassifier
    tiny_sentence_encoder SentenceEncoder
    tiny_seq2seq          Seq2Seq                    seq2seq_inputs(...)    dict of (B, S)/(B, T) int32
    tiny_vit              ViT                        images(...)            (B, 8, 8, 1) float32

`MODEL_CASES` names one `ModelCase` per model class (and per layout worth its own run): the
factory, the example inputs and labels, the documented output shape and how to train it.
`run_model_test(case, tmp_path)` checks, for one case:

* it builds and its output has the documented shape, float32 (logits) and finite;
* `fit` (eager, one step per epoch on one batch) runs: the loss is finite and goes down, every
  trainable weight changes;
* the `.keras` round trip gives the same class, config, weight paths and outputs;
* under the `mixed_bfloat16` dtype policy it builds and runs: float32 weights, bfloat16 blocks,
  float32 logits (encoder outputs in the compute dtype) close to the float32 model's with the
  same weights;
* `get_config()` (of that mixed-precision model) is JSON-serialisable and `from_config` rebuilds
  the same model: the same config (dtype policy included), weight paths and shapes, and the same
  outputs with the same weights;
* for the generative models (GPT, Seq2Seq): the cached path (`init_caches` + `call_with_cache`,
  a prefix then one token at a time) equals the full forward pass (`assert_cached_equals_full`).

Everything runs eagerly on tiny sizes: the compiled (graph/XLA) training steps are checked in
test_training.py and test_backends.py, where compiling is what is under test.
"""

import dataclasses
import json
import os
from collections.abc import Callable
from typing import Any

import keras
import numpy as np

from keras_tfm import models
from keras_tfm.models.presets import LLAMA_LAYOUT
from keras_tfm.training import compile_for_classification, compile_for_lm

#: The Llama layout of `tiny_llama` (Llama 3's RoPE base).
LLAMA = dict(LLAMA_LAYOUT, rope_max_wavelength=500000.0)
#: The "tiny" presets' vocabularies (`keras_tfm.models.presets`).
GPT_VOCABULARY = BERT_VOCABULARY = 64
SEQ2SEQ_VOCABULARY = 32


def _seed(seed):
    if seed is not None:
        keras.utils.set_random_seed(seed)


# ---------------------------------------------------------------- factories
def tiny_gpt(*, seed: int | None = 0, **options) -> models.GPT:
    """`gpt("tiny", **options)` (V 64, T ≤ 32, 2 layers, 2 heads, d 32, d_ff 64) after
    `set_random_seed(seed)` (None: no seeding)."""
    _seed(seed)
    return models.gpt("tiny", **options)


def tiny_llama(*, seed: int | None = 0, **options) -> models.GPT:
    """The tiny GPT in the Llama layout (`LLAMA`), 4 query heads sharing 2 key/value heads
    (head size 8)."""
    return tiny_gpt(seed=seed, **{"num_heads": 4, "num_key_value_heads": 2, **LLAMA, **options})


def tiny_bert_encoder(*, seed: int | None = 0, **options) -> models.BertEncoder:
    """`bert_encoder("tiny", **options)` (V 64, T ≤ 32, 2 layers, 2 heads, d 32)."""
    _seed(seed)
    return models.bert_encoder("tiny", **options)


def tiny_bert_masked_lm(*, seed: int | None = 0, **options) -> models.BertMaskedLM:
    """`bert_masked_lm("tiny", **options)` (the tiny encoder with the MLM head)."""
    _seed(seed)
    return models.bert_masked_lm("tiny", **options)


def tiny_bert_classifier(*, seed: int | None = 0, num_classes: int = 3, **options) -> models.BertClassifier:
    """`bert_classifier("tiny", num_classes, **options)` ([CLS] pooler by default)."""
    _seed(seed)
    return models.bert_classifier("tiny", num_classes, **options)


def tiny_bert_token_classifier(
    *, seed: int | None = 0, num_classes: int = 5, **options
) -> models.BertTokenClassifier:
    """`bert_token_classifier("tiny", num_classes, **options)`."""
    _seed(seed)
    return models.bert_token_classifier("tiny", num_classes, **options)


def tiny_sentence_encoder(
    *, seed: int | None = 0, pooling: str = "mean", normalize: bool = True, **options
) -> models.SentenceEncoder:
    """A `SentenceEncoder` on `tiny_bert_encoder(**options)`."""
    return models.SentenceEncoder(
        tiny_bert_encoder(seed=seed, **options), pooling=pooling, normalize=normalize
    )


def tiny_seq2seq(*, seed: int | None = 0, **options) -> models.Seq2Seq:
    """`seq2seq("tiny", **options)` (shared V 32, T ≤ 16, 2+2 layers, 4 heads, d 64, d_ff 128)."""
    _seed(seed)
    return models.seq2seq("tiny", **options)


def tiny_vit(*, seed: int | None = 0, **options) -> models.ViT:
    """A ViT on 8×8 grey images: 4×4 patches, 3 classes, 2 layers, 2 heads, d 16."""
    _seed(seed)
    config = dict(
        image_size=8, patch_size=4, num_classes=3, num_layers=2, num_heads=2, d_model=16, num_channels=1
    )
    return models.vit_classifier(**{**config, **options})


# ------------------------------------------------------------ example data
def token_ids(batch=2, length=9, vocabulary_size=GPT_VOCABULARY, seed=0, low=1) -> np.ndarray:
    """Random int32 ids in [low, vocabulary_size), shape (batch, length)."""
    return np.random.default_rng(seed).integers(low, vocabulary_size, (batch, length)).astype("int32")


def bert_inputs(batch=2, length=10, vocabulary_size=BERT_VOCABULARY, seed=0, pad=0) -> dict:
    """BERT inputs: random ids, segment 1 on the second half, then `pad` padded positions."""
    ids = token_ids(batch, length, vocabulary_size, seed)
    segments = np.zeros((batch, length), "int32")
    segments[:, length // 2 :] = 1
    mask = np.ones((batch, length), "int32")
    padding = np.zeros((batch, pad), "int32")
    return {
        "token_ids": np.concatenate([ids, padding], axis=1),
        "segment_ids": np.concatenate([segments, padding], axis=1),
        "padding_mask": np.concatenate([mask, padding], axis=1),
    }


def seq2seq_inputs(
    batch=2, source_length=7, target_length=5, vocabulary_size=SEQ2SEQ_VOCABULARY, seed=0
) -> dict:
    """Seq2seq inputs without padding (id 0 is padding): random source and decoder ids."""
    rng = np.random.default_rng(seed)
    return {
        "encoder_token_ids": rng.integers(1, vocabulary_size, (batch, source_length)).astype("int32"),
        "decoder_token_ids": rng.integers(1, vocabulary_size, (batch, target_length)).astype("int32"),
    }


def images(batch=2, height=8, width=8, channels=1, seed=0) -> np.ndarray:
    """Random float32 images in [0, 1), shape (batch, height, width, channels)."""
    return np.random.default_rng(seed).random((batch, height, width, channels)).astype("float32")


# ------------------------------------------------------------------ cases
def _compile_lm(model):
    return compile_for_lm(model, learning_rate=1e-2, run_eagerly=True)


def _compile_classifier(model):
    return compile_for_classification(model, learning_rate=1e-3, run_eagerly=True)


def _compile_mse(model):
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse", run_eagerly=True)
    return model


@dataclasses.dataclass(frozen=True)
class ModelCase:
    """One model class in a tiny configuration, with an example batch.

    Attributes:
        cls: the model class the factory returns.
        build: `build(dtype=None)` → a fresh model (seeded: the same weights every call).
        inputs, labels: an example batch and training targets for it.
        output_shape: the output shape, or {output name: shape} for dict outputs.
        compile: `compile(model)` → the model compiled (eagerly) for `fit` on `labels`.
        generative: the model has the cached decoding path (`init_caches`, `call_with_cache`).
        float32_outputs: outputs are float32 under every dtype policy (logits); False when they
            are in the compute dtype (the encoder's hidden states).
    """

    cls: type
    build: Callable[..., keras.Model]
    inputs: Any
    labels: Any
    output_shape: Any
    compile: Callable[[keras.Model], keras.Model]
    generative: bool = False
    float32_outputs: bool = True


_RNG = np.random.default_rng(1)
_IDS = token_ids()
_BERT = bert_inputs()
_SEQ2SEQ = seq2seq_inputs()
_SEQ2SEQ_20 = seq2seq_inputs(vocabulary_size=20)


def _next_tokens(ids):
    return np.roll(ids, -1, axis=1)


MODEL_CASES = {
    "gpt": ModelCase(
        cls=models.GPT,
        build=tiny_gpt,
        inputs=_IDS,
        labels=_next_tokens(_IDS),
        output_shape=(2, 9, 64),
        compile=_compile_lm,
        generative=True,
    ),
    "gpt_llama": ModelCase(
        cls=models.GPT,
        build=tiny_llama,
        inputs=_IDS,
        labels=_next_tokens(_IDS),
        output_shape=(2, 9, 64),
        compile=_compile_lm,
        generative=True,
    ),
    "bert_encoder": ModelCase(
        cls=models.BertEncoder,
        build=tiny_bert_encoder,
        inputs=_BERT,
        labels={
            "sequence_output": _RNG.normal(size=(2, 10, 32)).astype("float32"),
            "pooled_output": _RNG.normal(size=(2, 32)).astype("float32"),
        },
        output_shape={"sequence_output": (2, 10, 32), "pooled_output": (2, 32)},
        compile=_compile_mse,
        float32_outputs=False,
    ),
    "bert_masked_lm": ModelCase(
        cls=models.BertMaskedLM,
        build=tiny_bert_masked_lm,
        inputs=_BERT,
        labels=_BERT["token_ids"],
        output_shape=(2, 10, 64),
        compile=_compile_lm,
    ),
    # The Llama-era options in the encoder: RMSNorm, SwiGLU, grouped-query attention.
    "bert_masked_lm_llama": ModelCase(
        cls=models.BertMaskedLM,
        build=lambda **kw: tiny_bert_masked_lm(num_key_value_heads=1, norm="rms", activation="swiglu", **kw),
        inputs=_BERT,
        labels=_BERT["token_ids"],
        output_shape=(2, 10, 64),
        compile=_compile_lm,
    ),
    "bert_classifier": ModelCase(
        cls=models.BertClassifier,
        build=tiny_bert_classifier,
        inputs=_BERT,
        labels=np.array([0, 2]),
        output_shape=(2, 3),
        compile=_compile_classifier,
    ),
    "bert_token_classifier": ModelCase(
        cls=models.BertTokenClassifier,
        build=tiny_bert_token_classifier,
        inputs=_BERT,
        labels=_BERT["token_ids"] % 5,
        output_shape=(2, 10, 5),
        compile=_compile_lm,
    ),
    "sentence_encoder": ModelCase(
        cls=models.SentenceEncoder,
        build=tiny_sentence_encoder,
        inputs=_BERT,
        labels=_RNG.normal(size=(2, 32)).astype("float32"),
        output_shape=(2, 32),
        compile=_compile_mse,
    ),
    "seq2seq": ModelCase(
        cls=models.Seq2Seq,
        build=tiny_seq2seq,
        inputs=_SEQ2SEQ,
        labels=_next_tokens(_SEQ2SEQ["decoder_token_ids"]),
        output_shape=(2, 5, 32),
        compile=_compile_lm,
        generative=True,
    ),
    # The Llama-era options in the encoder–decoder (pre-RMSNorm, GeGLU, multi-query attention, no
    # biases), with separate untied vocabularies.
    "seq2seq_llama": ModelCase(
        cls=models.Seq2Seq,
        build=lambda **kw: tiny_seq2seq(
            source_vocabulary_size=24,
            target_vocabulary_size=20,
            tie_embeddings=False,
            norm_first=True,
            norm="rms",
            activation="geglu",
            num_key_value_heads=1,
            use_bias=False,
            **kw,
        ),
        inputs=_SEQ2SEQ_20,
        labels=_next_tokens(_SEQ2SEQ_20["decoder_token_ids"]),
        output_shape=(2, 5, 20),
        compile=_compile_lm,
        generative=True,
    ),
    "vit": ModelCase(
        cls=models.ViT,
        build=tiny_vit,
        inputs=images(),
        labels=np.array([0, 2]),
        output_shape=(2, 3),
        compile=_compile_classifier,
    ),
}


# ------------------------------------------------------------------ checks
def to_numpy(outputs):
    """Outputs (a tensor or a dict of tensors) as float32 NumPy arrays."""
    return keras.tree.map_structure(
        lambda t: np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(t, "float32"))), outputs
    )


def assert_outputs_equal(actual, expected, atol=1e-6):
    keras.tree.map_structure(
        lambda a, b: np.testing.assert_allclose(a, b, atol=atol, rtol=0), to_numpy(actual), to_numpy(expected)
    )


def _value(variable):
    return np.array(keras.ops.convert_to_numpy(variable))


def blocks(model) -> list:
    """The model's `TransformerBlock`s (encoder then decoder blocks for a Seq2Seq)."""
    if isinstance(model, models.Seq2Seq):
        return model.encoder_blocks + model.decoder_blocks
    return model.blocks


def check_output(case, model, inputs=None):
    """The documented output shape(s) and dtype, finite; returns the outputs as NumPy."""
    outputs = model(case.inputs if inputs is None else inputs, training=False)
    if isinstance(case.output_shape, dict):
        assert sorted(outputs) == sorted(case.output_shape)
        shapes = {name: tuple(outputs[name].shape) for name in case.output_shape}
    else:
        shapes = tuple(outputs.shape)
    assert shapes == case.output_shape, f"output shape {shapes}, expected {case.output_shape}"
    for tensor in keras.tree.flatten(outputs):
        expected = "float32" if case.float32_outputs else blocks(model)[0].compute_dtype
        assert keras.backend.standardize_dtype(tensor.dtype) == expected, (tensor.dtype, expected)
    values = to_numpy(outputs)
    assert all(np.isfinite(v).all() for v in keras.tree.flatten(values))
    return values


def check_config_round_trip(model, inputs):
    """`get_config` is JSON-serialisable; `from_config` of it is the same model."""
    config = model.get_config()
    clone = type(model).from_config(json.loads(json.dumps(config)))
    assert clone.get_config() == config
    assert [tuple(w.shape) for w in clone.weights] == [tuple(w.shape) for w in model.weights]
    assert [w.path for w in clone.weights] == [w.path for w in model.weights]
    clone.set_weights(model.get_weights())
    assert_outputs_equal(clone(inputs, training=False), model(inputs, training=False))
    return clone


def check_fit(case, model, epochs=2):
    """`fit` on the example batch (one step per epoch): finite losses going down, every trainable
    weight changed. Returns the losses."""
    case.compile(model)
    before = [_value(w) for w in model.trainable_weights]
    batch = keras.tree.flatten(case.inputs)[0].shape[0]
    history = model.fit(case.inputs, case.labels, batch_size=batch, epochs=epochs, verbose=0)
    losses = history.history["loss"]
    assert np.isfinite(losses).all(), losses
    assert losses[-1] < losses[0], losses
    unchanged = [w.path for w, b in zip(model.trainable_weights, before) if np.array_equal(b, _value(w))]
    assert not unchanged, f"fit left {unchanged} unchanged"
    return losses


def check_keras_round_trip(model, inputs, tmp_path):
    """`.keras` save → load: the same class, config and outputs."""
    path = os.path.join(str(tmp_path), f"{model.name}.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is type(model)
    assert loaded.get_config() == model.get_config()
    assert [w.path for w in loaded.weights] == [w.path for w in model.weights]
    assert_outputs_equal(loaded(inputs, training=False), model(inputs, training=False))
    return loaded


def check_mixed_precision(case, reference, policy="mixed_bfloat16"):
    """Built under `policy`: float32 variables, blocks in the compute dtype, outputs as
    documented (`check_output`) and close to `reference`'s (float32, same weights); its config
    round trip (`check_config_round_trip`) keeps the policy."""
    compute = keras.DTypePolicy(policy).compute_dtype
    model = case.build(dtype=policy)
    assert all(keras.backend.standardize_dtype(w.dtype) == "float32" for w in model.weights)
    assert {block.compute_dtype for block in blocks(model)} == {compute}
    model.set_weights(reference.get_weights())
    mixed = check_output(case, model)
    full = to_numpy(reference(case.inputs, training=False))
    for m, f in zip(keras.tree.flatten(mixed), keras.tree.flatten(full)):
        # bfloat16 keeps 8 bits of mantissa: a few % of the output's scale.
        np.testing.assert_allclose(m, f, atol=0.05 * np.abs(f).max(), rtol=0)
    clone = check_config_round_trip(model, case.inputs)
    assert {block.compute_dtype for block in blocks(clone)} == {compute}
    return model


def assert_cached_equals_full(model, inputs, prompt_length=3, atol=1e-5):
    """The cached path equals the full forward pass `model(inputs)`: `call_with_cache` on the
    first `prompt_length` (decoder) tokens in one pass (all positions, and `last_only=True`),
    then one token at a time.

    `inputs`: token ids (B, T) for a GPT; {"encoder_token_ids", "decoder_token_ids"} for a
    Seq2Seq (the encoder side through `encode` + `compute_cross_caches`).
    """
    full = to_numpy(model(inputs, training=False))
    if isinstance(inputs, dict):
        source, ids = inputs["encoder_token_ids"], inputs["decoder_token_ids"]
        extra = (model.compute_cross_caches(model.encode(source)), source != 0)
    else:
        ids, extra = inputs, ()
    batch, length = ids.shape
    prompt = ids[:, :prompt_length]
    last, _ = model.call_with_cache(prompt, model.init_caches(batch, length), 0, *extra, last_only=True)
    np.testing.assert_allclose(to_numpy(last), full[:, prompt_length - 1 : prompt_length], atol=atol, rtol=0)
    logits, caches = model.call_with_cache(prompt, model.init_caches(batch, length), 0, *extra)
    np.testing.assert_allclose(to_numpy(logits), full[:, :prompt_length], atol=atol, rtol=0)
    for t in range(prompt_length, length):
        logits, caches = model.call_with_cache(ids[:, t : t + 1], caches, t, *extra)
        np.testing.assert_allclose(to_numpy(logits)[:, 0], full[:, t], atol=atol, rtol=0)


def run_model_test(case: ModelCase, tmp_path, mixed_precision: str = "mixed_bfloat16") -> keras.Model:
    """Every check of the module docstring on `case`; returns the trained float32 model.

    The config round trip runs on the `mixed_precision` model (its dtype policy is part of the
    config); the `.keras` round trip on the float32 one, after `fit`.
    """
    model = case.build()
    assert type(model) is case.cls, type(model)
    check_output(case, model)
    check_fit(case, model)
    check_keras_round_trip(model, case.inputs, tmp_path)
    check_mixed_precision(case, model, mixed_precision)
    if case.generative:
        assert_cached_equals_full(model, case.inputs)
    return model
