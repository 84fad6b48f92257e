"""The batch shapes every tokenizer shares: string inputs as `[batch]`, fixed-id columns beside ragged ids."""

from collections.abc import Sequence

import tensorflow as tf

from keras_tfm.resources import as_string_tensor

#: Text a tokenizer accepts: a str, a list of str, or a scalar or `[batch]` string tensor.
TextInput = str | Sequence[str] | tf.Tensor


def string_batch(inputs: TextInput, name: str = "inputs") -> tuple[tf.Tensor, bool]:
    """(`[batch]` string tensor, was_scalar) from a scalar or rank-1 string input named `name`."""
    inputs = as_string_tensor(name, inputs)
    rank = inputs.shape.rank
    if rank is None or rank > 1:
        raise ValueError(
            f"`{name}` must be a scalar string or a rank-1 [batch] string tensor; received shape {inputs.shape}."
        )
    return (tf.reshape(inputs, [1]) if rank == 0 else inputs), rank == 0


def id_column(tokens: Sequence[int], like: tf.RaggedTensor) -> tf.RaggedTensor:
    """`[rows, len(tokens)]` ragged int32 of `tokens` repeated for each row of `like`."""
    rows = like.nrows(out_type=tf.int32)
    column = tf.RaggedTensor.from_tensor(tf.tile(tf.constant([list(tokens)], tf.int32), [rows, 1]))
    return column.with_row_splits_dtype(like.row_splits.dtype)
