"""The text steps around a Unigram model: added-token splitting, normalisers, pre-tokenisers, decoders.

Each step is a small function of `[n]` string tensors in core TF ops, named
after the HuggingFace `tokenizers` component (or SentencePiece / Marian rule)
it reproduces. `UnigramTokenizer` strings them together as a `tokenizer.json`
or a Marian checkpoint says.
"""

import re

import tensorflow as tf

from keras_tfm.tokenizers.unicode_tables import WHITE_SPACE

#: A byte that never occurs in UTF-8 text: marks split points before `tf.strings.split`.
MARK = b"\xff"
#: Rust's `char::is_whitespace` (Unicode White_Space), which `WhitespaceSplit` and `Strip` use.
WHITE_SPACE_CLASS = "[" + "".join(f"\\x{{{cp:x}}}" for cp in sorted(WHITE_SPACE)) + "]"
#: Python's `str.isspace()`, which `str.strip()` uses (White_Space plus U+001C..U+001F).
PYTHON_SPACE_CLASS = (
    "[" + "".join(f"\\x{{{cp:x}}}" for cp in sorted(WHITE_SPACE | {0x1C, 0x1D, 0x1E, 0x1F})) + "]"
)
#: transformers' `clean_up_tokenization`, applied in this order to the decoded string.
CLEANUP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"))
CLEANUP += ((" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))

TEXT, ADDED, LANGUAGE_CODE = 0, 1, 2


def split_marked(strings):
    """`[n]` strings with `MARK` bytes -> `[n, None]` ragged parts (empty parts kept)."""
    return tf.strings.split(strings, sep=MARK)


def drop_empty(parts):
    return tf.ragged.boolean_mask(parts, tf.not_equal(parts, ""))


def split_added_tokens(strings, tokens, language_codes=False):
    """Cuts `[n]` strings around the added tokens (leftmost, then longest, match first).

    Args:
        strings: `[n]` strings.
        tokens: the added token strings.
        language_codes: also cut a Marian language code `>>xx<<` off the
            start of every text part (after the added tokens are cut).

    Returns:
        `(parts, kinds)`: `[n, None]` ragged strings and int32 kinds
        (`TEXT`, `ADDED`, `LANGUAGE_CODE`), in text order.
    """
    if tokens:
        pattern = "|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True))
        parts = split_marked(tf.strings.regex_replace(strings, f"({pattern})", MARK + b"\\1" + MARK))
    else:
        parts = tf.RaggedTensor.from_tensor(strings[:, None])
    position = tf.range(tf.size(parts.flat_values, out_type=parts.row_splits.dtype))
    within = position - tf.gather(parts.row_splits, parts.value_rowids())
    kinds = tf.where(within % 2 == 1, ADDED, TEXT)
    if language_codes:
        flat = parts.flat_values
        cut = tf.strings.regex_replace(flat, "^(>>(?s:.*?)<<)", MARK + b"\\1" + MARK, replace_global=False)
        pieces = split_marked(tf.where(tf.equal(kinds, TEXT), cut, flat))
        inner = tf.range(tf.size(pieces.flat_values, out_type=pieces.row_splits.dtype))
        inner -= tf.gather(pieces.row_splits, pieces.value_rowids())
        inner_kinds = tf.where(inner % 2 == 1, LANGUAGE_CODE, TEXT)
        inner_kinds = tf.where(tf.gather(tf.equal(kinds, ADDED), pieces.value_rowids()), ADDED, inner_kinds)
        parts = parts.with_flat_values(pieces).merge_dims(1, 2)
        kinds = inner_kinds
    return parts, parts.with_flat_values(tf.cast(kinds, tf.int32))


# ---- HuggingFace normalizers and pre-tokenizers (on `[n]` strings / ragged words) ---- #


def strip(strings, left, right):
    """`Strip` normaliser: White_Space removed from the left and/or right end."""
    if left:
        strings = tf.strings.regex_replace(strings, f"^{WHITE_SPACE_CLASS}+", "")
    if right:
        strings = tf.strings.regex_replace(strings, f"{WHITE_SPACE_CLASS}+$", "")
    return strings


def replace(strings, pattern, content, regex):
    """`Replace` normaliser: every match of `pattern` (a regex or a literal string) becomes `content`."""
    pattern = pattern if regex else re.escape(pattern)
    return tf.strings.regex_replace(strings, pattern, content.replace("\\", "\\\\"))


def prepend(strings, text):
    """`Prepend` normaliser: `text` put before every non-empty string."""
    return tf.where(tf.equal(strings, ""), strings, tf.strings.join([text, strings]))


def whitespace_split(words):
    """`WhitespaceSplit` pre-tokeniser: every word cut at runs of White_Space, which are dropped."""
    flat = tf.strings.regex_replace(words.flat_values, f"{WHITE_SPACE_CLASS}+", MARK)
    return drop_empty(words.with_flat_values(split_marked(flat)).merge_dims(1, 2))


def metaspace(words, replacement, prepend_scheme, split):
    """`Metaspace` pre-tokeniser: spaces become `replacement`, which is put in front of every word
    not starting with it (`prepend_scheme="always"`); with `split` each word is cut before every
    `replacement` (it stays with the part that follows)."""
    flat = tf.strings.regex_replace(words.flat_values, " ", replacement)
    if prepend_scheme == "always":
        starts = tf.strings.regex_full_match(flat, f"(?s){re.escape(replacement)}.*")
        flat = tf.where(starts, flat, tf.strings.join([replacement, flat]))
    if split:
        flat = tf.strings.regex_replace(flat, re.escape(replacement), MARK + replacement.encode("utf-8"))
        return drop_empty(words.with_flat_values(split_marked(flat)).merge_dims(1, 2))
    return words.with_flat_values(flat)


# ---- decoders (ragged token strings -> [n] strings) ---- #


def metaspace_decode(tokens, replacement, prepend_scheme):
    """`Metaspace` decoder: `replacement` becomes a space, except that it is dropped from the first
    token (unless `prepend_scheme="never"`); the tokens are then joined."""
    flat = tokens.flat_values
    position = tf.range(tf.size(flat, out_type=tokens.row_splits.dtype))
    first = tf.equal(position, tf.gather(tokens.row_splits, tokens.value_rowids()))
    spaced = tf.strings.regex_replace(flat, re.escape(replacement), " ")
    if prepend_scheme != "never":
        spaced = tf.where(first, tf.strings.regex_replace(flat, re.escape(replacement), ""), spaced)
    return tf.strings.reduce_join(tokens.with_flat_values(spaced), axis=1)


NORMAL_PIECE, CONTROL_PIECE, OTHER_PIECE = 0, 1, 2


def marian_decode(tokens, kinds, unk_token):
    """MarianTokenizer's `convert_tokens_to_string`: the runs between `<unk>` tokens decoded by
    SentencePiece, each `<unk>` written as `"<unk> "`, `▁` made a space, the ends stripped.

    SentencePiece's `DecodePieces` drops control pieces, keeps pieces it does
    not know as they are, turns `▁` into a space and, while nothing visible has
    been written, drops one leading `▁` from each (normal) piece.

    Args:
        tokens: `[n, None]` ragged token strings.
        kinds: int32 ragged kinds of the same shape (`NORMAL_PIECE`,
            `CONTROL_PIECE` or `OTHER_PIECE`, for the SentencePiece model).
        unk_token: the `<unk>` token string.
    """
    flat, kind = tokens.flat_values, kinds.flat_values
    is_unk = tf.equal(flat, unk_token)
    row = tokens.value_rowids()
    run = tf.cumsum(tf.cast(is_unk, row.dtype)) + row * (tf.size(flat, out_type=row.dtype) + 1)
    _, run = tf.unique(run)
    plain = tf.strings.regex_replace(flat, "\u2581", " ")
    stripped = tf.strings.regex_replace(flat, "^\u2581", "", replace_global=False)
    stripped = tf.strings.regex_replace(stripped, "\u2581", " ")
    normal = tf.equal(kind, NORMAL_PIECE)
    first_text = tf.where(normal, stripped, tf.where(tf.equal(kind, CONTROL_PIECE), "", flat))
    visible = tf.cast(tf.not_equal(first_text, "") & ~is_unk, tf.int32)
    before = tf.math.segment_sum(visible, run)
    seen = tf.cumsum(visible, exclusive=True) - tf.gather(tf.cumsum(before, exclusive=True), run)
    text = tf.where(seen > 0, tf.where(normal, plain, first_text), first_text)
    text = tf.where(is_unk, tf.strings.join([flat, " "]), text)
    joined = tf.strings.reduce_join(tokens.with_flat_values(text), axis=1)
    joined = tf.strings.regex_replace(joined, "\u2581", " ")
    return tf.strings.regex_replace(joined, f"^{PYTHON_SPACE_CLASS}+|{PYTHON_SPACE_CLASS}+$", "")


def clean_up_tokenization(strings):
    """transformers' `clean_up_tokenization` (spaces before punctuation and English clitics)."""
    for dirty, clean in CLEANUP:
        strings = tf.strings.regex_replace(strings, re.escape(dirty), clean)
    return strings
