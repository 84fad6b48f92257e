"""The text methods of the BERT-family models (`keras_tfm.models.bert_text`).

Each text path is checked against the ids path: the tokenizer's ids wrapped as `[CLS] … [SEP]`
by hand, the model called on them, the answer read off the logits; and against the served
signatures' functions (`keras_tfm.export.bert_serving`, called eagerly, nothing exported).
The tiny models run eagerly (`run_eagerly`): what is under test is the text handling, not the
compiled graph (the MiniLM test runs Keras's compiled predict function).
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from model_harness import tiny_bert_encoder

import keras_tfm  # noqa: F401  (registers the text methods)
from keras_tfm import models
from keras_tfm.checks import is_text
from keras_tfm.export.bert_serving import BertClassifierServing, BertMaskedLMServing, SentenceEncoderServing
from keras_tfm.tokenizers import CharTokenizer, WordPieceTokenizer
from keras_tfm.training import compile_for_classification

MINILM = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "all-MiniLM-L6-v2")
CORPUS = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "hello world",
    "good film great acting",
    "bad film awful plot",
] * 3
MAX_LENGTH = 12  # the tiny models' length: long texts below are cut
TEXTS = [
    "good film",
    "the cat sat on the mat with a dog in the park and the dog ran",  # past MAX_LENGTH
    "hello wonderful world!",  # "wonderful": several pieces
    "bad",
]


def small_encoder():
    """The tiny BERT encoder, 1 layer, no dropout, `MAX_LENGTH` positions (seeded)."""
    return tiny_bert_encoder(vocabulary_size=64, max_length=MAX_LENGTH, num_layers=1, dropout=0.0, seed=0)


def tiny_bert_classifier(num_classes, pooling="cls"):
    return models.BertClassifier(small_encoder(), num_classes, pooling=pooling, dropout=0.0)


def tiny_bert_token_classifier(num_classes):
    return models.BertTokenClassifier(small_encoder(), num_classes, dropout=0.0)


def tiny_bert_masked_lm():
    return models.BertMaskedLM(small_encoder())


def tiny_sentence_encoder(normalize=True):
    return models.SentenceEncoder(small_encoder(), normalize=normalize)


@pytest.fixture(scope="module")
def tokenizer():
    return WordPieceTokenizer.from_corpus(CORPUS, vocabulary_size=64)


def _eager(model, tokenizer):
    model.tokenizer = tokenizer
    model.run_eagerly = True
    return model


def reference_batch(tokenizer, texts, max_length=MAX_LENGTH):
    """Model inputs built by hand: the tokenizer's ids, cut, `[CLS] … [SEP]`, right-padded."""
    rows = [
        [tokenizer.cls_id, *ids[: max_length - 2], tokenizer.sep_id] for ids in tokenizer(texts).to_list()
    ]
    width = max(len(r) for r in rows)
    token_ids = np.array([r + [tokenizer.pad_id] * (width - len(r)) for r in rows], np.int32)
    mask = np.array([[1] * len(r) + [0] * (width - len(r)) for r in rows], np.int32)
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "padding_mask": mask}, rows


def test_is_text_sorts_inputs():
    for text in (
        "a",
        b"a",
        ["a", "b"],
        ("a",),
        [],
        np.array(["a"]),
        np.array(["a"], object),
        tf.constant(["a"]),
    ):
        assert is_text(text), text
    for other in (
        {"token_ids": np.ones((1, 2))},
        np.ones((2, 3), np.int32),
        [np.ones(2)],
        tf.ones((2,)),
        None,
    ):
        assert not is_text(other), other


def test_classifier_predict_equals_ids_path_and_served_classify(tokenizer):
    model = _eager(tiny_bert_classifier(num_classes=3), tokenizer)
    probabilities = model.predict(TEXTS, batch_size=2)
    assert probabilities.dtype == np.float32 and probabilities.shape == (len(TEXTS), 3)
    batch, _ = reference_batch(tokenizer, TEXTS)
    expected = tf.nn.softmax(model(batch, training=False)).numpy()
    np.testing.assert_allclose(probabilities, expected, rtol=1e-5, atol=1e-6)
    classify = BertClassifierServing(model, tokenizer).endpoints()[0][1]
    np.testing.assert_allclose(probabilities, classify(tf.constant(TEXTS))["probabilities"], atol=1e-6)
    np.testing.assert_allclose(model.predict(TEXTS[2]), probabilities[2], atol=1e-6)  # one str → one row
    # Anything else is Keras's predict: ids in, logits out.
    np.testing.assert_allclose(model.predict(batch, verbose=0), model(batch), atol=1e-6)


