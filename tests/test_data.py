"""Tests for keras_tfm.data: tokenizers, tf.data pipelines and loaders (small generated data only)."""

import gzip
import os
import random
import time

import keras
import numpy as np
import pytest
import tensorflow as tf
from tokenizer_test_utils import assert_saved_model_round_trip, tokenizer_module

import keras_tfm  # noqa: F401  (sets the Keras backend)
from keras_tfm import data as D
from keras_tfm import tokenizers as T
from keras_tfm.tokenizers import (
    BOS,
    CLS,
    EOS,
    MASK,
    NUM_SPECIAL_TOKENS,
    PAD,
    SEP,
    UNK,
    ByteTokenizer,
    CharTokenizer,
    SpecialTokens,
    WordPieceTokenizer,
    WordTokenizer,
)

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\nAll:\nSpeak, speak."
UNICODE_TEXT = "Grüße aus Köln! Ça va? 日本語のテキスト — ok."
CORPUS = [
    "the lower lowest newer newest wider widest",
    "low lower lowest new newer newest",
    "Grüße aus Köln, café crème!",
    "the cat sat on the mat.",
] * 3


def _wordpiece():
    return WordPieceTokenizer.from_corpus(CORPUS, vocabulary_size=80)


def _tokenizers():
    return {
        "char": CharTokenizer.from_corpus(TEXT + UNICODE_TEXT),
        "byte": ByteTokenizer(),
        "word": WordTokenizer.from_corpus(CORPUS + [TEXT, UNICODE_TEXT]),
        "wordpiece": _wordpiece(),
    }


# --------------------------------------------------------------------------- #
# Special tokens.
# --------------------------------------------------------------------------- #


def test_special_token_ids_and_helper():
    assert (PAD, UNK, CLS, SEP, MASK, BOS, EOS) == tuple(range(7)) and NUM_SPECIAL_TOKENS == 7
    assert SpecialTokens.token(MASK) == "[MASK]" and SpecialTokens.id("[EOS]") == EOS
    np.testing.assert_array_equal(
        SpecialTokens.is_special(tf.constant([0, 6, 7, 100])), [True, True, False, False]
    )
    with pytest.raises(ValueError, match="token_id"):
        SpecialTokens.token(7)
    for tokenizer in _tokenizers().values():
        assert tokenizer.get_vocabulary()[:7] == list(T.SPECIAL_TOKENS)


# --------------------------------------------------------------------------- #
# Tokenizers.
# --------------------------------------------------------------------------- #


def test_char_tokenizer_round_trip_unicode_and_unknown():
    tokenizer = CharTokenizer.from_corpus(TEXT + UNICODE_TEXT)
    ids = tokenizer([TEXT, UNICODE_TEXT])
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert ids.row_lengths().numpy().tolist() == [len(TEXT), len(UNICODE_TEXT)]  # one id per character
    decoded = [s.decode("utf-8") for s in tokenizer.detokenize(ids).numpy()]
    assert decoded == [TEXT, UNICODE_TEXT]
    assert tokenizer.tokenize("Fq").numpy().tolist()[1] == UNK  # "q" unseen
    assert tokenizer.detokenize(tokenizer.tokenize("Fq")).numpy().decode() == "F[UNK]"


def test_char_tokenizer_without_specials_is_nanogpt_vocabulary():
    tokenizer = CharTokenizer.from_corpus(
        tf.data.Dataset.from_tensor_slices([TEXT[:30], TEXT[30:]]), special_tokens=False
    )
    chars = sorted(set(TEXT))
    assert tokenizer.get_vocabulary() == chars and tokenizer.vocabulary_size == len(chars)
    np.testing.assert_array_equal(tokenizer(TEXT).numpy(), [chars.index(c) for c in TEXT])
    assert tokenizer.token_to_id("\n") == 0 and tokenizer.id_to_token(0) == "\n"
    assert tokenizer.detokenize(tf.ragged.constant([[chars.index(c) for c in "hear"]])).numpy()[0] == b"hear"
    with pytest.raises(tf.errors.InvalidArgumentError, match="not in the vocabulary"):
        tokenizer("Zzz")
    with pytest.raises(ValueError, match="special_tokens"):
        CharTokenizer(chars, special_tokens=False, add_bos=True)


