"""The four tokenizer kinds of issue 35 inside one SavedModel, id for id on the 2,232-line corpus.

SentencePiece Unigram (T5's tokenizer.json; Marian's source.spm and target.spm + vocab.json), SentencePiece BPE
with byte fallback (Llama's tokenizer.json; a Llama-style tokenizer.model read on its own) and
Qwen2's byte-level BPE are traced into one `tf.Module`, saved, loaded back, and run on
tests/unigram_corpus.py's lines (2,190 of ../shared/data and the edge cases). References: HuggingFace
`tokenizers` live on the tokenizer.json files; the committed ids of transformers' MarianTokenizer
and of the `sentencepiece` library (make_unigram_fixtures.py, make_sentencepiece_bpe_fixtures.py).
The same tokenizers in Python are checked on the same lines by test_tokenizers_unigram.py,
test_tokenizers_bpe_variants.py (its own 4,000 lines) and test_tokenizers_sentencepiece_model.py.
"""

import json
import lzma
import os

import pytest
import tensorflow as tf
import unigram_corpus

from keras_tfm.tokenizers import (
    SentencePieceModelBPETokenizer,
    UnigramTokenizer,
    load_marian_tokenizers,
    load_tokenizer_json,
)

tokenizers = pytest.importorskip(
    "tokenizers", reason="HuggingFace `tokenizers` (the test extra) is the reference"
)
pytestmark = pytest.mark.skipif(
    not os.path.isdir(unigram_corpus.DATA),
    reason=f"shared data folder {os.path.abspath(unigram_corpus.DATA)} is absent (set KERAS_TFM_SHARED_DATA)",
)

KINDS = ("t5_unigram", "marian_source", "marian_target", "llama_bpe", "llama_bpe_model", "qwen2_bpe")


def _unpack(name, target):
    """Fixture folder `name` of tests/fixtures/tokenizers, its `.xz` files decompressed."""
    source = os.path.join(unigram_corpus.FIXTURES, name)
    os.makedirs(target)
    for file in os.listdir(source):
        with open(os.path.join(source, file), "rb") as f:
            data = lzma.decompress(f.read()) if file.endswith(".xz") else f.read()
        with open(os.path.join(target, file.removesuffix(".xz")), "wb") as f:
            f.write(data)
    return str(target)


def _read_xz_json(folder, name):
    with lzma.open(os.path.join(unigram_corpus.FIXTURES, folder, name)) as f:
        return json.loads(f.read().decode("utf-8"))


def _hf_ids(tokenizer_json, lines):
    return [e.ids for e in tokenizers.Tokenizer.from_file(tokenizer_json).encode_batch(lines)]


def _tokenizers_and_references(root, lines):
    """{kind: (tokenizer, reference ids of `lines`)}."""
    t5 = _unpack("unigram_t5", root / "t5")
    marian = _unpack("unigram_marian", root / "marian")
    sp_model = _unpack("sp_bpe_llama", root / "sp_bpe_llama")
    llama, qwen2 = (os.path.join(unigram_corpus.FIXTURES, n) for n in ("llama_bpe", "qwen2_bpe"))
    marian_reference = _read_xz_json("unigram_marian", "reference.json.xz")
    sp_reference = _read_xz_json("sp_bpe_llama", "reference.json.xz")
    for reference in (marian_reference, sp_reference):
        assert reference["digest"] == unigram_corpus.corpus_digest(lines), "the corpus lines changed"
    sp_ids = list(sp_reference["ids"])
    for index, ids in sp_reference["special_lines"].items():
        sp_ids[int(index)] = ids
    source, target = load_marian_tokenizers(marian)
    model_tokenizer = SentencePieceModelBPETokenizer.from_sentencepiece_model(
        os.path.join(sp_model, "tokenizer.model"), add_bos=False
    )
    return {
        "t5_unigram": (
            UnigramTokenizer.from_pretrained(t5),
            _hf_ids(os.path.join(t5, "tokenizer.json"), lines),
        ),
        "marian_source": (source, marian_reference["source_ids"]),
        "marian_target": (target, marian_reference["target_ids"]),
        "llama_bpe": (load_tokenizer_json(llama), _hf_ids(os.path.join(llama, "tokenizer.json"), lines)),
        "llama_bpe_model": (model_tokenizer, sp_ids),
        "qwen2_bpe": (load_tokenizer_json(qwen2), _hf_ids(os.path.join(qwen2, "tokenizer.json"), lines)),
    }


class _Served(tf.Module):
    def __init__(self, tokenizers_by_kind):
        super().__init__()
        self.tokenizers = dict(tokenizers_by_kind)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, strings):
        outputs = {}
        for kind, tokenizer in self.tokenizers.items():
            ids = tokenizer(strings)
            outputs[f"{kind}_ids"] = ids.to_tensor(default_value=-1)
            outputs[f"{kind}_lengths"] = ids.row_lengths()
        return outputs


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """{kind: (ids from the SavedModel, reference ids)} on the corpus; one SavedModel for all kinds."""
    root = tmp_path_factory.mktemp("saved_corpus")
    lines = unigram_corpus.corpus()
    assert len(lines) >= 2000
    pairs = _tokenizers_and_references(root, lines)
    module = _Served({kind: tokenizer for kind, (tokenizer, _) in pairs.items()})
    graph = module.tokenize.get_concrete_function().graph.as_graph_def()
    ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
    assert sorted(op for op in ops if not hasattr(tf.raw_ops, op)) == [], "ops outside core TensorFlow"
    tf.saved_model.save(module, str(root / "saved"), signatures={"serving_default": module.tokenize})
    restored = tf.saved_model.load(str(root / "saved")).signatures["serving_default"]
    out = {k: v.numpy() for k, v in restored(tf.constant(lines)).items()}
    results = {}
    for kind, (_, reference) in pairs.items():
        rows = [row[:n].tolist() for row, n in zip(out[f"{kind}_ids"], out[f"{kind}_lengths"])]
        results[kind] = (lines, rows, reference)
    return results


@pytest.mark.parametrize("kind", KINDS)
def test_saved_model_ids_equal_the_reference_on_the_corpus(served, kind):
    lines, got, want = served[kind]
    bad = [(line, g[:12], w[:12]) for line, g, w in zip(lines, got, want) if g != w]
    assert len(got) == len(want) == len(lines) and bad[:3] == []
