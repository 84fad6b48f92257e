"""Per-codepoint tables for the in-graph text normalisers, built from Python's `unicodedata`.

The tables are computed once per process (about 0.2 s) and become constants
of the graph (`tf.searchsorted` over run boundaries, a `StaticHashTable` for
character mappings), so an exported tokenizer needs only core TensorFlow ops.
They follow the Unicode version of the Python that builds them (3.11: Unicode
14); HuggingFace `tokenizers` uses older category tables, so characters added
in recent Unicode versions can be classified differently (see
tests/test_tokenizers_pretrained.py for the measured extent).
"""

import functools
import unicodedata

import numpy as np
import tensorflow as tf

MAX_CODEPOINT = 0x10FFFF
_SCANNED = 0x40000  # planes 4..13 are unassigned; planes 14..16 are handled by rule below

# Rust's `char::is_whitespace` / Unicode White_Space (what HuggingFace and `\s` in Oniguruma use).
WHITE_SPACE = frozenset(
    [0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000]
    + list(range(0x2000, 0x200B))
)

# BERT's "Chinese characters": the CJK blocks its basic tokenizer isolates.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _tail_category(cp):
    """General category above the scanned planes (only planes 14..16 are assigned there)."""
    if cp >= 0xF0000:
        return "Co"
    if 0xE0100 <= cp <= 0xE01EF:
        return "Mn"
    if cp == 0xE0001 or 0xE0020 <= cp <= 0xE007F:
        return "Cf"
    return "Cn"


# Codepoints above the scanned planes where the category (or a class derived from it) may change.
_TAIL_POINTS = (0x40000, 0xE0000, 0xE0001, 0xE0002, 0xE0020, 0xE0080, 0xE0100, 0xE01F0, 0xF0000)


@functools.cache
def categories():
    """`np.ndarray` of the two-letter general category of codepoints `0.._SCANNED-1`."""
    return np.array([unicodedata.category(chr(cp)) for cp in range(_SCANNED)])


def runs(classes, tail_class):
    """Run-length encodes a class (small int) of every codepoint.

    Args:
        classes: int array, the class of codepoints `0.._SCANNED-1`.
        tail_class: function (codepoint, category) -> class, for the rest.

    Returns:
        `(starts, classes)` int32 arrays: codepoints `starts[i] ..
        starts[i + 1] - 1` have class `classes[i]`.
    """
    values = np.asarray(classes, np.int32)
    change = np.flatnonzero(np.diff(values)) + 1
    starts = [0] + change.tolist()
    out = [int(values[0])] + values[change].tolist()
    for cp in _TAIL_POINTS:
        cls = tail_class(cp, _tail_category(cp))
        if cls != out[-1]:
            starts.append(cp)
            out.append(cls)
    return np.array(starts, np.int32), np.array(out, np.int32)


def lookup_runs(codepoints, starts, classes):
    """The class of each codepoint (int32 tensor of any shape) under `runs(...)` tables."""
    flat = tf.reshape(codepoints, [1, -1])
    index = tf.searchsorted(starts[None, :], flat, side="right") - 1
    return tf.reshape(tf.gather(classes, index[0]), tf.shape(codepoints))


def _scanned():
    return np.arange(_SCANNED)


def ascii_punctuation(cps):
    return (
        ((33 <= cps) & (cps <= 47))
        | ((58 <= cps) & (cps <= 64))
        | ((91 <= cps) & (cps <= 96))
        | ((123 <= cps) & (cps <= 126))
    )


def cjk(cps):
    """BERT's "Chinese characters" (bool array)."""
    inside = np.zeros(np.shape(cps), bool)
    for low, high in CJK_RANGES:
        inside |= (low <= cps) & (cps <= high)
    return inside


def bert_removed(cps, cats):
    """BERT's text cleaning drops NUL, U+FFFD and control/format/private characters (not tab/newline)."""
    cats = np.asarray(cats)
    control = np.isin(cats, ["Cc", "Cf", "Co", "Cs"]) & ~np.isin(cps, [0x09, 0x0A, 0x0D])
    return control | (cps == 0) | (cps == 0xFFFD)


@functools.cache
def bert_removed_runs():
    """Runs (class 1 = removed by BERT's cleaning)."""
    return runs(
        bert_removed(_scanned(), categories()).astype(np.int32),
        lambda cp, cat: int(bert_removed(np.array([cp]), [cat])[0]),
    )


# Classes of `bert_class_runs`.
BERT_OTHER, BERT_SPACE, BERT_ISOLATED = 0, 1, 2


