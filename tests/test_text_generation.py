"""Text in, text out for the generating models: `GPT.generate` / `beam_search`,
`Seq2Seq.generate` / `beam_search` / `translate` (`keras_tfm.generation.text`).

Every text path is compared with the ids path plus the tokenizer, computed here
from `tokenizer.tokenize` / `tokenizer.detokenize` directly. The models' generators
run eagerly (`run_eagerly=True`, the same loop as the compiled one, tested
against it in tests/test_generation.py), installed as the generator
`generation.generate(model, ...)` uses, so the file compiles nothing. The
served `translate` is compared with `Seq2Seq.translate` in tests/test_export.py.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from model_harness import tiny_gpt, tiny_seq2seq

from keras_tfm import generation
from keras_tfm.generation import Generator
from keras_tfm.generation import generator as api
from keras_tfm.models import Seq2Seq
from keras_tfm.tokenizers import CharTokenizer, WordTokenizer
from keras_tfm.tokenizers.special_tokens import BOS, EOS, UNK

PROMPTS = ["hello", "a", "this is"]
CORPUS = "hello world, this is a tiny corpus! yes."
SOURCES = ["the cat sat", "a dog", "the dog sat on the mat"]
SOURCE_WORDS = "the cat sat on a mat dog ran far".split()
TARGET_WORDS = "die katze sass auf einer matte hund lief weit".split()
NEW = 4


def eager(model):
    """Installs an eager generator as `model`'s generator (what `generation.generate(model)` and the
    model's methods use); returns the model."""
    cls = Generator if isinstance(model, Seq2Seq) else Generator
    api._GENERATORS[model] = cls(model, run_eagerly=True)
    return model


def ids_of(tokenizer, texts):
    return [[int(i) for i in tokenizer.tokenize(t).numpy()] for t in texts]


def detok(tokenizer, rows):
    """The served rule: ids past the tokenizer's vocabulary read as [UNK]."""
    rows = [[i if i < tokenizer.vocabulary_size else UNK for i in row] for row in rows]
    ragged = tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1)
    return [s.decode("utf-8") for s in tokenizer.detokenize(ragged).numpy()]


@pytest.fixture(scope="module")
def gpt_model():
    tokenizer = CharTokenizer.from_corpus(CORPUS)  # special tokens: eos_id 6
    model = eager(tiny_gpt(seed=1, vocabulary_size=tokenizer.vocabulary_size, max_length=32, num_layers=1))
    model.tokenizer = tokenizer
    return model


@pytest.fixture(scope="module")
def s2s_model():
    model = eager(tiny_seq2seq(seed=2, num_layers=1, max_length=8))  # shared vocabulary of 32
    model.tokenizer = (WordTokenizer(SOURCE_WORDS), WordTokenizer(TARGET_WORDS))
    return model


# --------------------------------------------------------------------------- GPT
def test_gpt_generate_text_is_ids_plus_tokenizer(gpt_model):
    tok = gpt_model.tokenizer
    rows = ids_of(tok, PROMPTS)
    tokens, lengths = generation.generate(gpt_model, rows, NEW, eos_id=tok.eos_id, return_lengths=True)
    new = [tokens[b, : lengths[b]].tolist() for b in range(len(rows))]
    texts = gpt_model.generate(PROMPTS, NEW)
    assert texts == detok(tok, [p + n for p, n in zip(rows, new)])
    assert all(text.startswith(prompt) for text, prompt in zip(texts, PROMPTS))
    assert gpt_model.generate(PROMPTS, NEW, completion_only=True) == detok(tok, new)
    assert gpt_model.generate(PROMPTS[0], NEW) == texts[0]  # str in, str out


def test_gpt_eos_id_defaults_to_the_tokenizers(gpt_model):
    """An eos_id the model emits stops the row on the text path as on the ids path; the default is
    the tokenizer's, `eos_id=None` generates past it."""
    tok = gpt_model.tokenizer
    rows = ids_of(tok, PROMPTS)
    free = generation.generate(gpt_model, rows, NEW)
    first = free[0].tolist()
    k = next((i for i, t in enumerate(first) if t != first[0]), 0)  # a token first emitted at step k
    stop = first[k]
    tokens, lengths = generation.generate(gpt_model, rows, NEW, eos_id=stop, return_lengths=True)
    assert lengths[0] == k + 1 < NEW or k == 0
    new = [tokens[b, : lengths[b]].tolist() for b in range(len(rows))]
    assert gpt_model.generate(PROMPTS, NEW, eos_id=stop, completion_only=True) == detok(tok, new)
    no_stop = gpt_model.generate(PROMPTS, NEW, eos_id=None, completion_only=True)
    assert no_stop == detok(tok, free.tolist())
    assert tok.eos_id == EOS  # the default of the other tests' text paths


