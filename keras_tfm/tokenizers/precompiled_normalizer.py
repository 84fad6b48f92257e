"""The two ways a precompiled charsmap is applied: HuggingFace `tokenizers`' and SentencePiece's own.

`PrecompiledNormalizer` is HuggingFace's `Precompiled` normaliser (what a
`tokenizer.json` asks for). It walks the text grapheme cluster by grapheme
cluster (`grapheme_tables`): a cluster shorter than 6 bytes whose first
characters form a rule of the charsmap is replaced by the *shortest* such
rule's replacement, and the rest of the cluster is dropped; any other cluster
is mapped character by character, each character replaced when it is a rule
on its own. (So `"ﬁ\\u0301"` becomes `"fi"`, as in `tokenizers`.)

`SentencePieceNormalizer` is SentencePiece's `Normalizer` (what Marian's
`source.spm` / `target.spm` get, through the `sentencepiece` library): from
left to right, the *longest* rule starting at the current character replaces
it (else the character is kept); then, with `remove_extra_whitespaces`,
leading spaces are dropped, a run of spaces is kept as one (the leading spaces
of a replacement that follows a space are dropped) and trailing spaces are
dropped; with `add_dummy_prefix` one space is put in front; with
`escape_whitespaces` every space becomes `▁`. The greedy left-to-right choice
of overlapping multi-character rules is found by a fixed-point iteration
(rarely more than one step, as such rules are rare in text).

Both take and return a `[n]` string tensor of valid UTF-8.
"""

import tensorflow as tf

from keras_tfm.tokenizers import grapheme_tables as G
from keras_tfm.tokenizers.charsmap import CharsmapTrie, exact_match, first_and_last
from keras_tfm.tokenizers.unicode_tables import lookup_runs

SPACE_SYMBOL = "\u2581"


def char_layout(strings):
    """Characters of `[n]` strings laid end to end.

    Returns:
        A dict of flat tensors over all characters: `codepoints` (int32),
        `row` (int64 string index), `start` (int64 byte offset in the
        concatenation of the strings), `length` (int64 UTF-8 bytes),
        `local_start` (int64 byte offset in its string), and per string
        `splits` (int64 char row splits), `end` (int64 byte end offset);
        `data` is the int64 `[bytes]` of the concatenation.
    """
    codepoints, offsets = tf.strings.unicode_decode_with_offsets(strings, "UTF-8")
    byte_lengths = tf.cast(tf.strings.length(strings), tf.int64)
    string_end = tf.cumsum(byte_lengths)
    string_start = string_end - byte_lengths
    row = codepoints.value_rowids()
    cps = codepoints.flat_values
    local_start = offsets.flat_values
    length = tf.cast(1 + tf.cast(cps >= 0x80, tf.int32) + tf.cast(cps >= 0x800, tf.int32), tf.int64)
    length += tf.cast(cps >= 0x10000, tf.int64)
    data = tf.cast(tf.io.decode_raw(tf.strings.reduce_join(strings), tf.uint8), tf.int64)
    return {
        "codepoints": cps,
        "row": row,
        "start": tf.gather(string_start, row) + local_start,
        "local_start": local_start,
        "length": length,
        "splits": codepoints.row_splits,
        "end": string_end,
        "data": tf.reshape(data, [-1]),
    }


def _char_text(strings, layout, keep=None):
    """The text of every character (of those `keep` selects)."""
    row, start, length = layout["row"], layout["local_start"], layout["length"]
    if keep is not None:
        row, start, length = (tf.boolean_mask(t, keep) for t in (row, start, length))
    return tf.strings.substr(tf.gather(strings, row), start, length)


def _join_rows(pieces, row, nrows):
    return tf.strings.reduce_join(tf.RaggedTensor.from_value_rowids(pieces, row, nrows), axis=1)


