"""Tokenizer package: saved configs keep loading, special tokens from the vocabulary, core-TF-only
graphs, bad input (issue 11) and round trips of the published-vocabulary tokenizers (small
hand-made vocabularies; the comparisons with HuggingFace are in test_tokenizers_pretrained.py)."""

import json

import numpy as np
import pytest
import tensorflow as tf
from tokenizer_test_utils import assert_saved_model_round_trip, tokenizer_module

from keras_tfm import tokenizers as T
from keras_tfm.tokenizers import BytePairTokenizer, ByteTokenizer, CharTokenizer, WordPieceTokenizer

# A tiny BERT-layout vocabulary: special tokens where a published one may put them.
BERT_VOCAB = ["[PAD]", "[unused0]", "the", "cat", "sat", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "on"]
BERT_VOCAB += ["mat", "##s", "!", ",", "cafe", "naive", "日", "本", "a", "##b"]


def _bert_tokenizer(**kwargs):
    special = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
    kwargs.setdefault("add_cls_sep", True)
    return WordPieceTokenizer(BERT_VOCAB, special_tokens=special, normalization="bert", **kwargs)


def _write_bert_checkpoint(directory, config=None):
    directory.mkdir(exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(BERT_VOCAB) + "\n", encoding="utf-8")
    if config is not None:
        (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return directory


def _tiny_bpe():
    byte_chars = list(T.byte_level.bytes_to_unicode().values())
    merges = ["Ġ t", "h e", "t he", "Ġt he", "a t", "c at"]
    vocabulary = byte_chars + ["Ġt", "he", "the", "Ġthe", "at", "cat", "<|endoftext|>"]
    special = {"bos": "<|endoftext|>", "eos": "<|endoftext|>"}
    return BytePairTokenizer(vocabulary, merges, special_tokens=special)


# --------------------------------------------------------------------------- #
# The package split keeps every public import and every saved config working.
# --------------------------------------------------------------------------- #


# --------------------------------------------------------------------------- #
# Special tokens come from the vocabulary.
# --------------------------------------------------------------------------- #


def test_special_token_ids_are_where_the_vocabulary_has_them():
    tokenizer = _bert_tokenizer()
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id) == (
        0,
        5,
        6,
        7,
        8,
    )
    assert tokenizer.special_token_ids == (0, 5, 6, 7, 8) and tokenizer.bos_id is None
    assert tokenizer.prefix_ids == (6,) and tokenizer.suffix_ids == (7,)
    ids = tokenizer(["The cats sat on the mat!", "the dog"], max_length=10).numpy().tolist()
    assert ids[0] == [6, 2, 3, 11, 4, 9, 2, 10, 12, 7]
    assert ids[1] == [6, 2, 5, 7, 0, 0, 0, 0, 0, 0]  # unknown word -> [UNK]=5, padding with [PAD]=0
    assert tokenizer.token_to_id("dog") == 5 and tokenizer.token_to_id("[MASK]") == 8
    # detokenize drops the special tokens (not [UNK]) wherever they are; "[unused0]" is ordinary.
    assert (
        tokenizer.detokenize(tf.constant([6, 2, 3, 11, 5, 1, 7, 0])).numpy().decode()
        == "the cats [UNK] [unused0]"
    )
    np.testing.assert_array_equal(tokenizer.is_special(tf.constant([0, 1, 5, 6, 9])), [1, 0, 1, 1, 0])


def test_fixed_special_tokens_unchanged_for_corpus_tokenizers():
    tokenizer = CharTokenizer.from_corpus("abc", add_bos=True, add_eos=True)
    assert tokenizer.special_token_ids == tuple(range(7))
    assert tokenizer.prefix_ids == (T.BOS,) and tokenizer.suffix_ids == (T.EOS,)
    assert tokenizer("ab").numpy().tolist() == [T.BOS, 7, 8, T.EOS]
    plain = CharTokenizer.from_corpus("abc", special_tokens=False)
    assert plain.special_token_ids == () and plain.pad_id is None


def test_special_token_errors_name_the_field():
    with pytest.raises(ValueError, match="not in the vocabulary"):
        WordPieceTokenizer(["a", "b"], special_tokens={"unk": "[UNK]"})
    with pytest.raises(ValueError, match="unknown roles"):
        WordPieceTokenizer(["a", "[X]"], special_tokens={"start": "[X]"})
    with pytest.raises(TypeError, match="special_tokens"):
        WordPieceTokenizer(["a"], special_tokens="yes")
    with pytest.raises(ValueError, match="add_bos"):
        WordPieceTokenizer(["a", "[UNK]"], special_tokens={"unk": "[UNK]"}, add_bos=True)
    with pytest.raises(TypeError, match="special_tokens"):
        ByteTokenizer(special_tokens={"pad": "<0x00>"})


