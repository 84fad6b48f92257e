"""Argument checks of plain values shared by every keras_tfm module: ints,
floats, rates, choices, seeds, dtypes, sizes and files. Each raises a
ValueError, TypeError or FileNotFoundError that names the argument, the value
received and what was expected. Check an option once, where it is stored.

Only `check_file` and `as_string_tensor` use TensorFlow, and import it lazily.
The checks of tensors (ranks, token ids, lengths, masks; eager or in a graph)
live in `keras_tfm.tensor_checks`; the command line's argparse types in
`keras_tfm.cli.options`.
"""

import math
import numbers
import os


def _is_int(value):
    """A Python or NumPy integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_positive_int(name, value, allow_none=False):
    if value is None and allow_none:
        return None
    if not _is_int(value):
        raise TypeError(f"`{name}` must be a positive int; received {value!r} ({type(value).__name__}).")
    if value <= 0:
        raise ValueError(f"`{name}` must be a positive int; received {value}.")
    return int(value)


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


def dtype_name(dtype):
    """ "float32", "int64", "bool", ... for any backend's dtype object (or a str)."""
    import keras

    try:
        return keras.backend.standardize_dtype(dtype)
    except (ValueError, TypeError, AttributeError):
        return str(dtype)


#: The dtypes a key/value decoding cache may have (None: the compute dtype).
CACHE_DTYPES = (None, "float32", "float16", "bfloat16")


def check_cache_dtype(name, value):
    """A float dtype for key/value caches: None, "float32", "float16" or
    "bfloat16" (or the same NumPy / TensorFlow dtype object); returns the name.

    Integer and bool caches would silently round every key and value.
    """
    if value is None:
        return None
    dtype = dtype_name(value) if not isinstance(value, bool) else repr(value)
    if dtype not in CACHE_DTYPES:
        raise ValueError(f"`{name}` must be one of {list(CACHE_DTYPES)} (a float dtype); received {value!r}.")
    return dtype


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


# --------------------------------------------------------------------------- #
# Python options.
# --------------------------------------------------------------------------- #


def check_bool(name, value):
    """A real bool (or NumPy bool): the strings "false"/"true" and ints are rejected.

    `bool("false")` is True, so a config or CLI value passed through `bool()`
    would silently flip; this check refuses anything that is not a bool.
    """
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_" and type(value).__module__ == "numpy":
        return bool(value)
    raise TypeError(f"`{name}` must be a bool (True or False); received {value!r} ({type(value).__name__}).")


def check_non_negative_int(name, value, allow_none=False):
    if value is None and allow_none:
        return None
    if not _is_int(value):
        raise TypeError(f"`{name}` must be a non-negative int; received {value!r} ({type(value).__name__}).")
    if value < 0:
        raise ValueError(f"`{name}` must be a non-negative int; received {value}.")
    return int(value)


def check_index(name, value, size):
    """An int (Python or NumPy) in [0, size): an example, row or head of something of `size` entries."""
    if not _is_int(value) or not 0 <= value < size:
        raise ValueError(f"`{name}` must be an index in [0, {size}); received {value!r}.")
    return int(value)


def parse_int_list(name, text):
    """Integers separated by commas or spaces ("1,2 3") → [1, 2, 3]; a ValueError names `name` otherwise."""
    try:
        return [int(t) for t in str(text).replace(",", " ").split()]
    except ValueError:
        raise ValueError(
            f"`{name}` must be integers separated by commas or spaces; received {text!r}."
        ) from None


def check_int(name, value, minimum=None, maximum=None, allow_none=False, maximum_name="the maximum"):
    """A Python or NumPy integer (not a bool) in [minimum, maximum]; returns a Python int.

    Token ids, counts and widths often arrive as NumPy scalars (read from an
    array), so `numpy.int32` etc. are accepted. `maximum_name` says what the
    upper bound is (e.g. "the vocabulary size") in the error message.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an int; received {value!r} of type {type(value).__name__}.")
    if minimum is not None and value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}; received {value}.")
    if maximum is not None and value > maximum:
        raise ValueError(f"`{name}`={value} exceeds {maximum_name} {maximum}.")
    return int(value)


def check_token_id(name, value, vocabulary_size, minimum=0, consequence=""):
    """An int id of a vocabulary of `vocabulary_size` tokens, in [minimum, vocabulary_size);
    `consequence` (e.g. ": generation could never stop on it") ends the error message."""
    value = check_int(name, value, minimum=minimum)
    if value >= vocabulary_size:
        raise ValueError(
            f"`{name}`={value} is outside the model's vocabulary [{minimum}, {int(vocabulary_size)}){consequence}."
        )
    return value


def memory_bytes():
    """The machine's physical memory in bytes (None where the platform does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def format_bytes(nbytes):
    """`nbytes` as "1.2 GB" (decimal units)."""
    for unit, size in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{int(nbytes)} B"


