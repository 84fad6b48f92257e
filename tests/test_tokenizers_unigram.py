"""SentencePiece Unigram tokenizers (T5, Marian) against HuggingFace, id for id.

T5: the fixture `tokenizer.json` (and the `spiece.model` it was converted from) against HuggingFace
`tokenizers` run live on the same lines. Marian: against the ids and decodes of transformers'
`MarianTokenizer` (the `sentencepiece` library), committed by
tests/fixtures/tokenizers/make_unigram_fixtures.py since neither is in the test environment. The
lines: 2,190 of ../shared/data (tests/unigram_corpus.py) and the committed edge cases; the tests that
need ../shared/data skip, saying so, only when that folder is absent. The in-graph tokenizers run as
one `tf.function` over the batch.
"""

import base64
import json
import lzma
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import unigram_corpus

from keras_tfm.tokenizers import UnigramTokenizer, load_marian_tokenizers, load_tokenizer

tokenizers = pytest.importorskip(
    "tokenizers", reason="HuggingFace `tokenizers` (the test extra) is the reference"
)

needs_data = pytest.mark.skipif(
    not os.path.isdir(unigram_corpus.DATA),
    reason=f"shared data folder {os.path.abspath(unigram_corpus.DATA)} is absent (set KERAS_TFM_SHARED_DATA)",
)


def _unpack(name, target):
    """Copies fixture folder `name` to `target`, decompressing the `.xz` files."""
    source = os.path.join(unigram_corpus.FIXTURES, name)
    os.makedirs(target)
    for file in os.listdir(source):
        if file.endswith(".xz"):
            with (
                lzma.open(os.path.join(source, file)) as packed,
                open(os.path.join(target, file[:-3]), "wb") as out,
            ):
                out.write(packed.read())
        else:
            shutil.copy(os.path.join(source, file), target)
    return str(target)


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory):
    return _unpack("unigram_t5", tmp_path_factory.mktemp("unigram") / "t5")


@pytest.fixture(scope="module")
def marian_dir(tmp_path_factory):
    return _unpack("unigram_marian", tmp_path_factory.mktemp("unigram") / "marian")


@pytest.fixture(scope="module")
def t5(t5_dir):
    return UnigramTokenizer.from_pretrained(t5_dir)


@pytest.fixture(scope="module")
def hf_t5(t5_dir):
    return tokenizers.Tokenizer.from_file(os.path.join(t5_dir, "tokenizer.json"))


@pytest.fixture(scope="module")
def lines():
    if not os.path.isdir(unigram_corpus.DATA):
        pytest.skip(f"shared data folder {os.path.abspath(unigram_corpus.DATA)} is absent")
    return unigram_corpus.corpus()


def _ids(tokenizer, texts):
    """Ids as lists; an eager call runs the tokenizer as one traced `tf.function` (once per tokenizer)."""
    return tokenizer(tf.constant(texts)).to_list()


def _hf_ids(reference, texts):
    return [e.ids for e in reference.encode_batch(texts)]


def _mismatches(texts, got, want):
    return [(t, g, w) for t, g, w in zip(texts, got, want) if g != w][:5]


# ---- T5: tokenizer.json and spiece.model ---------------------------------------------------- #


def test_t5_edge_cases_match_tokenizers(t5, hf_t5):
    texts = unigram_corpus.edge_cases()
    assert _mismatches(texts, t5(texts).to_list(), _hf_ids(hf_t5, texts)) == []
    ids = t5("The <extra_id_0> walks in <extra_id_1> park").numpy().tolist()
    assert ids[-1] == t5.eos_id == 1 and t5.token_to_id("<extra_id_0>") in ids
    assert t5.prefix_ids == () and t5.suffix_ids == (1,) and (t5.pad_id, t5.unk_id) == (0, 2)
    # Invalid UTF-8 (which HuggingFace cannot receive) is read with U+FFFD in place of each bad byte.
    assert t5(tf.constant([b"ab\xff\xfec"])).to_list() == t5(["ab\ufffd\ufffdc"]).to_list()
    cleanup = UnigramTokenizer(**{**t5.get_config(), "clean_up_tokenization_spaces": True})
    ids = t5(["I 'm here , are n't you ?"])
    assert cleanup.detokenize(ids).numpy().tolist() == [b"I'm here, aren't you?"]


@needs_data
def test_t5_tokenizer_json_matches_tokenizers(t5, hf_t5, lines):
    assert len(lines) >= 2000
    assert _mismatches(lines, _ids(t5, lines), _hf_ids(hf_t5, lines)) == []