def test_cls_sep_tokenizer_gives_the_same_rows(tokenizer):
    """A tokenizer that adds [CLS]/[SEP] itself (pretrained ones do) gives the same rows."""
    from keras_tfm.models.bert_text import encode_texts

    wrapped = WordPieceTokenizer(tokenizer.get_vocabulary()[7:], add_cls_sep=True, max_length=8)
    model = tiny_bert_classifier(num_classes=2)
    plain_rows = encode_texts(tokenizer, TEXTS, 8, model.max_length)
    for a, b in zip(plain_rows, encode_texts(wrapped, TEXTS, None, model.max_length)):
        np.testing.assert_array_equal(a, b)
    assert max(len(r) for r in plain_rows) == 8 and all(r[0] == tokenizer.cls_id for r in plain_rows)


def test_token_classifier_labels_each_word_at_its_first_piece(tokenizer):
    model = _eager(tiny_bert_token_classifier(num_classes=5), tokenizer)
    answers = model.predict(TEXTS)
    batch, rows = reference_batch(tokenizer, TEXTS)
    labels = np.argmax(model(batch, training=False), axis=-1)
    for text, answer, row_labels in zip(TEXTS, answers, labels):
        words = text.split()
        assert [w for w, _ in answer] == words
        position = 1
        for (word, label), pieces in zip(answer, tokenizer(words).to_list()):
            expected = int(row_labels[position]) if position < MAX_LENGTH - 1 else None
            assert label == expected, (text, word)
            position += len(pieces)
    assert len(tokenizer("wonderful").numpy()) > 1  # a word of several pieces was labelled once
    assert answers[1][-1][1] is None  # past the model's length
    assert model.predict("hello world") == model.predict(["hello world"])[0]  # one str → one list


def test_token_classifier_words_are_split_at_ascii_whitespace_only(tokenizer):
    """A no-break space, NEL, NUL or a file separator stays inside its word (Python's `split`
    would cut there, and the word-by-word ids would not be the text's ids)."""
    model = _eager(tiny_bert_token_classifier(num_classes=5), tokenizer)
    for odd in ("\u00a0", "\u0085", "\x00", "\x1c"):
        answer = model.predict(f"good{odd}film  hello\tworld")
        assert [w for w, _ in answer] == [f"good{odd}film", "hello", "world"], repr(odd)
        assert isinstance(answer[0][1], int)  # the odd word has tokens and a label
    # TF's UTF-8 lower-casing ends a string at NUL: the tokenizer drops NUL first, cutting nothing.
    assert tokenizer("a\x00b hello").numpy().tolist() == tokenizer("ab hello").numpy().tolist()


def test_fill_mask_equals_served_fill_mask(tokenizer):
    model = _eager(tiny_bert_masked_lm(), tokenizer)
    texts = ["the cat sat on the [MASK].", "a [MASK] ran in the [MASK]"]
    answers = model.fill_mask(texts, top_k=4)
    served = BertMaskedLMServing(model, tokenizer, top_k=4).endpoints()[0][1](tf.constant(texts))
    for i, answer in enumerate(answers):
        assert answer["filled"] == served["filled"][i].numpy().decode()
        assert answer["top_tokens"] == [t.decode() for t in served["top_tokens"][i].numpy()]
        np.testing.assert_allclose(answer["top_probabilities"], served["top_probabilities"][i], atol=1e-6)
    # Ids path: [CLS] ids("the cat sat on the") [MASK] ids(".") [SEP].
    ids = [tokenizer.cls_id, *tokenizer("the cat sat on the").numpy(), tokenizer.mask_id]
    position = len(ids) - 1
    ids = np.array([ids + [*tokenizer(".").numpy(), tokenizer.sep_id]], np.int32)
    logits = model({"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": 1 + 0 * ids})
    logits = np.array(logits[0, position])
    logits[list(tokenizer.special_token_ids)] = -np.inf
    best = np.argsort(-logits)[:4]
    assert answers[0]["top_tokens"] == [tokenizer.id_to_token(int(i)) for i in best]
    np.testing.assert_allclose(
        answers[0]["top_probabilities"], tf.nn.softmax(logits).numpy()[best], atol=1e-6
    )
    assert model.fill_mask(texts[0], top_k=4)["filled"] == answers[0]["filled"]  # one str → one dict


