"""Translations a person would accept (issue 15 §5): a cased byte-level BPE learned from the training
text (exact round trip, nothing unknown), beam-search decoding, sacreBLEU / chrF scores."""

import collections
import gzip
import json

import pytest
import tensorflow as tf

from keras_tfm import cli
from keras_tfm.analysis.bleu import corpus_scores
from keras_tfm.tokenizers import BytePairTokenizer
from keras_tfm.tokenizers.byte_level import bytes_to_unicode
from keras_tfm.tokenizers.byte_pair_trainer import learn_byte_pair_vocabulary

sacrebleu = pytest.importorskip("sacrebleu", reason="sacrebleu is in the test extra (pip install -e .[test])")

PAIRS = [
    ("Go.", "Ve."),
    ("Run!", "¡Corre!"),
    ("Where is the station?", "¿Dónde está la estación?"),
    ("It's fine!", "¡Está bien!"),
    ("Tom isn't here.", "Tom no está aquí."),
    ("I saw 3 cats.", "Vi 3 gatos."),
    ('She said "no".', 'Ella dijo "no".'),
    ("We're ready, aren't we?", "Estamos listos, ¿verdad?"),
]
TRAIN_TEXT = [s for pair in PAIRS for s in pair]


def _naive_bpe_merges(corpus, num_merges):
    """Reference BPE: recount every pair from scratch before each merge (most frequent, then alphabetical)."""
    splitter = BytePairTokenizer([bytes_to_unicode()[b] for b in range(256)], [], special_tokens=False)
    pieces = collections.Counter(splitter.split_pieces(tf.constant(corpus)).flat_values.numpy().tolist())
    chars = bytes_to_unicode()
    words = {tuple(chars[b] for b in piece): count for piece, count in pieces.items()}
    merges = []
    for _ in range(num_merges):
        pairs = collections.Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(" ".join(best))
        new_words = collections.Counter()
        for word, count in words.items():
            out, i = [], 0
            while i < len(word):
                if word[i : i + 2] == best:
                    out.append(best[0] + best[1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            new_words[tuple(out)] += count
        words = new_words
    return merges


@pytest.fixture(scope="module")
def tokenizer():
    return BytePairTokenizer.from_corpus(TRAIN_TEXT * 3, vocabulary_size=7 + 256 + 150)


def test_byte_pair_trainer_matches_a_naive_recount():
    vocabulary, merges = learn_byte_pair_vocabulary(TRAIN_TEXT * 3, 7 + 256 + 40)
    assert merges == _naive_bpe_merges(TRAIN_TEXT * 3, 40)
    assert vocabulary[:256] == [bytes_to_unicode()[b] for b in range(256)]
    assert len(vocabulary) == 256 + 40 and len(set(vocabulary)) == len(vocabulary)
    with pytest.raises(ValueError, match="vocabulary_size"):
        learn_byte_pair_vocabulary(TRAIN_TEXT, 200)


def test_subword_round_trip_is_exact_and_cased(tokenizer):
    held_out = [
        "¡Está aquí!",
        "¿Dónde está Tom?",
        'He said "fine", didn\'t he?',
        "Zoë's café costs 12 €.",  # characters never seen in training: still bytes, still exact
        "Two  spaces\tand a tab.",
    ]
    ids = tokenizer(tf.constant(held_out))
    flat = ids.flat_values.numpy()
    assert tokenizer.unk_id not in flat.tolist() and flat.min() >= 7  # no [UNK], no special token
    back = [s.decode("utf-8") for s in tokenizer.detokenize(ids).numpy()]
    assert back == held_out
    # Subwords, not bytes: the training text takes well under half as many tokens as bytes.
    n_tokens = int(tf.size(tokenizer(tf.constant(TRAIN_TEXT)).flat_values))
    assert n_tokens < 0.5 * sum(len(t.encode("utf-8")) for t in TRAIN_TEXT)
    # Saved with the model's tokenizers and read back: the same ids.
    config = tokenizer.get_config()
    again = BytePairTokenizer.from_config(config)
    assert again(tf.constant(held_out)).to_list() == ids.to_list()


def test_scores_are_sacrebleu_corpus_bleu_and_chrf():
    hyps = ["¡Está bien!", "El gato está en la alfombra."]
    refs = ["¡Está bien!", "El gato se sentó en la alfombra."]
    scores = corpus_scores(hyps, refs)
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    assert 0 < scores["bleu"] < 100 and "case:mixed" in scores["bleu_signature"]
    # Cased: a lower-cased translation loses points.
    assert corpus_scores([h.lower() for h in hyps], refs)["bleu"] < scores["bleu"]
    two_refs = corpus_scores(
        ["The cat sat on the mat."], [["A cat sat on a mat.", "The cat sat on the mat."]]
    )
    assert two_refs["bleu"] == pytest.approx(100.0)
    with pytest.raises(ValueError, match="references"):
        corpus_scores(hyps, refs[:1])
    with pytest.raises(TypeError, match="hypotheses"):
        corpus_scores([["tokens"]], refs[:1])


def test_recipe_on_a_folder_of_aligned_files(tmp_path, capsys):
    """Multi30k layout (train / val / test_2016_flickr .en.gz / .de.gz): BPE, beam search, sacreBLEU."""
    data = tmp_path / "m30k"
    data.mkdir()
    en = ["A dog runs.", "Two men talk.", "A girl sings!", "The cat sleeps."]
    de = ["Ein Hund rennt.", "Zwei Männer reden.", "Ein Mädchen singt!", "Die Katze schläft."]
    for split, n in (("train", 40), ("val", 4), ("test_2016_flickr", 4)):
        for lang, lines in (("en", en), ("de", de)):
            with gzip.open(data / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("".join(lines[i % 4] + "\n" for i in range(n)))
    results = tmp_path / "r.json"
    argv = ["train", "seq2seq", "--data", str(data), "--results", str(results), "--bleu-pairs", "0"]
    argv += [
        "--steps",
        "2",
        "--eval-interval",
        "2",
        "--batch-size",
        "8",
        "--num-layers",
        "1",
        "--num-heads",
        "2",
    ]
    argv += ["--d-model", "16", "--d-ff", "32", "--warmup-steps", "2", "--num-beams", "1", "--show", "1"]
    argv += ["--vocabulary-size", "300", "--verbose", "0"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "sacreBLEU" in out and "chrF" in out and "greedy" in out
    r = json.loads(results.read_text())
    assert r["bleu_pairs"] == 4 and r["unknown_share"] == 0.0 and r["num_beams"] == 1
    assert 0.0 <= r["bleu"] <= 100.0 and 0.0 <= r["chrf"] <= 100.0
    assert r["examples"][0]["reference"] == "Ein Hund rennt."