def test_tokenize_pairs_builds_bert_inputs():
    tokenizer = _bert_tokenizer()
    out = tokenizer.tokenize_pairs(["the cat", "cafe"], ["sat on the mat", "naive !"], max_length=9)
    assert out["token_ids"].numpy().tolist() == [[6, 2, 3, 7, 4, 9, 2, 10, 7], [6, 14, 7, 15, 12, 7, 0, 0, 0]]
    assert out["segment_ids"].numpy().tolist() == [[0, 0, 0, 0, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 0, 0, 0]]
    assert out["padding_mask"].numpy().tolist() == [[1] * 9, [1] * 6 + [0] * 3]
    cut = tokenizer.tokenize_pairs(["the cat"], ["sat on the mat"], max_length=7)  # the longer is cut
    assert cut["token_ids"].numpy().tolist() == [[6, 2, 3, 7, 4, 9, 7]]
    scalar = tokenizer.tokenize_pairs("the cat")
    assert scalar["token_ids"].numpy().tolist() == [6, 2, 3, 7] and scalar["segment_ids"].shape == (4,)
    with pytest.raises(ValueError, match="batch size"):
        tokenizer.tokenize_pairs(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="CLS"):
        CharTokenizer.from_corpus("ab", special_tokens=False).tokenize_pairs("a")


def test_bert_normalisation_cleans_strips_lowercases_and_splits():
    tokenizer = _bert_tokenizer(add_cls_sep=False)
    words = tokenizer._split_words(tf.constant(["Thé\x00 CAT,\u200bsat\t日本!", "  ", "Naïve  CAFÉ"]))
    assert words.to_list() == [
        [b"the", b"cat", b",", b"sat", "日".encode(), "本".encode(), b"!"],
        [],
        [b"naive", b"cafe"],
    ]
    assert tokenizer("Thé CATs, naïve!").numpy().tolist() == [2, 3, 11, 13, 15, 12]


# --------------------------------------------------------------------------- #
# from_pretrained: files and their errors.
# --------------------------------------------------------------------------- #


def test_wordpiece_from_pretrained_reads_vocab_and_config(tmp_path):
    directory = _write_bert_checkpoint(tmp_path / "bert", {"do_lower_case": False, "unk_token": "[UNK]"})
    tokenizer = WordPieceTokenizer.from_pretrained(directory, max_length=6)
    assert not tokenizer.lowercase and tokenizer.max_length == 6 and tokenizer.unk_id == 5
    assert tokenizer("the Cat").numpy().tolist() == [6, 2, 5, 7, 0, 0]  # cased: "Cat" is unknown
    clone = WordPieceTokenizer.from_config(tokenizer.get_config())
    assert clone.get_vocabulary() == BERT_VOCAB and clone.special_tokens == tokenizer.special_tokens
    tokenizer.save_vocabulary(tmp_path / "bert.vocab")
    restored = T.load_tokenizer(tmp_path / "bert.vocab")
    assert restored.get_vocabulary() == BERT_VOCAB and restored.cls_id == 6
    assert restored("the Cat").numpy().tolist() == [6, 2, 5, 7, 0, 0]


