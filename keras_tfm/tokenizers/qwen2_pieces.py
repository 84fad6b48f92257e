"""Qwen2's pre-tokenization regex, evaluated from character classes (RE2 has no look-ahead).

Qwen2 (transformers' `PRETOKENIZE_REGEX`, a HuggingFace `Split` pre-tokenizer
with behaviour "isolated") cuts text with

    (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+

matched leftmost-first by Oniguruma. With the classes L (`\\p{L}`), N
(`\\p{N}`), C (`\\r`, `\\n`), S (the other `\\s`) and O (the rest), the matches
follow from the runs of each class; a piece starts

- at every N (numbers are single characters);
- at a run of letters, unless the character before it joins it: an S (the
  last of a whitespace run), or a lone O that starts its own piece and is not
  an apostrophe opening a contraction (`'s 't 're 've 'm 'll 'd`, any case,
  `ſ` for `s` as Unicode case folding has it); after a contraction, the rest
  of the letters start a piece;
- at a run of O, unless a space (U+0020) comes just before it (then
  ` ?[^\\s\\p{L}\\p{N}]+` starts at that space); an O run's piece also takes
  the `\\r`/`\\n` characters right after it;
- in a whitespace run (what an O run before it left of it): at its start;
  after its last C (`\\s*[\\r\\n]+` ends there); and, unless the run ends the
  text, at its last character when the part after the last C has two or more
  (`\\s+(?!\\S)` leaves the last one to join what follows).

Character classes come from `unicode_tables` (Unicode 14, as for GPT-2's regex).
"""

import tensorflow as tf

from keras_tfm.tokenizers import unicode_tables as U

_SHORT = [ord(c) for c in "sStTmMdD\u017f"]  # 's 't 'm 'd (and the long s, which folds to s)
_LONG = [("rR", "eE"), ("vV", "eE"), ("lL", "lL")]  # 're 've 'll


def _isin(values, members):
    return tf.reduce_any(tf.equal(values[:, None], tf.constant(members, values.dtype)[None, :]), axis=1)


def qwen2_piece_starts(codepoints: tf.RaggedTensor, class_starts: tf.Tensor, classes: tf.Tensor) -> tf.Tensor:
    """Bool per character of `codepoints.flat_values`: a piece of Qwen2's regex starts there.

    Args:
        codepoints: `[batch, None]` int32 codepoints.
        class_starts, classes: `byte_level.gpt2_class_tables()` (letter, number, space, other).
    """
    flat = codepoints.flat_values
    size = tf.size(flat)
    index = tf.range(size)
    row_ids = codepoints.value_rowids()
    first = tf.concat([[True], row_ids[1:] != row_ids[:-1]], axis=0)[:size]
    last = tf.concat([row_ids[1:] != row_ids[:-1], [True]], axis=0)[:size]

    def prev(x, fill):
        return tf.where(first, fill, tf.concat([[fill], x[:-1]], axis=0)[:size])

    def after(x, fill, k=1):
        shifted = tf.concat([x[k:], tf.fill([k], fill)], axis=0)[:size]
        ok = ~last if k == 1 else ~last & tf.concat([~last[1:], [False]], axis=0)[:size]
        return tf.where(ok, shifted, fill)

    cls = U.lookup_runs(flat, class_starts, classes)
    letter, number = cls == U.GPT2_LETTER, cls == U.GPT2_NUMBER
    crlf = (flat == 10) | (flat == 13)
    space = cls == U.GPT2_SPACE
    other = ~letter & ~number & ~space
    prev_other, prev_letter = prev(other, False), prev(letter, False)
    # O runs: a space just before takes the run (` ?[^\s\p{L}\p{N}]+`).
    other_start = other & ~prev_other
    absorbed = other_start & prev(flat == 32, False)
    lone_other = other_start & ~after(other, False)
    # Contractions, where an apostrophe starts its own piece.
    next1, next2 = after(flat, -1), after(flat, -1, 2)
    short = _isin(next1, _SHORT)
    long = tf.zeros_like(short)
    for a, b in _LONG:
        long |= _isin(next1, [ord(c) for c in a]) & _isin(next2, [ord(c) for c in b])
    contraction = other_start & ~absorbed & (flat == 39) & (short | long)
    contraction_end = prev(prev(contraction & short, False), False) | prev(
        prev(prev(contraction & long, False), False), False
    )
    # Letter runs: joined to an S or to a lone O before them, unless that O opens a contraction.
    prev_joins = prev(space & ~crlf, False) | prev(lone_other & ~absorbed & ~contraction, False)
    letter_start = letter & ~prev_letter & ~prev_joins & ~prev(contraction, False)
    starts = number | letter_start | (letter & contraction_end) | (other_start & ~absorbed)
    return first | starts | _whitespace_starts(space, crlf, prev_other, first, last, index)


def _whitespace_starts(space, crlf, prev_other, first, last, index):
    """Piece starts inside whitespace runs (see the module docstring)."""
    size = tf.size(space)
    run_start = space & (first | ~tf.concat([[False], space[:-1]], axis=0)[:size])
    run_id = tf.cumsum(tf.cast(run_start, tf.int32)) - 1
    segment = tf.where(space, run_id, tf.reduce_max(tf.concat([run_id, [0]], axis=0)) + 1)
    num = tf.reduce_max(tf.concat([segment, [-1]], axis=0)) + 1
    big = size + 1
    start = tf.math.unsorted_segment_min(tf.where(space, index, big), segment, num)
    end = tf.math.unsorted_segment_max(tf.where(space, index + 1, -1), segment, num)
    first_not_crlf = tf.math.unsorted_segment_min(tf.where(space & ~crlf, index, big), segment, num)
    last_crlf = tf.math.unsorted_segment_max(tf.where(space & crlf, index, -1), segment, num)
    after_other = tf.math.unsorted_segment_max(tf.cast(run_start & prev_other, tf.int32), segment, num) > 0
    ends_text = tf.math.unsorted_segment_max(tf.cast(space & last, tf.int32), segment, num) > 0
    # An O run's piece takes the CR/LF at the start of the run.
    begin = tf.where(after_other, tf.minimum(first_not_crlf, end), start)
    has_crlf = last_crlf >= begin
    tail = tf.where(has_crlf, last_crlf + 1, begin)
    split_last = ~ends_text & (end - tail >= 2)

    def at(positions, valid):
        return tf.gather(valid & (positions < end), segment) & tf.equal(index, tf.gather(positions, segment))

    starts = at(begin, tf.ones_like(has_crlf)) | at(last_crlf + 1, has_crlf) | at(end - 1, split_last)
    return space & starts


def qwen2_pieces(codepoints: tf.RaggedTensor, class_starts: tf.Tensor, classes: tf.Tensor) -> tf.RaggedTensor:
    """`[batch, None]` codepoints -> `[batch, None]` UTF-8 pieces of Qwen2's regex (joining back to the text)."""
    starts = qwen2_piece_starts(codepoints, class_starts, classes)
    piece_ids = tf.cumsum(tf.cast(starts, tf.int64)) - 1
    piece_codepoints = tf.RaggedTensor.from_value_rowids(
        codepoints.flat_values, piece_ids, nrows=tf.reduce_sum(tf.cast(starts, tf.int64)), validate=False
    )
    pieces = tf.strings.unicode_encode(piece_codepoints, "UTF-8")
    piece_rows = tf.boolean_mask(codepoints.value_rowids(), starts)
    return tf.RaggedTensor.from_value_rowids(pieces, piece_rows, nrows=codepoints.nrows(), validate=False)
