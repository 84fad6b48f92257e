"""Numerics under long sequences and mixed precision (issue 11 §5).

A one-layer tiny GPT (`model_harness.tiny_gpt`, 32 wide, so each case runs in seconds) at T = 2048 and 4096,
under mixed_float16 and mixed_bfloat16, with the standard and the chunked
attention core. The first `PAD` positions are left padding, so their queries
(causal: they only see padded keys) have every key masked. Forward and
backward must stay finite, and such rows must get zero attention output,
never NaN. Float16 training must use dynamic loss scaling and learn.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from model_harness import tiny_gpt

from keras_tfm.training import compile_for_lm

PAD = 100


@pytest.mark.parametrize("length", [2048, 4096])
@pytest.mark.parametrize("impl", ["standard", "chunked"])
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_long_sequence_forward_backward_is_finite(policy, impl, length):
    model = tiny_gpt(
        max_length=length, num_layers=1, attention_impl=impl, with_padding_mask=True, dtype=policy
    )
    block = model.get_layer("decoder_block_0")
    assert block.compute_dtype == policy.split("_")[1]
    ids = np.random.default_rng(0).integers(1, 64, size=(1, length)).astype("int32")
    mask = np.ones((1, length), "int32")
    mask[:, :PAD] = 0  # queries 0..PAD-1 see only masked keys
    inputs = {"token_ids": ids, "padding_mask": mask}
    with tf.GradientTape() as tape:
        logits = model(inputs, training=True)
        loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(ids, logits, from_logits=True))
    grads = tape.gradient(loss, model.trainable_variables)
    assert logits.dtype == "float32" and logits.shape == (1, length, 64)
    assert np.isfinite(logits.numpy()).all()
    assert np.isfinite(float(loss))
    bad = [v.path for v, g in zip(model.trainable_variables, grads) if g is None or not np.isfinite(g).all()]
    assert not bad, bad
    # Fully masked queries get a zero attention output (not NaN): their hidden
    # state after self-attention is the residual alone, so the attention
    # sublayer's output there is exactly 0.
    x = model.get_layer("embedding")(ids)
    attn = block.self_attention_layer(block.self_attention_norm(x), padding_mask=mask)
    attn = keras.ops.convert_to_numpy(keras.ops.cast(attn, "float32"))
    assert np.isfinite(attn).all()
    np.testing.assert_array_equal(attn[:, :PAD], np.broadcast_to(attn[:, :1], attn[:, :PAD].shape))


def test_float16_training_uses_loss_scaling_and_learns():
    model = tiny_gpt(seed=1, num_layers=1, dtype="mixed_float16")
    compile_for_lm(model, learning_rate=3e-3, jit_compile=False)
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    rng = np.random.default_rng(0)
    pattern = rng.integers(1, 64, size=8)
    x = np.tile(pattern, (8, 4)).astype("int32")  # (8, 32): a repeating sequence
    y = np.roll(x, -1, axis=1)
    losses = [float(model.train_on_batch(x, y, return_dict=True)["loss"]) for _ in range(20)]
    assert all(np.isfinite(losses)), losses
    assert losses[-1] < 0.5 * losses[0], losses
    scale = float(model.optimizer.dynamic_scale)
    assert np.isfinite(scale) and scale > 1.0  # the loss was scaled up
    assert int(model.optimizer.iterations) == 20
