"""SentencePiece BPE `tokenizer.model` files (Llama, Mistral) against the `sentencepiece` library, id for id.

Fixtures: tests/fixtures/tokenizers/sp_bpe_llama (2,000 pieces, Llama's options, byte fallback) and
sp_bpe_plain (500 pieces, remove_extra_whitespaces, no byte fallback), trained and encoded with
`sentencepiece` by make_sentencepiece_bpe_fixtures.py (not in the test environment). The lines:
tests/unigram_corpus.py (2,190 lines of ../shared/data, skipped, saying so, when it is absent; and
the committed edge cases, always). Control and unknown pieces' text (`</s>`, `<unk>`) is cut out as
tokens, as HuggingFace does; the fixture holds those lines' ids. The merge order is also checked against a plain-Python
transcription of the library's BPE loop on hand-made models.
"""

import json
import lzma
import os
import random
import shutil

import pytest
import tensorflow as tf
import unigram_corpus

from keras_tfm.checkpoints.tokenizer_files import pretrained_tokenizer, save_tokenizer
from keras_tfm.tokenizers import SentencePieceModelBPETokenizer, load_tokenizer_json
from keras_tfm.tokenizers import sentencepiece_model as S
from keras_tfm.tokenizers.sentencepiece_bpe_model import read_sentencepiece_bpe

NAMES = ("sp_bpe_llama", "sp_bpe_plain")
needs_data = pytest.mark.skipif(
    not os.path.isdir(unigram_corpus.DATA),
    reason=f"shared data folder {os.path.abspath(unigram_corpus.DATA)} is absent (set KERAS_TFM_SHARED_DATA)",
)


def _unpack(name, target):
    os.makedirs(target)
    for file in os.listdir(os.path.join(unigram_corpus.FIXTURES, name)):
        with lzma.open(os.path.join(unigram_corpus.FIXTURES, name, file)) as packed:
            with open(os.path.join(target, file[:-3]), "wb") as out:
                out.write(packed.read())
    return str(target)


class Case:
    """One fixture: its folder, the `sentencepiece` reference, our tokenizer and its traced encode."""

    def __init__(self, name, folder):
        self.name, self.folder = name, folder
        with open(os.path.join(folder, "reference.json"), encoding="utf-8") as f:
            self.reference = json.load(f)
        self.tokenizer = SentencePieceModelBPETokenizer.from_sentencepiece_model(
            os.path.join(folder, "tokenizer.model"), add_bos=False
        )
        self.encode = tf.function(self.tokenizer, input_signature=[tf.TensorSpec([None], tf.string)])

    def ids(self, texts):
        return self.encode(tf.constant(texts)).to_list()

    def expected(self, first=0):
        """The reference ids from line `first` on, control pieces' lines as HuggingFace reads them."""
        ids = list(self.reference["ids"])
        for index, special in self.reference["special_lines"].items():
            ids[int(index)] = special
        return ids[first:]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    root = tmp_path_factory.mktemp("sp_bpe")
    return {name: Case(name, _unpack(name, root / name)) for name in NAMES}


def _mismatches(texts, got, want):
    return [(t, g[:12], w[:12]) for t, g, w in zip(texts, got, want) if g != w][:3]


@pytest.mark.parametrize("name", NAMES)
def test_edge_cases_equal_sentencepiece(cases, name):
    case, texts = cases[name], unigram_corpus.edge_cases()
    assert _mismatches(texts, case.ids(texts), case.expected(-len(texts))) == []
    special = {int(i) for i in case.reference["special_lines"]}
    first = len(case.reference["ids"]) - len(texts)
    assert special == {
        first + i for i, t in enumerate(texts) if any(s in t for s in ("<s>", "</s>", "<unk>"))
    }


@needs_data
@pytest.mark.parametrize("name", NAMES)
def test_ids_equal_sentencepiece_on_the_corpus(cases, name):
    case, lines = cases[name], unigram_corpus.corpus()
    assert case.reference["digest"] == unigram_corpus.corpus_digest(lines), "the corpus lines changed"
    assert len(lines) >= 2000
    assert _mismatches(lines, case.ids(lines), case.expected()) == []