@needs_data
def test_t5_sentencepiece_model_matches_tokenizers(t5_dir, t5, hf_t5, lines):
    """The spiece.model reader builds what transformers' T5Tokenizer converts (the fixture script
    checks that conversion equals this tokenizer.json), hence HuggingFace's ids."""
    from_model = UnigramTokenizer.from_sentencepiece_model(os.path.join(t5_dir, "spiece.model"))
    config, expected = from_model.get_config(), t5.get_config()
    keys = (
        "vocabulary",
        "scores",
        "unk_score",
        "precompiled_charsmap",
        "normalizers",
        "pre_tokenizers",
        "decoder",
    )
    for key in keys + ("special_tokens", "add_eos"):
        assert config[key] == expected[key], key
    assert sorted(map(tuple, config["added_tokens"])) == sorted(map(tuple, expected["added_tokens"]))
    assert _mismatches(lines, _ids(from_model, lines), _hf_ids(hf_t5, lines)) == []


@needs_data
def test_t5_detokenize_matches_hf_decode(t5, hf_t5, lines):
    """`detokenize` drops the special tokens but <unk>, as HF's decode of the same ids does."""
    ids = _hf_ids(hf_t5, lines)
    kept = [[i for i in row if i == t5.unk_id or i not in t5.special_token_ids] for row in ids]
    want = [hf_t5.decode(row, skip_special_tokens=False) for row in kept]
    got = [s.decode("utf-8") for s in t5.detokenize(tf.ragged.constant(ids)).numpy()]
    assert _mismatches(lines, got, want) == []
    plain = [
        t
        for t, row in zip(lines, ids)
        if t.isascii() and t.isprintable() and "<" not in t and t5.unk_id not in row
    ]
    assert len(plain) > 1000
    round_trip = t5.detokenize(t5(plain)).numpy()
    assert [s.decode("utf-8") for s in round_trip] == [" ".join(t.split()) for t in plain]


def _variant(t5_dir, tmp_path, edit):
    with open(os.path.join(t5_dir, "tokenizer.json"), encoding="utf-8") as file:
        data = json.load(file)
    edit(data)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _legacy_pipeline(data):
    """The pipeline older converters wrote: the charsmap, then Strip(right) and Replace(' {2,}', '▁'),
    a `Metaspace` pre-tokenizer alone (legacy `add_prefix_space`)."""
    data["normalizer"] = {
        "type": "Sequence",
        "normalizers": [
            data["normalizer"],
            {"type": "Strip", "strip_left": False, "strip_right": True},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "\u2581"},
        ],
    }
    data["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True}


def _byte_fallback(data):
    """Byte fallback: the 256 <0xXX> tokens appended to the model, unknown runs become bytes."""
    data["model"]["byte_fallback"] = True
    data["model"]["vocab"] += [[f"<0x{b:02X}>", 0.0] for b in range(256)]


@needs_data
@pytest.mark.parametrize("edit", [_legacy_pipeline, _byte_fallback], ids=["legacy_pipeline", "byte_fallback"])
def test_t5_variants_match_tokenizers(t5_dir, tmp_path, lines, edit):
    path = _variant(t5_dir, tmp_path, edit)
    ours = UnigramTokenizer.from_tokenizer_json(path)
    assert _mismatches(lines, _ids(ours, lines), _hf_ids(tokenizers.Tokenizer.from_file(path), lines)) == []


# ---- Marian: source.spm / target.spm + vocab.json ------------------------------------------- #


def _marian_reference():
    with lzma.open(os.path.join(unigram_corpus.FIXTURES, "unigram_marian", "reference.json.xz")) as file:
        return json.loads(file.read())


@pytest.fixture(scope="module")
def marian_reference(lines):
    reference = _marian_reference()
    assert reference["digest"] == unigram_corpus.corpus_digest(lines), "the corpus lines changed"
    return reference


@pytest.fixture(scope="module")
def marian_edge_reference():
    """MarianTokenizer's ids and decodes of the edge cases (the last lines of the reference corpus)."""
    count = len(unigram_corpus.edge_cases())
    return {key: value[-count:] for key, value in _marian_reference().items() if isinstance(value, list)}


@pytest.fixture(scope="module")
def marian(marian_dir):
    return load_marian_tokenizers(marian_dir)


def test_marian_edge_cases_match_marian_tokenizer(marian, marian_edge_reference):
    texts = unigram_corpus.edge_cases()
    source, target = marian
    assert _mismatches(texts, _ids(source, texts), marian_edge_reference["source_ids"]) == []
    assert _mismatches(texts, _ids(target, texts), marian_edge_reference["target_ids"]) == []
    decoded = target.detokenize(tf.ragged.constant(marian_edge_reference["target_ids"])).numpy()
    assert (
        _mismatches(texts, [s.decode("utf-8") for s in decoded], marian_edge_reference["target_decoded"])
        == []
    )


@needs_data
def test_marian_ids_and_decode_match_marian_tokenizer(marian, marian_reference, lines):
    source, target = marian
    assert _mismatches(lines, _ids(source, lines), marian_reference["source_ids"]) == []
    assert _mismatches(lines, _ids(target, lines), marian_reference["target_ids"]) == []
    decoded = [
        s.decode("utf-8")
        for s in target.detokenize(tf.ragged.constant(marian_reference["target_ids"])).numpy()
    ]
    assert _mismatches(lines, decoded, marian_reference["target_decoded"]) == []
    assert (
        source.suffix_ids == (source.eos_id,)
        and source.eos_id == 0
        and source.pad_id == source.vocabulary_size - 1
    )
    code = source(">>es<< hola").numpy().tolist()
    assert code[0] == source.token_to_id(">>es<<") != source.unk_id


# ---- SavedModel, Keras config, vocabulary file ---------------------------------------------- #


class _TokenizerModule(tf.Module):
    def __init__(self, tokenizers):
        super().__init__()
        self.tokenizers = tokenizers

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, strings):
        outputs = {}
        for i, tokenizer in enumerate(self.tokenizers):
            ids = tokenizer(strings)
            outputs.update({f"ids_{i}": ids.to_tensor(default_value=-1), f"lengths_{i}": ids.row_lengths()})
        return outputs

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32)])
    def detokenize(self, ids, which):
        ragged = tf.RaggedTensor.from_tensor(ids, padding=-1)
        return tf.switch_case(which, [lambda t=t: t.detokenize(ragged) for t in self.tokenizers])


