"""Diagnostics callbacks and attention-map extraction."""

import math
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from model_harness import images, tiny_bert_encoder, tiny_gpt, tiny_seq2seq, tiny_vit

from keras_tfm.analysis.inspection import attention_entropy, attention_maps, head_statistics
from keras_tfm.analysis.plotting import read_tensorboard_scalars
from keras_tfm.callbacks import AttentionEntropyMonitor, GradientNormMonitor, LossSpikeDetector

V, T = 64, 8


def _gpt(run_eagerly=True, **kwargs):
    # Tiny models train faster eagerly than traced; one test runs fit traced.
    model = tiny_gpt(seed=None, **kwargs)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=False,
        run_eagerly=run_eagerly,
    )
    return model


def _data(n=16, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(1, V, (n, T)).astype("int32")
    return x, np.roll(x, -1, axis=1)


# ----------------------------------------------------------------- inspection
def test_attention_maps_gpt_match_manual_run_and_do_not_change_model(tmp_path):
    model = _gpt()
    x, _ = _data(2)
    before = np.asarray(model(x))
    maps = attention_maps(model, x)
    assert list(maps) == ["decoder_block_0", "decoder_block_1"]
    h = model.get_layer("embedding")(x)
    for name in maps:
        h, scores = model.get_layer(name)(h, return_attention_scores=True)
        np.testing.assert_allclose(maps[name], np.asarray(scores["self_attention"]), atol=1e-6)
    assert maps["decoder_block_0"].shape == (2, 2, T, T)
    assert np.triu(maps["decoder_block_1"][0, 0], 1).max() == 0.0  # causal
    np.testing.assert_allclose(np.asarray(model(x)), before, atol=1e-6)
    model.save(tmp_path / "m.keras")  # the model is still serialisable
    keras.saving.load_model(tmp_path / "m.keras", compile=False)


def test_attention_maps_nested_sequential_and_errors():
    inner = tiny_gpt(seed=None)
    ids = keras.Input((None,), dtype="int32", name="ids")
    outer = keras.Model(ids, keras.layers.Activation("softmax", name="probs")(inner(ids)))
    x, _ = _data(2)
    nested, direct = attention_maps(outer, x), attention_maps(inner, x)
    assert list(nested) == list(direct)
    for name in direct:
        np.testing.assert_allclose(nested[name], direct[name], atol=1e-6)

    from keras_tfm.layers import TransformerBlock

    seq = keras.Sequential(
        [
            keras.Input((T,), dtype="int32"),
            keras.layers.Embedding(V, 16),
            TransformerBlock(16, 2, 32, causal=True, name="b0"),
            TransformerBlock(16, 4, 32, name="b1"),
        ]
    )
    maps = attention_maps(seq, x)
    assert maps["b0"].shape == (2, 2, T, T) and maps["b1"].shape == (2, 4, T, T)

    plain = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match="no TransformerBlock"):
        attention_maps(plain, np.zeros((1, 3)))


def test_attention_maps_bert_padding_and_seq2seq_cross():
    encoder = tiny_bert_encoder(seed=None)
    x, _ = _data(2)
    mask = np.ones_like(x)
    mask[1, 5:] = 0
    inputs = {"token_ids": x, "segment_ids": np.zeros_like(x), "padding_mask": mask}
    maps = attention_maps(encoder, inputs)
    assert list(maps) == ["encoder_block_0", "encoder_block_1"]
    assert maps["encoder_block_1"][1, :, :, 5:].max() == 0.0  # padded keys get no weight
    assert maps["encoder_block_1"][0, :, :, 5:].min() > 0.0  # full mask for a non-causal encoder
    ent = attention_entropy(maps["encoder_block_0"], key_mask=mask, normalize=True)
    assert ent.shape == (2,) and np.all((ent > 0.5) & (ent <= 1.0 + 1e-9))

    model = tiny_seq2seq(seed=None, num_layers=1)
    src = _data(2)[0] % 31 + 1
    inputs = {"encoder_token_ids": src, "decoder_token_ids": src[:, :5]}
    maps = attention_maps(model, inputs, include_cross=True)
    assert maps["encoder_block_0"].shape[-2:] == (T, T)
    assert maps["decoder_block_0"].shape[-2:] == (5, 5)
    assert maps["decoder_block_0/cross_attention"].shape[-2:] == (5, T)