def test_gpt_sampling_text_is_ids_plus_tokenizer(gpt_model):
    tok = gpt_model.tokenizer
    rows = ids_of(tok, PROMPTS)
    options = dict(sampler="sample", temperature=1.5, top_k=8, seed=7)
    tokens, lengths = generation.generate(
        gpt_model, rows, NEW, eos_id=tok.eos_id, return_lengths=True, **options
    )
    new = [tokens[b, : lengths[b]].tolist() for b in range(len(rows))]
    assert gpt_model.generate(PROMPTS, NEW, **options) == detok(tok, [p + n for p, n in zip(rows, new)])
    assert gpt_model.generate(PROMPTS, NEW, completion_only=True, **options) == detok(tok, new)


def test_gpt_beam_search_text_is_best_beam(gpt_model):
    tok = gpt_model.tokenizer
    rows = ids_of(tok, PROMPTS)
    sequences, _, lengths = generation.beam_search(gpt_model, rows, NEW, num_beams=3, eos_id=tok.eos_id)
    new = [sequences[b, 0, : lengths[b, 0]].tolist() for b in range(len(rows))]
    assert gpt_model.beam_search(PROMPTS, NEW, num_beams=3) == detok(tok, [p + n for p, n in zip(rows, new)])
    assert gpt_model.beam_search(PROMPTS, NEW, num_beams=3, completion_only=True) == detok(tok, new)


def test_gpt_ids_in_ids_out(gpt_model):
    rows = ids_of(gpt_model.tokenizer, PROMPTS)
    for got, want in zip(
        gpt_model.generate(rows, NEW, return_lengths=True, eos_id=9),
        generation.generate(gpt_model, rows, NEW, return_lengths=True, eos_id=9),
    ):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(
        gpt_model.beam_search(rows, NEW, num_beams=2, length_penalty=1.0),
        generation.beam_search(gpt_model, rows, NEW, num_beams=2, length_penalty=1.0),
    ):
        np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------- seq2seq
def s2s_reference(model, num_beams, max_new_tokens):
    source_tok, target_tok = model.tokenizer
    rows = ids_of(source_tok, SOURCES)
    if num_beams == 1:
        tokens, lengths = generation.generate(
            model, rows, max_new_tokens, bos_id=BOS, eos_id=EOS, return_lengths=True
        )
    else:
        sequences, _, lengths = generation.beam_search(
            model, rows, max_new_tokens, num_beams=num_beams, bos_id=BOS, eos_id=EOS
        )
        tokens, lengths = sequences[:, 0], lengths[:, 0]
    return detok(target_tok, [tokens[b, : lengths[b]].tolist() for b in range(len(rows))])


def test_translate_is_ids_plus_tokenizers(s2s_model):
    greedy = s2s_reference(s2s_model, 1, NEW)
    assert s2s_model.translate(SOURCES, num_beams=1, max_new_tokens=NEW) == greedy
    assert s2s_model.generate(SOURCES, NEW) == greedy
    beams = s2s_reference(s2s_model, 3, NEW)
    assert s2s_model.translate(SOURCES, num_beams=3, max_new_tokens=NEW) == beams
    assert s2s_model.beam_search(SOURCES[0], NEW, num_beams=3) == beams[0]  # str in, str out
    # The target tokenizer reads the output: its words only.
    assert {w for t in greedy + beams for w in t.split()} <= set(TARGET_WORDS) | {"[UNK]"}
    # max_new_tokens None: the model's max_length - 1 (the export's default limit).
    longest = s2s_reference(s2s_model, 1, s2s_model.max_length - 1)
    assert s2s_model.translate(SOURCES, num_beams=1) == longest


def test_seq2seq_sampling_and_ids(s2s_model):
    source_tok, target_tok = s2s_model.tokenizer
    rows = ids_of(source_tok, SOURCES)
    options = dict(sampler="sample", temperature=2.0, seed=3)
    tokens, lengths = generation.generate(
        s2s_model, rows, NEW, bos_id=BOS, eos_id=EOS, return_lengths=True, **options
    )
    expected = detok(target_tok, [tokens[b, : lengths[b]].tolist() for b in range(len(rows))])
    assert s2s_model.generate(SOURCES, NEW, **options) == expected
    np.testing.assert_array_equal(
        s2s_model.generate(rows, NEW, bos_id=BOS), generation.generate(s2s_model, rows, NEW, bos_id=BOS)
    )
    for got, want in zip(
        s2s_model.beam_search(rows, NEW, num_beams=2, bos_id=BOS),
        generation.beam_search(s2s_model, rows, NEW, num_beams=2, bos_id=BOS),
    ):
        np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------- .keras round trip