def test_byte_tokenizer_round_trip_and_specials():
    tokenizer = ByteTokenizer(add_bos=True, add_eos=True)
    assert tokenizer.vocabulary_size == 256 + 7 and ByteTokenizer(special_tokens=False).vocabulary_size == 256
    ids = tokenizer([UNICODE_TEXT, ""])
    expected = [BOS] + [b + 7 for b in UNICODE_TEXT.encode("utf-8")] + [EOS]
    assert ids[0].numpy().tolist() == expected and ids[1].numpy().tolist() == [BOS, EOS]
    assert tokenizer.detokenize(ids).numpy().tolist() == [UNICODE_TEXT.encode("utf-8"), b""]
    assert tokenizer.token_to_id("<0x41>") == 65 + 7 and tokenizer.token_to_id(b"A") == 65 + 7
    # A cut multi-byte character is repaired (U+FFFD), not returned as invalid UTF-8.
    cut = tokenizer.detokenize(tf.constant([[ord("a") + 7, 0xC3 + 7]]))
    assert cut.numpy()[0].decode("utf-8") == "a\ufffd"


def test_word_tokenizer_frequency_vocabulary_and_round_trip():
    tokenizer = WordTokenizer.from_corpus(["b a c a b a", "a!"], max_vocabulary_size=7 + 2)
    assert tokenizer.get_vocabulary()[7:] == ["a", "b"]  # most frequent first, then cut
    full = WordTokenizer.from_corpus(CORPUS)
    text = "The Lower, newest café!"
    assert full.detokenize(full(text)).numpy().decode() == "the lower , newest café !"
    assert full.tokenize("the zebra").numpy().tolist()[1] == UNK
    assert (
        full.detokenize(full(UNICODE_TEXT.split(" ")[0])).numpy().decode() == "grüße"
    )  # Unicode lower-casing


def _reference_wordpiece(word, vocabulary):
    pieces, start = [], 0
    while start < len(word):
        end, piece = len(word), None
        while start < end:
            candidate = ("##" if start else "") + word[start:end]
            if candidate in vocabulary:
                piece = candidate
                break
            end -= 1
        if piece is None:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


def test_wordpiece_matches_reference_greedy_longest_match():
    rng = random.Random(0)
    alphabet = "abcé"
    vocabulary = set(alphabet) | {"##" + c for c in alphabet if c != "c"}  # '##c' missing: some words fail
    while len(vocabulary) < 40:
        piece = "".join(rng.choice(alphabet) for _ in range(rng.randint(2, 4)))
        vocabulary.add(piece if rng.random() < 0.5 else "##" + piece)
    vocabulary = sorted(vocabulary)
    tokenizer = WordPieceTokenizer(vocabulary)
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))) for _ in range(300)]
    ids = tokenizer(" ".join(words)).numpy().tolist()
    expected = [piece for word in words for piece in _reference_wordpiece(word, set(vocabulary))]
    assert [tokenizer.id_to_token(i) for i in ids] == expected
    assert "[UNK]" in expected and any(p.startswith("##") for p in expected)  # both paths exercised


def test_wordpiece_learned_vocabulary_round_trip():
    vocabulary = T.learn_wordpiece_vocabulary(CORPUS, vocabulary_size=60)
    assert len(vocabulary) == 60 - 7 and len(set(vocabulary)) == len(vocabulary)
    assert "lowest" in vocabulary or "##est" in vocabulary  # frequent pieces were merged
    tokenizer = WordPieceTokenizer(vocabulary)
    text = "The newest café, the lowest mat!"
    ids = tokenizer(text)
    assert UNK not in ids.numpy().tolist()
    assert tokenizer.detokenize(ids).numpy().decode() == "the newest café , the lowest mat !"
    assert tokenizer.tokenize("zzz").numpy().tolist() == [UNK]  # uncoverable word -> one [UNK]
    too_long = WordPieceTokenizer(vocabulary, max_input_chars_per_word=5)
    assert too_long("newest low").numpy().tolist()[0] == UNK


