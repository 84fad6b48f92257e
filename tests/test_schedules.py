"""Tests for keras_tfm.schedules and keras_tfm.optimizers."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_tfm.optimizers import DEFAULT_NO_DECAY_NAMES, AdamW, adamw, vaswani_adam
from keras_tfm.schedules import TransformerSchedule, WarmupStableDecay, nanogpt_schedule


def reference_lr(step, d_model, warmup, scale=1.0):
    s = step + 1
    return scale * d_model**-0.5 * min(s**-0.5, s * warmup**-1.5)


# --------------------------------------------------------------------------- TransformerSchedule


@pytest.mark.parametrize("step", [0, 1, 99, 100, 1000, 40000])
def test_transformer_schedule_matches_formula(step):
    schedule = TransformerSchedule(d_model=512, warmup_steps=4000, scale=2.0)
    got = float(schedule(step))
    np.testing.assert_allclose(got, reference_lr(step, 512, 4000, 2.0), rtol=1e-6)


def test_transformer_schedule_first_step_is_not_zero_and_peak():
    warmup = 100
    schedule = TransformerSchedule(d_model=64, warmup_steps=warmup)
    assert float(schedule(0)) > 0.0
    np.testing.assert_allclose(float(schedule(0)), 64**-0.5 * warmup**-1.5, rtol=1e-6)
    steps = np.arange(0, 10 * warmup)
    values = np.array(schedule(steps))
    assert values.dtype == np.float32
    assert int(np.argmax(values)) == warmup - 1
    np.testing.assert_allclose(values.max(), schedule.peak_learning_rate(), rtol=1e-6)
    np.testing.assert_allclose(values.max(), 64**-0.5 * warmup**-0.5, rtol=1e-6)
    # Linear warmup, then decay as 1/sqrt(s).
    assert np.all(np.diff(values[:warmup]) > 0)
    assert np.all(np.diff(values[warmup:]) < 0)
    np.testing.assert_allclose(float(schedule(10 * warmup)), 64**-0.5 * (10 * warmup + 1) ** -0.5, rtol=1e-6)


def test_transformer_schedule_config_roundtrip():
    schedule = TransformerSchedule(d_model=256, warmup_steps=123, scale=0.5)
    config = schedule.get_config()
    assert config == {"d_model": 256, "warmup_steps": 123, "scale": 0.5}
    clone = TransformerSchedule.from_config(config)
    assert clone.get_config() == config
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert isinstance(restored, TransformerSchedule)
    np.testing.assert_allclose(float(restored(500)), float(schedule(500)))


def test_transformer_schedule_in_tf_function_with_tensor_step():
    schedule = TransformerSchedule(d_model=128, warmup_steps=50)

    @tf.function(jit_compile=True)
    def lr_at(step):
        return schedule(step)

    for step in (0, 49, 500):
        for dtype in (tf.int64, tf.int32, tf.float32):
            np.testing.assert_allclose(
                float(lr_at(tf.constant(step, dtype))), reference_lr(step, 128, 50), rtol=1e-6
            )
    variable = tf.Variable(7, dtype=tf.int64)
    np.testing.assert_allclose(float(schedule(variable)), reference_lr(7, 128, 50), rtol=1e-6)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"d_model": 0}, ValueError),
        ({"d_model": -4}, ValueError),
        ({"d_model": 64.0}, TypeError),
        ({"d_model": 64, "warmup_steps": 0}, ValueError),
        ({"d_model": 64, "warmup_steps": 1.5}, TypeError),
        ({"d_model": 64, "scale": 0.0}, ValueError),
        ({"d_model": 64, "scale": -1.0}, ValueError),
        ({"d_model": 64, "scale": "1"}, TypeError),
    ],
)
def test_transformer_schedule_validation(kwargs, error):
    name = [k for k in kwargs][-1]
    with pytest.raises(error, match=name):
        TransformerSchedule(**kwargs)


# --------------------------------------------------------------------------- nanogpt_schedule


def nanogpt_reference(it, lr, warmup, decay, min_lr):
    if it < warmup:
        return lr * it / warmup
    if it > decay:
        return min_lr
    ratio = (it - warmup) / (decay - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def test_nanogpt_schedule_matches_reference():
    schedule = nanogpt_schedule(6e-4, decay_steps=1000, warmup_steps=100, min_ratio=0.1)
    assert isinstance(schedule, keras.optimizers.schedules.CosineDecay)
    for it in (0, 1, 50, 99, 100, 101, 550, 999, 1000, 1001, 5000):
        np.testing.assert_allclose(
            float(schedule(it)), nanogpt_reference(it, 6e-4, 100, 1000, 6e-5), rtol=1e-5, atol=1e-12
        )
    no_warmup = nanogpt_schedule(1e-3, decay_steps=200, min_ratio=0.0)
    np.testing.assert_allclose(float(no_warmup(0)), 1e-3, rtol=1e-6)
    np.testing.assert_allclose(float(no_warmup(100)), 0.5e-3, rtol=1e-5)
    np.testing.assert_allclose(float(no_warmup(10_000)), 0.0, atol=1e-12)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"learning_rate": 0.0, "decay_steps": 10}, "learning_rate"),
        ({"learning_rate": 1e-3, "decay_steps": 0}, "decay_steps"),
        ({"learning_rate": 1e-3, "decay_steps": 10, "warmup_steps": 10}, "decay_steps"),
        ({"learning_rate": 1e-3, "decay_steps": 10, "warmup_steps": -1}, "warmup_steps"),
        ({"learning_rate": 1e-3, "decay_steps": 10, "min_ratio": 1.5}, "min_ratio"),
    ],
)
def test_nanogpt_schedule_validation(kwargs, name):
    with pytest.raises(ValueError, match=name):
        nanogpt_schedule(**kwargs)


# --------------------------------------------------------------------------- WarmupStableDecay


def wsd_reference(it, lr, total, warmup, decay, min_lr):
    if it < warmup:
        return lr * it / warmup
    start = total - decay
    if it < start:
        return lr
    if it >= total:
        return min_lr
    return lr + (min_lr - lr) * (it - start) / decay


def test_wsd_schedule_matches_reference():
    schedule = WarmupStableDecay(1e-3, total_steps=2000, warmup_steps=100, decay_fraction=0.2, min_ratio=0.1)
    assert schedule.decay_steps == 400
    for it in (0, 1, 50, 99, 100, 101, 1000, 1599, 1600, 1601, 1800, 1999, 2000, 2001, 10_000):
        np.testing.assert_allclose(
            float(schedule(it)), wsd_reference(it, 1e-3, 2000, 100, 400, 1e-4), rtol=1e-5, atol=1e-12
        )
    values = np.asarray(schedule(np.arange(2100)))
    assert values.dtype == np.float32
    assert np.all(np.diff(values[:100]) > 0) and np.all(values[100:1600] == np.float32(1e-3))
    assert np.all(np.diff(values[1600:2000]) < 0) and np.all(values[2000:] == np.float32(1e-4))
    # Explicit decay length, no warmup, decay to zero.
    plain = WarmupStableDecay(2.0, total_steps=10, decay_steps=4, min_ratio=0.0)
    np.testing.assert_allclose(
        np.asarray(plain(np.arange(12))), [2, 2, 2, 2, 2, 2, 2, 1.5, 1, 0.5, 0, 0], atol=1e-6
    )
    # A decay fraction reaching into the warmup is shortened to start where the warmup ends.
    assert WarmupStableDecay(1.0, total_steps=10, warmup_steps=4, decay_fraction=1.0).decay_steps == 6


def test_wsd_schedule_config_roundtrip_and_xla():
    schedule = WarmupStableDecay(3e-4, total_steps=500, warmup_steps=20, decay_steps=100, min_ratio=0.0)
    restored = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert isinstance(restored, WarmupStableDecay)
    assert restored.get_config() == schedule.get_config()
    lr_at = tf.function(lambda step: restored(step), jit_compile=True)
    for step in (0, 10, 300, 450, 600):
        np.testing.assert_allclose(
            float(lr_at(tf.constant(step, tf.int64))),
            wsd_reference(step, 3e-4, 500, 20, 100, 0.0),
            rtol=1e-5,
            atol=1e-12,
        )


@pytest.mark.parametrize(
    "kwargs, error, name",
    [
        ({"learning_rate": 0.0, "total_steps": 10}, ValueError, "learning_rate"),
        ({"learning_rate": 1e-3, "total_steps": 0}, ValueError, "total_steps"),
        ({"learning_rate": 1e-3, "total_steps": 10, "warmup_steps": -1}, ValueError, "warmup_steps"),
        ({"learning_rate": 1e-3, "total_steps": 10, "warmup_steps": 2.0}, TypeError, "warmup_steps"),
        ({"learning_rate": 1e-3, "total_steps": 10, "decay_steps": 0}, ValueError, "decay_steps"),
        (
            {"learning_rate": 1e-3, "total_steps": 10, "warmup_steps": 5, "decay_steps": 6},
            ValueError,
            "decay_steps",
        ),
        ({"learning_rate": 1e-3, "total_steps": 10, "decay_fraction": 0.0}, ValueError, "decay_fraction"),
        ({"learning_rate": 1e-3, "total_steps": 10, "min_ratio": 1.5}, ValueError, "min_ratio"),
    ],
)
def test_wsd_schedule_validation(kwargs, error, name):
    with pytest.raises(error, match=name):
        WarmupStableDecay(**kwargs)


# --------------------------------------------------------------------------- optimizers


def test_vaswani_adam_hyperparameters_and_passthrough():
    opt = vaswani_adam(64, warmup_steps=10, scale=2.0, clipnorm=1.0, gradient_accumulation_steps=2)
    assert isinstance(opt, keras.optimizers.Adam)
    assert isinstance(opt._learning_rate, TransformerSchedule)
    assert opt._learning_rate.get_config() == {"d_model": 64, "warmup_steps": 10, "scale": 2.0}
    assert (opt.beta_1, opt.beta_2, opt.epsilon) == (0.9, 0.98, 1e-9)
    assert opt.clipnorm == 1.0
    assert opt.gradient_accumulation_steps == 2
    with pytest.raises(TypeError, match="learning_rate"):
        vaswani_adam(64, learning_rate=1e-3)
    with pytest.raises(ValueError, match="d_model"):
        vaswani_adam(0)


def _tiny_model():
    inputs = keras.Input((4,))
    outputs = keras.layers.Dense(3, name="dense")(inputs)
    return keras.Model(inputs, outputs)


def test_vaswani_adam_model_save_load_keeps_schedule_and_state(tmp_path):
    keras.utils.set_random_seed(0)
    model = _tiny_model()
    model.compile(optimizer=vaswani_adam(16, warmup_steps=5), loss="mse")
    x = np.random.RandomState(0).normal(size=(8, 4)).astype("float32")
    y = np.random.RandomState(1).normal(size=(8, 3)).astype("float32")
    model.fit(x, y, batch_size=4, epochs=2, verbose=0)
    assert int(model.optimizer.iterations) == 4

    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)

    opt, new = model.optimizer, loaded.optimizer
    assert isinstance(new, keras.optimizers.Adam)
    assert isinstance(new._learning_rate, TransformerSchedule)
    assert new._learning_rate.get_config() == opt._learning_rate.get_config()
    assert (new.beta_2, new.epsilon) == (0.98, 1e-9)
    assert int(new.iterations) == 4
    old_vars = {v.path: keras.ops.convert_to_numpy(v) for v in opt.variables}
    new_vars = {v.path: keras.ops.convert_to_numpy(v) for v in new.variables}
    assert set(old_vars) == set(new_vars)
    moments = [p for p in old_vars if "momentum" in p or "velocity" in p]
    assert len(moments) == 4  # m and v for kernel and bias
    for p in old_vars:
        np.testing.assert_array_equal(old_vars[p], new_vars[p])
    np.testing.assert_allclose(float(new.learning_rate), reference_lr(4, 16, 5), rtol=1e-6)
    # Training continues identically from the restored state.
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    loaded.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
    for a, b in zip(model.weights, loaded.weights):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b), rtol=1e-6, atol=1e-7
        )


def test_adamw_excludes_bias_norm_and_embeddings_from_decay():
    inputs = keras.Input((3,), dtype="int32")
    h = keras.layers.Embedding(10, 4, name="emb")(inputs)
    h = keras.layers.LayerNormalization(name="ln")(h)
    outputs = keras.layers.Dense(2, name="dense")(h)
    model = keras.Model(inputs, outputs)
    opt = adamw(0.1, weight_decay=0.5)
    assert type(opt) is AdamW  # keras_tfm's AdamW (a keras.optimizers.AdamW with no-decay names)
    assert opt.no_decay_names == list(DEFAULT_NO_DECAY_NAMES)
    assert (opt.beta_1, opt.beta_2) == (0.9, 0.99)
    for v in model.trainable_variables:
        v.assign(tf.ones_like(v))
    # Zero gradients: Adam's step is 0, only the decoupled decay moves weights.
    opt.apply_gradients([(tf.zeros_like(v), v) for v in model.trainable_variables])
    after = {v.path: keras.ops.convert_to_numpy(v) for v in model.trainable_variables}
    np.testing.assert_allclose(after["dense/kernel"], 1.0 - 0.1 * 0.5, rtol=1e-6)
    for path in ("dense/bias", "ln/gamma", "ln/beta", "emb/embeddings"):
        np.testing.assert_array_equal(after[path], 1.0)


def test_adamw_config_roundtrip_keeps_exclusions():
    opt = adamw(nanogpt_schedule(1e-3, 100, 10), weight_decay=0.2, no_decay_names=["bias"], clipnorm=1.0)
    config = keras.optimizers.serialize(opt)
    restored = keras.optimizers.deserialize(config)
    assert isinstance(restored, AdamW)
    assert restored.no_decay_names == ["bias"]
    assert restored.weight_decay == 0.2 and restored.clipnorm == 1.0
    assert isinstance(restored._learning_rate, keras.optimizers.schedules.CosineDecay)
    kernel = keras.Variable(np.ones((2, 2), "float32"), name="kernel")
    bias = keras.Variable(np.ones((2,), "float32"), name="bias")
    assert restored._use_weight_decay(kernel) and not restored._use_weight_decay(bias)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"learning_rate": -1.0}, "learning_rate"),
        ({"learning_rate": "x"}, "learning_rate"),
        ({"learning_rate": 1e-3, "weight_decay": -0.1}, "weight_decay"),
        ({"learning_rate": 1e-3, "beta_2": 1.0}, "beta_2"),
        ({"learning_rate": 1e-3, "epsilon": 0.0}, "epsilon"),
        ({"learning_rate": 1e-3, "no_decay_names": "bias"}, "no_decay_names"),
    ],
)
def test_adamw_validation(kwargs, name):
    with pytest.raises((ValueError, TypeError), match=name):
        adamw(**kwargs)
