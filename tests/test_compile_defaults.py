"""Task models compile themselves with the lecture's defaults (issue 34 §6): `fit` works at once,
from a preset or a checkpoint, and a user's own `compile` replaces the defaults."""

import os

import keras
import numpy as np
import pytest

from keras_tfm import models
from keras_tfm.losses import MaskedSparseCategoricalCrossentropy
from keras_tfm.optimizers import AdamW
from keras_tfm.schedules import LinearWarmup

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "pretrained")
RNG = np.random.default_rng(0)


def _bert_inputs(vocab=30, batch=4, length=6):
    ids = RNG.integers(1, vocab, size=(batch, length)).astype("int32")
    return {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)}


CASES = {
    "gpt": lambda: (
        models.GPT.from_preset("tiny", vocabulary_size=30, max_length=8),
        RNG.integers(1, 30, size=(4, 8)).astype("int32"),
        RNG.integers(1, 30, size=(4, 8)).astype("int32"),
    ),
    "seq2seq": lambda: (
        models.Seq2Seq.from_preset("tiny", vocabulary_size=30, max_length=8),
        {
            "encoder_token_ids": RNG.integers(1, 30, size=(4, 6)).astype("int32"),
            "decoder_token_ids": RNG.integers(1, 30, size=(4, 5)).astype("int32"),
        },
        RNG.integers(1, 30, size=(4, 5)).astype("int32"),
    ),
    "masked_lm": lambda: (
        models.BertMaskedLM.from_preset("tiny", vocabulary_size=30, max_length=8, num_layers=1),
        _bert_inputs(),
        RNG.integers(1, 30, size=(4, 6)).astype("int32"),
    ),
    "classifier": lambda: (
        models.BertClassifier.from_preset(
            "tiny", num_classes=3, vocabulary_size=30, max_length=8, num_layers=1
        ),
        _bert_inputs(),
        RNG.integers(0, 3, size=(4,)).astype("int32"),
    ),
    "token_classifier": lambda: (
        models.BertTokenClassifier.from_preset(
            "tiny", num_classes=3, vocabulary_size=30, max_length=8, num_layers=1
        ),
        _bert_inputs(),
        RNG.integers(0, 3, size=(4, 6)).astype("int32"),
    ),
    "vit": lambda: (
        models.vit_classifier(8, 4, 3, num_layers=1, num_channels=1),
        RNG.normal(size=(4, 8, 8, 1)).astype("float32"),
        RNG.integers(0, 3, size=(4,)).astype("int32"),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_task_fits_without_a_compile_call(name):
    model, x, y = CASES[name]()
    assert isinstance(model.optimizer, AdamW)
    assert isinstance(model.optimizer.learning_rate, LinearWarmup) or hasattr(
        model.optimizer, "_learning_rate"
    )
    loss = model.fit(x, y, batch_size=2, epochs=1, verbose=0).history["loss"][0]
    assert np.isfinite(loss)


def test_a_users_compile_replaces_the_defaults_and_auto_keeps_them():
    model = models.gpt("tiny", vocabulary_size=30, max_length=8)
    assert isinstance(model.loss, MaskedSparseCategoricalCrossentropy) and model.loss.ignore_index is None
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    assert isinstance(model.optimizer, keras.optimizers.SGD)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))  # loss="auto": the task's
    assert isinstance(model.loss, MaskedSparseCategoricalCrossentropy)


def test_encoders_are_not_compiled():
    assert not models.bert_encoder("tiny", vocabulary_size=30, max_length=8, num_layers=1).compiled


def test_a_checkpoint_fine_tunes_on_texts_without_compile():
    model = models.BertClassifier.from_preset(os.path.join(FIXTURES, "tiny_bert"), num_classes=2)
    history = model.fit(["a good film", "a bad film"], [1, 0], epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