def test_keras_round_trip_keeps_the_text_path(gpt_model, s2s_model, tmp_path):
    for name, model in (("gpt", gpt_model), ("s2s", s2s_model)):
        path = str(tmp_path / f"{name}.keras")
        model.save(path)
        loaded = eager(keras.saving.load_model(path))
        if name == "gpt":
            assert loaded.tokenizer.get_vocabulary() == model.tokenizer.get_vocabulary()
            assert loaded.generate(PROMPTS, NEW) == model.generate(PROMPTS, NEW)
        else:
            assert [t.get_vocabulary() for t in loaded.tokenizer] == [
                t.get_vocabulary() for t in model.tokenizer
            ]
            assert loaded.translate(SOURCES, num_beams=2, max_new_tokens=NEW) == model.translate(
                SOURCES, num_beams=2, max_new_tokens=NEW
            )


# --------------------------------------------------------------------------- bad input
def no_tokenizer_gpt():
    return eager(tiny_gpt(seed=0, num_layers=1))


BAD = [
    # (model, method, args, kwargs, error, message)
    ("gpt", "generate", ([], NEW), {}, ValueError, r"`inputs` is an empty batch"),
    ("gpt", "generate", (["hello", 3], NEW), {}, TypeError, r"`inputs\[1\]` must be a str .*received 3"),
    ("gpt", "generate", (["hello", ""], NEW), {}, ValueError, r"`inputs\[1\]`='' has no tokens"),
    ("gpt", "generate", ("hello", -1), {}, ValueError, r"`max_new_tokens`"),
    ("gpt", "generate", ("hello", "5"), {}, TypeError, r"`max_new_tokens`"),
    ("gpt", "generate", ("hello", NEW), {"return_lengths": True}, TypeError, r"ids path"),
    (
        "gpt",
        "generate",
        ("hello", NEW),
        {"temperature": -1.0, "sampler": "sample"},
        ValueError,
        "temperature",
    ),
    ("gpt", "generate", ("hello", NEW), {"eos_id": 1000}, ValueError, r"`eos_id`"),
    ("gpt", "generate", ([[7, 8]], NEW), {"completion_only": True}, TypeError, r"`completion_only`"),
    ("gpt", "beam_search", ("hello", 0), {}, ValueError, r"`max_new_tokens`"),
    ("gpt", "beam_search", ("hello", NEW), {"num_beams": 0}, ValueError, r"`num_beams`"),
    ("gpt", "beam_search", (("a", 3), NEW), {}, TypeError, r"`inputs\[1\]` must be a str .*received 3"),
    (
        "plain",
        "generate",
        ("hello", NEW),
        {},
        ValueError,
        r"`GPT.generate` was given text but the model has no tokenizer",
    ),
    ("plain", "beam_search", (["hello"], NEW), {}, ValueError, r"`GPT.beam_search` was given text but"),
    ("s2s", "translate", ([],), {}, ValueError, r"`texts` is an empty batch"),
    ("s2s", "translate", ([[7, 8]],), {}, TypeError, r"`texts` must be a str or a non-empty list of str"),
    ("s2s", "translate", (["the cat", None],), {}, TypeError, r"`texts\[1\]` must be a str .*received None"),
    ("s2s", "translate", ([""],), {}, ValueError, r"`texts\[0\]`='' has no tokens"),
    ("s2s", "translate", (" ".join(["cat"] * 20),), {}, ValueError, r"`texts\[0\]`=.* 20 tokens, more than"),
    ("s2s", "translate", ("the cat",), {"num_beams": 0}, ValueError, r"`num_beams`"),
    ("s2s", "translate", ("the cat",), {"max_new_tokens": 99}, ValueError, r"`max_new_tokens`=99"),
    ("s2s", "translate", ("the cat",), {"length_penalty": -1.0}, ValueError, r"`length_penalty`"),
    (
        "s2s",
        "generate",
        ("the cat", NEW),
        {"completion_only": True},
        TypeError,
        r"`completion_only` is for GPT",
    ),
    ("s2s", "generate", ("the cat", NEW), {"source_lengths": [2]}, TypeError, r"\['source_lengths'\]"),
    ("plain_s2s", "translate", ("the cat",), {}, ValueError, r"`Seq2Seq.translate` was given text but"),
    ("no_unk", "generate", (["abc", "abz"], NEW), {}, ValueError, r"`inputs` cannot be tokenized"),
]


@pytest.mark.parametrize("kind, method, args, kwargs, error, message", BAD)
def test_bad_input(gpt_model, s2s_model, kind, method, args, kwargs, error, message):
    if kind == "plain":
        model = no_tokenizer_gpt()
    elif kind == "plain_s2s":
        model = tiny_seq2seq(seed=0, num_layers=1)
    elif kind == "no_unk":
        model = no_tokenizer_gpt()
        model.tokenizer = CharTokenizer.from_corpus("abc", special_tokens=False)
    else:
        model = {"gpt": gpt_model, "s2s": s2s_model}[kind]
    with pytest.raises(error, match=message):
        getattr(model, method)(*args, **kwargs)