def test_sequence_length_and_added_special_tokens():
    tokenizer = CharTokenizer.from_corpus("abcdef", add_cls_sep=True)
    dense = tokenizer(["abcdef", "ab"], max_length=5)
    assert dense.shape == (2, 5) and dense.dtype == tf.int32
    a, b = tokenizer.token_to_id("a"), tokenizer.token_to_id("b")
    assert dense.numpy().tolist()[1] == [CLS, a, b, SEP, PAD]
    assert dense.numpy().tolist()[0][0] == CLS and dense.numpy().tolist()[0][-1] == SEP  # text cut, SEP kept
    scalar = CharTokenizer.from_corpus("abc", add_bos=True, add_eos=True, max_length=6)("ab")
    assert scalar.shape == (6,) and scalar.numpy().tolist()[0] == BOS and scalar.numpy().tolist()[3] == EOS
    with pytest.raises(ValueError, match="max_length"):
        tokenizer("abc", max_length=1)


def test_bad_inputs_name_the_argument():
    tokenizer = CharTokenizer.from_corpus("abc")
    with pytest.raises(ValueError, match="`inputs`"):
        tokenizer.tokenize([["a", "b"]])
    with pytest.raises(ValueError, match="`inputs`"):
        tokenizer(tf.constant([["a"]]))
    with pytest.raises(TypeError, match="`inputs`"):
        tokenizer.tokenize(tf.constant([1, 2]))
    with pytest.raises(TypeError, match="`ids`"):
        tokenizer.detokenize(tf.constant([[1.0]]))
    with pytest.raises(ValueError, match="`ids`"):
        tokenizer.detokenize(tf.zeros([1, 1, 1], tf.int32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="ids"):
        tokenizer.detokenize(tf.constant([[999]]))
    with pytest.raises(ValueError, match="`vocabulary`"):
        CharTokenizer(["a", "a"])
    with pytest.raises(ValueError, match="`vocabulary`"):
        WordTokenizer(["[MASK]", "x"])


@pytest.mark.parametrize("kind", ["char", "byte", "word", "wordpiece"])
def test_tokenizer_in_tf_function_and_saved_model(kind, tmp_path):
    tokenizer = _tokenizers()[kind]
    inputs = tf.constant(["the newest café, Köln!", "lower", ""])
    eager = tokenizer(inputs, max_length=16).numpy()
    module = tokenizer_module(tokenizer, max_length=16)
    np.testing.assert_array_equal(module.encode(inputs).numpy(), eager)
    assert_saved_model_round_trip(module, inputs, eager, tmp_path / "export")


@pytest.mark.parametrize("kind", ["char", "wordpiece"])
def test_keras_model_with_tokenizer_round_trip(kind, tmp_path):
    tokenizer = _tokenizers()[kind]
    inputs = keras.Input(shape=(), dtype="string")
    ids = tokenizer(inputs, max_length=12)
    outputs = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(tokenizer.vocabulary_size, 4)(ids))
    model = keras.Model(inputs, outputs)
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    restored = next(layer for layer in loaded.layers if isinstance(layer, T.Tokenizer))
    assert type(restored) is type(tokenizer) and restored.get_vocabulary() == tokenizer.get_vocabulary()
    text = tf.constant(["the lowest café", "ab"])
    np.testing.assert_allclose(loaded(text).numpy(), model(text).numpy())


def test_get_config_from_config_preserves_vocabulary():
    for tokenizer in _tokenizers().values():
        config = tokenizer.get_config()
        clone = type(tokenizer).from_config(config)
        assert clone.get_vocabulary() == tokenizer.get_vocabulary()
        if not isinstance(tokenizer, ByteTokenizer):
            assert config["vocabulary"] == tokenizer.get_vocabulary()[7:]
        text = tf.constant(["the newest café, Köln!"])
        assert clone(text).to_list() == tokenizer(text).to_list()


def test_vocabulary_file_round_trip(tmp_path):
    for kind, tokenizer in _tokenizers().items():
        path = tmp_path / f"{kind}.vocab"
        tokenizer.save_vocabulary(path)
        same_class = type(tokenizer).from_vocabulary_file(path)
        any_class = T.load_tokenizer(path)
        assert type(any_class) is type(tokenizer)
        assert same_class.get_vocabulary() == tokenizer.get_vocabulary() == any_class.get_vocabulary()
    assert sorted(os.listdir(tmp_path)) == sorted(f"{k}.vocab" for k in _tokenizers())  # no temp files left
    newline = CharTokenizer.from_corpus("a\n b", special_tokens=False, max_length=8)
    newline.save_vocabulary(tmp_path / "nl.vocab")
    restored = CharTokenizer.from_vocabulary_file(tmp_path / "nl.vocab")
    assert restored.get_vocabulary() == ["\n", " ", "a", "b"] and restored.max_length == 8
    assert not restored.special_tokens
    with pytest.raises(ValueError, match="WordPieceTokenizer"):
        CharTokenizer.from_vocabulary_file(tmp_path / "wordpiece.vocab")
    with pytest.raises(FileNotFoundError, match="missing.vocab"):
        T.load_tokenizer(tmp_path / "missing.vocab")