@pytest.mark.parametrize("name", NAMES)
def test_detokenize_equals_sentencepiece_decode(cases, name):
    """On the rows without `<unk>` (which `detokenize` drops as a special token, as HuggingFace's
    `skip_special_tokens`, where sentencepiece writes " ⁇ ")."""
    case, unk = cases[name], cases[name].tokenizer.token_to_id("<unk>")
    rows = [
        (ids, text) for ids, text in zip(case.reference["ids"], case.reference["decoded"]) if unk not in ids
    ]
    assert len(rows) >= 2000
    decoded = case.tokenizer.detokenize(tf.ragged.constant([ids for ids, _ in rows])).numpy()
    assert [t.decode("utf-8") for t in decoded] == [text for _, text in rows]


def test_options_come_from_the_model(cases):
    llama, plain = (cases[n].tokenizer for n in NAMES)
    assert llama.get_config()["byte_fallback"] and not plain.get_config()["byte_fallback"]
    assert plain.remove_extra_whitespaces and not llama.remove_extra_whitespaces
    assert llama.token_to_id("<unk>") == 0 and (llama.bos_id, llama.eos_id) == (1, 2)
    assert llama.special_token_ids == (0, 1, 2)
    with_bos = SentencePieceModelBPETokenizer(**{**llama.get_config(), "add_bos": True})
    assert with_bos(["hi"]).to_list() == [[1] + llama(["hi"]).to_list()[0]]
    restored = SentencePieceModelBPETokenizer.from_config(plain.get_config())
    texts = unigram_corpus.edge_cases()
    assert restored(texts).to_list() == cases["sp_bpe_plain"].ids(texts)


def test_checkpoint_with_only_tokenizer_model(tmp_path):
    """Mistral's fixture folder without its tokenizer.json: HuggingFace's ids, BOS from the config."""
    source = os.path.join(os.path.dirname(__file__), "fixtures", "pretrained", "tiny_mistral")
    folder = tmp_path / "mistral"
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("tokenizer.json", "model.safetensors"))
    with open(os.path.join(source, "reference.json"), encoding="utf-8") as f:
        tokenization = json.load(f)["tokenization"]
    tokenizer = pretrained_tokenizer(folder)
    assert type(tokenizer) is SentencePieceModelBPETokenizer
    assert tokenizer(tokenization["sentences"]).to_list() == tokenization["transformers_ids"]
    config_file = folder / "tokenizer_config.json"
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "add_bos_token": False}))
    without = pretrained_tokenizer(folder)
    assert without(tokenization["sentences"]).to_list() == tokenization["sentencepiece_ids_no_specials"]


def test_save_writes_a_tokenizer_json_huggingface_reads_alike(cases, tmp_path):
    tokenizers = pytest.importorskip("tokenizers", reason="HuggingFace `tokenizers` is the reference")
    case = cases["sp_bpe_llama"]
    tokenizer = SentencePieceModelBPETokenizer(**{**case.tokenizer.get_config(), "add_bos": True})
    save_tokenizer(tokenizer, tmp_path)
    texts = unigram_corpus.corpus() if os.path.isdir(unigram_corpus.DATA) else unigram_corpus.edge_cases()
    ours = [[1] + ids for ids in case.ids(texts)]
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert _mismatches(texts, [e.ids for e in hf.encode_batch(texts)], ours) == []
    assert load_tokenizer_json(tmp_path)(texts).to_list() == ours
    with pytest.raises(ValueError, match="remove_extra_whitespaces"):
        save_tokenizer(cases["sp_bpe_plain"].tokenizer, tmp_path / "plain")


# ---- refused by name -------------------------------------------------------------------------- #


def _edited(model, tmp_path, edit):
    edited = S.SentencePieceModel(
        list(model.pieces),
        list(model.scores),
        list(model.types),
        dict(model.trainer),
        dict(model.normalizer),
        False,
        "",
    )
    edit(edited)
    path = tmp_path / "tokenizer.model"
    S.write_sentencepiece_model(edited, path)
    return path


def _set(part, **values):
    return lambda m: getattr(m, part).update(values)


def _piece_type(piece, kind):
    return lambda m: m.types.__setitem__(m.pieces.index(piece), kind)


def _same_score(m):
    first, second = [i for i, (p, t) in enumerate(zip(m.pieces, m.types)) if t == S.NORMAL and len(p) > 2][:2]
    m.scores[second] = m.scores[first]


