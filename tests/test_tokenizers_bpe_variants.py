"""SentencePiece BPE (Llama, Mistral) and Qwen2 BPE against HuggingFace `tokenizers`, id for id.

The tokenizers are the committed fixtures of tests/fixtures/tokenizers (made by
make_bpe_fixtures.py); the reference is `tokenizers.Tokenizer.from_file` on the same tokenizer.json,
computed here. The corpus: Anki English and Spanish, Multi30k German and tiny-shakespeare lines from
../shared/data (those tests skip, saying so, only when that folder is absent) plus the committed
edge cases (always run).
"""

import copy
import gzip
import itertools
import json
import os
import random
import unicodedata

import numpy as np
import pytest
import tensorflow as tf

from keras_tfm.tokenizers import (
    BytePairTokenizer,
    Qwen2BPETokenizer,
    SentencePieceBPETokenizer,
    WordPieceTokenizer,
    load_tokenizer,
    load_tokenizer_json,
)
from keras_tfm.tokenizers.bpe_merges import MergeRanks, merge_rules
from keras_tfm.tokenizers.byte_level import gpt2_class_tables
from keras_tfm.tokenizers.nfc import NFC, nfc_tables
from keras_tfm.tokenizers.qwen2_pieces import qwen2_pieces
from keras_tfm.tokenizers.tokenizer_json_fields import QWEN2_REGEX

tokenizers = pytest.importorskip(
    "tokenizers", reason="HuggingFace `tokenizers` (the test extra) is the reference"
)

HERE = os.path.dirname(__file__)
FIXTURES = os.path.join(HERE, "fixtures", "tokenizers")
NAMES = ["llama_bpe", "sp_bpe_metaspace_first", "sp_bpe_metaspace_always", "qwen2_bpe"]
CLASSES = {"qwen2_bpe": Qwen2BPETokenizer}
DATA = os.environ.get("KERAS_TFM_SHARED_DATA", os.path.join(HERE, os.pardir, os.pardir, "shared", "data"))

with open(os.path.join(FIXTURES, "edge_cases.json"), encoding="utf-8") as _f:
    EDGE_CASES = json.load(_f)


def _corpus():
    """Anki English + Spanish (1,000 pairs), Multi30k German (1,000), tiny-shakespeare (1,000): 4,000 lines."""
    if not os.path.isdir(DATA):
        pytest.skip(f"shared data folder {os.path.abspath(DATA)} is absent")
    with open(os.path.join(DATA, "spa_eng_anki", "spa-eng", "spa.txt"), encoding="utf-8") as f:
        pairs = [line.split("\t")[:2] for line in f.read().split("\n") if "\t" in line]
    anki = [side for pair in pairs[::100][:1000] for side in pair]
    with gzip.open(os.path.join(DATA, "multi30k_task1_raw", "train.de.gz"), "rt", encoding="utf-8") as f:
        german = f.read().split("\n")[::29][:1000]
    with open(os.path.join(DATA, "tiny_shakespeare", "input.txt"), encoding="utf-8") as f:
        shakespeare = f.read().split("\n")[::40][:1000]
    return anki + german + shakespeare


@pytest.fixture(scope="module")
def corpus():
    return _corpus()


class Case:
    """One fixture: its name, our tokenizer, HuggingFace's, and our encode / decode traced once."""

    def __init__(self, name):
        path = os.path.join(FIXTURES, name)
        self.name = name
        self.reference = tokenizers.Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
        self.tokenizer = load_tokenizer_json(path)
        self.encode = tf.function(
            lambda s: self.tokenizer(s), input_signature=[tf.TensorSpec([None], tf.string)]
        )
        self.decode = tf.function(
            lambda ids: self.tokenizer.detokenize(ids),
            input_signature=[tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)],
        )

    def ids(self, texts):
        return self.encode(tf.constant(texts)).to_list()


@pytest.fixture(scope="module", params=NAMES)
def case(request):
    return Case(request.param)


def _assert_same_ids(texts, ours, reference):
    expected = [e.ids for e in reference.encode_batch(texts)]
    bad = [(t, a, b) for t, a, b in zip(texts, ours, expected) if a != b]
    assert not bad, (
        f"{len(bad)} of {len(texts)} differ; first: {bad[0][0]!r}: {bad[0][1][:12]} vs {bad[0][2][:12]}"
    )


