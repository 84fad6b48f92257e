"""Argument checks shared by every keras_tfm module: each raises a ValueError,
TypeError or FileNotFoundError that names the argument, the value received and
what was expected. Check an option once, where it is stored.

Only `check_file` and `as_string_tensor` use TensorFlow, and import it lazily.

Why one module of ~600 lines: the guide asks for one public home for checks, so
every package imports its checks from here and none writes its own; the module
is a flat list of small independent functions (numbers, choices, tensors,
files) and reads top to bottom. The command line's argparse types live in
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


def check_float_dtype(name, tensor):
    """`tensor` must hold floats (e.g. embeddings, not token ids)."""
    dtype = _dtype_name(getattr(tensor, "dtype", type(tensor).__name__))
    if "float" not in dtype:
        raise TypeError(
            f"`{name}` must be a float tensor (embeddings of shape (batch, length, d_model)); received dtype "
            f"{dtype}. Embed integer token ids first (e.g. with TokenEmbedding)."
        )


#: The dtypes a key/value decoding cache may have (None: the compute dtype).
CACHE_DTYPES = (None, "float32", "float16", "bfloat16")


def check_cache_dtype(name, value):
    """A float dtype for key/value caches: None, "float32", "float16" or
    "bfloat16" (or the same NumPy / TensorFlow dtype object); returns the name.

    Integer and bool caches would silently round every key and value.
    """
    if value is None:
        return None
    dtype = _dtype_name(value) if not isinstance(value, bool) else repr(value)
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


# --------------------------------------------------------------------------- #
# Tensors: checked once per call, in eager mode, in `tf.function` and under XLA.
#
# Eager: a ValueError naming the argument. Graph (`tf.function`): a
# `tf.debugging.Assert` raising InvalidArgumentError with the same message.
# XLA drops assertions (TF logs "Ignoring Assert operator"), so the tensor
# helpers also return a validity mask: callers clamp the bad entries to a
# safe value and poison their results with NaN, so an XLA training step on bad
# ids gives a NaN loss (and TerminateOnNaN stops it) instead of a plausible one.
# --------------------------------------------------------------------------- #


def _dtype_name(dtype):
    """ "float32", "int64", "bool", ... for any backend's dtype object (or a str)."""
    import keras

    try:
        return keras.backend.standardize_dtype(dtype)
    except (ValueError, TypeError, AttributeError):
        return str(dtype)


def _is_symbolic(tensor):
    import keras

    return isinstance(tensor, keras.KerasTensor)


def _eager():
    import keras

    if keras.backend.backend() != "tensorflow":
        return True  # jax/torch: concrete unless traced; traced values fail the bool() below
    import tensorflow as tf

    return tf.executing_eagerly()


def _jax_traced(tensor):
    """True for a JAX tracer (inside `jax.jit`/`jax.grad`): its value is unknown in Python."""
    import keras

    if keras.backend.backend() != "jax":
        return False
    import jax

    return isinstance(tensor, jax.core.Tracer)


def _assert_all(name, condition, message, *values):
    """Raises ValueError(message) eagerly; in a graph returns the assertion op (None eagerly)."""
    from keras import ops

    if _eager():
        if _jax_traced(condition):
            return None  # inside jax.jit/grad: the caller's NaN poisoning stands in for the check
        if not bool(ops.convert_to_numpy(ops.all(condition))):
            shown = ", ".join(str(ops.convert_to_numpy(v)) for v in values)
            raise ValueError(message + (f" ({shown})" if values else ""))
        return None
    import tensorflow as tf

    return tf.debugging.Assert(tf.reduce_all(condition), [message, *values], name=f"check_{name}")


def _after(op, tensor):
    """`tensor`, computed only after the assertion `op` (so the check fires before any op using it)."""
    if op is None:
        return tensor
    import tensorflow as tf

    with tf.control_dependencies([op]):
        return tf.identity(tensor)