def test_from_pretrained_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint directory"):
        WordPieceTokenizer.from_pretrained(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        WordPieceTokenizer.from_pretrained(tmp_path / "empty")
    no_unk = tmp_path / "no_unk"
    no_unk.mkdir()
    (no_unk / "vocab.txt").write_text("[PAD]\n[CLS]\n[SEP]\nthe\n", encoding="utf-8")
    with pytest.raises(ValueError, match="unk_token"):
        WordPieceTokenizer.from_pretrained(no_unk)
    bad_json = _write_bert_checkpoint(tmp_path / "bad_json")
    (bad_json / "tokenizer_config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="tokenizer_config.json"):
        WordPieceTokenizer.from_pretrained(bad_json)
    wrong_token = _write_bert_checkpoint(tmp_path / "wrong", {"mask_token": "<mask>"})
    with pytest.raises(ValueError, match="mask_token"):
        WordPieceTokenizer.from_pretrained(wrong_token)
    with pytest.raises(FileNotFoundError, match="merges.txt"):
        BytePairTokenizer.from_pretrained(tmp_path / "empty")
    bpe = tmp_path / "bpe"
    bpe.mkdir()
    (bpe / "vocab.json").write_text(json.dumps({"a": 0, "b": 1}), encoding="utf-8")
    (bpe / "merges.txt").write_text("#version: 0.2\na b c\n", encoding="utf-8")
    with pytest.raises(ValueError, match="merges.txt"):
        BytePairTokenizer.from_pretrained(bpe)


# --------------------------------------------------------------------------- #
# Byte-level BPE.
# --------------------------------------------------------------------------- #


def test_byte_pair_merges_lowest_rank_first_and_round_trips():
    tokenizer = _tiny_bpe()
    ids = tokenizer(["the cat", " the"]).to_list()
    vocabulary = tokenizer.get_vocabulary()
    assert [vocabulary[i] for i in ids[0]] == ["the", "Ġ", "cat"]  # "Ġc" is no merge: Ġ stays alone
    assert [vocabulary[i] for i in ids[1]] == ["Ġthe"]
    texts = ["it's  a\n\ntest 'S", "", "ünïcode 😀", "\xff"]
    assert tokenizer.detokenize(tokenizer(texts)).numpy().tolist() == [t.encode() for t in texts]
    eos = tokenizer.eos_id
    assert tokenizer.detokenize(tf.constant([ids[0] + [eos]])).numpy().tolist() == [b"the cat"]
    clone = BytePairTokenizer.from_config(tokenizer.get_config())
    assert clone(["the cat"]).to_list() == [ids[0]]


def test_byte_pair_vocabulary_file_keeps_the_merges(tmp_path):
    tokenizer = _tiny_bpe()
    tokenizer.save_vocabulary(tmp_path / "bpe.vocab")
    restored = T.load_tokenizer(tmp_path / "bpe.vocab")
    assert type(restored) is BytePairTokenizer and restored.eos_id == tokenizer.eos_id
    assert restored(["the cat at"]).to_list() == tokenizer(["the cat at"]).to_list()


# --------------------------------------------------------------------------- #
# Exported graphs need core TensorFlow only (a stock TF Serving binary has no tensorflow-text ops).
# --------------------------------------------------------------------------- #


def _op_types(graph_def):
    types = {node.op for node in graph_def.node}
    for function in graph_def.library.function:
        types |= {node.op for node in function.node_def}
    return types


@pytest.mark.parametrize("kind", ["wordpiece_bert", "byte_pair"])
def test_saved_model_uses_core_tf_ops_only(kind, tmp_path):
    tokenizer = _bert_tokenizer() if kind == "wordpiece_bert" else _tiny_bpe()
    module = tokenizer_module(tokenizer, max_length=12)
    inputs = tf.constant(["The cats sat on the mat!", "", "naïve 日本"])
    expected = tokenizer(inputs, max_length=12).numpy()
    ops = _op_types(module.encode.get_concrete_function().graph.as_graph_def())
    ops |= _op_types(module.decode.get_concrete_function().graph.as_graph_def())
    not_core = sorted(op for op in ops if not hasattr(tf.raw_ops, op))
    assert not not_core, f"ops outside core TensorFlow: {not_core}"
    assert_saved_model_round_trip(module, inputs, expected, tmp_path / "export")


# --------------------------------------------------------------------------- #
# Issue 11: bad input and lossless bytes.
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("corpus", [[], (), ""])
def test_empty_corpus_is_a_clear_error(corpus):
    with pytest.raises(ValueError, match="`corpus`") as error:
        CharTokenizer.from_corpus(corpus)
    assert "float32" not in str(error.value)
    with pytest.raises(ValueError, match="`corpus`"):
        T.WordTokenizer.from_corpus(corpus)


def test_byte_tokenizer_invalid_utf8_is_lossless_raw_and_documented_replace():
    raw = b"\xff\xfeab"
    replace, lossless = ByteTokenizer(), ByteTokenizer(errors="raw")
    ids = replace(raw)
    assert ids.numpy().tolist() == [b + 7 for b in raw]  # tokenize keeps every byte
    assert lossless.detokenize(ids).numpy() == raw  # errors="raw": exact bytes back
    assert replace.detokenize(ids).numpy().decode() == "\ufffd\ufffdab"  # default: valid UTF-8 out
    text = "Grüße 😀 日本"
    assert replace.detokenize(replace(text)).numpy().decode() == text  # valid UTF-8 round-trips
    with pytest.raises(ValueError, match="errors"):
        ByteTokenizer(errors="surrogateescape")
