"""Sentence pairs for BERT: `[CLS] a [SEP] b [SEP]`, segment ids, HuggingFace's longest_first truncation."""

import tensorflow as tf

from keras_tfm.checks import check_positive_int
from keras_tfm.tokenizers.batches import id_column, string_batch


def pack_sentence_pairs(tokenizer, first, second=None, max_length=None):
    """`Tokenizer.tokenize_pairs` (see there): a dict of `token_ids`, `segment_ids`, `padding_mask`."""
    if tokenizer.cls_id is None or tokenizer.sep_id is None:
        raise ValueError("`tokenize_pairs` needs a vocabulary with [CLS] and [SEP] (`special_tokens`).")
    first_batch, scalar = string_batch(first, "first")
    max_length = check_positive_int("max_length", max_length, allow_none=True)
    a = tf.cast(tokenizer.encode_text(first_batch), tf.int32)
    cls, sep = tokenizer.cls_id, tokenizer.sep_id
    if second is None:
        if max_length is not None:
            if max_length < 2:
                raise ValueError(f"`max_length` must be at least 2; received {max_length}.")
            a = a[:, : max_length - 2]
        ids = tf.concat([id_column((cls,), a), a, id_column((sep,), a)], axis=1)
        segments = tf.zeros_like(ids)
    else:
        second_batch, second_scalar = string_batch(second, "second")
        if second_scalar != scalar:
            raise ValueError("`first` and `second` must both be scalars or both [batch] tensors.")
        rows_a, rows_b = first_batch.shape[0], second_batch.shape[0]
        if rows_a is not None and rows_b is not None and rows_a != rows_b:
            raise ValueError(
                f"`first` and `second` must have the same batch size; received {rows_a} and {rows_b}."
            )
        b = tf.cast(tokenizer.encode_text(second_batch), tf.int32)
        check = tf.debugging.assert_equal(
            a.nrows(), b.nrows(), message="`first` and `second` must have the same batch size"
        )
        with tf.control_dependencies([check] if check is not None else []):
            a = a.with_flat_values(tf.identity(a.flat_values))
        if max_length is not None:
            if max_length < 3:
                raise ValueError(f"`max_length` must be at least 3 for pairs; received {max_length}.")
            keep_a, keep_b = longest_first_lengths(
                a.row_lengths(), b.row_lengths(), tf.cast(max_length - 3, a.row_splits.dtype)
            )
            a = tf.ragged.boolean_mask(a, tf.ragged.range(a.row_lengths()) < keep_a[:, None])
            b = tf.ragged.boolean_mask(b, tf.ragged.range(b.row_lengths()) < keep_b[:, None])
        ids = tf.concat([id_column((cls,), a), a, id_column((sep,), a), b, id_column((sep,), b)], axis=1)
        segments = tf.concat(
            [tf.zeros_like(id_column((cls,), a)), tf.zeros_like(a), tf.zeros_like(id_column((sep,), a))]
            + [tf.ones_like(b), tf.ones_like(id_column((sep,), b))],
            axis=1,
        )
    shape = [None, max_length]
    outputs = {
        "token_ids": ids.to_tensor(default_value=tokenizer.pad_id or 0, shape=shape),
        "segment_ids": segments.to_tensor(default_value=0, shape=shape),
        "padding_mask": tf.ones_like(ids).to_tensor(default_value=0, shape=shape),
    }
    return {k: v[0] for k, v in outputs.items()} if scalar else outputs


def longest_first_lengths(length_a, length_b, room):
    """HuggingFace's "longest_first" pair truncation: the lengths to keep of a and b.

    Nothing is cut when `a + b <= room`. Otherwise, with `s` the shorter and
    `l` the longer: if `s <= room - s` the shorter is kept whole and the longer
    cut to `room - s`; else each keeps `room // 2`, the longer one `+ room % 2`
    (the first when both are equal).
    """
    shorter = tf.minimum(length_a, length_b)
    a_longer = length_a > length_b
    fits = length_a + length_b <= room
    keep_short_whole = shorter <= room - shorter
    half = room // 2
    long_keep = tf.where(keep_short_whole, room - shorter, half + room % 2)
    short_keep = tf.where(keep_short_whole, shorter, half)
    keep_a = tf.where(fits, length_a, tf.where(a_longer, long_keep, short_keep))
    keep_b = tf.where(fits, length_b, tf.where(a_longer, short_keep, long_keep))
    return keep_a, keep_b