def _from_saved(tokenizers, path, texts):
    """Per tokenizer, (ids, detokenized text) from a SavedModel holding them, loaded back; its graphs
    use core TensorFlow ops only (what a stock TF Serving binary runs)."""
    module = _TokenizerModule(tokenizers)
    ops = set()
    concrete = (module.tokenize.get_concrete_function(), module.detokenize.get_concrete_function())
    for function in concrete:
        graph = function.graph.as_graph_def()
        ops |= {node.op for node in graph.node}
        ops |= {node.op for f in graph.library.function for node in f.node_def}
    assert sorted(op for op in ops if not hasattr(tf.raw_ops, op)) == []
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.tokenize})
    restored = tf.saved_model.load(str(path))
    out = restored.signatures["serving_default"](tf.constant(texts))
    results = []
    for i in range(len(tokenizers)):
        ids = [row[:n].tolist() for row, n in zip(out[f"ids_{i}"].numpy(), out[f"lengths_{i}"].numpy())]
        text = restored.detokenize(out[f"ids_{i}"], tf.constant(i)).numpy()
        results.append((ids, [t.decode("utf-8") for t in text]))
    return results


def test_saved_model_gives_the_same_ids(t5, hf_t5, marian, marian_edge_reference, tmp_path):
    """Both rule sets ("tokenizers": T5, "sentencepiece": Marian) served from one SavedModel."""
    texts = unigram_corpus.edge_cases()
    target = marian[1]
    (t5_ids, t5_text), (marian_ids, marian_text) = _from_saved([t5, target], tmp_path / "saved", texts)
    assert _mismatches(texts, t5_ids, _hf_ids(hf_t5, texts)) == []
    assert t5_text == [s.decode("utf-8") for s in t5.detokenize(tf.ragged.constant(t5_ids)).numpy()]
    assert _mismatches(texts, marian_ids, marian_edge_reference["target_ids"]) == []
    assert _mismatches(texts, marian_text, marian_edge_reference["target_decoded"]) == []


def test_config_and_vocabulary_file_round_trip(t5, hf_t5, marian, tmp_path):
    texts = unigram_corpus.edge_cases()
    rebuilt = UnigramTokenizer.from_config(json.loads(json.dumps(t5.get_config())))
    assert _mismatches(texts, _ids(rebuilt, texts), _hf_ids(hf_t5, texts)) == []
    target = marian[1]
    target.save_vocabulary(tmp_path / "vocabulary.txt")
    loaded = load_tokenizer(tmp_path / "vocabulary.txt")
    configs = [{k: v for k, v in t.get_config().items() if k != "name"} for t in (loaded, target)]
    assert type(loaded) is UnigramTokenizer and configs[0] == configs[1]


# ---- refusals ---------------------------------------------------------------------------------- #