def test_embed_equals_ids_path_and_is_unit_length(tokenizer):
    for normalize in (True, False):
        model = _eager(tiny_sentence_encoder(normalize=normalize), tokenizer)
        vectors = model.embed(TEXTS)
        assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 32)
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=-1), 1.0, atol=1e-6)
        batch, _ = reference_batch(tokenizer, TEXTS)
        expected = np.array(model(batch, training=False))
        expected /= np.linalg.norm(expected, axis=-1, keepdims=True)
        np.testing.assert_allclose(vectors, expected, atol=1e-6)
        np.testing.assert_allclose(model.embed(TEXTS[2]), vectors[2], atol=1e-6)  # one str → one vector
    served = SentenceEncoderServing(model, tokenizer).endpoints()[0][1](tf.constant(TEXTS))
    raw = served["embeddings"].numpy()
    np.testing.assert_allclose(vectors, raw / np.linalg.norm(raw, axis=-1, keepdims=True), atol=1e-6)


@pytest.fixture(scope="module")
def minilm():
    if not os.path.isdir(MINILM):
        pytest.skip(f"the shared MiniLM checkpoint is absent ({MINILM})")
    from keras_tfm.checkpoints import pretrained_tokenizer
    from keras_tfm.models import sentence_encoder

    return sentence_encoder(MINILM), pretrained_tokenizer(MINILM)


def test_minilm_embed_equals_embed_texts_exactly(minilm):
    from keras_tfm.data import embed_texts

    model, tokenizer = minilm
    texts = ["A man is eating food.", "A man is riding a horse.", "The new movie is awesome", "Paris"]
    model.tokenizer = tokenizer
    vectors = model.embed(texts)
    assert np.array_equal(vectors, embed_texts(model, tokenizer, texts))
    assert vectors.dtype == np.float32 and vectors.shape == (4, 384)


# ------------------------------------------------------------------ training
GOOD = ["good film", "great acting", "good plot", "great film good acting"]
BAD = ["bad film", "awful acting", "bad plot", "awful film bad acting"]


def _trainable(tokenizer, learning_rate=1e-2):
    model = _eager(tiny_bert_classifier(num_classes=2, pooling="mean"), tokenizer)
    return compile_for_classification(model, learning_rate=learning_rate, warmup_steps=0, run_eagerly=True)