@functools.cache
def bert_class_runs(tokenize_chinese_chars=True):
    """Runs of BERT's pre-tokenizer classes: space, isolated (punctuation, CJK if asked), other."""
    cps = _scanned()
    isolated = ascii_punctuation(cps) | np.char.startswith(categories(), "P")
    if tokenize_chinese_chars:
        isolated |= cjk(cps)
    classes = np.where(np.isin(cps, sorted(WHITE_SPACE)), BERT_SPACE, np.where(isolated, BERT_ISOLATED, 0))
    return runs(classes, lambda cp, cat: BERT_OTHER)


@functools.cache
def bert_character_map(lowercase, strip_accents):
    """{codepoint: replacement str} for BERT's per-character normalisation.

    Covers the characters the normalisation changes and keeps: whitespace
    becomes " ", accents are stripped (NFD, then combining marks `Mn`
    dropped) and letters lower-cased as asked. Removed characters
    (`bert_removed`) are not in the map.
    """
    cats = categories()
    # Unassigned and CJK unified ideographs never change: skip them (most of the scan).
    skip = bert_removed(_scanned(), cats) | (cats == "Cn") | (cjk(_scanned()) & (cats == "Lo"))
    skip[0xF900:0xFB00] = False  # CJK compatibility ideographs decompose
    skip[0x2F800:0x2FA20] = False
    mapping = {}
    for cp in np.flatnonzero(~skip).tolist():
        ch = chr(cp)
        if cp in WHITE_SPACE:
            mapping[cp] = " "
            continue
        out = ch
        if strip_accents:
            out = "".join(c for c in unicodedata.normalize("NFD", out) if unicodedata.category(c) != "Mn")
        if lowercase:
            out = "".join(c.lower() for c in out)
        if out != ch:
            mapping[cp] = out
    if strip_accents:
        for cp in range(0xE0100, 0xE01F0):  # variation selectors supplement (Mn)
            mapping[cp] = ""
    return mapping


# Classes of `gpt2_class_runs` (the character classes of GPT-2's pre-tokenization regex).
GPT2_OTHER, GPT2_LETTER, GPT2_NUMBER, GPT2_SPACE = 0, 1, 2, 3


@functools.cache
def gpt2_class_runs():
    """Runs of `\\p{L}`, `\\p{N}`, `\\s` (Unicode White_Space) and everything else."""
    cps = _scanned()
    first = np.array([c[0] for c in categories()])
    classes = np.where(
        np.isin(cps, sorted(WHITE_SPACE)),
        GPT2_SPACE,
        np.where(first == "L", GPT2_LETTER, np.where(first == "N", GPT2_NUMBER, GPT2_OTHER)),
    )
    return runs(classes, lambda cp, cat: GPT2_OTHER)


class CodepointMap(tf.Module):
    """Maps every codepoint of a ragged `[batch, None]` int32 tensor to 0, 1 or more codepoints.

    Args:
        mapping: {codepoint: replacement str}; codepoints not in it are kept.
        removed: (starts, classes) runs; codepoints of class 1 are dropped.
    """

    def __init__(self, mapping, removed, name=None):
        super().__init__(name=name)
        keys = sorted(mapping)
        replacements = [[ord(c) for c in mapping[k]] for k in keys]
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys or [-1], tf.int32), tf.range(max(len(keys), 1), dtype=tf.int32)
            ),
            default_value=-1,
        )
        lengths = np.array([len(r) for r in replacements] or [0], np.int32)
        self._lengths = tf.constant(lengths)
        self._starts = tf.constant(np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32))
        self._values = tf.constant(np.array([c for r in replacements for c in r] or [0], np.int32))
        self._removed_starts = tf.constant(removed[0])
        self._removed_classes = tf.constant(removed[1])

    def __call__(self, codepoints):
        flat = codepoints.flat_values
        index = self._table.lookup(flat)
        mapped = index >= 0
        safe = tf.maximum(index, 0)
        removed = lookup_runs(flat, self._removed_starts, self._removed_classes) > 0
        lengths = tf.where(mapped, tf.gather(self._lengths, safe), 1)
        lengths = tf.where(removed, 0, lengths)
        num_values = tf.shape(self._values)[0]
        starts = tf.where(mapped, tf.gather(self._starts, safe), num_values + tf.range(tf.size(flat)))
        source = tf.concat([self._values, flat], axis=0)
        positions = tf.ragged.range(starts, starts + lengths).flat_values
        values = tf.gather(source, positions)
        row_ids = tf.cast(codepoints.value_rowids(), tf.int32)
        row_lengths = tf.math.unsorted_segment_sum(lengths, row_ids, codepoints.nrows(out_type=tf.int32))
        return tf.RaggedTensor.from_row_lengths(values, tf.cast(row_lengths, tf.int64), validate=False)
