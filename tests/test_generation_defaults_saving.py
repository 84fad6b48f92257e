"""A checkpoint's generation defaults survive a `.keras` file.

`from_preset` of a HuggingFace checkpoint sets `model.generation_defaults` (HuggingFace's beam
search with the checkpoint's length penalty, early stopping and eos id); `model.save` and
`keras.models.load_model` must give back a model with the same defaults, hence the same beam
search (GNMT's α = 0.6 search otherwise, with other scores) and the same `translate` text.
The tiny fixtures of tests/fixtures/pretrained (BART: seq2seq, Mistral: decoder) are loaded
once; generation runs uncompiled (the same loops without an XLA compile).
"""

import json
import os
import warnings
import zipfile

import keras
import numpy as np
import pytest

from keras_tfm.generation import generator as generator_lib
from keras_tfm.models import GPT, Seq2Seq

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "pretrained")
IDS = [[5, 17, 42, 9], [30, 8, 11, 60]]
MAX_NEW = 6


def load_fixture(cls, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cls.from_preset(os.path.join(HERE, name))


def beams(model, ids):
    """(sequences, scores, lengths) of a 3-beam search with the model's defaults (run eagerly)."""
    generator = generator_lib.Generator(model, run_eagerly=True)
    return generator.beam_search(ids, MAX_NEW, num_beams=3)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """{name: (model, reloaded model, config.json of the .keras file)} for tiny_bart and tiny_mistral."""
    out = {}
    for name, cls in (("tiny_bart", Seq2Seq), ("tiny_mistral", GPT)):
        model = load_fixture(cls, name)
        path = str(tmp_path_factory.mktemp(name) / "model.keras")
        model.save(path)
        with zipfile.ZipFile(path) as archive:
            stored = json.loads(archive.read("config.json"))["config"]
        out[name] = (model, keras.models.load_model(path, compile=False), stored)
    return out


@pytest.mark.parametrize("name", ["tiny_bart", "tiny_mistral"])
def test_generation_defaults_saved_as_plain_json(saved, name):
    model, loaded, stored = saved[name]
    assert model.generation_defaults["length_penalty_style"] == "hf"  # a checkpoint's defaults
    assert stored["generation_defaults"] == dict(model.generation_defaults)
    assert dict(loaded.generation_defaults) == dict(model.generation_defaults)


@pytest.mark.parametrize("name", ["tiny_bart", "tiny_mistral"])
def test_reloaded_model_beam_searches_the_same(saved, name):
    model, loaded, _ = saved[name]
    before, after = beams(model, IDS), beams(loaded, IDS)
    for want, got in zip(before, after):
        np.testing.assert_array_equal(got, want)
    # Without the saved defaults the search is GNMT's α = 0.6: other scores.
    loaded_plain = type(loaded).from_config(
        {k: v for k, v in loaded.get_config().items() if k != "generation_defaults"}
    )
    loaded_plain.set_weights(loaded.get_weights())
    assert loaded_plain.generation_defaults is None
    assert not np.allclose(beams(loaded_plain, IDS)[1], before[1])


def test_reloaded_seq2seq_translates_the_same(saved):
    model, loaded, _ = saved["tiny_bart"]
    texts = ["the cat sat on the mat", "a dog ran"]
    for m in (model, loaded):
        generator_lib._GENERATORS[m] = generator_lib.Generator(m, run_eagerly=True)  # what `translate` runs
    want = model.translate(texts, num_beams=3, max_new_tokens=MAX_NEW)
    assert loaded.translate(texts, num_beams=3, max_new_tokens=MAX_NEW) == want
    assert loaded.translate(texts, num_beams=1, max_new_tokens=MAX_NEW) == model.translate(
        texts, num_beams=1, max_new_tokens=MAX_NEW
    )
