"""LoRA on every model class (issue 14 §2): `model.enable_lora(rank)`, `merge_lora()`.

Keras's own `Dense/EinsumDense.enable_lora` does the maths; these tests check
the model-level part: the right projections (self- and cross-attention) are
adapted, only A and B train, a fine-tune lowers the loss, a `.keras` file keeps
A and B, and merging keeps the outputs.
"""

import os

import keras
import numpy as np
import pytest
from model_harness import MODEL_CASES, tiny_gpt, token_ids

from keras_tfm.models import lora

GPT_IDS = token_ids(4, 16, low=0)


def _build(name):
    """A fresh model of `MODEL_CASES[name]` (seeded) and its example inputs."""
    case = MODEL_CASES[name]
    return case.build(), case.inputs


def _outputs(model, x):
    y = model(x)
    y = y["pooled_output"] if isinstance(y, dict) else y
    return keras.ops.convert_to_numpy(y)


def _perturb(model):
    """Non-zero B (B starts at 0, so a fresh LoRA changes nothing)."""
    for i, layer in enumerate(lora.target_layers(model, model.get_config()["lora"]["target"])):
        layer.lora_kernel_b.assign(keras.random.normal(layer.lora_kernel_b.shape, seed=i))


@pytest.mark.parametrize("name", sorted(MODEL_CASES))
def test_enable_lora_on_every_model(name):
    model, x = _build(name)
    attention_layers = 6 if name.startswith("seq2seq") else 2
    reference = _outputs(model, x)
    model.enable_lora(2)
    # Only A and B of query and value train: 2 targets x 2 matrices per attention layer
    # (seq2seq: encoder self-attention, decoder self- and cross-attention).
    trainable = model.trainable_variables
    assert len(trainable) == attention_layers * 2 * 2
    assert all(v.path.endswith(("lora_kernel_a", "lora_kernel_b")) for v in trainable)
    assert {v.path.split("/")[-2] for v in trainable} == {"query", "value"}
    # B = 0: the same function, up to float32 rounding (the graph differs: a LoRA layer adds
    # x·A·B to x·W).
    np.testing.assert_allclose(_outputs(model, x), reference, rtol=1e-5, atol=1e-5)
    _perturb(model)
    adapted = _outputs(model, x)
    assert np.abs(adapted - reference).max() > 0.01 * np.abs(reference).max()
    model.merge_lora()
    np.testing.assert_allclose(_outputs(model, x), adapted, atol=1e-5)
    assert not lora.lora_enabled(model)
    assert not any(v.path.endswith(("lora_kernel_a", "lora_kernel_b")) for v in model.trainable_variables)
    assert "lora" not in model.get_config()


def test_lora_targets_and_rank():
    model, _ = _build("gpt")
    model.enable_lora(3, target=("key", "attention_output", "ffn_inner", "ffn_output"), alpha=6)
    layers = lora.target_layers(model, ("key", "attention_output", "ffn_inner", "ffn_output"))
    assert len(layers) == 8 and all(layer.lora_enabled and layer.lora_rank == 3 for layer in layers)
    assert layers[0].lora_alpha == 6.0
    assert len(model.trainable_variables) == 16


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(rank=0), "`rank` must be a positive int"),
        (dict(rank=2, target=("query", "attn")), "Unknown `target` 'attn'"),
        (dict(rank=2, target=()), "`target` must be a non-empty tuple"),
        (dict(rank=2, target=("ffn_gate",)), r"`target` \['ffn_gate'\] matches no layer"),
        (dict(rank=2, alpha=-1.0), "`alpha`"),
    ],
)
def test_bad_lora_arguments(kwargs, match):
    model, _ = _build("gpt")
    with pytest.raises(ValueError, match=match):
        model.enable_lora(**kwargs)
    assert not lora.lora_enabled(model) and len(model.trainable_variables) > 8


def test_lora_twice_or_merge_without_lora():
    model, _ = _build("gpt")
    with pytest.raises(ValueError, match="needs LoRA enabled first"):
        model.merge_lora()
    model.enable_lora(2)
    with pytest.raises(ValueError, match="already enabled"):
        model.enable_lora(2)
    with pytest.raises(TypeError, match="positive int"):
        tiny_gpt().enable_lora("2")


@pytest.fixture(scope="module")
def finetuned_gpt():
    """A tiny GPT, LoRA on query/value, fitted 20 steps on one batch."""
    model, ids = tiny_gpt(), GPT_IDS
    frozen = {v.path: keras.ops.convert_to_numpy(v) for v in model.weights}
    model.enable_lora(4)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=False,
    )
    history = model.fit(ids[:, :-1], ids[:, 1:], epochs=20, batch_size=4, verbose=0)
    return model, frozen, history.history["loss"]


def test_lora_finetune_lowers_the_loss(finetuned_gpt):
    model, frozen, losses = finetuned_gpt
    # From random weights the frozen tied embedding (std 0.02) bounds how far
    # query/value updates can move the logits: measured 4.174 -> 4.064 in 20 steps.
    assert losses[-1] < losses[0] - 0.05 and all(b < a for a, b in zip(losses, losses[1:])), losses
    # Every pre-existing weight (kernels, biases, norms, embeddings) is untouched.
    for v in model.weights:
        if v.path in frozen:
            np.testing.assert_array_equal(keras.ops.convert_to_numpy(v), frozen[v.path], err_msg=v.path)


def test_lora_keras_round_trip_keeps_a_and_b(finetuned_gpt, tmp_path):
    model, _, _ = finetuned_gpt
    path = os.path.join(tmp_path, "lora.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(_outputs(loaded, GPT_IDS), _outputs(model, GPT_IDS), atol=1e-5)
    assert [v.path for v in loaded.trainable_variables] == [v.path for v in model.trainable_variables]
    for a, b in zip(loaded.trainable_variables, model.trainable_variables):  # A and B, not zeros
        np.testing.assert_allclose(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b), atol=1e-6)
    for a, b in zip(
        lora.target_layers(loaded, ("query",)), lora.target_layers(model, ("query",))
    ):  # the frozen kernel W itself (not W + AB)
        a.lora_enabled = b.lora_enabled = False
        try:
            np.testing.assert_allclose(
                keras.ops.convert_to_numpy(a.kernel), keras.ops.convert_to_numpy(b.kernel), atol=1e-6
            )
        finally:
            a.lora_enabled = b.lora_enabled = True


def test_merged_model_exports_the_same_outputs(tmp_path):
    model, _ = _build("gpt")
    model.enable_lora(2, target=("query", "value", "ffn_output"))
    _perturb(model)
    expected = _outputs(model, GPT_IDS)
    model.merge_lora()
    export_dir = os.path.join(tmp_path, "merged")
    model.export(export_dir, format="tf_saved_model", verbose=False)
    served = keras.layers.TFSMLayer(export_dir, call_endpoint="serve")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(served(GPT_IDS)), expected, atol=1e-5)
    # The merged model saves and loads as a plain model (no LoRA in its config).
    path = os.path.join(tmp_path, "merged.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert not lora.lora_enabled(reloaded)
    np.testing.assert_allclose(_outputs(reloaded, GPT_IDS), expected, atol=1e-5)
