"""BERT's basic tokenizer in TF ops: clean, isolate CJK, strip accents, lower-case, split.

What HuggingFace `BertNormalizer` + `BertPreTokenizer` (and Google's
`BasicTokenizer`) do, one character at a time: NUL, U+FFFD and control,
format and private-use characters are dropped; whitespace becomes a space;
accents are stripped (NFD, then combining marks dropped) when asked (by
default when lower-casing); letters are lower-cased; then the text is split
on spaces and every punctuation mark (ASCII punctuation or a Unicode `P*`
character) and every CJK ideograph becomes a word of its own. Only core TF
ops: `unicode_decode`/`unicode_encode`, a `StaticHashTable`, `searchsorted`.
"""

import tensorflow as tf

from keras_tfm.tokenizers import unicode_tables as U


class BertWordSplitter(tf.Module):
    """Splits `[batch]` strings into BERT's words (a `[batch, None]` string RaggedTensor).

    Args:
        lowercase: lower-case letters.
        strip_accents: strip accents (None: when `lowercase`).
        tokenize_chinese_chars: make every CJK ideograph a word.
    """

    def __init__(self, lowercase=True, strip_accents=None, tokenize_chinese_chars=True, name=None):
        super().__init__(name=name)
        strip = lowercase if strip_accents is None else strip_accents
        self._lowercase = bool(lowercase)
        self._map = U.CodepointMap(U.bert_character_map(bool(lowercase), bool(strip)), U.bert_removed_runs())
        starts, classes = U.bert_class_runs(bool(tokenize_chinese_chars))
        self._class_starts = tf.constant(starts)
        self._classes = tf.constant(classes)

    def __call__(self, strings):
        # ASCII rows (most real text) take a fast path of whole-string ops; the others
        # go through the per-codepoint tables. Both give the same words for ASCII text.
        ascii_rows = tf.strings.regex_full_match(strings, "[\\x00-\\x7f]*")
        return tf.cond(
            tf.reduce_all(ascii_rows),
            lambda: self._split_ascii(strings),
            lambda: self._split_mixed(strings, ascii_rows),
        )

    def _split_mixed(self, strings, ascii_rows):
        ascii_index = tf.cast(tf.where(ascii_rows)[:, 0], tf.int32)
        other_index = tf.cast(tf.where(~ascii_rows)[:, 0], tf.int32)
        words = tf.concat(
            [
                self._split_ascii(tf.gather(strings, ascii_index)),
                self._split_unicode(tf.gather(strings, other_index)),
            ],
            axis=0,
        )
        order = tf.concat([ascii_index, other_index], axis=0)
        return tf.gather(words, tf.math.invert_permutation(order))

    def _split_ascii(self, strings):
        if self._lowercase:
            strings = tf.strings.lower(strings)  # ASCII letters only, as Unicode lower-casing does
        # Control characters other than tab, newline and carriage return are dropped.
        strings = tf.strings.regex_replace(strings, "[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f]", "")
        strings = tf.strings.regex_replace(strings, "([!-/:-@\\[-`{-~])", " \\1 ")
        return tf.strings.split(strings).with_row_splits_dtype(tf.int64)

    def _split_unicode(self, strings):
        codepoints = tf.strings.unicode_decode(strings, "UTF-8", errors="replace", replacement_char=0xFFFD)
        normal = self._map(codepoints)
        flat = normal.flat_values
        cls = U.lookup_runs(flat, self._class_starts, self._classes)
        space = cls == U.BERT_SPACE
        isolated = cls == U.BERT_ISOLATED
        first = _first_in_row(normal)
        size = tf.size(flat)
        breaks_after = tf.concat([[True], (space | isolated)[:-1]], axis=0)[:size]
        start = ~space & (isolated | breaks_after | first)
        keep = ~space
        word_index = tf.cumsum(tf.cast(start, tf.int32)) - 1
        num_words = tf.reduce_sum(tf.cast(start, tf.int32))
        words = tf.RaggedTensor.from_value_rowids(
            tf.boolean_mask(flat, keep),
            tf.cast(tf.boolean_mask(word_index, keep), tf.int64),
            nrows=tf.cast(num_words, tf.int64),
            validate=False,
        )
        word_strings = tf.strings.unicode_encode(words, "UTF-8")
        row_ids = tf.cast(normal.value_rowids(), tf.int32)
        words_per_row = tf.math.unsorted_segment_sum(
            tf.cast(start, tf.int32), row_ids, normal.nrows(out_type=tf.int32)
        )
        return tf.RaggedTensor.from_row_lengths(
            word_strings, tf.cast(words_per_row, tf.int64), validate=False
        )


def _first_in_row(ragged):
    """Bool per flat value: True at the first value of each row."""
    row_ids = ragged.value_rowids()
    return tf.concat([[True], row_ids[1:] != row_ids[:-1]], axis=0)[: tf.size(row_ids)]