def check_token_ids(name, ids, vocabulary_size, ignore_index=None):
    """Checks integer ids lie in [0, vocabulary_size) (entries equal to `ignore_index` excepted).

    Returns:
        `(safe_ids, valid)`: int32 ids with bad entries replaced by 0 and a
        bool tensor, True where the id was valid (or ignored). Eagerly and in
        `tf.function` a bad id raises (ValueError / InvalidArgumentError with
        the argument, the smallest and largest id and the limit); under XLA the
        caller uses `valid` to poison the result with NaN.
    """
    from keras import ops

    if _is_symbolic(ids):
        return ids, None
    ids = ops.convert_to_tensor(ids)
    dtype = _dtype_name(ids.dtype)
    if "int" not in dtype:
        raise TypeError(f"`{name}` must hold integer token ids; received dtype {dtype}.")
    ids = ops.cast(ids, "int32")
    valid = ops.logical_and(ops.greater_equal(ids, 0), ops.less(ids, vocabulary_size))
    if ignore_index is not None:
        valid = ops.logical_or(valid, ops.equal(ids, ignore_index))
    _assert_all(
        name,
        valid,
        f"`{name}` holds ids outside [0, {vocabulary_size}) (the vocabulary size is {vocabulary_size}); "
        f"smallest and largest id:",
        ops.min(ids),
        ops.max(ids),
    )
    return ops.where(valid, ids, 0), valid


def poison_invalid(x, valid):
    """`x` with NaN wherever `valid` (broadcast over trailing axes) is False."""
    from keras import ops

    if valid is None:
        return x
    while len(valid.shape) < len(x.shape):
        valid = ops.expand_dims(valid, -1)
    return ops.where(valid, x, ops.cast(float("nan"), x.dtype))


def check_length(name, length, limit, start_index=0):
    """Checks `start_index + length <= limit` for a static or dynamic length; returns `length`.

    Static ints raise a ValueError at once. A tensor length is checked with an
    assertion and returned as a tensor that depends on it, so slicing with the
    returned length reports this message instead of TF's "Expected size[0] in
    [0, N]" (under XLA every shape is static, so the Python branch runs).
    """
    if isinstance(length, int) and isinstance(start_index, int):
        if start_index + length > limit:
            where = f" (starting at position {start_index})" if start_index else ""
            raise ValueError(f"`{name}` has length {length}{where}, which exceeds `max_length`={limit}.")
        return length
    from keras import ops

    end = ops.cast(length, "int32") + ops.cast(start_index, "int32")
    op = _assert_all(
        name,
        ops.less_equal(end, limit),
        f"`{name}` is longer than `max_length`={limit}; start position + length:",
        end,
    )
    return _after(op, length)


def check_positive_value(name, value):
    """A finite value > 0 given as a Python number or a scalar tensor (e.g. a temperature).

    Python numbers raise at once (NaN and inf included); a tensor is checked
    eagerly (ValueError) or with an assertion in `tf.function` and returned
    as a tensor computed after it.
    """
    if isinstance(value, (bool, str)) or not hasattr(value, "shape"):
        return check_positive_float(name, value)
    from keras import ops

    value = ops.convert_to_tensor(value)
    if "float" not in _dtype_name(value.dtype) and "int" not in _dtype_name(value.dtype):
        raise TypeError(f"`{name}` must be a number; received dtype {value.dtype}.")
    as_float = ops.cast(value, "float32")
    op = _assert_all(
        name,
        ops.logical_and(ops.greater(as_float, 0.0), ops.isfinite(as_float)),
        f"`{name}` must be a finite number > 0; received",
        as_float,
    )
    return _after(op, value)