# --------------------------------------------------------------------------- #
# Pipelines.
# --------------------------------------------------------------------------- #


def test_lm_windows_random_offsets_shift_by_one():
    stream = np.arange(1000, dtype=np.int32)
    dataset = D.lm_windows(stream, max_length=16, batch_size=8, seed=3)
    batches = list(dataset.take(3))
    for x, y in batches:
        assert x.shape == (8, 16) and y.shape == (8, 16)
        np.testing.assert_array_equal(y.numpy(), x.numpy() + 1)  # y is x shifted by one
        np.testing.assert_array_equal(np.diff(x.numpy(), axis=1), 1)  # contiguous windows
    assert not np.array_equal(batches[0][0], batches[1][0])  # new offsets every batch
    again = next(iter(D.lm_windows(stream, max_length=16, batch_size=8, seed=3)))
    np.testing.assert_array_equal(again[0].numpy(), batches[0][0].numpy())  # reproducible


def test_lm_windows_deterministic_non_overlapping_from_dataset():
    chunks = tf.data.Dataset.from_tensor_slices(np.arange(100, dtype=np.int64).reshape(10, 10))
    batches = list(D.lm_windows(chunks, max_length=10, batch_size=4, random_offsets=False, shuffle=False))
    x = np.concatenate([b[0].numpy() for b in batches])
    y = np.concatenate([b[1].numpy() for b in batches])
    assert x.shape == (9, 10)  # (100 - 1) // 10 windows
    np.testing.assert_array_equal(x[:, 0], np.arange(0, 90, 10))
    np.testing.assert_array_equal(y, x + 1)
    assert np.unique(y).size == y.size  # each target predicted once
    with pytest.raises(ValueError, match="max_length"):
        D.lm_windows(np.arange(5), max_length=5, batch_size=1)


def _mlm_batch(vocabulary_size=1000):
    rng = np.random.default_rng(0)
    ids = rng.integers(NUM_SPECIAL_TOKENS, vocabulary_size, size=(256, 128)).astype(np.int32)
    lengths = rng.integers(64, 129, size=256)
    ids[np.arange(128)[None, :] >= lengths[:, None]] = PAD
    ids[:, 0] = CLS
    ids[np.arange(256), lengths - 1] = SEP
    return ids


def test_mlm_mask_statistics():
    ids = _mlm_batch()
    features, labels, weights = D.mlm_mask(tf.constant(ids), vocabulary_size=1000, seed=7)
    masked, weights = features["token_ids"].numpy(), weights.numpy()
    np.testing.assert_array_equal(labels.numpy(), ids)
    np.testing.assert_array_equal(features["padding_mask"].numpy(), ids != PAD)
    eligible = ids >= NUM_SPECIAL_TOKENS
    selected = weights == 1.0
    assert set(np.unique(weights)) == {0.0, 1.0}
    assert not selected[~eligible].any()  # never pads nor specials
    np.testing.assert_array_equal(masked[~selected], ids[~selected])  # only selected positions change
    rate = selected.sum() / eligible.sum()
    assert abs(rate - 0.15) < 0.015
    to_mask = (masked == MASK) & selected
    random_token = selected & (masked != MASK) & (masked != ids)
    unchanged = selected & (masked == ids)
    n = selected.sum()
    assert abs(to_mask.sum() / n - 0.8) < 0.03
    assert abs(random_token.sum() / n - 0.1) < 0.03
    assert abs(unchanged.sum() / n - 0.1) < 0.03
    assert masked[random_token].min() >= NUM_SPECIAL_TOKENS and masked[random_token].max() < 1000
    again = D.mlm_mask(tf.constant(ids), vocabulary_size=1000, seed=7)[0]["token_ids"].numpy()
    np.testing.assert_array_equal(again, masked)  # reproducible with a seed