def test_attention_maps_vit():
    maps = attention_maps(tiny_vit(), images(4))
    assert list(maps) == ["encoder_block_0", "encoder_block_1"]
    assert maps["encoder_block_0"].shape == (4, 2, 5, 5)  # [CLS] + 2×2 patches, not causal
    np.testing.assert_allclose(maps["encoder_block_1"].sum(-1), 1.0, atol=1e-5)
    assert maps["encoder_block_1"][0, 0, 0, 1:].min() > 0.0


def test_entropy_and_head_statistics_on_known_patterns():
    t = 6
    prev = np.zeros((1, 1, t, t))
    prev[0, 0, 0, 0] = 1
    for i in range(1, t):
        prev[0, 0, i, i - 1] = 1
    uniform = np.tril(np.ones((t, t)))
    uniform = (uniform / uniform.sum(-1, keepdims=True))[None, None]
    w = np.concatenate([prev, uniform], axis=1)  # heads: previous-token, uniform causal
    ent = attention_entropy(w, causal=True)
    assert ent[0] == 0.0
    expected = np.mean([math.log(n) for n in range(2, t + 1)])
    assert ent[1] == pytest.approx(expected)
    np.testing.assert_allclose(attention_entropy(w, causal=True, normalize=True), [0.0, 1.0], atol=1e-12)
    stats = head_statistics(w, causal=True)
    assert stats["previous_token"][0] == 1.0 and stats["mean_distance"][0] == pytest.approx((t - 1) / t)
    assert stats["first_token"][1] == pytest.approx(np.mean([1 / n for n in range(2, t + 1)]))


# ------------------------------------------------------------------ callbacks
def test_gradient_norm_monitor_matches_manual_gradients_and_lands_in_history(tmp_path):
    model = _gpt(run_eagerly=False)
    x, y = _data()
    monitor = GradientNormMonitor((x[:4], y[:4]), every_n_steps=2, log_dir=tmp_path / "tb")
    first = monitor  # measure manually before training
    monitor.set_model(model)
    values = first.measure()
    with tf.GradientTape() as tape:
        loss = model.compute_loss(x=x[:4], y=y[:4], y_pred=model(x[:4], training=False))
    grads = tape.gradient(loss, model.trainable_variables)
    total = math.sqrt(sum(float(tf.reduce_sum(tf.square(tf.convert_to_tensor(g)))) for g in grads))
    assert values["grad_norm"] == pytest.approx(total, rel=1e-4)
    block = model.get_layer("decoder_block_1")
    block_ids = {id(v) for v in block.trainable_variables}
    block_norm = math.sqrt(
        sum(
            float(tf.reduce_sum(tf.square(tf.convert_to_tensor(g))))
            for g, v in zip(grads, model.trainable_variables)
            if id(v) in block_ids
        )
    )
    assert values["grad_norm/decoder_block_1"] == pytest.approx(block_norm, rel=1e-4)
    per_layer = [v for k, v in values.items() if k.startswith("grad_norm/")]
    assert math.sqrt(sum(v * v for v in per_layer)) == pytest.approx(values["grad_norm"], rel=1e-4)

    history = model.fit(x, y, batch_size=4, epochs=2, verbose=0, callbacks=[monitor])
    assert {"grad_norm", "grad_norm/decoder_block_0", "grad_norm/embedding", "loss"} <= set(history.history)
    assert len(history.history["grad_norm"]) == 2
    assert [s for s, _ in monitor.records] == [0, 2, 4, 6, 8]
    scalars = read_tensorboard_scalars(tmp_path / "tb")
    assert list(scalars["grad_norm"][0]) == [0, 2, 4, 6, 8]