def _set(path, value):
    def edit(data):
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    "edit, field",
    [
        (_set(["model", "type"], "BPE"), "model.type"),
        (_set(["model", "fuse_unk"], False), "fuse_unk"),
        (_set(["normalizer"], {"type": "NFKC"}), "normalizer.type"),
        (_set(["normalizer", "precompiled_charsmap"], "not base64!"), "precompiled_charsmap"),
        (_set(["normalizer"], {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}), "pattern"),
        (_set(["pre_tokenizer"], {"type": "ByteLevel", "add_prefix_space": False}), "pre_tokenizer.type"),
        (_set(["pre_tokenizer", "pretokenizers", 1, "prepend_scheme"], "first"), "prepend_scheme"),
        (_set(["decoder"], {"type": "ByteFallback"}), "decoder"),
        (_set(["post_processor"], {"type": "BertProcessing"}), "post_processor.type"),
        (_set(["added_tokens", 3, "lstrip"], True), "added_tokens[3].lstrip"),
        (_set(["added_tokens", 3, "normalized"], True), "added_tokens[3].normalized"),
        (_set(["truncation"], {"max_length": 8}), "truncation"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_tokenizer_json_refuses_what_it_does_not_implement(t5_dir, tmp_path, edit, field):
    path = _variant(t5_dir, tmp_path, edit)
    with pytest.raises(ValueError, match="tokenizer.json") as error:
        UnigramTokenizer.from_tokenizer_json(path)
    assert field in str(error.value)


def _proto(fields):
    """Serializes [(number, value)] as a protobuf message (int: varint, bytes/str: length-delimited,
    float: fixed32, list: a nested message)."""
    out = bytearray()
    for number, value in fields:
        if isinstance(value, list):
            value = _proto(value)
        if isinstance(value, str):
            value = value.encode("utf-8")
        if isinstance(value, float):
            out += _varint(number << 3 | 5) + np.float32(value).tobytes()
        elif isinstance(value, bytes):
            out += _varint(number << 3 | 2) + _varint(len(value)) + value
        else:
            out += _varint(number << 3) + _varint(value & (1 << 64) - 1)
    return bytes(out)


def _varint(value):
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _spm(trainer=(), pieces=()):
    base = [("<pad>", 0.0, 3), ("</s>", 0.0, 3), ("<unk>", 0.0, 2), ("\u2581", -2.0, 1), ("a", -3.0, 1)]
    messages = [(1, [(1, p), (2, s), (3, t)]) for p, s, t in base + list(pieces)]
    return _proto(messages + [(2, [(40, 2), (41, -1), (42, 1), (43, 0), *trainer]), (3, [(1, "identity")])])


@pytest.mark.parametrize(
    "trainer, pieces, field",
    [
        ([(3, 2)], [], "trainer_spec.model_type"),
        ([(35, 1)], [], "trainer_spec.byte_fallback"),
        ([(24, 1)], [], "trainer_spec.treat_whitespace_as_suffix"),
        ([(40, 0)], [], "trainer_spec.unk_id"),
    ],
)
def test_sentencepiece_model_refuses_what_it_does_not_implement(tmp_path, trainer, pieces, field):
    path = tmp_path / "spiece.model"
    path.write_bytes(_spm(trainer, pieces))
    with pytest.raises(ValueError, match="spiece.model") as error:
        UnigramTokenizer.from_sentencepiece_model(path)
    assert field in str(error.value)


def test_hand_written_model_reads_and_malformed_files_are_refused(tmp_path, marian_dir):
    path = tmp_path / "spiece.model"
    path.write_bytes(_spm())
    tokenizer = UnigramTokenizer.from_sentencepiece_model(path, extra_ids=2)
    assert tokenizer(["a a", "b"]).to_list() == [[3, 4, 3, 4, 1], [3, 2, 1]]
    path.write_bytes(_spm()[:-3])
    with pytest.raises(ValueError, match="truncated protobuf"):
        UnigramTokenizer.from_sentencepiece_model(path)
    with pytest.raises(ValueError, match="precompiled_charsmap"):
        UnigramTokenizer(
            **{**tokenizer.get_config(), "precompiled_charsmap": base64.b64encode(b"xy").decode()},
        )
    user = str(tmp_path / "marian_user_defined")
    shutil.copytree(marian_dir, user)
    with open(os.path.join(user, "source.spm"), "wb") as file:
        file.write(_spm(pieces=[("<sep>", 0.0, 4)]))
    with pytest.raises(ValueError, match="source.spm.*pieces\\[\\]\\.type.*USER_DEFINED"):
        load_marian_tokenizers(user)