def test_fit_texts_trains_and_equals_the_ids_batches(tokenizer):
    texts, labels = GOOD + BAD, [1] * 4 + [0] * 4
    # One step on one batch: the same loss and weights as fitting the padded id batch.
    a, b = _trainable(tokenizer), _trainable(tokenizer)
    order = np.argsort([len(r) for r in reference_batch(tokenizer, texts)[1]], kind="stable")
    batch, _ = reference_batch(tokenizer, [texts[i] for i in order])
    history = a.fit(texts, labels, batch_size=8, epochs=1, shuffle=False, verbose=0)
    expected = b.fit(batch, np.array(labels)[order], batch_size=8, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(history.history["loss"], expected.history["loss"], rtol=1e-5)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(wa, wb, atol=1e-5)
    # A few epochs on the toy task: the loss goes down, evaluate agrees with the ids path.
    history = a.fit(
        texts, labels, batch_size=8, epochs=5, verbose=0, validation_data=(GOOD[:2] + BAD[:2], [1, 1, 0, 0])
    )
    assert history.history["loss"][-1] < 0.7 * history.history["loss"][0], history.history["loss"]
    assert len(history.history["val_loss"]) == 5
    result = a.evaluate(texts, labels, verbose=0, return_dict=True)
    reference = keras.Model.evaluate(a, batch, np.array(labels)[order], verbose=0, return_dict=True)
    np.testing.assert_allclose(result["loss"], reference["loss"], rtol=1e-5)
    assert result["accuracy"] >= 0.75


def test_xla_model_is_trained_without_xla(tokenizer):
    model = _trainable(tokenizer)
    model.compile(optimizer="adam", loss=model.loss, jit_compile=True)
    model.run_eagerly = True  # cheap: what is under test is the switch
    assert model.jit_compile
    model.fit(GOOD[:2] + BAD[:2], [1, 1, 0, 0], batch_size=2, epochs=1, verbose=0)
    assert not model.jit_compile


def test_keras_round_trip_keeps_the_text_path(tokenizer, tmp_path):
    model = _eager(tiny_bert_classifier(num_classes=2), tokenizer)
    path = str(tmp_path / "classifier.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert restored.tokenizer.get_vocabulary() == tokenizer.get_vocabulary()
    np.testing.assert_allclose(restored.predict(TEXTS), model.predict(TEXTS), atol=1e-6)


# ------------------------------------------------------------------ bad input
def test_bad_inputs_name_the_argument(tokenizer):
    bare = tiny_bert_classifier(num_classes=2)
    with pytest.raises(
        ValueError, match=r"`BertClassifier.predict` was given text but the model has no tokenizer"
    ):
        bare.predict(["good film"])
    model = _trainable(tokenizer)
    with pytest.raises(ValueError, match=r"`x` is an empty batch"):
        model.predict([])
    with pytest.raises(TypeError, match=r"`x\[1\]` must be a str .*received 3"):
        model.predict(["good", 3])
    with pytest.raises(ValueError, match=r"does not take `steps`"):
        model.predict(["good"], steps=1)
    with pytest.raises(
        ValueError, match=r"`y` must hold one label per text of `x` \(2\); received shape \(3,\)"
    ):
        model.fit(["good", "bad"], [1, 0, 1])
    with pytest.raises(ValueError, match=r"`y\[1\]`=2 is not a class id .*num_classes=2"):
        model.fit(["good", "bad"], [1, 2])
    with pytest.raises(TypeError, match=r"`y` must be int class ids; received dtype float"):
        model.evaluate(["good", "bad"], [1.0, 0.0])
    with pytest.raises(
        TypeError, match=r"`x` must be a list of texts \(one per label\); received a single str"
    ):
        model.fit("good film", [1])
    with pytest.raises(ValueError, match=r"does not take `sample_weight`"):
        model.fit(["good", "bad"], [1, 0], sample_weight=np.ones(2))
    with pytest.raises(ValueError, match=r"`validation_data` must be a pair \(texts, labels\)"):
        model.fit(["good", "bad"], [1, 0], validation_data=["good"])
    with pytest.raises(ValueError, match=r"`validation_data\[1\]` must hold one label per text"):
        model.fit(["good", "bad"], [1, 0], validation_data=(["good"], [1, 0]))
    masked = _eager(tiny_bert_masked_lm(), tokenizer)
    with pytest.raises(ValueError, match=r"`texts\[1\]` \('no mask here'\) has no \[MASK\]"):
        masked.fill_mask(["the [MASK]", "no mask here"])
    with pytest.raises(ValueError, match=r"`top_k` must be a positive int"):
        masked.fill_mask("the [MASK]", top_k=0)
    with pytest.raises(ValueError, match=r"first \[MASK\] lies past the model's length"):
        masked.fill_mask("the cat sat on the mat with a dog in the park [MASK]")
    tagger = _eager(tiny_bert_token_classifier(num_classes=3), CharTokenizer.from_corpus(CORPUS))
    with pytest.raises(ValueError, match=r"tokenizes `x\[0\]` \('the cat'\) differently from its words"):
        tagger.predict(["the cat"])  # characters: the space is a token of its own
    encoder = _eager(tiny_sentence_encoder(), tokenizer)
    with pytest.raises(ValueError, match=r"`max_length`=13 exceeds the model's max_length 12"):
        encoder.embed(["hello"], max_length=13)
    with pytest.raises(TypeError, match=r"`texts` must be a list of texts; received int"):
        encoder.embed(7)
