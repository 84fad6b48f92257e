"""Argument checks shared by every keras_tfm module: each raises a ValueError,
TypeError or FileNotFoundError that names the argument, the value received and
what was expected. Check an option once, where it is stored.

Only `check_file` and `as_string_tensor` use TensorFlow, and import it lazily.
"""

import os


def check_positive_int(name, value, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"`{name}` must be a positive int; received {value!r} ({type(value).__name__}).")
    if value <= 0:
        raise ValueError(f"`{name}` must be a positive int; received {value}.")
    return value


def check_rate(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a float in [0, 1); received {value!r}.")
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"`{name}` must be in [0, 1); received {value}.")
    return float(value)


def check_open_rate(name, value):
    """A float strictly inside (0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a float in (0, 1); received {value!r}.")
    if not 0.0 < float(value) < 1.0:
        raise ValueError(f"`{name}` must be in (0, 1); received {value}.")
    return float(value)


def check_closed_rate(name, value):
    """A float inside [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a float in [0, 1]; received {value!r}.")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"`{name}` must be in [0, 1]; received {value}.")
    return float(value)


def check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"Unknown `{name}` {value!r}; expected one of {list(choices)}.")
    return value


def check_rank(name, tensor, ranks):
    ranks = (ranks,) if isinstance(ranks, int) else tuple(ranks)
    rank = len(tensor.shape)
    if rank not in ranks:
        want = " or ".join(str(r) for r in ranks)
        raise ValueError(
            f"`{name}` must have rank {want}; received shape {tuple(tensor.shape)} (rank {rank})."
        )


def check_last_dim(name, tensor, expected):
    got = tensor.shape[-1]
    if got is not None and expected is not None and got != expected:
        raise ValueError(f"`{name}` last dimension must be {expected}; received shape {tuple(tensor.shape)}.")


def check_file(name, path):
    """Returns `path` as a str, raising FileNotFoundError when it is missing."""
    import tensorflow as tf  # lazily: the rest of this module is backend-agnostic

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
    import tensorflow as tf  # lazily: the rest of this module is backend-agnostic

    if isinstance(value, tf.RaggedTensor):
        raise TypeError(f"`{name}` must be a dense string tensor; received a RaggedTensor.")
    try:
        tensor = tf.convert_to_tensor(value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"`{name}` must be a string or a list of strings; received {value!r}.") from error
    if tensor.dtype != tf.string:
        raise TypeError(f"`{name}` must be a string tensor; received dtype {tensor.dtype.name}.")
    return tensor