def test_mlm_mask_in_dataset_passes_extra_features():
    ids = _mlm_batch()[:8]
    dataset = tf.data.Dataset.from_tensors({"token_ids": ids, "segment_ids": np.ones_like(ids)}).repeat(2)
    masked = list(D.mlm_mask(dataset, vocabulary_size=1000, seed=1))
    assert len(masked) == 2
    (first, _, w1), (_, labels, w2) = masked
    np.testing.assert_array_equal(first["segment_ids"].numpy(), np.ones_like(ids))
    np.testing.assert_array_equal(labels.numpy(), ids)
    assert not np.array_equal(w1.numpy(), w2.numpy())  # each element gets its own seed
    for bad in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="mask_rate"):
            D.mlm_mask(ids, vocabulary_size=1000, mask_rate=bad)


def test_mlm_mask_uses_the_tokenizers_scattered_special_ids():
    """BERT's layout ([PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103): ids 1..6 are ordinary
    words (an id threshold would never mask them), the special ids are never selected nor drawn."""
    vocabulary = ["[PAD]"] + [f"w{i}" for i in range(1, 100)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocabulary += [f"w{i}" for i in range(104, 160)]
    roles = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
    tokenizer = WordPieceTokenizer(vocabulary, special_tokens=roles)
    assert tokenizer.special_token_ids == (0, 100, 101, 102, 103)
    rng = np.random.default_rng(1)
    ids = rng.integers(1, 160, size=(256, 64)).astype(np.int32)
    ids[:, :8] = rng.integers(1, 7, size=(256, 8))  # low ordinary ids
    ids[:, 8] = 100  # [UNK]
    ids[:, 0], ids[:, -2], ids[:, -1] = 101, 102, 0
    special = np.isin(ids, [0, 100, 101, 102, 103])
    for kwargs in (
        {"tokenizer": tokenizer},
        {"vocabulary_size": 160, "special_token_ids": [103, 0, 101, 100, 102], "mask_token_id": 103},
    ):
        features, labels, weights = D.mlm_mask(tf.constant(ids), seed=3, mask_rate=0.3, **kwargs)
        masked, selected = features["token_ids"].numpy(), weights.numpy() == 1.0
        np.testing.assert_array_equal(labels.numpy(), ids)
        np.testing.assert_array_equal(features["padding_mask"].numpy(), ids != 0)
        assert not selected[special].any()
        assert abs(selected[~special].mean() - 0.3) < 0.02
        assert selected[:, 1:8].mean() > 0.25  # the low ordinary ids are maskable
        np.testing.assert_array_equal(masked[~selected], ids[~selected])
        to_mask = selected & (masked == 103)
        assert abs(to_mask.sum() / selected.sum() - 0.8) < 0.03
        drawn = masked[selected & (masked != 103) & (masked != ids)]
        assert drawn.size > 300 and not np.isin(drawn, [0, 100, 101, 102, 103]).any()
        assert drawn.min() < 20 and drawn.max() > 150  # uniform over both sides of the special block
    with pytest.raises(ValueError, match="not both"):
        D.mlm_mask(ids, tokenizer=tokenizer, num_special_tokens=7)
    with pytest.raises(ValueError, match="special_token_ids"):
        D.mlm_mask(ids, vocabulary_size=160, special_token_ids=[0, 160], mask_token_id=103)
    with pytest.raises(ValueError, match="mask_token_id"):
        D.mlm_mask(ids, vocabulary_size=160, special_token_ids=[0, 100])


def test_seq2seq_pairs_shift_and_truncation():
    source = [[10, 11, 12], [13]]
    target = [[20, 21], [22, 23, 24, 25]]
    ((features, labels),) = list(D.seq2seq_pairs(source, target, batch_size=2))
    decoder, labels = features["decoder_token_ids"].numpy(), labels.numpy()
    np.testing.assert_array_equal(features["encoder_token_ids"].numpy(), [[10, 11, 12], [13, 0, 0]])
    np.testing.assert_array_equal(decoder, [[BOS, 20, 21, 0, 0], [BOS, 22, 23, 24, 25]])
    np.testing.assert_array_equal(labels, [[20, 21, EOS, 0, 0], [22, 23, 24, 25, EOS]])
    np.testing.assert_array_equal(
        decoder[:, 1:][labels[:, :-1] != EOS], labels[:, :-1][labels[:, :-1] != EOS]
    )
    fixed = list(
        D.seq2seq_pairs(
            tf.ragged.constant(source),
            tf.ragged.constant(target),
            batch_size=2,
            source_length=2,
            target_length=3,
            sample_weights=True,
        )
    )
    ((features, labels, weights),) = fixed
    np.testing.assert_array_equal(features["encoder_token_ids"].numpy(), [[10, 11], [13, 0]])
    np.testing.assert_array_equal(features["decoder_token_ids"].numpy(), [[BOS, 20, 21], [BOS, 22, 23]])
    np.testing.assert_array_equal(labels.numpy(), [[20, 21, EOS], [22, 23, EOS]])
    np.testing.assert_array_equal(weights.numpy(), np.ones((2, 3)))
    with pytest.raises(ValueError, match="target_ids"):
        D.seq2seq_pairs(source, target[:1])


def test_tokenize_dataset_into_seq2seq_pairs():
    pairs = tf.data.Dataset.from_tensor_slices((["the cat", "the lower mat"], ["newer", "the newest"]))
    tokenizer = WordTokenizer.from_corpus(CORPUS)
    ids = D.tokenize_dataset(pairs, tokenizer)
    assert ids.element_spec[0] == tf.TensorSpec([None], tf.int32)
    ((features, labels),) = list(D.seq2seq_pairs(ids, batch_size=2))
    assert tokenizer.detokenize(features["encoder_token_ids"]).numpy().tolist() == [
        b"the cat",
        b"the lower mat",
    ]
    assert tokenizer.detokenize(labels).numpy().tolist() == [b"newer", b"the newest"]


def test_pad_and_batch_pads_with_zero_and_truncates():
    dataset = tf.data.Dataset.from_tensor_slices((tf.ragged.constant([[7, 8, 9], [10]]), [1, 0]))
    ((ids, labels),) = list(D.pad_and_batch(dataset, batch_size=2))
    np.testing.assert_array_equal(ids.numpy(), [[7, 8, 9], [10, 0, 0]])
    np.testing.assert_array_equal(labels.numpy(), [1, 0])
    ((ids, _),) = list(D.pad_and_batch(dataset, batch_size=2, max_length=2))
    np.testing.assert_array_equal(ids.numpy(), [[7, 8], [10, 0]])


def test_bucket_by_length_groups_lengths():
    lengths = [1, 9, 2, 8, 3, 7, 4, 6, 2, 9, 1, 8]
    sequences = tf.ragged.constant([[7] * n for n in lengths])
    dataset = tf.data.Dataset.from_tensor_slices(sequences)
    batches = [b.numpy() for b in D.bucket_by_length(dataset, boundaries=[5], batch_sizes=[3, 2])]
    seen = []
    for batch in batches:
        real = (batch != 0).sum(axis=1)
        seen.extend(real.tolist())
        assert (real < 5).all() or (real >= 5).all()  # one bucket per batch
        assert batch.shape[1] == real.max()  # padded (with 0) to the batch's longest only
        assert set(np.unique(batch)) <= {0, 7}
    assert sorted(seen) == sorted(lengths)
    with pytest.raises(ValueError, match="batch_sizes"):
        D.bucket_by_length(dataset, boundaries=[5], batch_sizes=[3])
    with pytest.raises(ValueError, match="boundaries"):
        D.bucket_by_length(dataset, boundaries=[5, 5], batch_sizes=[1, 1, 1])


# --------------------------------------------------------------------------- #
# Loaders.
# --------------------------------------------------------------------------- #


def test_load_text_file_whole_lines_and_gzip(tmp_path):
    text = "line one\n\nline two ü\n"
    plain = tmp_path / "a.txt"
    plain.write_text(text, encoding="utf-8")
    packed = tmp_path / "a.txt.gz"
    packed.write_bytes(gzip.compress(text.encode("utf-8")))
    for path in (plain, packed):
        assert [t.decode() for t in D.load_text_file(path).as_numpy_iterator()] == [text]
        lines = [t.decode() for t in D.load_text_file(path, lines=True, skip_empty=True).as_numpy_iterator()]
        assert lines == ["line one", "line two ü"]
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        D.load_text_file(tmp_path / "nope.txt")


def test_tiny_shakespeare_split_rule(tmp_path):
    rng = random.Random(0)
    text = "".join(rng.choice("abc de\nFG:,é") for _ in range(1_115_394))
    path = tmp_path / "input.txt"
    path.write_text(text, encoding="utf-8")
    sizes = {
        split: len(next(iter(D.load_tiny_shakespeare_file(path, split))).numpy().decode("utf-8"))
        for split in ("train", "validation", "test")
    }
    assert sizes == {"train": 1_003_854, "validation": 55_770, "test": 55_770}  # by characters, not bytes
    parts = D.split_tiny_shakespeare("abcdefghijklmnopqrst")
    assert parts == {"train": "abcdefghijklmnopqr", "validation": "s", "test": "t"}
    with pytest.raises(ValueError, match="split"):
        D.load_tiny_shakespeare_file(path, "valid")


def test_load_tab_pairs(tmp_path):
    path = tmp_path / "spa.txt"
    path.write_text("Go.\tVe.\tCC-BY 2.0 (France)\nI won!\t¡Gané!\n\n", encoding="utf-8")
    pairs = [(a.decode(), b.decode()) for a, b in D.load_tab_pairs(path).as_numpy_iterator()]
    assert pairs == [("Go.", "Ve."), ("I won!", "¡Gané!")]
    swapped = list(D.load_tab_pairs(path, source_column=1, target_column=0).as_numpy_iterator())
    assert swapped[0] == (b"Ve.", b"Go.")
    bad = tmp_path / "bad.txt"
    bad.write_text("Go.\tVe.\nno tab here\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.txt:2"):
        D.load_tab_pairs(bad)


def test_load_aligned_files_gzip(tmp_path):
    english, german = ["A man.", "Two dogs run."], ["Ein Mann.", "Zwei Hunde rennen."]
    (tmp_path / "train.en.gz").write_bytes(gzip.compress(("\n".join(english) + "\n").encode()))
    (tmp_path / "train.de.gz").write_bytes(gzip.compress(("\n".join(german) + "\n").encode()))
    pairs = list(D.load_aligned_files(tmp_path / "train.en.gz", tmp_path / "train.de.gz").as_numpy_iterator())
    assert pairs == [(e.encode(), g.encode()) for e, g in zip(english, german)]
    (tmp_path / "short.de").write_text("Ein Mann.\n")
    with pytest.raises(ValueError, match="short.de"):
        D.load_aligned_files(tmp_path / "train.en.gz", tmp_path / "short.de")
    with pytest.raises(FileNotFoundError, match="target_path"):
        D.load_aligned_files(tmp_path / "train.en.gz", tmp_path / "missing.de")


def test_load_label_sentence_lines(tmp_path):
    path = tmp_path / "stsa.binary.dev"
    path.write_text("1 a gorgeous film .\n0 apparently reassembled , from the floor .\n", encoding="utf-8")
    rows = list(D.load_label_sentence_lines(path).as_numpy_iterator())
    assert rows == [(b"a gorgeous film .", 1), (b"apparently reassembled , from the floor .", 0)]
    bad = tmp_path / "bad.dev"
    bad.write_text("1 fine .\npositive not a label\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.dev:2"):
        D.load_label_sentence_lines(bad)


def test_tfds_loaders_fail_fast_offline(tmp_path):
    start = time.monotonic()
    with pytest.raises(FileNotFoundError, match="download=False"):
        D.load_tiny_shakespeare("train", data_dir=tmp_path / "tfds")
    empty = tmp_path / "manual"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="input.txt"):
        D.load_tiny_shakespeare("train", data_dir=tmp_path / "tfds", manual_dir=empty)
    with pytest.raises(FileNotFoundError, match="SST-2.zip"):
        D.load_glue_sst2("train", data_dir=tmp_path / "tfds", manual_dir=empty)
    with pytest.raises(FileNotFoundError, match="download=False"):
        D.load_ted_hrlr("pt_to_en", data_dir=tmp_path / "tfds")
    with pytest.raises(ValueError, match="pair"):
        D.load_ted_hrlr("xx_to_en", data_dir=tmp_path / "tfds")
    assert time.monotonic() - start < 30