def check_cache_index(name, index, length, cache_length):
    """Checks `0 <= index` and `index + length <= cache_length` for a key/value cache write.

    A write beyond the cache (or at a negative index) would be clamped by
    the slice update into the wrong slots. Python ints raise a ValueError; a
    tensor index is asserted (eagerly a ValueError, in `tf.function` an
    InvalidArgumentError) and returned as a tensor computed after the check.
    """
    static = all(isinstance(v, int) and not isinstance(v, bool) for v in (index, length, cache_length))
    if static:
        if index < 0 or index + length > cache_length:
            raise ValueError(
                f"`{name}`={index} with {length} new positions does not fit the cache of length "
                f"{cache_length}: need 0 <= {name} and {name} + length <= {cache_length}."
            )
        return index
    from keras import ops

    index_t = ops.cast(index, "int32")
    end = index_t + ops.cast(length, "int32")
    op = _assert_all(
        name,
        ops.logical_and(ops.greater_equal(index_t, 0), ops.less_equal(end, ops.cast(cache_length, "int32"))),
        f"`{name}` must satisfy 0 <= {name} and {name} + length <= cache length; {name}, {name} + length, "
        "cache length:",
        index_t,
        end,
        ops.cast(cache_length, "int32"),
    )
    return _after(op, index_t)


def check_leading_dims(name, tensor, other_name, other, what=("batch", "length")):
    """The first `len(what)` dimensions of `tensor` equal those of `other`; returns `tensor`.

    Static sizes raise a ValueError at once; sizes unknown until run time are
    asserted (so `tf.function` reports this message, not "[Op:SelectV2]"
    from the op that would combine the two), and `tensor` is returned
    computed after the assertion.
    """
    t_shape, o_shape = tuple(tensor.shape), tuple(other.shape)
    dynamic = False
    for axis, label in enumerate(what):
        a, b = t_shape[axis], o_shape[axis]
        if a is not None and b is not None and a != b:
            raise ValueError(
                f"`{name}` {label} size {a} does not match the {label} size {b} of `{other_name}` "
                f"(shapes {t_shape} and {o_shape})."
            )
        dynamic = dynamic or a is None or b is None
    if not dynamic or _is_symbolic(tensor) or _is_symbolic(other):
        return tensor
    from keras import ops

    n = len(what)
    t_dims, o_dims = ops.shape(tensor)[:n], ops.shape(other)[:n]
    op = _assert_all(
        name,
        ops.equal(
            ops.stack([ops.cast(d, "int32") for d in t_dims]),
            ops.stack([ops.cast(d, "int32") for d in o_dims]),
        ),
        f"`{name}` ({', '.join(what)}) sizes do not match those of `{other_name}`:",
        ops.stack([ops.cast(d, "int32") for d in t_dims]),
        ops.stack([ops.cast(d, "int32") for d in o_dims]),
    )
    return _after(op, tensor)


MASK_CONVENTION = (
    "masks are boolean with True = may attend (or a real token); int 0/1 masks are read the same way "
    "(1 = may attend). Convert an additive float mask (0 / -1e9) with `mask = additive == 0`, and a "
    "'1 = padding' mask with `mask = padding == 0`."
)


def as_bool_mask(name, mask):
    """A mask as bool: bool passes, int masks must hold only 0/1, float masks are refused.

    Int segment ids (1/2), "1 = pad" conventions and additive float masks
    would otherwise be cast to bool silently (wrongly); the message gives the
    convention and the conversion.
    """
    from keras import ops

    if mask is None or _is_symbolic(mask):
        return mask
    mask = ops.convert_to_tensor(mask)
    dtype = _dtype_name(mask.dtype)
    if dtype == "bool":
        return mask
    if "int" in dtype:
        _assert_all(
            name,
            ops.logical_or(ops.equal(mask, 0), ops.equal(mask, 1)),
            f"`{name}` is an int mask with values other than 0/1; {MASK_CONVENTION} Smallest and largest value:",
            ops.min(mask),
            ops.max(mask),
        )
        return ops.cast(mask, "bool")
    raise TypeError(f"`{name}` has dtype {dtype}; {MASK_CONVENTION}")


# --------------------------------------------------------------------------- #
# Files.
# --------------------------------------------------------------------------- #


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