def test_gradient_norm_monitor_does_not_change_training():
    x, y = _data()
    losses = []
    for callbacks in ([], [GradientNormMonitor((x[:4], y[:4]), every_n_steps=1)]):
        keras.utils.set_random_seed(1)
        model = _gpt()
        losses.append(
            model.fit(x, y, batch_size=4, epochs=1, verbose=0, shuffle=False, callbacks=callbacks).history[
                "loss"
            ]
        )
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-6)


def test_loss_spike_detector_unit_and_in_fit(tmp_path):
    detector = LossSpikeDetector(factor=2.0, window=5, warmup=3, warn=False)
    flags = [detector.update(v, step=i) for i, v in enumerate([1.0, 1.1, 0.9, 1.0, 5.0, 1.0, float("nan")])]
    assert flags == [False, False, False, False, True, False, True]
    assert detector.spikes[0][:2] == (4, 5.0)
    ema = LossSpikeDetector(factor=1.5, mode="ema", warmup=2, warn=False)
    assert [ema.update(v) for v in (1.0, 1.0, 1.4, 2.0)] == [False, False, False, True]
    for bad in (dict(factor=1.0), dict(mode="mean"), dict(window=0), dict(ema_decay=1.0), dict(warmup=0)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            LossSpikeDetector(**bad)

    # In fit: batch losses are recovered from the running mean; a huge spike
    # injected through sample weights is flagged and stops training.
    model = _gpt()
    x, y = _data(32)
    weights = np.ones((32, T), "float32")
    weights[28:] = 1000.0  # the 8th batch of 4 has a 1000x loss
    detector = LossSpikeDetector(factor=3.0, warmup=3, stop_training=True, log_dir=tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(
            x,
            y,
            sample_weight=weights,
            batch_size=4,
            epochs=3,
            verbose=0,
            shuffle=False,
            callbacks=[detector],
        )
    assert [s for s, _, _ in detector.spikes] == [8]
    assert any("Loss spike" in str(w.message) for w in caught)
    assert history.history["loss_spike"] == [1.0]  # stopped after the first epoch
    assert history.history["loss_spikes"] == [1.0]
    assert detector.spikes[0][1] > 100 * detector.spikes[0][2]
    assert "loss_spike" in read_tensorboard_scalars(tmp_path)


def test_attention_entropy_monitor_logs_per_head_and_flags():
    model = _gpt()
    x, y = _data()
    monitor = AttentionEntropyMonitor(x[:4], collapse_threshold=0.1, uniform_threshold=0.9)
    history = model.fit(x, y, batch_size=8, epochs=1, verbose=0, callbacks=[monitor])
    keys = set(history.history)
    for layer in ("decoder_block_0", "decoder_block_1"):
        for head in range(2):
            assert f"attention_entropy/{layer}/head_{head}" in keys
        assert f"attention_entropy/{layer}/mean" in keys
    # a freshly initialised model (N(0, 0.02) weights) attends almost uniformly
    assert history.history["attention_uniform_heads"] == [4.0]
    assert len(monitor.flags) == 4 and all(f[3] == "uniform" for f in monitor.flags)
    mean = history.history["attention_entropy/mean"][0]
    assert 0 < mean < math.log(T)

    # every_n_steps + a padded dict probe
    model = _gpt(with_padding_mask=True)
    mask = np.ones((4, T), "int32")
    mask[:, 6:] = 0
    monitor = AttentionEntropyMonitor({"token_ids": x[:4], "padding_mask": mask}, every_n_steps=1)
    model.fit(
        {"token_ids": x[:8], "padding_mask": np.ones((8, T), "int32")},
        y[:8],
        batch_size=4,
        verbose=0,
        callbacks=[monitor],
    )
    assert [s for s, _ in monitor.records] == [1, 2]
    with pytest.raises(ValueError, match="collapse_threshold"):
        AttentionEntropyMonitor(x, collapse_threshold=2.0)