def test_loader_picks_the_class(case):
    assert type(case.tokenizer) is CLASSES.get(case.name, SentencePieceBPETokenizer)


def _assert_same_text(case, ids):
    ragged = tf.ragged.constant(ids, dtype=tf.int32, ragged_rank=1)
    ours = [t.decode("utf-8") for t in case.decode(ragged).numpy()]
    expected = case.reference.decode_batch(ids, skip_special_tokens=True)
    bad = [(i, a, b) for i, a, b in zip(ids, ours, expected) if a != b]
    assert not bad, f"{len(bad)} differ; first: {bad[0]}"


def test_ids_and_text_equal_huggingface_on_the_corpus(case, corpus):
    assert len(corpus) >= 2000
    ids = case.ids(corpus)
    _assert_same_ids(corpus, ids, case.reference)
    _assert_same_text(case, ids)


def test_ids_equal_huggingface_on_edge_cases(case):
    _assert_same_ids(EDGE_CASES, case.ids(EDGE_CASES), case.reference)


def test_special_tokens_follow_the_post_processor(case):
    name, tokenizer, reference = case.name, case.tokenizer, case.reference
    ids = reference.encode("a").ids
    expected_bos = {"llama_bpe": 1, "sp_bpe_metaspace_always": 1}.get(name)
    assert tokenizer.prefix_ids == ((expected_bos,) if expected_bos is not None else ())
    assert tokenizer.suffix_ids == ((2,) if name == "sp_bpe_metaspace_always" else ())
    assert list(tokenizer.prefix_ids) == ids[: len(tokenizer.prefix_ids)]
    specials = {t["content"] for t in _fixture_json(name)["added_tokens"]}
    vocabulary = tokenizer.get_vocabulary()
    assert {vocabulary[i] for i in tokenizer.special_token_ids} == specials


def test_detokenize_equals_huggingface_decode(case):
    ids = [e.ids for e in case.reference.encode_batch(EDGE_CASES)]
    # Random id sequences too: byte tokens out of order (invalid UTF-8), special tokens anywhere.
    rng = random.Random(0)
    size = case.tokenizer.vocabulary_size
    ids += [[rng.randrange(size) for _ in range(rng.randrange(12))] for _ in range(1000)]
    _assert_same_text(case, ids)


@pytest.mark.parametrize("name", ["llama_bpe", "qwen2_bpe"])
def test_ids_inside_a_saved_model(name, tmp_path):
    tokenizer = load_tokenizer_json(os.path.join(FIXTURES, name))
    reference = tokenizers.Tokenizer.from_file(os.path.join(FIXTURES, name, "tokenizer.json"))

    class Module(tf.Module):
        def __init__(self):
            super().__init__()
            self.tokenizer = tokenizer

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def tokenize(self, strings):
            ids = self.tokenizer(strings)
            return {"ids": ids.to_tensor(default_value=-1), "lengths": ids.row_lengths()}

    module = Module()
    graph = module.tokenize.get_concrete_function().graph.as_graph_def()
    ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    assert not sorted(op for op in ops if not hasattr(tf.raw_ops, op)), "ops outside core TensorFlow"
    tf.saved_model.save(module, str(tmp_path), signatures={"tokenize": module.tokenize})
    restored = tf.saved_model.load(str(tmp_path)).signatures["tokenize"]
    out = restored(tf.constant(EDGE_CASES))
    rows = [row[:n].tolist() for row, n in zip(out["ids"].numpy(), out["lengths"].numpy())]
    assert rows == [e.ids for e in reference.encode_batch(EDGE_CASES)]


def test_configuration_round_trips(case, tmp_path):
    tokenizer = case.tokenizer
    texts = tf.constant(EDGE_CASES)
    expected = case.ids(EDGE_CASES)
    rebuilt = type(tokenizer).from_config(tokenizer.get_config())
    assert rebuilt(texts).to_list() == expected
    tokenizer.save_vocabulary(tmp_path / "vocab.txt")
    assert load_tokenizer(tmp_path / "vocab.txt")(texts).to_list() == expected


