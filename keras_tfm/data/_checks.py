"""Argument checks for keras_tfm.data: each error names the argument."""

import os

import tensorflow as tf


def check_file(name, path):
    """Returns `path` as a str, raising FileNotFoundError when it is missing."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"`{name}` must be a path (str or os.PathLike); received {path!r}.")
    path = os.fspath(path)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"`{name}`: no such file: {path!r}.")
    if tf.io.gfile.isdir(path):
        raise FileNotFoundError(f"`{name}`: expected a file but found a directory: {path!r}.")
    return path


def as_string_tensor(name, value):
    """Converts `value` to a tf.string tensor, raising TypeError for any other dtype."""
    if isinstance(value, tf.RaggedTensor):
        raise TypeError(f"`{name}` must be a dense string tensor; received a RaggedTensor.")
    try:
        tensor = tf.convert_to_tensor(value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"`{name}` must be a string or a list of strings; received {value!r}.") from error
    if tensor.dtype != tf.string:
        raise TypeError(f"`{name}` must be a string tensor; received dtype {tensor.dtype.name}.")
    return tensor
