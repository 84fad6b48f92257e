"""Tests for keras_tfm.losses and keras_tfm.metrics."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_tfm.losses import MaskedSparseCategoricalCrossentropy
from keras_tfm.metrics import MaskedAccuracy, perplexity

BATCH, SEQ, VOCAB = 3, 5, 7


def np_log_softmax(x):
    x = x.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def np_token_losses(labels, logits, smoothing=0.0):
    logp = np_log_softmax(logits)
    nll = -np.take_along_axis(logp, labels[..., None], axis=-1)[..., 0]
    return (1 - smoothing) * nll - smoothing * logp.mean(-1)


@pytest.fixture
def data():
    rng = np.random.RandomState(0)
    logits = rng.normal(size=(BATCH, SEQ, VOCAB)).astype("float32") * 3
    labels = rng.randint(1, VOCAB, size=(BATCH, SEQ)).astype("int32")
    labels[0, 3:] = 0  # padding
    labels[2, 1:] = 0
    return labels, logits


def to_float(x):
    return float(keras.ops.convert_to_numpy(x))


# --------------------------------------------------------------------------- loss


def test_equals_keras_sparse_cce_without_padding_or_smoothing(data):
    _, logits = data
    labels = np.random.RandomState(1).randint(0, VOCAB, size=(BATCH, SEQ))
    ours = MaskedSparseCategoricalCrossentropy(ignore_index=None)(labels, logits)
    ref = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, logits)
    np.testing.assert_allclose(to_float(ours), to_float(ref), rtol=1e-6)
    # ignore_index that never occurs gives the same value.
    ours = MaskedSparseCategoricalCrossentropy(ignore_index=-100)(labels, logits)
    np.testing.assert_allclose(to_float(ours), to_float(ref), rtol=1e-6)
    # Probabilities instead of logits.
    probs = keras.ops.softmax(logits)
    ours = MaskedSparseCategoricalCrossentropy(from_logits=False, ignore_index=None)(labels, probs)
    ref = keras.losses.SparseCategoricalCrossentropy(from_logits=False)(labels, probs)
    np.testing.assert_allclose(to_float(ours), to_float(ref), rtol=1e-5)


def test_ignores_padding_and_averages_over_real_tokens(data):
    labels, logits = data
    valid = labels != 0
    expected = np_token_losses(labels, logits)[valid].mean()
    loss = MaskedSparseCategoricalCrossentropy()(labels, logits)
    assert loss.dtype == "float32"
    np.testing.assert_allclose(to_float(loss), expected, rtol=1e-5)
    # Not the mean over all positions.
    all_positions = (np_token_losses(labels, logits) * valid).mean()
    assert abs(to_float(loss) - all_positions) > 1e-2
    # Changing logits at padded positions does not change the loss.
    noisy = logits.copy()
    noisy[~valid] += 100.0
    np.testing.assert_allclose(
        to_float(MaskedSparseCategoricalCrossentropy()(labels, noisy)), expected, rtol=1e-5
    )
    # Labels of shape [batch, seq, 1] work too.
    np.testing.assert_allclose(
        to_float(MaskedSparseCategoricalCrossentropy()(labels[..., None], logits)), expected, rtol=1e-5
    )


def test_out_of_range_ignore_index(data):
    labels, logits = data
    hf_labels = np.where(labels == 0, -100, labels)
    loss = MaskedSparseCategoricalCrossentropy(ignore_index=-100)(hf_labels, logits)
    np.testing.assert_allclose(to_float(loss), np_token_losses(labels, logits)[labels != 0].mean(), rtol=1e-5)


def test_reductions(data):
    labels, logits = data
    valid = labels != 0
    per_token = np_token_losses(labels, logits) * valid
    none = MaskedSparseCategoricalCrossentropy(reduction=None)(labels, logits)
    assert tuple(none.shape) == (BATCH, SEQ)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(none), per_token, rtol=1e-5, atol=1e-6)
    total = MaskedSparseCategoricalCrossentropy(reduction="sum")(labels, logits)
    np.testing.assert_allclose(to_float(total), per_token.sum(), rtol=1e-5)
    for reduction in ("mean", "mean_with_sample_weight"):
        value = MaskedSparseCategoricalCrossentropy(reduction=reduction)(labels, logits)
        np.testing.assert_allclose(to_float(value), per_token.sum() / valid.sum(), rtol=1e-5)
    # Everything ignored: 0, not NaN.
    zero = MaskedSparseCategoricalCrossentropy()(np.zeros_like(labels), logits)
    assert to_float(zero) == 0.0


def test_label_smoothing_equals_keras_categorical_cce(data):
    _, logits = data
    labels = np.random.RandomState(2).randint(0, VOCAB, size=(BATCH, SEQ))
    onehot = np.eye(VOCAB, dtype="float32")[labels]
    for eps in (0.1, 0.3):
        ours = MaskedSparseCategoricalCrossentropy(label_smoothing=eps, ignore_index=None)(labels, logits)
        ref = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=eps)(onehot, logits)
        np.testing.assert_allclose(to_float(ours), to_float(ref), rtol=1e-5)
        np.testing.assert_allclose(to_float(ours), np_token_losses(labels, logits, eps).mean(), rtol=1e-5)


def test_label_smoothing_with_padding(data):
    labels, logits = data
    ours = MaskedSparseCategoricalCrossentropy(label_smoothing=0.1)(labels, logits)
    expected = np_token_losses(labels, logits, 0.1)[labels != 0].mean()
    np.testing.assert_allclose(to_float(ours), expected, rtol=1e-5)


def test_sample_weight_gives_weighted_token_mean(data):
    labels, logits = data
    valid = labels != 0
    per_token = np_token_losses(labels, logits)
    loss_fn = MaskedSparseCategoricalCrossentropy()
    # MLM: weights 1 on "masked" positions only -> mean over those positions.
    mlm = np.zeros((BATCH, SEQ), "float32")
    mlm[0, 1] = mlm[1, 0] = mlm[1, 4] = 1.0
    np.testing.assert_allclose(
        to_float(loss_fn(labels, logits, sample_weight=mlm)), per_token[mlm > 0].mean(), rtol=1e-5
    )
    # MLM with ignore_index=None (labels at unmasked positions arbitrary).
    np.testing.assert_allclose(
        to_float(MaskedSparseCategoricalCrossentropy(ignore_index=None)(labels, logits, sample_weight=mlm)),
        per_token[mlm > 0].mean(),
        rtol=1e-5,
    )
    # General per-token weights, combined with the padding mask; [b, s, 1] works.
    w = np.random.RandomState(3).uniform(0.5, 2.0, size=(BATCH, SEQ)).astype("float32")
    expected = (per_token * w * valid).sum() / (w * valid).sum()
    np.testing.assert_allclose(to_float(loss_fn(labels, logits, sample_weight=w)), expected, rtol=1e-5)
    np.testing.assert_allclose(
        to_float(loss_fn(labels, logits, sample_weight=w[..., None])), expected, rtol=1e-5
    )
    # Per-sequence weights [batch].
    ws = np.array([1.0, 2.0, 0.5], "float32")
    expected = (per_token * ws[:, None] * valid).sum() / (ws[:, None] * valid).sum()
    np.testing.assert_allclose(to_float(loss_fn(labels, logits, sample_weight=ws)), expected, rtol=1e-5)
    # Uniform weights do not change the mean.
    np.testing.assert_allclose(
        to_float(loss_fn(labels, logits, sample_weight=np.full((BATCH, SEQ), 3.0, "float32"))),
        per_token[valid].mean(),
        rtol=1e-5,
    )


def test_float16_logits_are_finite_and_close(data):
    labels, logits = data
    big = logits * 10  # large logits overflow exp() in float16 if not upcast
    for smoothing in (0.0, 0.1):
        loss_fn = MaskedSparseCategoricalCrossentropy(label_smoothing=smoothing)
        l32 = to_float(loss_fn(labels, big))
        l16 = loss_fn(labels, tf.constant(big, tf.float16))
        assert l16.dtype == "float32"
        assert math.isfinite(to_float(l16))
        np.testing.assert_allclose(to_float(l16), l32, rtol=2e-3)
        l16b = loss_fn(labels, tf.constant(big, tf.bfloat16))
        np.testing.assert_allclose(to_float(l16b), l32, rtol=2e-2)


def test_keras_mask_on_predictions_is_honoured(data):
    labels, logits = data
    mask = np.ones((BATCH, SEQ), bool)
    mask[1, 3:] = False
    y_pred = tf.constant(logits)
    y_pred._keras_mask = tf.constant(mask)
    keep = (labels != 0) & mask
    expected = np_token_losses(labels, logits)[keep].mean()
    np.testing.assert_allclose(
        to_float(MaskedSparseCategoricalCrossentropy()(labels, y_pred)), expected, rtol=1e-5
    )


def test_config_roundtrip_and_validation():
    loss = MaskedSparseCategoricalCrossentropy(
        label_smoothing=0.1, ignore_index=-100, reduction="sum", name="x"
    )
    config = loss.get_config()
    assert config == {
        "name": "x",
        "reduction": "sum",
        "from_logits": True,
        "label_smoothing": 0.1,
        "ignore_index": -100,
    }
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert isinstance(restored, MaskedSparseCategoricalCrossentropy)
    assert restored.get_config() == config
    with pytest.raises(ValueError, match="label_smoothing"):
        MaskedSparseCategoricalCrossentropy(label_smoothing=1.0)
    with pytest.raises(TypeError, match="ignore_index"):
        MaskedSparseCategoricalCrossentropy(ignore_index=0.5)
    with pytest.raises(TypeError, match="from_logits"):
        MaskedSparseCategoricalCrossentropy(from_logits="yes")
    with pytest.raises(ValueError, match="reduction"):
        MaskedSparseCategoricalCrossentropy(reduction="avg")


def test_trains_in_compiled_model_with_sample_weight_and_accuracy(tmp_path):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((SEQ,), dtype="int32")
    h = keras.layers.Embedding(VOCAB, 8)(inputs)
    outputs = keras.layers.Dense(VOCAB)(h)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(0.05),
        loss=MaskedSparseCategoricalCrossentropy(label_smoothing=0.05),
        metrics=[MaskedAccuracy()],
    )
    rng = np.random.RandomState(0)
    x = rng.randint(1, VOCAB, size=(32, SEQ)).astype("int32")
    x[:, -1] = 0
    y = x.copy()  # learn the identity; the padded last column is ignored
    sw = np.ones((32, SEQ), "float32")
    history = model.fit(x, y, sample_weight=sw, batch_size=8, epochs=8, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert history.history["masked_accuracy"][-1] > 0.9
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded.loss, MaskedSparseCategoricalCrossentropy)
    assert loaded.loss.label_smoothing == 0.05


# --------------------------------------------------------------------------- metrics


def test_masked_accuracy_by_hand():
    logits = np.zeros((2, 4, 5), "float32")
    preds = np.array([[1, 2, 3, 4], [4, 4, 1, 0]])
    np.put_along_axis(logits, preds[..., None], 1.0, axis=-1)
    labels = np.array([[1, 2, 0, 0], [4, 3, 1, 0]])
    # Real tokens: (0,0)✓ (0,1)✓ (1,0)✓ (1,1)✗ (1,2)✓ -> 4/5; padding (incl. pred 0 == label 0) ignored.
    metric = MaskedAccuracy()
    metric.update_state(labels, logits)
    np.testing.assert_allclose(to_float(metric.result()), 4 / 5, rtol=1e-6)
    # Accumulates across batches: second batch has 1 real token, wrong.
    metric.update_state(np.array([[2, 0, 0, 0]]), logits[:1])
    np.testing.assert_allclose(to_float(metric.result()), 4 / 6, rtol=1e-6)
    metric.reset_state()
    assert to_float(metric.result()) == 0.0
    # Sample weights: drop row 1 entirely.
    metric.update_state(labels, logits, sample_weight=np.array([1.0, 0.0]))
    np.testing.assert_allclose(to_float(metric.result()), 1.0)
    # ignore_index=None counts padding too: 5/8 correct (row 0: 2, row 1: 3).
    metric = MaskedAccuracy(ignore_index=None)
    metric.update_state(labels, logits)
    np.testing.assert_allclose(to_float(metric.result()), 5 / 8, rtol=1e-6)
    config = metric.get_config()
    assert config["ignore_index"] is None
    assert MaskedAccuracy.from_config(config).ignore_index is None
    with pytest.raises(TypeError, match="ignore_index"):
        MaskedAccuracy(ignore_index="pad")


def test_perplexity():
    assert perplexity(0.0) == 1.0
    np.testing.assert_allclose(perplexity(math.log(50.0)), 50.0)
    assert perplexity(1e6) == math.inf
    np.testing.assert_allclose(to_float(perplexity(tf.constant(math.log(7.0)))), 7.0, rtol=1e-6)
    # Uniform predictions over V classes have perplexity V.
    labels = np.random.RandomState(0).randint(1, VOCAB, size=(BATCH, SEQ))
    loss = MaskedSparseCategoricalCrossentropy()(labels, np.zeros((BATCH, SEQ, VOCAB), "float32"))
    np.testing.assert_allclose(to_float(perplexity(loss)), VOCAB, rtol=1e-5)