EDITS = {
    "unigram": (_set("trainer", model_type=1), r"`trainer_spec.model_type` is 'UNIGRAM'"),
    "suffix": (_set("trainer", treat_whitespace_as_suffix=True), "`trainer_spec.treat_whitespace_as_suffix`"),
    "charsmap": (
        _set("normalizer", precompiled_charsmap=b"x", name="nmt_nfkc"),
        "`normalizer_spec.precompiled_charsmap`",
    ),
    "rules": (_set("normalizer", normalization_rule_tsv="a\tb"), "`normalizer_spec.normalization_rule_tsv`"),
    "no_escape": (_set("normalizer", escape_whitespaces=False), "`normalizer_spec.escape_whitespaces`"),
    "user_defined": (_piece_type("▁the", S.USER_DEFINED), r"`pieces\[\].type` is .USER_DEFINED"),
    "unused": (_piece_type("▁the", S.UNUSED), r"`pieces\[\].type` is .UNUSED"),
    "byte_missing": (_piece_type("<0x41>", S.NORMAL), "no BYTE piece <0x41>"),
    "equal_scores": (_same_score, r"`pieces\[\].score`"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_what_is_not_implemented_is_refused_by_name(cases, tmp_path, edit):
    model = S.read_sentencepiece_model(os.path.join(cases["sp_bpe_llama"].folder, "tokenizer.model"))
    change, message = EDITS[edit]
    path = _edited(model, tmp_path, change)
    with pytest.raises(ValueError, match=message) as error:
        read_sentencepiece_bpe(path)
    assert str(path) in str(error.value)


def test_model_writer_round_trips(cases):
    for name in NAMES:
        model = S.read_sentencepiece_model(os.path.join(cases[name].folder, "tokenizer.model"))
        assert S.parse_sentencepiece_model(S.serialize_sentencepiece_model(model), model.file) == model
    with pytest.raises(ValueError, match="denormalizer"):
        S.serialize_sentencepiece_model(S.SentencePieceModel(["a"], [0.0], [1], {}, {}, True, "x.model"))


# ---- the merge order, against a transcription of sentencepiece's BPE loop ---------------------- #


def _sentencepiece_bpe(scores, text):
    """sentencepiece's `bpe::Model` on characters: merge the adjacent pair whose concatenation is
    the piece of highest score, the leftmost of equal scores, until none is a piece."""
    symbols = list(text)
    while True:
        best = None
        for i in range(len(symbols) - 1):
            score = scores.get(symbols[i] + symbols[i + 1])
            if score is not None and (best is None or score > best[0]):
                best = (score, i)
        if best is None:
            return symbols
        i = best[1]
        symbols[i : i + 2] = [symbols[i] + symbols[i + 1]]


@pytest.mark.parametrize("seed", range(3))
def test_merges_follow_sentencepiece_on_overlapping_pieces(tmp_path, seed):
    """Random models whose pieces have several splits (`ab`+`a` and `a`+`ba` both make `aba`): the
    leftmost pair making the best piece merges first, whichever split it is."""
    rng = random.Random(seed)
    alphabet = ["▁", "a", "b", "c"]
    pieces = set(alphabet)
    while len(pieces) < 40:
        left, right = rng.choice(sorted(pieces)), rng.choice(sorted(pieces))
        if len(left + right) <= 5:
            pieces.add(left + right)
    ordered = alphabet + rng.sample(sorted(pieces - set(alphabet)), len(pieces) - len(alphabet))
    scores = {p: -float(i) for i, p in enumerate(ordered)}
    bytes_ = [f"<0x{b:02X}>" for b in range(256)]
    all_pieces = ["<unk>", "<s>", "</s>"] + bytes_ + ordered
    types = [S.UNKNOWN, S.CONTROL, S.CONTROL] + [S.BYTE] * 256 + [S.NORMAL] * len(ordered)
    trainer = {"model_type": 2, "byte_fallback": True, "unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": -1}
    normalizer = {"add_dummy_prefix": True, "remove_extra_whitespaces": False, "escape_whitespaces": True}
    model = S.SentencePieceModel(
        all_pieces, [0.0] * 259 + [scores[p] for p in ordered], types, trainer, normalizer, False, ""
    )
    S.write_sentencepiece_model(model, tmp_path / "tokenizer.model")
    tokenizer = SentencePieceModelBPETokenizer.from_sentencepiece_model(
        tmp_path / "tokenizer.model", add_bos=False
    )
    texts = ["".join(rng.choice("abc ") for _ in range(rng.randrange(1, 30))) for _ in range(300)]
    index = {p: i for i, p in enumerate(all_pieces)}
    want = [[index[s] for s in _sentencepiece_bpe(scores, "▁" + t.replace(" ", "▁"))] for t in texts]
    assert _mismatches(texts, tokenizer(texts).to_list(), want) == []