def test_dense_output_is_padded_with_pad_id():
    tokenizer = load_tokenizer_json(os.path.join(FIXTURES, "qwen2_bpe"))
    pad = tokenizer.token_to_id("<|endoftext|>")
    assert tokenizer.pad_id == pad and tokenizer.eos_id == tokenizer.token_to_id("<|im_end|>")
    dense = tokenizer(["a", "a b c d e f"], max_length=4).numpy()
    assert dense.shape == (2, 4) and dense[0, 1:].tolist() == [pad] * 3


# --------------------------------------------------------------------------- #
# Variants of the files: other options of the same parts, against HuggingFace.
# --------------------------------------------------------------------------- #


def _fixture_json(name):
    with open(os.path.join(FIXTURES, name, "tokenizer.json"), encoding="utf-8") as f:
        return json.load(f)


def _variant(data, tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return load_tokenizer_json(path), tokenizers.Tokenizer.from_str(json.dumps(data))


def _sentencepiece_variants():
    llama = _fixture_json("llama_bpe")
    no_fallback = copy.deepcopy(llama)
    no_fallback["model"]["byte_fallback"] = False
    no_fuse = copy.deepcopy(no_fallback)
    no_fuse["model"]["fuse_unk"] = False
    no_unk = copy.deepcopy(no_fallback)
    no_unk["model"]["unk_token"] = None
    split = _fixture_json("sp_bpe_metaspace_first")
    split["pre_tokenizer"]["split"] = True
    ignore = copy.deepcopy(llama)
    ignore["model"]["ignore_merges"] = True
    inner = copy.deepcopy(llama)  # a merged token with "▁" inside: words can no longer be cut at "▁"
    inner["model"]["vocab"]["e\u2581"] = len(inner["model"]["vocab"])
    inner["model"]["merges"].append(["e", "\u2581"])
    no_strip = copy.deepcopy(llama)
    no_strip["decoder"]["decoders"] = no_strip["decoder"]["decoders"][:3]
    names = ["no_fallback", "no_fuse", "no_unk", "split", "ignore_merges", "inner_metaspace", "no_strip"]
    return dict(zip(names, [no_fallback, no_fuse, no_unk, split, ignore, inner, no_strip]))


@pytest.mark.parametrize("variant", list(_sentencepiece_variants()))
def test_sentencepiece_variants_equal_huggingface(variant, tmp_path):
    ours, reference = _variant(_sentencepiece_variants()[variant], tmp_path)
    texts = EDGE_CASES + ["ein Hund läuft über die Straße", "e e▁e ee  e"]
    _assert_same_ids(texts, ours(tf.constant(texts)).to_list(), reference)
    ids = [e.ids for e in reference.encode_batch(texts)]
    ours_text = [t.decode("utf-8") for t in ours.detokenize(tf.ragged.constant(ids, ragged_rank=1)).numpy()]
    assert ours_text == reference.decode_batch(ids, skip_special_tokens=True)


@pytest.mark.parametrize("variant", ["ignore_merges", "no_nfc"])
def test_qwen2_variants_equal_huggingface(variant, tmp_path):
    data = _fixture_json("qwen2_bpe")
    if variant == "ignore_merges":
        data["model"]["ignore_merges"] = True
    else:
        data["normalizer"] = None
    ours, reference = _variant(data, tmp_path)
    _assert_same_ids(EDGE_CASES, ours(tf.constant(EDGE_CASES)).to_list(), reference)


@pytest.mark.parametrize("name", NAMES)
def test_normalized_added_tokens_equal_huggingface(name, tmp_path):
    # `normalized: true`: matched in the normalised text (Llama 2: "▁<s>", so "Hello<s>" keeps "<s>" as text).
    data = _fixture_json(name)
    for token in data["added_tokens"]:
        token["normalized"] = True
    ours, reference = _variant(data, tmp_path)
    texts = EDGE_CASES + [
        "Hello<s>x",
        "a <s> b",
        "<s>Hi",
        " <s> ",
        "x<unk>y </s>b",
        "<|im_start|>é<|im_end|>",
    ]
    _assert_same_ids(texts, ours(tf.constant(texts)).to_list(), reference)


def test_gpt2_tokenizer_json_gives_the_byte_pair_tokenizer(tmp_path):
    trained = tokenizers.ByteLevelBPETokenizer()
    text = [line for line in EDGE_CASES if "<" not in line] * 3
    trained.train_from_iterator(text, vocab_size=400, show_progress=False, special_tokens=["<|endoftext|>"])
    trained.save(str(tmp_path / "tokenizer.json"))
    ours = load_tokenizer_json(tmp_path)
    assert type(ours) is BytePairTokenizer
    _assert_same_ids(text, ours(tf.constant(text)).to_list(), trained)


@pytest.mark.skipif(not os.path.isdir(os.path.join(DATA, "all-MiniLM-L6-v2")), reason="shared MiniLM absent")
def test_wordpiece_tokenizer_json_gives_the_wordpiece_tokenizer():
    path = os.path.join(DATA, "all-MiniLM-L6-v2")
    ours = load_tokenizer_json(os.path.join(path, "tokenizer.json"))
    assert type(ours) is WordPieceTokenizer
    reference = tokenizers.Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
    reference.no_truncation()
    reference.no_padding()
    texts = [t for t in EDGE_CASES if len(t) < 200]
    _assert_same_ids(texts, ours(tf.constant(texts)).to_list(), reference)


# --------------------------------------------------------------------------- #
# The pieces: merge order, NFC, Qwen2's regex.
# --------------------------------------------------------------------------- #


def test_merge_order_is_huggingface_when_a_merged_token_has_a_lower_rank_rule():
    # ("ab", "a") ranks before ("a", "b"): "abab" is [aba, b] for HuggingFace, not [ab, ab].
    vocab = {"a": 0, "b": 1, "ab": 2, "aba": 3, "abab": 4, "ba": 5, "bab": 6}
    merges = [("ab", "a"), ("a", "b"), ("b", "a"), ("ab", "ab"), ("ba", "b")]
    reference = tokenizers.models.BPE(vocab=vocab, merges=merges)
    ranks = MergeRanks(len(vocab), *merge_rules(vocab, merges, "test"))
    assert ranks.num_cascading == 1
    words = ["".join(p) for n in range(1, 9) for p in itertools.product("ab", repeat=n)]
    ids = ranks(tf.ragged.constant([[vocab[c] for c in w] for w in words], dtype=tf.int32)).to_list()
    assert ids == [[t.id for t in reference.tokenize(w)] for w in words]
    assert ids[words.index("abab")] == [vocab["aba"], vocab["b"]]


def _nfc(strings):
    codepoints = tf.strings.unicode_decode(tf.constant([s.encode("utf-8") for s in strings]), "UTF-8")
    return ["".join(map(chr, row)) for row in NFC()(codepoints).to_list()]


def test_nfc_equals_unicodedata_on_every_composing_character_and_random_sequences():
    decompositions, ccc, pairs, seconds = nfc_tables()
    interesting = sorted(
        set(decompositions) | {cp for p in pairs for cp in p} | set(np.flatnonzero(ccc).tolist())
    )
    singles = [chr(cp) for cp in interesting]
    assert _nfc(singles) == [unicodedata.normalize("NFC", s) for s in singles]
    pools = [
        [chr(cp) for cp in interesting if ccc[cp]],
        [chr(cp) for cp in interesting if not ccc[cp]],
        ["a", "e", " ", "가", "\u1100", "\u1161", "\u11a8", "\u0dd9", "\u0dcf", "\u0dca"],
    ]
    rng = random.Random(0)
    texts = ["".join(rng.choice(rng.choice(pools)) for _ in range(rng.randrange(10))) for _ in range(5000)]
    assert _nfc(texts) == [unicodedata.normalize("NFC", t) for t in texts]
    reference = tokenizers.normalizers.NFC()
    agree = [t for t in texts if reference.normalize_str(t) == unicodedata.normalize("NFC", t)]
    assert _nfc(agree) == [reference.normalize_str(t) for t in agree]


def test_qwen2_pieces_equal_the_huggingface_split():
    reference = tokenizers.pre_tokenizers.Split(tokenizers.Regex(QWEN2_REGEX), behavior="isolated")
    alphabet = list("abs'StTrReElLvmdD1!( \t\n\r") + [
        "\u017f",
        "  ",
        "\r\n",
        "é",
        "\u00a0",
        "日",
        "\u0301",
        "\x0b",
        "😀",
    ]
    rng = random.Random(1)
    texts = [
        "".join(rng.choice(alphabet) for _ in range(rng.randrange(14))) for _ in range(20000)
    ] + EDGE_CASES
    codepoints = tf.strings.unicode_decode(tf.constant(texts), "UTF-8")
    ours = qwen2_pieces(codepoints, *gpt2_class_tables()).to_list()
    expected = [[p.encode("utf-8") for p, _ in reference.pre_tokenize_str(t)] for t in texts]
    bad = [(t, a, b) for t, a, b in zip(texts, ours, expected) if a != b]
    assert not bad, f"{len(bad)} differ; first: {bad[0]}"


# --------------------------------------------------------------------------- #
# Refusals: every part that is not implemented is named.
# --------------------------------------------------------------------------- #


def _edit(name, edit):
    data = _fixture_json(name)
    edit(data)
    return data


LLAMA3_REGEX = QWEN2_REGEX.replace(r"\p{N}|", r"\p{N}{1,3}|")
REFUSALS = [
    ("llama_bpe", lambda d: d["model"].update(type="WordLevel"), "`model.type` 'WordLevel'"),
    ("llama_bpe", lambda d: d["model"].update(type="Unigram"), "UnigramTokenizer does not implement"),
    ("llama_bpe", lambda d: d.update(normalizer={"type": "NFKC"}), "`normalizer` {'type': 'NFKC'}"),
    (
        "llama_bpe",
        lambda d: d["normalizer"]["normalizers"].append({"type": "Lowercase"}),
        "`normalizer.normalizers[2]`",
    ),
    (
        "llama_bpe",
        lambda d: d.update(pre_tokenizer={"type": "Whitespace"}),
        "`pre_tokenizer` {'type': 'Whitespace'}",
    ),
    ("llama_bpe", lambda d: d.update(decoder={"type": "Metaspace"}), "`decoder`"),
    # A RobertaProcessing without its `cls` pair (BART's processor is read).
    ("llama_bpe", lambda d: d.update(post_processor={"type": "RobertaProcessing"}), "`post_processor.cls`"),
    (
        "llama_bpe",
        lambda d: d["post_processor"]["single"].insert(0, d["post_processor"]["single"][0]),
        "single",
    ),
    ("llama_bpe", lambda d: d["model"].update(dropout=0.1), "`model.dropout` 0.1"),
    (
        "llama_bpe",
        lambda d: d["model"].update(continuing_subword_prefix="##"),
        "`model.continuing_subword_prefix`",
    ),
    ("llama_bpe", lambda d: d["added_tokens"][1].update(lstrip=True), "`added_tokens[1].lstrip`"),
    ("qwen2_bpe", lambda d: d["model"].update(byte_fallback=True), "`model.byte_fallback` True"),
    (
        "qwen2_bpe",
        lambda d: d["pre_tokenizer"]["pretokenizers"][0]["pattern"].update(Regex=LLAMA3_REGEX),
        "pattern",
    ),
    ("qwen2_bpe", lambda d: d.update(normalizer={"type": "NFKC"}), "`normalizer` {'type': 'NFKC'}"),
    ("qwen2_bpe", lambda d: d.update(decoder=None), "`decoder` None"),
]


@pytest.mark.parametrize("name, edit, field", REFUSALS, ids=[r[2] for r in REFUSALS])
def test_unsupported_parts_are_refused_by_name(name, edit, field, tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(_edit(name, edit)), encoding="utf-8")
    with pytest.raises(ValueError) as error:
        load_tokenizer_json(path)
    assert field in str(error.value) and str(path) in str(error.value)


@pytest.mark.parametrize("name", NAMES)
def test_byte_level_reader_refuses_other_tokenizer_json(name):
    with pytest.raises(ValueError, match="not GPT-2's byte-level BPE") as error:
        BytePairTokenizer.from_pretrained(os.path.join(FIXTURES, name))
    assert ("`normalizer`" if name == "qwen2_bpe" else "`model.byte_fallback`") in str(error.value)


def test_byte_level_reader_refuses_qwen2_vocab_and_merges(tmp_path):
    data = _fixture_json("qwen2_bpe")
    (tmp_path / "vocab.json").write_text(json.dumps(data["model"]["vocab"]), encoding="utf-8")
    merges = "".join(" ".join(m) + "\n" for m in data["model"]["merges"])
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + merges, encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text('{"tokenizer_class": "Qwen2Tokenizer"}', encoding="utf-8")
    with pytest.raises(ValueError, match="`tokenizer_class` 'Qwen2Tokenizer'"):
        BytePairTokenizer.from_pretrained(tmp_path)
