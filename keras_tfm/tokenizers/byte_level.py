"""GPT-2's byte level: the printable alphabet of the 256 bytes and the pre-tokenization regex.

Byte-level BPE (`BytePairTokenizer`, `learn_byte_pair_vocabulary`) first cuts
text into pieces with GPT-2's regex

    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

(evaluated here from per-codepoint classes, since RE2 has no look-ahead), then
writes each piece's UTF-8 bytes as printable characters (`bytes_to_unicode`)
so that merges work on strings.
"""

import tensorflow as tf

from keras_tfm.tokenizers import unicode_tables as U


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from the 256 byte values to printable characters."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in chars)))


def gpt2_class_tables() -> tuple[tf.Tensor, tf.Tensor]:
    """`(class_starts, classes)`: int32 constants of the codepoint runs `split_pieces` looks up."""
    starts, classes = U.gpt2_class_runs()
    return tf.constant(starts), tf.constant(classes)


def split_pieces(strings: tf.Tensor, class_starts: tf.Tensor, classes: tf.Tensor) -> tf.RaggedTensor:
    """`[batch]` strings -> `[batch, None]` pieces (byte strings) of GPT-2's regex.

    Args:
        strings: `[batch]` string tensor.
        class_starts, classes: the tables of `gpt2_class_tables()`.

    Returns:
        A `[batch, None]` string RaggedTensor; the pieces of a row are byte
        ranges of its input that join back to it (invalid UTF-8 included).
    """
    codepoints, offsets = tf.strings.unicode_decode_with_offsets(
        strings, "UTF-8", errors="replace", replacement_char=0xFFFD
    )
    flat = codepoints.flat_values
    size = tf.size(flat)
    cls = U.lookup_runs(flat, class_starts, classes)
    row_ids = codepoints.value_rowids()
    first = tf.concat([[True], row_ids[1:] != row_ids[:-1]], axis=0)[:size]
    last = tf.concat([row_ids[1:] != row_ids[:-1], [True]], axis=0)[:size]

    def shift_prev(x, fill, k=1):
        return tf.concat([tf.fill([k], fill), x[:-k]], axis=0)[:size]

    def shift_next(x, fill, k=1):
        return tf.concat([x[k:], tf.fill([k], fill)], axis=0)[:size]

    space = cls == U.GPT2_SPACE
    blank = tf.equal(flat, 32)
    prev_cls = shift_prev(cls, -1)
    prev_space = shift_prev(space, False)
    prev_blank = shift_prev(blank, False)
    next_space = shift_next(space, False)
    # Whitespace: a run starts a piece; inside a run, the last character before a
    # non-space starts a piece (`\s+(?!\S)` leaves it to the next piece or to `\s+`).
    ws_start = ~prev_space | (~last & ~next_space)
    # Other classes: a new piece at a class change, except after the single space
    # that ` ?X+` takes in front of a run.
    other_start = ~prev_blank & (prev_space | (prev_cls != cls))
    start = first | tf.where(space, ws_start, other_start)
    # Contractions ('s 't 're 've 'm 'll 'd) where an apostrophe starts a piece.
    same_row_1 = ~last
    same_row_2 = same_row_1 & shift_next(same_row_1, False)
    next_1 = tf.where(same_row_1, shift_next(flat, -1), -1)
    next_2 = tf.where(same_row_2, shift_next(flat, -1, 2), -1)
    one = tf.reduce_any(tf.equal(next_1[:, None], [ord(c) for c in "stmd"]), axis=1)
    two = ((next_1 == ord("r")) | (next_1 == ord("v"))) & (next_2 == ord("e"))
    two |= (next_1 == ord("l")) & (next_2 == ord("l"))
    contraction = start & tf.equal(flat, 39) & (one | two)
    short, long = contraction & one, contraction & two
    inside = shift_prev(contraction, False) | shift_prev(long, False, 2)
    after = shift_prev(short, False, 2) | shift_prev(long, False, 3)
    start = (start & ~inside) | after
    # Pieces are byte ranges of the input, so invalid UTF-8 bytes are kept as they are.
    byte_start = tf.boolean_mask(offsets.flat_values, start)
    piece_rows = tf.boolean_mask(row_ids, start)
    string_length = tf.cast(tf.strings.length(strings), byte_start.dtype)
    next_start = tf.concat([byte_start[1:], tf.zeros([1], byte_start.dtype)], axis=0)
    same_row_next = tf.concat([piece_rows[1:] == piece_rows[:-1], [False]], axis=0)
    byte_end = tf.where(same_row_next, next_start, tf.gather(string_length, piece_rows))
    pieces = tf.strings.substr(tf.gather(strings, piece_rows), byte_start, byte_end - byte_start)
    return tf.RaggedTensor.from_value_rowids(
        pieces, piece_rows, nrows=tf.shape(strings, out_type=tf.int64)[0]
    )
