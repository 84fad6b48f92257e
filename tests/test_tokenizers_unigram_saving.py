"""Writing SentencePiece Unigram tokenizers back (`save_pretrained`): T5's tokenizer.json, Marian's
source.spm + target.spm + vocab.json.

The fixtures of test_tokenizers_unigram.py are read, written, read again: the same tokenizer
(every option, hence the same ids), and HuggingFace `tokenizers` on the written tokenizer.json
gives the ids it gives on the original. That transformers' T5TokenizerFast, AutoTokenizer and
MarianTokenizer load what `save_pretrained` writes, with the same ids on the whole corpus, is
checked by tests/fixtures/pretrained/check_hf_roundtrip.py (`--corpus`, in the throwaway
environment: the `sentencepiece` library is not in the test environment).
"""

import lzma
import os
import shutil

import pytest
import tensorflow as tf
import unigram_corpus

from keras_tfm.tokenizers import UnigramTokenizer, load_marian_tokenizers
from keras_tfm.tokenizers import sentencepiece_model as S
from keras_tfm.tokenizers.unigram_writer import (
    write_marian_tokenizers,
    write_t5_tokenizer,
    write_unigram_tokenizer,
)

tokenizers = pytest.importorskip(
    "tokenizers", reason="HuggingFace `tokenizers` (the test extra) is the reference"
)


def _unpack(name, target):
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
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("unigram_saving")
    return {name: _unpack(f"unigram_{name}", root / name) for name in ("t5", "marian")}


def _texts():
    return unigram_corpus.corpus() if os.path.isdir(unigram_corpus.DATA) else unigram_corpus.edge_cases()


def _same_tokenizer(got, want):
    """Every constructor option equal (the layer name aside): the same ids and texts."""
    a, b = got.get_config(), want.get_config()
    a.pop("name"), b.pop("name")
    a["added_tokens"], b["added_tokens"] = (
        sorted(map(tuple, a["added_tokens"])),
        sorted(map(tuple, b["added_tokens"])),
    )
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []


@pytest.mark.parametrize("source", ["tokenizer.json", "spiece.model"])
def test_t5_tokenizer_json_reads_back_the_same(folders, tmp_path, source):
    path = os.path.join(folders["t5"], source)
    if source == "tokenizer.json":
        original = UnigramTokenizer.from_pretrained(folders["t5"])
    else:
        original = UnigramTokenizer.from_sentencepiece_model(path)
    write_t5_tokenizer(original, tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["tokenizer.json", "tokenizer_config.json"]
    _same_tokenizer(UnigramTokenizer.from_pretrained(tmp_path), original)
    texts = _texts()
    reference = tokenizers.Tokenizer.from_file(os.path.join(folders["t5"], "tokenizer.json"))
    written = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    want = [e.ids for e in reference.encode_batch(texts)]
    assert [e.ids for e in written.encode_batch(texts)] == want
    if source == "tokenizer.json":  # one traced call: the tokenizer read back gives these ids
        assert UnigramTokenizer.from_pretrained(tmp_path)(tf.constant(texts)).to_list() == want


def test_marian_files_read_back_the_same(folders, tmp_path):
    source, target = load_marian_tokenizers(folders["marian"])
    write_marian_tokenizers(source, target, tmp_path)
    files = ["source.spm", "target.spm", "tokenizer_config.json", "vocab.json"]
    assert sorted(os.listdir(tmp_path)) == files
    again = load_marian_tokenizers(tmp_path)
    _same_tokenizer(again[0], source)
    _same_tokenizer(again[1], target)
    for side in ("source", "target"):
        original = S.read_sentencepiece_model(os.path.join(folders["marian"], f"{side}.spm"))
        written = S.read_sentencepiece_model(tmp_path / f"{side}.spm")
        normal = lambda m: {p: s for p, s, t in zip(m.pieces, m.scores, m.types) if t == S.NORMAL}  # noqa: E731
        assert normal(written) == normal(original)
        assert written.normalizer["precompiled_charsmap"] == original.normalizer["precompiled_charsmap"]


def test_writers_refuse_what_their_format_cannot_hold(folders, tmp_path):
    source, _ = load_marian_tokenizers(folders["marian"])
    with pytest.raises(TypeError, match="compatibility='tokenizers'"):
        write_t5_tokenizer(source, tmp_path)
    t5 = UnigramTokenizer.from_pretrained(folders["t5"])
    with pytest.raises(
        TypeError, match="`source` must be a UnigramTokenizer with compatibility='sentencepiece'"
    ):
        write_marian_tokenizers(t5, t5, tmp_path)
    extra = UnigramTokenizer(**{**t5.get_config(), "extra_pieces": [["zzz", -3.0]]})
    with pytest.raises(ValueError, match="no tokenizer.json form"):
        write_t5_tokenizer(extra, tmp_path)
    with pytest.raises(ValueError, match="a \\(source, target\\) pair; received 3 items"):
        write_unigram_tokenizer((source, source, source), tmp_path)
