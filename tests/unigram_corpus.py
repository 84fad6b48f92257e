"""The mixed-text corpus of the Unigram tokenizer tests (and of the script that made their fixtures).

2,190 lines from ../shared/data (every 200th Anki pair, both the English and
the Spanish side; every 58th German line of Multi30k train; every 80th line
of tiny-shakespeare, blank lines included), then the committed edge cases of
tests/fixtures/tokenizers/unigram_edge_cases.json. `corpus_digest` lets a
test check that it reads the lines the reference ids were made from.
"""

import gzip
import hashlib
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures", "tokenizers")
DATA = os.environ.get("KERAS_TFM_SHARED_DATA", os.path.join(HERE, os.pardir, os.pardir, "shared", "data"))


def edge_cases():
    with open(os.path.join(FIXTURES, "unigram_edge_cases.json"), encoding="utf-8") as file:
        return json.load(file)


def shared_lines(data_dir=DATA):
    """The 2,190 corpus lines of ../shared/data (FileNotFoundError when absent)."""
    with open(os.path.join(data_dir, "spa_eng_anki", "spa-eng", "spa.txt"), encoding="utf-8") as file:
        pairs = [line.split("\t") for line in file.read().split("\n") if line]
    anki = pairs[::200]
    with gzip.open(
        os.path.join(data_dir, "multi30k_task1_raw", "train.de.gz"), "rt", encoding="utf-8"
    ) as file:
        german = file.read().split("\n")[::58]
    with open(os.path.join(data_dir, "tiny_shakespeare", "input.txt"), encoding="utf-8") as file:
        shakespeare = file.read().split("\n")[::80]
    return [p[0] for p in anki] + [p[1] for p in anki] + german + shakespeare


def corpus(data_dir=DATA):
    """`shared_lines` followed by the edge cases."""
    return shared_lines(data_dir) + edge_cases()


def corpus_digest(lines):
    """sha256 of the lines, each UTF-8 encoded and NUL-terminated."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8") + b"\0")
    return digest.hexdigest()