def check_allocation(what, nbytes, memory=None):
    """A ValueError when `nbytes` (an estimate made before allocating) exceeds the machine's
    physical memory, so a huge size fails with the bytes it needs instead of an out-of-memory
    error from the backend. `what` names the argument(s), e.g. "`vocabulary_size`=10**12".
    """
    memory = memory_bytes() if memory is None else memory
    if memory and nbytes > memory:
        raise ValueError(
            f"{what} needs {format_bytes(nbytes)}, more than this machine's {format_bytes(memory)} of "
            "memory; check the size."
        )


#: The largest random seed: one range, [0, SEED_MAX], for every seed of the recipes, the command line
#: and the serving signatures (an int32 there; NumPy's `set_random_seed` takes up to 2**32 - 1).
SEED_MAX = 2**31 - 1


def check_seed(name, value, allow_none=False):
    """A random seed: an int in [0, `SEED_MAX`]; returns a Python int."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an int; received {value!r} of type {type(value).__name__}.")
    if not 0 <= value <= SEED_MAX:
        raise ValueError(f"`{name}` must be a seed in [0, {SEED_MAX}]; received {value}.")
    return int(value)


def check_float(name, value, low=None, high=None, low_open=False, high_open=False, allow_none=False):
    """A finite Python/NumPy float (or int) inside [low, high] (ends open on request).

    NaN and ±inf are always rejected: `nan > 0` is False, so a range check
    alone would let them through.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or isinstance(value, str):
        raise TypeError(f"`{name}` must be a number; received {value!r} ({type(value).__name__}).")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be a number; received {value!r} ({type(value).__name__}).") from None
    left = "(" if low_open else "["
    right = ")" if high_open else "]"
    span = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
    if math.isnan(number) or math.isinf(number):
        raise ValueError(f"`{name}` must be a finite number in {span}; received {value!r}.")
    if low is not None and (number < low or (low_open and number == low)):
        raise ValueError(f"`{name}` must be in {span}; received {value!r}.")
    if high is not None and (number > high or (high_open and number == high)):
        raise ValueError(f"`{name}` must be in {span}; received {value!r}.")
    return number


def check_positive_float(name, value, allow_none=False):
    """A finite float > 0 (temperatures, learning rates, scales)."""
    return check_float(name, value, low=0.0, low_open=True, allow_none=allow_none)


def check_learning_rate(name, value):
    """A finite positive float, or a Keras `LearningRateSchedule` / callable of the step."""
    if callable(value) and not isinstance(value, (int, float)):
        return value
    return check_positive_float(name, value)


def check_known_keys(name, mapping, valid):
    """`mapping` is a dict whose keys are all in `valid`; unknown keys are listed with the valid ones."""
    if mapping is None:
        return {}
    if not isinstance(mapping, dict):
        raise TypeError(f"`{name}` must be a dict; received {mapping!r} ({type(mapping).__name__}).")
    unknown = sorted(str(k) for k in mapping if k not in valid)
    if unknown:
        raise ValueError(f"`{name}` has unknown key(s) {unknown}; valid keys are {sorted(valid)}.")
    return mapping


def read_text_file(name, path, compression=None):
    """The decoded text of a UTF-8 file (gzip/zlib-compressed on request), checked in full.

    Raises a ValueError naming `name` and the file for: an empty file, a
    truncated or corrupt gzip/zlib stream, bytes that are not UTF-8 (with the
    byte offset) and binary content (NUL bytes).

    Args:
        name: the argument that held the path.
        path: the file.
        compression: "", "GZIP" or "ZLIB" (None: "GZIP" for `.gz`).
    """
    import gzip
    import zlib

    import tensorflow as tf  # lazily: gfile reads local and remote paths

    path = check_file(name, path)
    if compression is None:
        compression = "GZIP" if path.endswith(".gz") else ""
    with tf.io.gfile.GFile(path, "rb") as file:
        data = file.read()
    if not data:
        raise ValueError(f"`{name}`: the file {path!r} is empty.")
    try:
        if compression == "GZIP":
            data = gzip.decompress(data)
        elif compression == "ZLIB":
            data = zlib.decompress(data)
    except EOFError:
        raise ValueError(
            f"`{name}`: the {compression.lower()} file {path!r} is truncated (the compressed stream ends early)."
        ) from None
    except (OSError, zlib.error) as error:
        raise ValueError(f"`{name}`: {path!r} is not a valid {compression.lower()} file ({error}).") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"`{name}`: {path!r} is not UTF-8 text: byte {data[error.start : error.start + 1]!r} at offset "
            f"{error.start} ({error.reason})."
        ) from None
    if "\x00" in text:
        raise ValueError(f"`{name}`: {path!r} looks binary (it holds NUL bytes), not text.")
    return text