class PrecompiledNormalizer(tf.Module):
    """HuggingFace `tokenizers`' `Precompiled` normaliser (see the module docstring).

    Args:
        blob: the charsmap bytes.
        where: file and field, for error messages.
    """

    def __init__(self, blob: bytes, where: str = "precompiled_charsmap", name=None):
        super().__init__(name=name)
        self._trie = CharsmapTrie(blob, where)
        self._starts, self._classes = (tf.constant(a) for a in G.grapheme_class_runs())

    def __call__(self, strings: tf.Tensor) -> tf.Tensor:
        touched = tf.where(self._trie.touches(strings))
        return tf.tensor_scatter_nd_update(strings, touched, self._normalize(tf.gather_nd(strings, touched)))

    def _normalize(self, strings):
        layout = char_layout(strings)
        n = tf.size(layout["row"], out_type=tf.int64)
        walk, length, value = self._trie.matches(
            layout["data"], layout["start"], tf.gather(layout["end"], layout["row"])
        )
        first_length, first_value, _, _ = first_and_last(walk, length, value, n)
        exact = exact_match(walk, length, value, layout["length"], n)
        classes = lookup_runs(layout["codepoints"], self._starts, self._classes)
        row_start = tf.equal(tf.range(n), tf.gather(layout["splits"], layout["row"]))
        previous = tf.concat([[G.CONTROL], classes[:-1]], axis=0)
        cluster_start = row_start | ~G.joins_previous(previous, classes)
        cluster = tf.cumsum(tf.cast(cluster_start, tf.int64)) - 1
        clusters = tf.reduce_sum(tf.cast(cluster_start, tf.int64))
        cluster_bytes = tf.math.unsorted_segment_sum(layout["length"], cluster, clusters)
        head = tf.boolean_mask(tf.range(n), cluster_start)
        head_length = tf.gather(first_length, head)
        whole = (cluster_bytes < 6) & (head_length > 0) & (head_length <= cluster_bytes)
        in_whole = tf.gather(whole, cluster)
        # Only the strings a rule changes are rebuilt, character by character.
        keep = _in_changed_rows(in_whole | (exact >= 0), layout["row"], tf.size(strings, out_type=tf.int64))
        in_whole, cluster_start, exact, first_value = (
            tf.boolean_mask(t, keep) for t in (in_whole, cluster_start, exact, first_value)
        )
        replaced = self._trie.replacement(tf.where(in_whole, first_value, tf.maximum(exact, 0)))
        pieces = tf.where(
            in_whole,
            tf.where(cluster_start, replaced, ""),
            tf.where(exact >= 0, replaced, _char_text(strings, layout, keep)),
        )
        return _rebuilt(strings, pieces, tf.boolean_mask(layout["row"], keep))


def _in_changed_rows(changed, row, nrows):
    """Bool per character: its string has a changed character."""
    return tf.gather(tf.math.unsorted_segment_max(tf.cast(changed, tf.int32), row, nrows) > 0, row)


def _rebuilt(strings, pieces, row):
    """`strings` with the rows that have `pieces` replaced by their join."""
    nrows = tf.size(strings, out_type=tf.int64)
    has = tf.math.unsorted_segment_max(tf.ones_like(row, tf.int32), row, nrows) > 0
    return tf.where(has, _join_rows(pieces, row, nrows), strings)


class SentencePieceNormalizer(tf.Module):
    """SentencePiece's `Normalizer` (see the module docstring).

    Args:
        blob: the charsmap bytes, or None (identity: only the whitespace rules).
        add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces: the
            `NormalizerSpec` flags.
        where: file and field, for error messages.
    """

    def __init__(
        self,
        blob: bytes | None,
        add_dummy_prefix: bool = True,
        remove_extra_whitespaces: bool = True,
        escape_whitespaces: bool = True,
        where: str = "normalizer_spec",
        name=None,
    ):
        super().__init__(name=name)
        self._trie = CharsmapTrie(blob, where) if blob else None
        self.add_dummy_prefix = add_dummy_prefix
        self.remove_extra_whitespaces = remove_extra_whitespaces
        self.escape_whitespaces = escape_whitespaces

    def __call__(self, strings: tf.Tensor) -> tf.Tensor:
        """Strings no rule changes take `_plain`; the others go unit by unit through `_units`."""
        plain = self._plain(strings)
        if self._trie is None:
            return plain
        touched = tf.where(self._trie.touches(strings))
        return tf.tensor_scatter_nd_update(plain, touched, self._normalize(tf.gather_nd(strings, touched)))

    def _normalize(self, strings):
        units, row = self._units(strings)
        space = SPACE_SYMBOL if self.escape_whitespaces else " "
        nrows = tf.size(strings, out_type=tf.int64)
        if self.remove_extra_whitespaces:
            nonempty = tf.not_equal(units, "")
            ends_with_space = tf.strings.regex_full_match(units, "(?s).* ")
            count = tf.cumsum(tf.cast(nonempty, tf.int64), exclusive=True)
            kept = tf.boolean_mask(tf.range(tf.size(units, out_type=tf.int64)), nonempty)
            last = tf.gather(tf.concat([[0], kept], 0), count)
            valid = (count > 0) & tf.equal(tf.gather(row, last), row)
            after_space = tf.where(valid, tf.gather(ends_with_space, last), True)
            units = tf.where(after_space, tf.strings.regex_replace(units, "^ +", ""), units)
        if self.escape_whitespaces:
            units = tf.strings.regex_replace(units, " ", SPACE_SYMBOL)
        text = _join_rows(units, row, nrows)
        if self.add_dummy_prefix:
            text = tf.strings.join([space, text])
        if self.remove_extra_whitespaces:
            text = tf.strings.regex_replace(text, f"(?:{space})+$", "")
        return text

    def _plain(self, strings):
        """The whitespace rules alone (what every string no charsmap rule touches gets)."""
        space = SPACE_SYMBOL if self.escape_whitespaces else " "
        text = strings
        if self.remove_extra_whitespaces:
            text = tf.strings.regex_replace(tf.strings.regex_replace(text, "^ +", ""), " +", " ")
        if self.escape_whitespaces:
            text = tf.strings.regex_replace(text, " ", SPACE_SYMBOL)
        if self.add_dummy_prefix:
            text = tf.where(tf.equal(text, ""), text, tf.strings.join([space, text]))
        if self.remove_extra_whitespaces:
            text = tf.strings.regex_replace(text, f"(?:{space})+$", "")
        return text

    def _units(self, strings):
        """(`[units]` normalised strings, their int64 rows) of the strings some rule changes: the
        replacement of the longest rule, or the character, each step of the scan consumes."""
        layout = char_layout(strings)
        n = tf.size(layout["row"], out_type=tf.int64)
        walk, length, value = self._trie.matches(
            layout["data"], layout["start"], tf.gather(layout["end"], layout["row"])
        )
        _, _, longest, longest_value = first_and_last(walk, length, value, n)
        index = tf.range(n)
        end = tf.searchsorted(layout["start"], layout["start"] + longest, side="left", out_type=tf.int64)
        multi = (longest > 0) & (end > index + 1)
        keep = ~_greedy_cover(index, end, multi, n)
        units = tf.where(
            tf.boolean_mask(longest, keep) > 0,
            self._trie.replacement(tf.boolean_mask(longest_value, keep)),
            _char_text(strings, layout, keep),
        )
        return units, tf.boolean_mask(layout["row"], keep)


def _greedy_cover(index, end, multi, n):
    """Characters hidden by the rules a left-to-right greedy scan takes (multi-character rules only).

    A rule at character `i` covering characters `i+1 .. end[i]-1` is taken
    unless an earlier taken rule covers `i`. Iterated to its fixed point,
    which is reached once each chain of overlapping rules is settled.
    """

    def cover(taken):
        first = tf.boolean_mask(index + 1, taken)
        inside = tf.ragged.range(first, tf.boolean_mask(end, taken)).flat_values
        hits = tf.scatter_nd(inside[:, None], tf.ones_like(inside, tf.int32), n[None])
        return hits > 0

    def cond(taken, previous):
        return tf.reduce_any(tf.not_equal(taken, previous))

    def body(taken, previous):
        return multi & ~cover(taken), taken

    taken, _ = tf.while_loop(cond, body, (multi & ~cover(multi), multi))
    return cover(taken)
